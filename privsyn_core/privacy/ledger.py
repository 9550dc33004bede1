"""The privacy budget in rho-zCDP and the ledger that spends it.

PrivSyn composes Gaussian mechanisms under zero-concentrated DP (paper section 2.3 and
appendix C): a Gaussian mechanism with L2 sensitivity ``Delta`` and standard deviation
``sigma`` is ``Delta^2 / (2 sigma^2)``-zCDP (Proposition C.3), and zCDP adds up under
composition (Proposition C.1). The user states ``(epsilon, delta)``; we convert it once to a
total ``rho`` and every measurement is charged to a :class:`PrivacyLedger` that refuses to
overspend.

A ledger read back from a file (a release bundle's ``ledger.json``) is only a claim: anyone can
edit it. :func:`verified` prices every measurement again from its noise scale
(:func:`noise_rho`), checks each figure the record states against that price, and returns the
ledger with the recomputed figures only, so what a front end prints for a loaded release is
what its noise means, not what its file says.

The (epsilon, delta) <-> rho conversions live in :mod:`privsyn_core.privacy.conversion`; a
ledger's budget and spend, as (rho, delta) pairs, are a
:class:`~privsyn_core.privacy.budget.Budget`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from statistics import NormalDist
from typing import Any

from privsyn_core.errors import InputError
from privsyn_core.privacy.budget import Budget
from privsyn_core.privacy.conversion import (
    MAX_DELTA,
    Conversion,
    check_epsilon_delta,
    epsilon_from_rho,
    rho_from_epsilon_delta,
)

#: Relative slack for float round-off when comparing a sum of spends with the budget.
_ROUNDOFF = 1e-9


class BudgetExceededError(RuntimeError):
    """A measurement would push the ledger past its budget."""


class FailedAfterSpending(InputError):
    """An input problem found only after measurements were made on the private table: the
    one error that carries a spend. ``ledger`` holds what was spent: that budget is gone
    though the run failed (and the message may come from DP measurements), so every front
    end records it against the run's reservation
    (:meth:`~privsyn_core.release.registry.Reservation.spend`).

    A step that has no run ledger yet (a domain estimate) raises it with :meth:`holding`;
    the run charges what it holds to its own ledger (:meth:`after`) before the error
    leaves the engine. ``reason`` is the problem alone, without the words on the spend."""

    def __init__(self, message: str, ledger: PrivacyLedger, *, reason: str | None = None) -> None:
        super().__init__(message)
        self.ledger = ledger
        self.reason = message if reason is None else reason

    @classmethod
    def holding(cls, error: InputError, measurements: Sequence[Measurement]) -> InputError:
        """``error``, raised once ``measurements`` were made by a step without the run's
        ledger: it carries them with what it carried already (``error`` itself when nothing
        was measured)."""
        carried = error.ledger.entries if isinstance(error, FailedAfterSpending) else ()
        spent = (*measurements, *carried)
        if not spent:
            return error
        reason = _reason(error)
        held = PrivacyLedger(budget_rho=math.fsum(m.rho for m in spent), entries=spent)
        return cls(reason, held, reason=reason)

    @classmethod
    def after(cls, error: InputError, ledger: PrivacyLedger) -> FailedAfterSpending:
        """``error``, found once the run's ``ledger`` had spent: the message says how much."""
        reason = _reason(error)
        message = f"{reason} ({ledger.spent.words} was spent before this was found)"
        return cls(message, ledger, reason=reason)


def _reason(error: InputError) -> str:
    return error.reason if isinstance(error, FailedAfterSpending) else str(error)


@contextmanager
def charged_on_refusal(ledger_now: Callable[[], PrivacyLedger | None]) -> Iterator[None]:
    """Inside: an :class:`InputError` raised once the run's ledger (``ledger_now()``, as it
    stands when the error is raised) holds a measurement leaves as a
    :class:`FailedAfterSpending` carrying that ledger. One raised before anything was spent
    passes as it is, and so does a ``FailedAfterSpending`` (it carries its spend already).
    Every stage of a run runs inside one, so no input error leaves the engine with a spend
    it does not carry."""
    try:
        yield
    except FailedAfterSpending:
        raise
    except InputError as error:
        ledger = ledger_now()
        if ledger is None or not ledger.entries:
            raise
        raise FailedAfterSpending.after(error, ledger) from None


