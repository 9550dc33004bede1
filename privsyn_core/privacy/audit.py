"""Empirical privacy audits: try to tell neighbouring datasets apart from the mechanism's output.

A proof says a mechanism is rho-zCDP; an audit checks the code that claims it. For each of
the engine's noisy steps (1-way marginals, InDif scores, a selected marginal) we build two
neighbouring datasets ``D`` and ``D' = D + one record``, run the real step many times on each,
and play the distinguishing game: guess "D'" when a test statistic exceeds a threshold.
Any (epsilon, delta)-DP mechanism forces every such test to satisfy
``FNR >= 1 - delta - e^epsilon FPR`` (and the same with the roles swapped), so observed
error rates give a **lower bound on the epsilon the code really has** (Jagielski, Ullman and
Oprea 2020; Nasr et al. 2021). If it ever exceeds the claimed epsilon, the claim is false.

Two numbers per audit:

* ``epsilon_lower_bound``: the largest ``log((1 - delta - FNR) / FPR)`` over thresholds, with
  Clopper-Pearson upper confidence bounds on both error rates (Bonferroni over thresholds and
  directions), so the bound holds with the stated confidence whatever the noise's shape.
* ``mu_estimate``: the separation of the two output distributions along the statistic, in
  standard deviations. A Gaussian mechanism with L2 sensitivity ``Delta`` and noise ``sigma``
  has ``mu = Delta / sigma = sqrt(2 rho)`` (Dong, Roth and Su's mu-GDP), so this checks the
  calibration far more sharply than a finite-sample epsilon bound can: a noise scale off by
  10% shows up, where the epsilon bound would need billions of trials at small delta.

**Person-level neighbours** (``rows_per_person`` K, :class:`~privsyn_core.privacy.ledger.
PrivacyUnit`): the per-row neighbours scaled by K. ``D`` holds each of its rows K times, each
copy set held by one person, and ``D'`` adds one whole person holding ``3K`` rows equal to the
added record; every run first keeps at most K rows per person
(:func:`~privsyn_core.measuring.persons.kept_rows`, the code a run uses) before the step,
calibrated for K rows, measures. Every count and every InDif score is homogeneous of degree
one in the table (K times every count, K times every score), so the person moves each output
exactly K times as far as the per-row neighbours' record did, against noise K times larger:
the game is the per-row one, as hard to win as the strongest per-row neighbours make it. For
the histograms that is the worst case (all K rows in one cell); for InDif it is the worst case
the search of :func:`worst_indif_neighbours` finds, where K rows added to an unscaled table
move the scores far less than K times a row does (a fifth of the bound at K = 20, against
0.86 of it scaled).

The statistic is the likelihood-ratio test for Gaussian noise: the projection of the output on
the exact difference ``f(D') - f(D)`` weighted by ``1/sigma^2``, the most powerful test there is
for this mechanism, so a weak audit cannot hide a leak.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np
import pandas as pd
from scipy.optimize import brentq
from scipy.stats import beta, norm

from privsyn_core.data.values import ValueClass, canonical_text, class_counts
from privsyn_core.domain import Domain
from privsyn_core.marginals import count_marginal
from privsyn_core.measuring.counters import ArrayCounter
from privsyn_core.measuring.indif import indif_scores, indif_sigma, measure_indif
from privsyn_core.measuring.measurement import measure_marginal
from privsyn_core.measuring.one_way import measure_one_way
from privsyn_core.measuring.persons import bounded_frame, kept_rows
from privsyn_core.measuring.structure import noisy_structure
from privsyn_core.privacy.conversion import epsilon_from_rho, rho_from_epsilon_delta
from privsyn_core.privacy.ledger import PrivacyUnit
from privsyn_core.privacy.noise import NoiseSource, shuffling_rng

#: confidence of every epsilon lower bound
CONFIDENCE = 0.99
#: the half-width of the separation's range, in standard errors. The separation is an
#: estimate from finitely many runs, so the audit calls a leak only when the whole range
#: ``mu_estimate ± SEPARATION_ERRORS * mu_standard_error`` lies above the allowed ``mu``: an
#: honest step whose neighbours reach the bound (the marginals do) does that by chance about
#: once in 30,000 audits (the normal tail beyond 4), so a class playing the game all afternoon
#: sees no false leak, while half the noise (twice the separation) clears it in almost every
#: audit from ``36 (2 + mu^2) / mu^2`` runs on each table (1,500 at epsilon 1, delta 1e-6:
#: 38 of 40 seeds caught it).
SEPARATION_ERRORS = 4.0

#: where the separation's range lies against the allowed separation: wholly above it (a leak
#: shown), across it (within the measurement's noise of the bound), or wholly below it
Separation = Literal["above", "across", "below"]

Mechanism = Callable[[np.ndarray], np.ndarray]
"""One run of a noisy step on a dataset (attribute-major records), flattened to a vector."""


@dataclass(frozen=True)
class AuditResult:
    """What ``trials`` runs on each of two neighbouring datasets revealed."""

    mechanism: str
    trials: int
    delta: float
    claimed_rho: float
    #: the epsilon the ledger would state for this step at ``delta`` (CKS conversion)
    claimed_epsilon: float
    #: the lower bound on the true epsilon, valid with probability ``confidence``
    epsilon_lower_bound: float
    confidence: float
    #: separation of the two outputs' distributions, in noise standard deviations
    mu_estimate: float
    mu_standard_error: float
    #: ``sqrt(2 rho)``: the largest separation a rho-zCDP Gaussian mechanism allows
    mu_claimed: float
    #: ``||f(D') - f(D)|| / sigma`` for the neighbours audited (at most ``mu_claimed``)
    mu_of_neighbours: float
    #: the test statistic of every run on ``D`` and on ``D'`` (for plotting the game)
    on_d: np.ndarray = field(default_factory=lambda: np.empty(0), repr=False)
    on_neighbour: np.ndarray = field(default_factory=lambda: np.empty(0), repr=False)

    @property
    def epsilon_of_neighbours(self) -> float:
        """The exact epsilon at ``delta`` of a Gaussian mechanism separating these neighbours
        by ``mu_of_neighbours``: the most any audit of this pair could find."""
        return gdp_epsilon(self.mu_of_neighbours, self.delta)

    @property
    def mu_range(self) -> tuple[float, float]:
        """The separation the runs leave possible: ``mu_estimate`` ±
        :data:`SEPARATION_ERRORS` standard errors."""
        half = SEPARATION_ERRORS * self.mu_standard_error
        return self.mu_estimate - half, self.mu_estimate + half

    @property
    def separation(self) -> Separation:
        """Where :attr:`mu_range` lies against ``mu_claimed``. Only "above" is evidence of a
        leak; a range that touches the bound is "across"."""
        low, high = self.mu_range
        if low > self.mu_claimed:
            return "above"
        if high < self.mu_claimed:
            return "below"
        return "across"

    @property
    def epsilon_refuted(self) -> bool:
        """The attacker's error rates prove a larger epsilon than the claimed one."""
        return self.epsilon_lower_bound > self.claimed_epsilon

    @property
    def violates_claim(self) -> bool:
        """The audit refutes the claim: epsilon's lower bound exceeds the claimed epsilon, or
        the separation's whole range lies above ``mu_claimed``."""
        return self.epsilon_refuted or self.separation == "above"