class LedgerMismatchError(InputError):
    """A ledger whose stated figures its own noise scales contradict; the message says which
    figure, what it says and what the noise means."""


def gaussian_sigma(rho: float, sensitivity: float = 1.0) -> float:
    """Noise standard deviation that makes a Gaussian mechanism rho-zCDP (Prop. C.3)."""
    if rho <= 0:
        raise ValueError(f"rho must be positive to calibrate noise, got {rho!r}")
    return sensitivity / math.sqrt(2.0 * rho)


def gaussian_rho(sigma: float, sensitivity: float = 1.0) -> float:
    """The zCDP cost ``Delta^2 / (2 sigma^2)`` of Gaussian noise of standard deviation
    ``sigma`` on a query of L2 sensitivity ``Delta`` (Prop. C.3): :func:`gaussian_sigma`
    read backwards, to price noise already added."""
    return sensitivity * sensitivity / (2.0 * sigma * sigma)


@dataclass(frozen=True)
class PrivacyUnit:
    """Whose privacy the guarantee protects: one row (the default), or one person of the
    column ``person`` whose rows are bounded to ``rows_per_person`` (K) before anything is
    counted.

    With at most K rows per person, adding or removing a person moves a histogram by at most
    K counts in all (L1 K) and, all K in one cell at worst, by K in L2; InDif's scores, each
    moved by at most 4 by one row (paper Lemma 4.1), move by at most 4K (the triangle
    inequality over the K rows). So every measurement's sensitivity is its per-row one times
    K (:meth:`sensitivity`), and the noise for a given rho is K times the per-row noise: the
    one rule every step calibrates with (:meth:`sigma`). K is public: it is a setting, not a
    statistic of the table."""

    person: str | None = None
    rows_per_person: int = 1

    def __post_init__(self) -> None:
        k = self.rows_per_person
        if isinstance(k, bool) or not isinstance(k, int):
            raise InputError(f"max_rows_per_person must be a whole number >= 1, got {k!r}")
        if k < 1:
            raise InputError(f"max_rows_per_person must be at least 1, got {k}")
        if self.person is None and k != 1:
            raise InputError("max_rows_per_person needs the person column that says whose rows")
        if self.person is not None and (not isinstance(self.person, str) or not self.person):
            raise InputError(f"person must be a column name, got {self.person!r}")

    @classmethod
    def of(cls, person: str | None, rows_per_person: int | None) -> PrivacyUnit:
        """The unit from a front end's two settings: both or neither (K is never guessed)."""
        if person is None and rows_per_person is None:
            return ROW
        if person is None:
            raise InputError("max_rows_per_person needs the person column that says whose rows")
        if rows_per_person is None:
            raise InputError(
                f"person {person!r} needs max_rows_per_person too: the most rows of one person "
                "kept (a public choice; see the README)"
            )
        return cls(person, rows_per_person)

    @property
    def is_row(self) -> bool:
        return self.person is None

    def sensitivity(self, per_row: float = 1.0) -> float:
        """A measurement's sensitivity under this unit, from its per-row one."""
        return per_row * self.rows_per_person

    def sigma(self, rho: float, per_row: float = 1.0) -> float:
        """The Gaussian noise that makes a query of per-row sensitivity ``per_row``
        rho-zCDP for this unit."""
        return gaussian_sigma(rho, self.sensitivity(per_row))

    @property
    def words(self) -> str:
        """The guarantee's unit as every front end prints it."""
        if self.person is None:
            return "per row"
        rows = "row" if self.rows_per_person == 1 else "rows"
        return f"per person ({self.person}), at most {self.rows_per_person} {rows}"

    def to_json(self) -> dict[str, object]:
        return {"person": self.person, "rows_per_person": self.rows_per_person, "words": self.words}

    @classmethod
    def from_json(cls, record: object) -> PrivacyUnit:
        """The unit a ledger record states (a record without one is per row)."""
        if record is None:
            return ROW
        if not isinstance(record, Mapping):
            raise LedgerMismatchError(f"its ledger's privacy unit is {record!r}, not a record")
        try:
            return cls(record.get("person"), record.get("rows_per_person", 1))
        except InputError as error:
            raise LedgerMismatchError(f"its ledger's privacy unit is not one: {error}") from None


#: the default unit: one row
ROW = PrivacyUnit()

#: one row's effect on an InDif score (paper Lemma 4.1), and on PrivBayes's score of the same
#: form: at most 4
INDIF_SENSITIVITY = 4.0


#: one row's effect on the pair (distinct values, present values) of a column, each moved by
#: at most one (:mod:`privsyn_core.measuring.identifiers`): sqrt(2) in L2
IDENTIFIER_SENSITIVITY = math.sqrt(2.0)


def per_row_sensitivity(step: str) -> float:
    """The sensitivity of a step's queries to one row: 4 for the scores (InDif,
    PrivBayes), sqrt(2) for a column's counts of distinct and of present values, 1 for every
    other step that counts rows (a count moves by one)."""
    if step == "identifier":
        return IDENTIFIER_SENSITIVITY
    return INDIF_SENSITIVITY if step in ("indif", "privbayes") else 1.0


def guarantee(unit: PrivacyUnit) -> str:
    """The guarantee in one sentence, as the report, the marginals' README and the CLI say it."""
    if unit.person is None:
        return (
            "(epsilon, delta)-differential privacy, per row: neighbouring tables differ in one row"
        )
    return (
        f"(epsilon, delta)-differential privacy, {unit.words}: neighbouring tables differ in "
        f"all the rows of one person, of which at most {unit.rows_per_person} are kept"
    )


def pure_epsilon(rho: float) -> float:
    """The epsilon of an epsilon-DP mechanism that costs exactly ``rho`` in zCDP.

    A pure epsilon-DP release is ``epsilon^2 / 2``-zCDP (Bun and Steinke 2016, Proposition
    1.4), so a zCDP share ``rho`` buys ``epsilon = sqrt(2 rho)``. The "equal Laplace"
    allocation of paper section 6.4 spends its marginals this way, in the same ledger.
    """
    if rho <= 0:
        raise ValueError(f"rho must be positive to calibrate noise, got {rho!r}")
    return math.sqrt(2.0 * rho)


def laplace_scale(rho: float, l1_sensitivity: float = 1.0) -> float:
    """Laplace scale ``b = Delta_1 / epsilon`` (paper appendix B) with ``epsilon`` bought by
    ``rho`` (:func:`pure_epsilon`): the release is ``epsilon``-DP, hence ``rho``-zCDP."""
    return l1_sensitivity / pure_epsilon(rho)


def exponential_scale(rho: float, sensitivity: float) -> float:
    """Gumbel scale of an exponential mechanism (paper appendix A) that is ``rho``-zCDP.

    Sampling ``i`` with probability ~ ``exp(epsilon q_i / (2 Delta))`` is epsilon-DP and,
    being epsilon-bounded-range, ``epsilon^2 / 8``-zCDP (Cesar and Rogers 2021, used by MST and
    AIM). So ``epsilon = sqrt(8 rho)`` and the Gumbel scale ``2 Delta / epsilon`` is
    ``Delta / sqrt(2 rho)``.
    """
    if rho <= 0:
        raise ValueError(f"rho must be positive to calibrate a selection, got {rho!r}")
    return sensitivity / math.sqrt(2.0 * rho)


def upper_quantile(probability: float) -> float:
    """The standard normal's ``z`` with ``P(Z > z) = probability`` (scipy's ``norm.isf``),
    from the standard library: the thresholds of the private domain estimates need it, and
    importing ``scipy.stats`` costs a command line run about a second."""
    return -NormalDist().inv_cdf(probability)


@dataclass(frozen=True)
class Measurement:
    """One charge to the budget: what was measured, on which attributes, at what cost.

    ``rho`` is the total for all ``n_queries`` queries of the entry; each query has L2
    sensitivity ``sensitivity`` and receives independent noise of standard deviation ``sigma``.
    """

    step: str
    attributes: tuple[str, ...]
    sensitivity: float
    rho: float
    sigma: float
    n_queries: int = 1
    mechanism: str = "gaussian"
    #: the approximate-DP part of the cost (thresholded releases of unknown values); it is
    #: paid from the share of delta the ledger reserved, not from the conversion's delta
    delta: float = 0.0