def gdp_epsilon(mu: float, delta: float) -> float:
    """Smallest epsilon such that a mu-GDP mechanism is (epsilon, delta)-DP (Dong, Roth and Su
    2022, Corollary 2.13): ``delta = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)``."""
    if mu <= 0:
        return 0.0

    def excess(eps: float) -> float:
        return norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2) - delta

    if excess(0.0) <= 0:
        return 0.0
    return float(brentq(excess, 0.0, mu * mu + 50 * mu + 50))


def distinguishing_audit(
    mechanism: str,
    on_d: np.ndarray,
    on_neighbour: np.ndarray,
    weights: np.ndarray,
    claimed_rho: float,
    delta: float,
    *,
    mu_of_neighbours: float,
    confidence: float = CONFIDENCE,
    thresholds: int = 100,
) -> AuditResult:
    """Audit from ``trials x outputs`` arrays of runs on ``D`` and on ``D'``.

    ``weights`` (``(f(D') - f(D)) / sigma^2``) turns each output into the likelihood-ratio
    statistic.
    """
    trials = on_d.shape[0]
    if on_neighbour.shape[0] != trials:
        raise ValueError("run the mechanism equally often on both datasets")
    null = on_d @ weights
    alternative = on_neighbour @ weights
    pooled_sd = math.sqrt(0.5 * (null.var(ddof=1) + alternative.var(ddof=1)))
    mu = float((alternative.mean() - null.mean()) / pooled_sd) if pooled_sd > 0 else math.inf
    mu_se = math.sqrt(2.0 / trials + mu * mu / (4.0 * trials))

    grid = np.quantile(np.concatenate([null, alternative]), np.linspace(0.001, 0.999, thresholds))
    alpha = (1 - confidence) / (4 * thresholds)  # two rates, two directions, every threshold
    false_positive = _upper_bound((null[:, None] >= grid).sum(axis=0), trials, alpha)
    false_negative = _upper_bound((alternative[:, None] < grid).sum(axis=0), trials, alpha)
    # D' -> D direction: the same test with the decision reversed
    reverse_fp = _upper_bound((alternative[:, None] < grid).sum(axis=0), trials, alpha)
    reverse_fn = _upper_bound((null[:, None] >= grid).sum(axis=0), trials, alpha)
    with np.errstate(divide="ignore", invalid="ignore"):
        bounds = np.concatenate(
            [
                np.log((1 - delta - false_negative) / false_positive),
                np.log((1 - delta - reverse_fn) / reverse_fp),
            ]
        )
    bounds = bounds[np.isfinite(bounds)]
    return AuditResult(
        mechanism=mechanism,
        trials=trials,
        delta=delta,
        claimed_rho=claimed_rho,
        claimed_epsilon=epsilon_from_rho(claimed_rho, delta),
        epsilon_lower_bound=float(max(0.0, bounds.max(initial=0.0))),
        confidence=confidence,
        mu_estimate=mu,
        mu_standard_error=mu_se,
        mu_claimed=math.sqrt(2 * claimed_rho),
        mu_of_neighbours=mu_of_neighbours,
        on_d=null,
        on_neighbour=alternative,
    )