#: how each mechanism's ``sigma`` prices a measurement, by the first words of its description
_FAMILIES = (
    ("gaussian", "gaussian"),
    ("discrete gaussian", "gaussian"),
    ("laplace", "laplace"),
    ("discrete laplace", "laplace"),
    ("exponential", "exponential"),
)


def noise_rho(measurement: Measurement) -> float:
    """The rho a measurement's noise buys, from its mechanism, sensitivity, sigma and number
    of queries alone: the calibrations above, read backwards.

    * Gaussian (continuous or discrete, CKS 2020 Theorem 14): ``k Delta^2 / (2 sigma^2)``
      (Prop. C.3, composed k times by Prop. C.1). A histogram (a marginal, a column's value
      classes or categories) is one query of L2 sensitivity ``Delta`` however many cells it
      has, since one record moves one cell: k = 1. The private range
      (:func:`~privsyn_core.measuring.private_domain.range_from_histogram`, whose description
      names its "log grid") is two such histograms: k = 2. InDif's scores (paper Theorem
      4.2) are ``n_queries`` queries of sensitivity 4 each that one record can all move:
      k = ``n_queries``.
    * Laplace: ``sigma = sqrt(2) b`` with ``b = Delta / sqrt(2 rho)`` (:func:`laplace_scale`),
      so ``rho = Delta^2 / sigma^2``.
    * Exponential: ``sigma`` is the Gumbel scale ``Delta / sqrt(2 rho)``
      (:func:`exponential_scale`), one choice per entry however many candidates it had.

    An unknown mechanism is a :class:`LedgerMismatchError`: it cannot be priced.
    ``tests/test_bundle.py`` prices every producer's entries with it, so a calibration that
    changes without this rule fails there, not in a user's bundle."""
    description = measurement.mechanism.lower()
    family = next((f for name, f in _FAMILIES if description.startswith(name)), None)
    if family is None:
        raise LedgerMismatchError(
            f"its ledger names a mechanism this version cannot price: {measurement.mechanism!r}"
        )
    base = gaussian_rho(measurement.sigma, measurement.sensitivity)
    if family == "laplace":
        return 2.0 * base
    if family == "exponential":
        return base
    if measurement.step == "indif":
        return measurement.n_queries * base
    if "log grid" in description:  # the private range's two histograms, by its description
        return 2.0 * base
    return base


@dataclass(frozen=True)
class PrivacyLedger:
    """Every measurement made on the private table, and the budget they are charged to.

    Immutable: :meth:`charge` returns a new ledger, so a ledger handed to the caller is a
    faithful record of what was spent up to that point.
    """

    budget_rho: float
    epsilon: float | None = None
    delta: float | None = None
    conversion: Conversion = "tight"
    entries: tuple[Measurement, ...] = field(default_factory=tuple)
    #: part of ``delta`` set aside for thresholded releases; the rest converts rho to epsilon
    reserved_delta: float = 0.0
    #: columns whose domain was read off the raw data: if any, the run is NOT end-to-end DP
    not_private: tuple[str, ...] = ()
    #: "release" (secure, exact noise) or the debug mode's "not for release" mark
    randomness: str = "release"
    #: whose privacy the budget protects: a row, or a person with at most K rows
    unit: PrivacyUnit = ROW

    @classmethod
    def from_epsilon_delta(
        cls,
        epsilon: float,
        delta: float,
        conversion: Conversion = "tight",
        reserved_delta: float = 0.0,
    ) -> PrivacyLedger:
        """The budget for (epsilon, delta)-DP; ``reserved_delta`` of delta is kept for
        measurements with an approximate-DP part, so rho is converted at the remainder."""
        check_epsilon_delta(epsilon, delta)
        if not 0 <= reserved_delta < delta:
            raise InputError(
                f"the delta reserved for thresholding ({reserved_delta!r}) must lie in "
                f"[0, delta={delta!r})"
            )
        rho = rho_from_epsilon_delta(epsilon, delta - reserved_delta, conversion)
        return cls(
            budget_rho=rho,
            epsilon=epsilon,
            delta=delta,
            conversion=conversion,
            reserved_delta=reserved_delta,
        )

    @property
    def spent_delta(self) -> float:
        return math.fsum(e.delta for e in self.entries)

    @property
    def budget(self) -> Budget:
        """What this ledger may spend: its rho, and the delta reserved for thresholding."""
        return Budget(self.budget_rho, self.reserved_delta)

    @property
    def spent(self) -> Budget:
        """What its measurements spent: their rho and their thresholds' delta."""
        return Budget(self.spent_rho, self.spent_delta)

    @property
    def spent_rho(self) -> float:
        return math.fsum(e.rho for e in self.entries)

    @property
    def remaining_rho(self) -> float:
        return max(0.0, self.budget_rho - self.spent_rho)

    def spent_epsilon(self) -> float | None:
        """The epsilon actually used so far, at this ledger's delta (less the reserve)."""
        if self.delta is None:
            return None
        return epsilon_from_rho(self.spent_rho, self.delta - self.reserved_delta, self.conversion)

    def charge(self, measurement: Measurement) -> PrivacyLedger:
        if measurement.rho <= 0:
            raise ValueError(f"a measurement must cost a positive rho, got {measurement.rho!r}")
        if self.spent_delta + measurement.delta > self.reserved_delta * (1 + _ROUNDOFF):
            raise BudgetExceededError(
                f"measuring {measurement.step} on {list(measurement.attributes)} needs "
                f"delta={measurement.delta:.3g} for thresholding, but only "
                f"{self.reserved_delta - self.spent_delta:.3g} of the reserved "
                f"{self.reserved_delta:.3g} is left"
            )
        total = self.spent_rho + measurement.rho
        if total > self.budget_rho * (1 + _ROUNDOFF):
            raise BudgetExceededError(
                f"measuring {measurement.step} on {list(measurement.attributes)} costs "
                f"rho={measurement.rho:.6g}, but only {self.remaining_rho:.6g} of "
                f"{self.budget_rho:.6g} is left"
            )
        return replace(self, entries=(*self.entries, measurement))

    def charge_all(self, measurements: Sequence[Measurement]) -> PrivacyLedger:
        ledger = self
        for m in measurements:
            ledger = ledger.charge(m)
        return ledger

    def spent_by_step(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for e in self.entries:
            out[e.step] = out.get(e.step, 0.0) + e.rho
        return out

    def to_json(self) -> dict[str, object]:
        """The ledger as a JSON-ready record: every measurement, the totals, and the
        (epsilon, delta) <-> rho conversions both ways, so a reader can check the claim."""
        conversion_delta = None if self.delta is None else self.delta - self.reserved_delta
        return {
            "format": "privsyn-ledger",
            "version": 1,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "conversion": self.conversion,
            "budget_rho": self.budget_rho,
            "spent_rho": self.spent_rho,
            "reserved_delta": self.reserved_delta,
            "spent_delta": self.spent_delta,
            "spent_epsilon": self.spent_epsilon(),
            "conversions": {
                "rho_from_epsilon_delta": {
                    "epsilon": self.epsilon,
                    "delta": conversion_delta,
                    "rho": self.budget_rho,
                },
                "epsilon_from_rho": {
                    "rho": self.spent_rho,
                    "delta": conversion_delta,
                    "epsilon": self.spent_epsilon(),
                },
            },
            "randomness": self.randomness,
            "privacy_unit": self.unit.to_json(),
            "end_to_end_dp": not self.not_private,
            "not_private": list(self.not_private),
            "measurements": [
                {
                    "step": e.step,
                    "attributes": list(e.attributes),
                    "sensitivity": e.sensitivity,
                    "rho": e.rho,
                    "sigma": e.sigma,
                    "queries": e.n_queries,
                    "mechanism": e.mechanism,
                    "delta": e.delta,
                }
                for e in self.entries
            ],
        }


def recomputed(ledger: PrivacyLedger) -> PrivacyLedger:
    """``ledger`` with every figure priced again from the noise it records: each entry's rho
    by :func:`noise_rho`, the budget set to what they spent together (a release read back
    spends nothing more), and epsilon that total at the ledger's delta less its reserve: the
    smallest epsilon the measurements' noise guarantees, which is what a release cost."""
    entries = tuple(replace(e, rho=noise_rho(e)) for e in ledger.entries)
    spent = math.fsum(e.rho for e in entries)
    epsilon = (
        None
        if ledger.delta is None
        else epsilon_from_rho(spent, ledger.delta - ledger.reserved_delta, ledger.conversion)
    )
    return replace(ledger, budget_rho=spent, epsilon=epsilon, entries=entries)


def verified(ledger: PrivacyLedger, stated: Mapping[str, Any] | None = None) -> PrivacyLedger:
    """:func:`recomputed` ``ledger``, once every figure it states agrees with that price.

    ``stated`` is the record it was read from (:meth:`PrivacyLedger.to_json`): its totals and
    conversions are figures a reader sees too, so they are checked as well. Agreement is up
    to float round-off (relative 1e-9). Checked: every figure is a positive finite number
    (deltas non-negative), each entry's rho is what its noise buys, the entries fit the
    budget (rho and reserved delta), the stated epsilon is the budget's at the ledger's delta,
    the stated totals are the entries', and every entry is calibrated for the ledger's privacy
    unit (:func:`check_unit`). The first that disagrees is a :class:`LedgerMismatchError`
    saying what the ledger says and what its noise means.

    The delta of thresholded releases (private categories) is only checked to fit the
    reserve: its threshold is recorded in words, not precisely enough to recompute it."""
    _check_figures(ledger)
    check_unit(ledger)
    priced = recomputed(ledger)
    for said, entry in zip(ledger.entries, priced.entries, strict=True):
        if not agrees(said.rho, entry.rho):
            raise LedgerMismatchError(
                f"its ledger charges rho {said.rho:.6g} for the {said.step} measurement on "
                f"{list(said.attributes)}, but its noise (sigma {said.sigma:.6g}, sensitivity "
                f"{said.sensitivity:g}, {said.n_queries} queries) means rho {entry.rho:.6g}"
            )
    spent = priced.spent_rho
    means = f"its measurements (the sigma of each) mean {_price(priced)}"
    if spent > ledger.budget_rho * (1 + _ROUNDOFF):
        raise LedgerMismatchError(
            f"its ledger's budget is rho {ledger.budget_rho:.6g}, but {means}, more than that"
        )
    if ledger.spent_delta > ledger.reserved_delta * (1 + _ROUNDOFF):
        raise LedgerMismatchError(
            f"its ledger reserves delta {ledger.reserved_delta:.3g} for thresholding, but its "
            f"measurements spent delta {ledger.spent_delta:.3g} on it"
        )
    if ledger.epsilon is not None and ledger.delta is not None:
        budget = rho_from_epsilon_delta(
            ledger.epsilon, ledger.delta - ledger.reserved_delta, ledger.conversion
        )
        if not agrees(budget, ledger.budget_rho):
            raise LedgerMismatchError(f"its ledger says epsilon {ledger.epsilon:.4g}, but {means}")
    for name, claimed, recomputed_value in _totals(ledger, priced, stated or {}):
        if claimed is None and recomputed_value is None:
            continue
        if claimed is None or recomputed_value is None or not agrees(claimed, recomputed_value):
            shown = "none" if claimed is None else f"{claimed:.4g}"
            actual = (
                f"its measurements' deltas add up to {ledger.spent_delta:.4g}"
                if name.startswith("delta")
                else means
            )
            raise LedgerMismatchError(f"its ledger says {name} {shown}, but {actual}")
    return priced


def check_unit(ledger: PrivacyLedger) -> None:
    """Refuse a ledger whose measurements are not calibrated for its privacy unit: each
    entry's sensitivity must be its step's per-row one times K (:meth:`PrivacyUnit.sensitivity`).

    Prices are recomputed from the sensitivity each entry records, so without this check a
    ledger could say "per person, at most 20 rows" over noise calibrated for one row, and
    every figure would agree: a guarantee 20 times weaker in sigma than the one it states
    (400 times the rho). An entry recording more than its unit needs is refused as well: the
    ledger and its noise tell different stories."""
    unit = ledger.unit
    for e in ledger.entries:
        per_row = per_row_sensitivity(e.step)
        expected = unit.sensitivity(per_row)
        if not agrees(e.sensitivity, expected):
            rows = e.sensitivity / per_row
            raise LedgerMismatchError(
                f"its ledger's guarantee is {unit.words}, so the {e.step} measurement on "
                f"{list(e.attributes)} has sensitivity {expected:g}, but it records "
                f"{e.sensitivity:g}: noise for {rows:g} row{'' if rows == 1 else 's'} per person"
            )


def _price(ledger: PrivacyLedger) -> str:
    """A ledger's cost as printed: epsilon (at its delta) when it has one, and rho."""
    rho = f"rho {ledger.spent_rho:.4g}"
    return rho if ledger.epsilon is None else f"epsilon {ledger.epsilon:.4g} ({rho})"


def agrees(said: float, recomputed_value: float) -> bool:
    """Whether a stated figure is the recomputed one up to float round-off (relative 1e-9):
    conversions and JSON round trips move the last digits, an edit moves more."""
    return math.isclose(said, recomputed_value, rel_tol=_ROUNDOFF, abs_tol=0.0)


def _check_figures(ledger: PrivacyLedger) -> None:
    """Every figure a positive finite number (deltas may be 0), before any is compared: a NaN
    agrees with nothing and a negative rho would lower the total."""
    positive = [("budget rho", ledger.budget_rho)]
    if ledger.epsilon is not None:
        positive.append(("epsilon", ledger.epsilon))
    if ledger.delta is not None:
        positive.append(("delta", ledger.delta))
    for e in ledger.entries:
        where = f"of the {e.step} measurement on {list(e.attributes)}"
        positive += [
            (f"sigma {where}", e.sigma),
            (f"sensitivity {where}", e.sensitivity),
            (f"rho {where}", e.rho),
            (f"number of queries {where}", e.n_queries),
        ]
    for name, value in positive:
        if not (math.isfinite(value) and value > 0):
            raise LedgerMismatchError(f"its ledger's {name} is {value!r}, not a positive number")
    deltas = [("reserved delta", ledger.reserved_delta)]
    deltas += [(f"delta of the {e.step} measurement", e.delta) for e in ledger.entries]
    for name, value in deltas:
        if not (math.isfinite(value) and value >= 0):
            raise LedgerMismatchError(f"its ledger's {name} is {value!r}, not a number >= 0")
    if ledger.delta is not None and not (
        ledger.delta <= MAX_DELTA and ledger.reserved_delta < ledger.delta
    ):
        raise LedgerMismatchError(
            f"its ledger's delta {ledger.delta!r} (of which {ledger.reserved_delta!r} reserved) "
            f"is no privacy guarantee: delta must be at most {MAX_DELTA:g} and exceed the reserve"
        )
    if ledger.conversion not in ("tight", "proposition"):
        raise LedgerMismatchError(f"its ledger names an unknown conversion {ledger.conversion!r}")


def _totals(
    ledger: PrivacyLedger, priced: PrivacyLedger, stated: Mapping[str, Any]
) -> list[tuple[str, float | None, float | None]]:
    """The totals and conversions a :meth:`PrivacyLedger.to_json` record states (name, the
    record's figure, the figure recomputed); a figure the record lacks is not compared."""
    conversions = _record(stated.get("conversions"))
    spend = _record(conversions.get("epsilon_from_rho"))
    budget = _record(conversions.get("rho_from_epsilon_delta"))
    expected = [
        ("rho spent", stated, "spent_rho", priced.spent_rho),
        ("epsilon spent", stated, "spent_epsilon", priced.epsilon),
        ("delta spent on thresholding", stated, "spent_delta", ledger.spent_delta),
        ("rho spent", spend, "rho", priced.spent_rho),
        ("epsilon", spend, "epsilon", priced.epsilon),
        ("epsilon", budget, "epsilon", ledger.epsilon),
        ("budget rho", budget, "rho", ledger.budget_rho),
    ]
    return [
        (name, None if record[key] is None else float(record[key]), value)
        for name, record, key, value in expected
        if key in record
    ]


def _record(value: object) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise TypeError(f"a ledger record holds {type(value).__name__} where a record belongs")
    return value