def _upper_bound(events: np.ndarray, trials: int, alpha: float) -> np.ndarray:
    """One-sided Clopper-Pearson upper confidence bound on a rate."""
    upper = beta.ppf(1 - alpha, events + 1, trials - events)
    return np.where(events >= trials, 1.0, upper)


def _run(mechanism: Callable[[Any], np.ndarray], records: Any, trials: int) -> np.ndarray:
    return np.stack([mechanism(records) for _ in range(trials)])


@dataclass(frozen=True)
class PersonRows:
    """Coded records (attribute-major) and whose each is: a run keeps at most ``k`` rows of
    each person before it measures."""

    records: np.ndarray
    people: np.ndarray
    k: int

    def bounded(self, rng: np.random.Generator) -> np.ndarray:
        return self.records[:, kept_rows(pd.Series(self.people), self.k, rng)]


def _rows(data: np.ndarray | PersonRows, rng: np.random.Generator) -> np.ndarray:
    """The records a step measures: at most K per person when they belong to people."""
    return data.bounded(rng) if isinstance(data, PersonRows) else data


@dataclass(frozen=True)
class Neighbours:
    """``D`` and ``D' = D`` plus ``extra`` (attribute-major records), on ``domain``; with
    ``people``, ``D'`` adds a new person holding ``copies`` rows equal to ``extra``, and each
    run keeps at most ``rows_per_person`` rows per person."""

    domain: Domain
    records: np.ndarray
    extra: np.ndarray
    people: np.ndarray | None = None
    copies: int = 1
    rows_per_person: int = 1

    @property
    def with_extra(self) -> np.ndarray:
        return np.concatenate([self.records, np.repeat(self.extra[:, None], self.copies, 1)], 1)

    @property
    def pair(self) -> tuple[np.ndarray | PersonRows, np.ndarray | PersonRows]:
        if self.people is None:
            return self.records, self.with_extra
        newcomer = np.full(self.copies, self.people.max(initial=0) + 1)
        grown = np.concatenate([self.people, newcomer])
        k = self.rows_per_person
        return PersonRows(self.records, self.people, k), PersonRows(self.with_extra, grown, k)

    def of_people(self, k: int) -> Neighbours:
        """These neighbours scaled to person-level ones (module docstring): each row of
        ``D`` held K times by one person (all K kept), and the added person holding ``3K``
        rows like ``extra``."""
        records = np.repeat(self.records, k, axis=1)
        people = np.arange(records.shape[1]) // k
        return replace(self, records=records, people=people, copies=3 * k, rows_per_person=k)


@dataclass(frozen=True)
class TableNeighbours:
    """A raw table ``D`` (text, as read from a file) and ``D' = D`` plus the row ``extra``;
    with ``person``, the column of ``D`` saying whose each row is, ``D'`` adds a new person
    holding ``3K`` rows equal to ``extra`` (K ``rows_per_person``)."""

    table: pd.DataFrame
    extra: dict[str, object]
    person: str | None = None
    rows_per_person: int = 1

    @property
    def pair(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        copies = 1 if self.person is None else 3 * self.rows_per_person
        extra = dict(self.extra)
        if self.person is not None:
            extra[self.person] = "newcomer"
        rows = pd.DataFrame([extra] * copies, columns=self.table.columns, dtype=object)
        return self.table, pd.concat([self.table, rows], ignore_index=True)

    def of_people(self, k: int) -> TableNeighbours:
        """These neighbours with person-level rows: ``D``'s rows in people of K rows each."""
        people = (np.arange(len(self.table)) // k).astype(str)
        table = self.table.assign(person=people)
        return TableNeighbours(table, self.extra, "person", k)


def audit_step(
    mechanism: str,
    run: Callable[[Any], np.ndarray],
    exact: Callable[[Any], np.ndarray],
    sigmas: np.ndarray,
    on_d: Any,
    on_neighbour: Any,
    claimed_rho: float,
    delta: float,
    trials: int,
    confidence: float = CONFIDENCE,
) -> AuditResult:
    """Run ``run`` ``trials`` times on each of two neighbouring datasets and audit it against
    ``claimed_rho``. The datasets may be coded records or raw tables: ``run`` and ``exact``
    take either.

    ``exact`` is the step without noise (to build the optimal test), ``sigmas`` the noise
    standard deviation of each output.
    """
    difference = exact(on_neighbour) - exact(on_d)
    weights = difference / sigmas**2
    return distinguishing_audit(
        mechanism,
        _run(run, on_d, trials),
        _run(run, on_neighbour, trials),
        weights,
        claimed_rho,
        delta,
        mu_of_neighbours=float(np.linalg.norm(difference / sigmas)),
        confidence=confidence,
    )


def audit_one_way(
    neighbours: Neighbours,
    rho: float,
    noise: NoiseSource,
    delta: float,
    trials: int,
    *,
    claimed_rho: float | None = None,
) -> AuditResult:
    """Audit :func:`~privsyn_core.measuring.one_way.measure_one_way` (every attribute's 1-way
    marginal
    at ``rho / d`` each). ``claimed_rho`` other than ``rho`` audits a mis-calibrated step."""
    domain = neighbours.domain
    shuffle = shuffling_rng(noise)

    def run(records: np.ndarray | PersonRows) -> np.ndarray:
        noisy, _ = measure_one_way(ArrayCounter(_rows(records, shuffle), domain), rho, noise)
        return np.concatenate([m.table.values for m in noisy])

    def exact(records: np.ndarray | PersonRows) -> np.ndarray:
        coded = _rows(records, shuffle)
        return np.concatenate([count_marginal(coded, domain, (a,)).values for a in domain])

    sigma = noise.unit.sigma(rho / len(domain))
    sigmas = np.full(sum(domain.sizes), sigma)
    claimed = rho if claimed_rho is None else claimed_rho
    return audit_step(
        "1-way marginals", run, exact, sigmas, *neighbours.pair, claimed, delta, trials
    )


def audit_indif(
    neighbours: Neighbours,
    rho: float,
    noise: NoiseSource,
    delta: float,
    trials: int,
    *,
    claimed_rho: float | None = None,
) -> AuditResult:
    """Audit :func:`~privsyn_core.measuring.indif.measure_indif` (all pairs' scores at total
    ``rho``)."""
    domain = neighbours.domain
    upper = np.triu_indices(len(domain), k=1)
    shuffle = shuffling_rng(noise)

    def run(records: np.ndarray | PersonRows) -> np.ndarray:
        noisy, _ = measure_indif(ArrayCounter(_rows(records, shuffle), domain), rho, noise)
        return noisy.to_numpy()[upper]

    def exact(records: np.ndarray | PersonRows) -> np.ndarray:
        return indif_scores(ArrayCounter(_rows(records, shuffle), domain)).to_numpy()[upper]

    sigmas = np.full(upper[0].size, indif_sigma(len(domain), rho, noise.unit))
    claimed = rho if claimed_rho is None else claimed_rho
    return audit_step("InDif scores", run, exact, sigmas, *neighbours.pair, claimed, delta, trials)


def audit_marginal(
    neighbours: Neighbours,
    attributes: tuple[str, ...],
    rho: float,
    noise: NoiseSource,
    delta: float,
    trials: int,
    *,
    claimed_rho: float | None = None,
) -> AuditResult:
    """Audit :func:`~privsyn_core.measuring.measurement.measure_marginal` on ``attributes`` at
    ``rho``."""
    domain = neighbours.domain
    shuffle = shuffling_rng(noise)

    def run(records: np.ndarray | PersonRows) -> np.ndarray:
        counter = ArrayCounter(_rows(records, shuffle), domain)
        noisy, _ = measure_marginal(counter, attributes, rho, noise, step="marginal")
        return noisy.table.values.ravel()

    def exact(records: np.ndarray | PersonRows) -> np.ndarray:
        return count_marginal(_rows(records, shuffle), domain, attributes).values.ravel()

    sigmas = np.full(domain.cells(attributes), noise.unit.sigma(rho))
    claimed = rho if claimed_rho is None else claimed_rho
    name = f"marginal {' x '.join(attributes)}"
    return audit_step(name, run, exact, sigmas, *neighbours.pair, claimed, delta, trials)


def audit_structure(
    neighbours: TableNeighbours,
    rho: float,
    noise: NoiseSource,
    delta: float,
    trials: int,
    *,
    claimed_rho: float | None = None,
) -> AuditResult:
    """Audit :func:`~privsyn_core.measuring.structure.measure_structure` (every column's value-class
    counts at ``rho / d`` each, as the pipeline spends the structure share): the step that
    decides kinds, whole numbers and date formats."""
    on_d, on_neighbour = neighbours.pair
    if neighbours.person is not None:  # at most K rows per person, the person column dropped
        unit = PrivacyUnit(neighbours.person, neighbours.rows_per_person)
        shuffle = shuffling_rng(noise)
        on_d, on_neighbour = (bounded_frame(t, unit, shuffle) for t in (on_d, on_neighbour))
    columns = list(on_d.columns)
    each = rho / len(columns)
    # reading and classifying the values is deterministic: done once per table, while every
    # run draws fresh noise through the mechanism itself
    exact_counts = {
        id(table): [class_counts(canonical_text(table[c])) for c in columns]
        for table in (on_d, on_neighbour)
    }

    def run(table: pd.DataFrame) -> np.ndarray:
        return np.concatenate(
            [
                noisy_structure(c, counts, each, noise).noisy_counts
                for c, counts in zip(columns, exact_counts[id(table)], strict=True)
            ]
        )

    def exact(table: pd.DataFrame) -> np.ndarray:
        return np.concatenate(exact_counts[id(table)])

    sigmas = np.full(len(columns) * len(ValueClass), noise.unit.sigma(each))
    claimed = rho if claimed_rho is None else claimed_rho
    return audit_step(
        "column kinds", run, exact, sigmas, on_d, on_neighbour, claimed, delta, trials
    )


def structure_neighbours(rng: np.random.Generator, n: int = 200) -> TableNeighbours:
    """A generated text table (whole numbers, ISO dates, letters) and the record that, read
    by pandas, would flip every column's type: a word among the numbers, a day-first date
    among the ISO dates, a blank among the letters. It moves one class count per column."""
    days = pd.Timestamp("2020-01-01") + pd.to_timedelta(rng.integers(0, 365, n), unit="D")
    table = pd.DataFrame(
        {
            "age": rng.integers(18, 90, n).astype(str),
            "visit": days.strftime("%Y-%m-%d"),
            "group": rng.choice(["a", "b", "c"], n),
        },
        dtype=object,
    )
    return TableNeighbours(table, {"age": "unknown", "visit": "13/01/2020", "group": None})


def worst_indif_neighbours(
    domain: Domain, n: int, rng: np.random.Generator, candidates: int = 200
) -> Neighbours:
    """Neighbours whose InDif scores move the most (in L2): the best of random tables of
    ``n`` rows with every possible added record, then improved one value of the table at a
    time, and the record chosen again, while that moves the scores further (coordinate
    ascent, to a local maximum). The audit of InDif is only as strong as this pair. Lemma 4.1
    bounds each score's move by 4; on 6-row tables of :data:`AUDIT_DOMAIN` the ascent reaches
    0.86 of that bound in L2, random tables alone about 0.6."""
    every_record = np.stack(np.meshgrid(*[np.arange(s) for s in domain.sizes], indexing="ij"))
    every_record = every_record.reshape(len(domain), -1).T

    def move(records: np.ndarray, extra: np.ndarray) -> float:
        base = indif_scores(ArrayCounter(records, domain)).to_numpy()
        grown = np.concatenate([records, extra[:, None]], axis=1)
        return float(np.linalg.norm(indif_scores(ArrayCounter(grown, domain)).to_numpy() - base))

    def best_record(records: np.ndarray) -> tuple[float, np.ndarray]:
        moves = [move(records, extra) for extra in every_record]
        best = int(np.argmax(moves))
        return moves[best], every_record[best].copy()

    tables = [
        np.stack([rng.integers(0, s, size=n) for s in domain.sizes]) for _ in range(candidates)
    ]
    (best_move, extra), records = max(
        ((best_record(t), t) for t in tables), key=lambda found: found[0][0]
    )
    improved = True
    while improved:
        improved = False
        for attribute, size in enumerate(domain.sizes):
            for row in range(n):
                for value in range(size):
                    changed = records.copy()
                    changed[attribute, row] = value
                    moved = move(changed, extra)
                    if moved > best_move * (1 + 1e-9):
                        records, best_move, improved = changed, moved, True
        moved, record = best_record(records)
        if moved > best_move * (1 + 1e-9):
            best_move, extra, improved = moved, record, True
    return Neighbours(domain, records, extra)


AUDIT_DOMAIN = Domain.from_mapping({"a": 2, "b": 3, "c": 2})


def audit_engine(
    epsilon: float,
    delta: float,
    noise: NoiseSource,
    trials: int,
    rng: np.random.Generator,
    *,
    indif_candidates: int = 200,
    rho_multiplier: float = 1.0,
    rows_per_person: int | None = None,
) -> list[AuditResult]:
    """Audit the four noisy steps (1-way marginals, InDif, a 2-way marginal, and the
    structure step that decides column kinds), each at the rho that makes it (epsilon,
    delta)-DP alone, on small generated neighbours (no real data: the audit checks the code,
    not a table). InDif and the structure step run a third as often: their exact steps are
    the slowest.

    ``rho_multiplier`` other than 1 runs every step at that multiple of rho while still
    claiming rho: a deliberately broken engine (4 means half the noise), so a demonstration
    can show the audit catching a mis-calibration. Leave it at 1 to audit the engine as is.

    ``rows_per_person`` K plays the game with person-level neighbours (see the module
    docstring): ``noise`` must then be calibrated for K rows per person (its ``unit``).
    """
    if rows_per_person is not None and noise.unit.rows_per_person != rows_per_person:
        raise ValueError("person-level neighbours need noise calibrated for the same K")
    claimed = rho_from_epsilon_delta(epsilon, delta)
    rho = rho_multiplier * claimed
    records = np.stack([rng.integers(0, s, size=200) for s in AUDIT_DOMAIN.sizes])
    neighbours = Neighbours(AUDIT_DOMAIN, records, np.array([1, 2, 0]))
    indif_neighbours = worst_indif_neighbours(AUDIT_DOMAIN, 6, rng, indif_candidates)
    indif_trials = max(trials // 3, 100)
    tables = structure_neighbours(rng)
    if rows_per_person is not None:
        neighbours = neighbours.of_people(rows_per_person)
        indif_neighbours = indif_neighbours.of_people(rows_per_person)
        tables = tables.of_people(rows_per_person)
    structure_trials = max(trials // 3, 100)
    return [
        audit_one_way(neighbours, rho, noise, delta, trials, claimed_rho=claimed),
        audit_indif(indif_neighbours, rho, noise, delta, indif_trials, claimed_rho=claimed),
        audit_marginal(neighbours, ("a", "b"), rho, noise, delta, trials, claimed_rho=claimed),
        audit_structure(tables, rho, noise, delta, structure_trials, claimed_rho=claimed),
    ]
