"""Budget planning: how much noise each step will add, and what it will cost a raw table.

:func:`plan_budget` is computed from public inputs only (epsilon, delta, the number of columns,
which domains are declared, the settings): nothing reads the table, so the plan can be shown
before any data is touched (the dashboard's Privacy page does so live while the user types).

:func:`forecast_columns` is the owner's preview of a run on a raw table: which columns the
private structure and domain estimates are likely to leave out at this budget, and why. It
reads the private table (exact counts) and runs the engine's own preparation step on them
with simulated noise, so it is shown to the data owner only and releases nothing; no budget
is spent and nothing is recorded.

Both take the run's :class:`~privsyn_core.privacy.ledger.PrivacyUnit`: with a person column and
K rows per person, a run calibrates every step for K rows (K times the per-row noise), and a
forecast that simulated per-row noise would promise columns the run then loses.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from statistics import NormalDist
from typing import Any

import numpy as np
import pandas as pd

from privsyn_core.config import PrivSynConfig
from privsyn_core.data.codecs import BinnedCodec, CategoryCodec, ColumnCodec
from privsyn_core.data.schema import Schema
from privsyn_core.data.values import NUMBER_CLASSES
from privsyn_core.errors import InputError
from privsyn_core.measuring.counters import Counter, FrameTable, Numbers, RawTable
from privsyn_core.measuring.domain_split import (
    CATEGORY_WEIGHT,
    FIRST_CATEGORY_SHARE,
    FIRST_RANGE_SHARE,
    DomainSplit,
)
from privsyn_core.measuring.identifiers import IDENTIFIER_RESERVE
from privsyn_core.measuring.indif import indif_sigma
from privsyn_core.measuring.persons import bounded
from privsyn_core.measuring.private_domain import category_threshold, combined_sigma
from privsyn_core.privacy.budget import Budget
from privsyn_core.privacy.conversion import rho_from_epsilon_delta
from privsyn_core.privacy.ledger import (
    IDENTIFIER_SENSITIVITY,
    ROW,
    FailedAfterSpending,
    Measurement,
    PrivacyUnit,
    laplace_scale,
)
from privsyn_core.privacy.noise import SecureNoise, SeededNoise


@dataclass(frozen=True)
class StepPlan:
    """One step's share of the budget and the noise it implies."""

    step: str
    rho: float
    sigma: float | None
    queries: str
    note: str


@dataclass(frozen=True)
class CategorySurvival:
    """How many records a category needs to survive the private category estimate.

    The estimate (:func:`privsyn_core.measuring.private_domain.categories_from_counts`) keeps
    a value whose count ``c`` plus noise N(0, sigma^2) reaches ``threshold``, so it survives
    with probability about ``P(c + N(0, sigma^2) >= threshold)``. Public inputs only: the
    threshold is the first estimate's and assumes every column that may release categories is
    thresholded (each first estimate gets an equal part of the first estimates' delta and
    budget, :class:`~privsyn_core.measuring.domain_split.DomainSplit`); if the structure
    step settles fewer as categorical, each gets more of both and the real threshold is lower
    (the owner's :func:`forecast_columns` uses the kinds the table's values have), and a
    column that releases nothing gets a second, lower threshold.
    """

    sigma: float
    threshold: float
    #: delta spent by each thresholded column (the chance a one-record value is released)
    delta_each: float
    #: columns whose categories may be thresholded
    columns: int

    def probability(self, count: float) -> float:
        """Chance that a value held by ``count`` records clears the threshold."""
        return NormalDist().cdf((count - self.threshold) / self.sigma)

    def count_for(self, probability: float) -> int:
        """The smallest whole count that survives with at least ``probability``."""
        return max(1, math.ceil(self.threshold + self.sigma * NormalDist().inv_cdf(probability)))

    @property
    def count_50(self) -> int:
        return self.count_for(0.5)

    @property
    def count_95(self) -> int:
        return self.count_for(0.95)

    def summary(self) -> str:
        return (
            f"a category needs about {self.count_50} records to survive half the time and "
            f"{self.count_95} to survive 95% of the time (threshold {self.threshold:.1f}, "
            f"sigma {self.sigma:.1f}); rarer values become '(other)', and a column with no "
            "surviving value gets a second estimate, then is dropped if that releases none. "
            "Declare the categories in the schema to skip this."
        )


@dataclass(frozen=True)
class BudgetPlan:
    epsilon: float
    delta: float
    rho: float
    steps: tuple[StepPlan, ...]
    #: the category threshold, when some column's categories are estimated privately
    categories: CategorySurvival | None = None
    #: the share of delta set aside for thresholded releases (rho is converted at the rest)
    reserved_delta: float = 0.0

    @property
    def budget(self) -> Budget:
        """What the run may spend: its rho, and the delta its thresholded releases may."""
        return Budget(self.rho, self.reserved_delta)

    def as_rows(self) -> list[dict[str, object]]:
        return [
            {
                "step": s.step,
                "rho": s.rho,
                "share": s.rho / self.rho if self.rho else 0.0,
                "sigma": s.sigma,
                "queries": s.queries,
                "note": s.note,
            }
            for s in self.steps
        ]


def plan_budget(
    epsilon: float,
    delta: float,
    n_columns: int,
    *,
    config: PrivSynConfig | None = None,
    private_structure: int = 0,
    private_categories: int = 0,
    private_ranges: int = 0,
    private_undecided: int = 0,
    noise: SeededNoise | SecureNoise | None = None,
    unit: PrivacyUnit = ROW,
) -> BudgetPlan:
    """The split of rho over PrivSyn's steps (Algorithm 3) and each step's noise.

    How many columns the schema leaves open: ``private_structure`` have their kind, whole
    numbers or date format decided privately; ``private_categories`` / ``private_ranges``
    their categories or bounds estimated; ``private_undecided`` are of undeclared kind, so
    they get one estimate of either sort (and may release categories). ``noise`` is the noise
    source whose tail bound sets the category threshold (release mode by default), recalibrated
    for the plan's privacy unit.
    ``unit`` is the run's privacy unit: per person with K rows, every sigma is K times the
    per-row one and the category threshold is the person-level one, as the run's own noise
    (:meth:`PrivacyUnit.sigma`, :func:`category_threshold`).
    """
    config = config or PrivSynConfig()
    estimates = private_categories + private_ranges + private_undecided
    may_threshold = private_categories + private_undecided
    open_split = config.open_split(
        delta,
        structure=private_structure,
        estimates=estimates,
        category_estimates=may_threshold,
    )
    reserved = open_split.reserved_delta
    rho = rho_from_epsilon_delta(epsilon, delta - reserved, config.conversion)
    rho_structure, rho_domain = open_split.rho(rho)
    steps: list[StepPlan] = []
    if private_structure:
        steps.append(_structure_step(rho_structure, private_structure, unit))
    # a share of the domain budget is kept for the identifier checks of the columns the
    # estimates point to: none is known before the run, so the plan is a run's without one
    # (the reserve goes to the steps below); a check takes it from them
    rho_checks = IDENTIFIER_RESERVE * rho_domain
    domain_split = DomainSplit(rho_domain - rho_checks, private_ranges, may_threshold)
    survival = None
    if may_threshold:
        calibrated = replace(noise or SecureNoise(), unit=unit)
        survival = _category_survival(domain_split, may_threshold, reserved, calibrated, unit)
    if estimates:
        steps.append(_domain_step(domain_split, rho_checks, estimates, survival, reserved, unit))
    rest = rho - rho_structure - rho_domain + rho_checks
    split = config.split(rest, n_columns)
    steps.append(_one_way_step(split.one_way, n_columns, unit))
    if split.selection:
        steps.append(_selection_step(split.selection, n_columns, config, unit))
    steps.append(_marginals_step(split.marginals, n_columns, config, unit))
    return BudgetPlan(epsilon, delta, rho, tuple(steps), survival, reserved)


def _structure_step(rho: float, columns: int, unit: PrivacyUnit) -> StepPlan:
    """Deciding the open columns' kinds: ``rho`` split evenly over ``columns``."""
    return StepPlan(
        "column kinds",
        rho,
        unit.sigma(rho / columns),
        f"{columns} columns",
        "sigma of the counts of numbers (by their decimals), dates and text per "
        "column; kinds, whole numbers, decimals and date formats are decided from "
        "their noisy shares",
    )


def _category_survival(
    split: DomainSplit,
    columns: int,
    reserved: float,
    noise: SeededNoise | SecureNoise,
    unit: PrivacyUnit,
) -> CategorySurvival:
    """The threshold a category can count on: a first estimate without the ranges' reserve,
    which reaches the categories only when every range finds its bounds at first."""
    sigma = unit.sigma(split.category_least)
    delta_each = split.category_first_delta(reserved)
    return CategorySurvival(
        sigma=sigma,
        threshold=category_threshold(sigma, delta_each, noise),
        delta_each=delta_each,
        columns=columns,
    )


def _domain_step(
    split: DomainSplit,
    rho_checks: float,
    estimates: int,
    survival: CategorySurvival | None,
    reserved: float,
    unit: PrivacyUnit,
) -> StepPlan:
    """The private domain estimates of ``estimates`` columns: categories kept above a noisy
    threshold, bounds from noisy histograms, and the identifier checks' reserve."""
    if survival is not None:
        sigma = survival.sigma
        first = (
            "sigma of each category's count in a first estimate (a category weighs "
            f"{CATEGORY_WEIGHT:g} ranges); "
        )
    else:  # ranges only: a first estimate's histograms (rho / 2 each)
        sigma = unit.sigma(split.range_first / 2)
        first = "sigma of a range's first histograms; "
    return StepPlan(
        "domains",
        split.total,
        sigma,
        f"{estimates} columns",
        first + f"categories kept when their noisy count clears a threshold (delta "
        f"{reserved:.2g} reserved), "
        f"{1 - FIRST_CATEGORY_SHARE:.0%} of their share kept for a second estimate of "
        "the columns that release none (of all, when each releases some); bounds "
        "from noisy histograms of powers of two, "
        f"{1 - FIRST_RANGE_SHARE:.0%} of the ranges' share kept for a second estimate "
        f"of those that find nothing; {IDENTIFIER_RESERVE:.0%} kept for the identifier "
        "checks of columns that look like row ids (text releasing no category, whole "
        "numbers about as many as the rows; sigma "
        f"{unit.sigma(rho_checks, IDENTIFIER_SENSITIVITY):.3g} for one); what is left "
        "unspent goes to the steps below",
    )


def _one_way_step(rho: float, n_columns: int, unit: PrivacyUnit) -> StepPlan:
    """The 1-way marginals (paper 5.3): ``rho`` split evenly over the columns."""
    return StepPlan(
        "1-way marginals",
        rho,
        unit.sigma(rho / max(1, n_columns)),
        f"{n_columns} marginals",
        "values below 3 sigma are combined or dropped",
    )


def _selection_step(
    rho: float, n_columns: int, config: PrivSynConfig, unit: PrivacyUnit
) -> StepPlan:
    """Choosing the marginals: InDif scores of every pair (paper 4.2), or PrivBayes's
    exponential mechanism over parent sets."""
    if config.selection_method().reads == "indif":
        pairs = n_columns * (n_columns - 1) // 2
        return StepPlan(
            "InDif scores",
            rho,
            indif_sigma(n_columns, rho, unit),
            f"{pairs} pair{'' if pairs == 1 else 's'}",
            f"sensitivity {4 * unit.rows_per_person}; noise variance "
            f"{8 * unit.rows_per_person**2}m / rho_2",
        )
    return StepPlan(
        "parent sets",
        rho,
        None,
        f"{n_columns} attributes",
        "PrivBayes's exponential mechanism: no additive noise",
    )


def _marginals_step(
    rho: float, n_columns: int, config: PrivSynConfig, unit: PrivacyUnit = ROW
) -> StepPlan:
    """The chosen marginals' step: how many there will be (known before the run unless the
    data chooses them) and each one's noise under ``config.noise``."""
    count, chosen = config.selection_method().planned(n_columns) or (
        max(1, n_columns),
        "chosen by the data",
    )
    if config.noise == "equal_laplace":
        sigma = math.sqrt(2) * laplace_scale(rho / count, unit.sensitivity())
        how = f"rho / {count} each, Laplace noise (pure DP); its standard deviation shown"
    elif config.noise == "equal_gaussian":
        sigma = unit.sigma(rho / count)
        how = f"rho / {count} each"
    else:
        sigma = unit.sigma(rho / count)
        rule = "cells^(2/3)"
        if config.target is not None:
            rule = (
                f"(w x cells)^(2/3), w = {config.target_weight:g} for marginals with "
                f"{config.target!r}"
            )
        how = f"sigma shown for {count} equal marginals; the real split follows {rule}"
    return StepPlan("selected marginals", rho, sigma, chosen, how)


# ------------------------------------------------------------------ the owner's forecast

#: simulated runs behind a forecast (seeds 0 .. FORECAST_DRAWS - 1: the same table and
#: settings always give the same forecast)
FORECAST_DRAWS = 8


@dataclass(frozen=True)
class ForecastNoise(SeededNoise):
    """Seeded Gaussian draws with the release mode's category threshold: a forecast (or a
    benchmark) sees the columns a release run would lose, reproducibly."""

    def tail_quantile(self, probability: float) -> float:
        return SecureNoise().tail_quantile(probability)


@dataclass(frozen=True)
class ColumnForecast:
    """What simulated runs did to one column (owner-only: read off the private table)."""

    name: str
    #: the kind most runs decided (``categorical``, ``numeric``, ``datetime``)
    kind: str
    #: share of the runs that left the column out
    lost: float
    #: what a run keeps of it, in words
    kept: str
    #: why it is left out, or what it loses, in words ("" when nothing)
    why: str
    #: categories: share of the present rows whose value is released (mean over the runs that
    #: kept the column); numbers: share of the present values inside the private bounds
    cover: float
    #: what a run that keeps it changes, in words ("" when nothing): written as fresh ids,
    #: collapsed to one value, values beyond the bounds, rare categories merged
    reduced: str = ""

    @property
    def status(self) -> str:
        """``likely lost``, ``at risk`` (lost in some runs), ``loses values`` (kept, but most
        of its rows become "other" or fall outside the bounds), ``reduced`` (kept with a
        change the release will list) or ``kept``."""
        if self.lost >= 0.5:
            return "likely lost"
        if self.lost > 0:
            return "at risk"
        if self.cover < 0.5:
            return "loses values"
        return "reduced" if self.reduced else "kept"


@dataclass(frozen=True)
class TableForecast:
    """:func:`forecast_columns`' answer, one line per column the schema includes."""

    columns: tuple[ColumnForecast, ...]
    draws: int
    #: the count a value needs to be released half the time, in this table's runs (their
    #: median threshold: the kinds the runs decided set how the budget is split), or None
    #: when no category is estimated
    category_threshold: float | None = None

    def at_risk(self) -> tuple[ColumnForecast, ...]:
        """The columns a run may lose or keep little of, the likeliest losses first."""
        risky = [c for c in self.columns if c.status != "kept"]
        return tuple(sorted(risky, key=lambda c: (-c.lost, c.cover)))

    def summary(self) -> str:
        lost = [c.name for c in self.columns if c.status == "likely lost"]
        risky = [c.name for c in self.columns if c.status == "at risk"]
        thin = [c.name for c in self.columns if c.status == "loses values"]
        reduced = [c.name for c in self.columns if c.status == "reduced"]
        parts = [f"{len(lost)} of {len(self.columns)} columns likely left out"]
        if risky:
            parts.append(f"{len(risky)} left out in some of {self.draws} simulated runs")
        if thin:
            parts.append(f"{len(thin)} kept with most of their values lost")
        if reduced:
            parts.append(f"{len(reduced)} kept with a change the run will list")
        return "; ".join(parts)


class CountsOnce:
    """A :class:`~privsyn_core.measuring.counters.reading.RawTable` that counts each aggregate once,
    so that many simulated runs cost little more than one (and a forecast redone at another
    epsilon costs no counting at all, when the caller keeps it). Owner-only: it holds exact
    counts of the private table.

    Under a person-level ``unit`` it counts the table a run would count: at most K rows per
    person, without the person column (:func:`~privsyn_core.measuring.persons.bounded`), the
    rows chosen once with seed 0 so the forecast is reproducible. A run chooses its own rows,
    which differ only among the people who hold more than K."""

    def __init__(self, table: RawTable, unit: PrivacyUnit = ROW) -> None:
        self.unit = unit
        self.table = bounded(table, unit, ForecastNoise(np.random.default_rng(0), unit=unit))
        self.names = self.table.names
        self._cache: dict[object, Any] = {}

    def _once(self, key: object, count: Callable[[], Any]) -> Any:
        if key not in self._cache:
            self._cache[key] = count()
        return self._cache[key]

    def class_counts(self, name: str) -> np.ndarray:
        return self._once(("classes", name), lambda: self.table.class_counts(name))

    def value_counts(self, name: str) -> tuple[tuple[str, ...], np.ndarray]:
        return self._once(("values", name), lambda: self.table.value_counts(name))

    def distinct_counts(self, name: str) -> tuple[int, int]:
        return self._once(("distinct", name), lambda: self.table.distinct_counts(name))

    def numbers(self, codec: BinnedCodec) -> _NumbersOnce:
        return self._once(("numbers", codec), lambda: _NumbersOnce(self.table.numbers(codec)))

    def encoded(self, codecs: Sequence[ColumnCodec], dtype: np.dtype) -> Counter:
        return self.table.encoded(codecs, dtype)


class _NumbersOnce:
    def __init__(self, numbers: Numbers) -> None:
        self.numbers = numbers
        self._cache: dict[tuple[bytes, bool], np.ndarray] = {}

    def histogram(self, edges: np.ndarray, clip: bool) -> np.ndarray:
        key = (np.asarray(edges, dtype=float).tobytes(), clip)
        if key not in self._cache:
            self._cache[key] = self.numbers.histogram(edges, clip)
        return self._cache[key]

    def bounds(self) -> tuple[float, float] | None:
        return self.numbers.bounds()


def forecast_columns(
    table: pd.DataFrame | RawTable | CountsOnce,
    schema: Schema,
    epsilon: float,
    delta: float,
    *,
    config: PrivSynConfig | None = None,
    draws: int = FORECAST_DRAWS,
    unit: PrivacyUnit = ROW,
) -> TableForecast:
    """Which columns a run at ``epsilon`` and ``delta`` is likely to leave out, and why.

    OWNER-ONLY: reads the private table. The engine's own preparation
    (:func:`~privsyn_core.data.columns.prepare_columns`, with the budget a run gives it) runs
    ``draws`` times on the table's exact counts with :class:`ForecastNoise` (seeds 0, 1, ...),
    and each column's line says how often it was left out, what the runs kept of it and why.
    Nothing is spent and nothing is released: the forecast is as private as the table.

    ``unit`` is the run's privacy unit: per person, the runs read the table bounded to K rows
    per person (:class:`CountsOnce`) with noise calibrated for K rows, as the run does; the
    schema then leaves the person column out, as the run's does. A ``table`` already counted
    (:class:`CountsOnce`) must have been counted for the same unit.
    """
    from privsyn_core.data.columns import open_parts, prepare_columns

    config = config or PrivSynConfig()
    counted = _counted_once(table, unit)
    parts = open_parts(schema)
    reserved = config.threshold_delta_share * delta if parts.possible_category_estimates else 0.0
    rho = rho_from_epsilon_delta(epsilon, delta - reserved, config.conversion)
    names = [c.name for c in schema.included()]
    rho_open = (config.structure_share if parts.structure else 0.0) + (
        config.domain_share if parts.domain_estimates else 0.0
    )
    one_way = config.split((1.0 - rho_open) * rho, max(1, len(names))).one_way
    one_way_sigma = unit.sigma(one_way / max(1, len(names)))
    prepare = partial(
        prepare_columns,
        counted,
        schema,
        rho_per_structure=config.structure_share * rho / max(1, len(parts.structure)),
        rho_per_estimate=config.domain_share * rho / max(1, parts.domain_estimates),
        delta_for_thresholds=reserved,
        one_way_sigma=one_way_sigma,
    )
    runs = [_simulate_run(prepare, names, seed, draws, unit) for seed in range(draws)]
    bar = config.threshold_sigmas * one_way_sigma if config.filter_low_counts else 0.0
    return _table_forecast(counted, names, runs, one_way_sigma, bar)


def _counted_once(table: pd.DataFrame | RawTable | CountsOnce, unit: PrivacyUnit) -> CountsOnce:
    """``table`` counted for ``unit``, once for every simulated run."""
    if not isinstance(table, CountsOnce):
        return CountsOnce(FrameTable(table) if isinstance(table, pd.DataFrame) else table, unit)
    if table.unit != unit:
        raise ValueError(
            f"the table was counted {table.unit.words}, but the forecast is {unit.words}"
        )
    return table


@dataclass(frozen=True)
class _SimulatedRun:
    """What one simulated run's preparation did (owner-only: read off the private table)."""

    #: the columns it kept, with their codecs
    kept: dict[str, ColumnCodec]
    #: the columns it left out, and why
    excluded: dict[str, str]
    #: the columns it found to be row ids
    identified: frozenset[str]
    #: each column's last category threshold, where its categories were estimated
    thresholds: dict[str, float]
    #: the draw its 1-way marginals would add (:func:`_numbers_reduced`)
    one_way_noise: ForecastNoise


def _simulate_run(
    prepare: Callable[..., Any], names: list[str], seed: int, draws: int, unit: PrivacyUnit
) -> _SimulatedRun:
    """Run the preparation ``prepare`` once with :class:`ForecastNoise` of ``seed`` (its 1-way
    marginals' noise from ``seed + draws``); a run that leaves every column out leaves each
    for the same reason."""
    noise = ForecastNoise(np.random.default_rng(seed), unit=unit)
    one_way_noise = ForecastNoise(np.random.default_rng(seed + draws), unit=unit)
    try:
        prepared = prepare(rng=noise)
    except InputError as error:  # every column left out
        spent = error.ledger.entries if isinstance(error, FailedAfterSpending) else ()
        excluded = dict.fromkeys(names, str(error))
        return _SimulatedRun(
            {}, excluded, frozenset(), _last_thresholds(spent, noise), one_way_noise
        )
    return _SimulatedRun(
        {c.codec.name: c.codec for c in prepared.columns},
        dict(prepared.excluded),
        frozenset(i.name for i in prepared.identifiers),
        _last_thresholds(prepared.measurements, noise),
        one_way_noise,
    )


def _last_thresholds(spent: Sequence[Measurement], noise: ForecastNoise) -> dict[str, float]:
    """Each column's last category threshold, as categories_from_counts sets it: a second
    estimate's is set for the noise of both."""
    estimates: dict[str, list[Measurement]] = {}
    for m in spent:
        if m.step == "domain" and m.delta > 0:
            estimates.setdefault(m.attributes[0], []).append(m)
    return {
        name: category_threshold(combined_sigma(*(m.sigma for m in found)), found[-1].delta, noise)
        for name, found in estimates.items()
    }


def _table_forecast(
    table: CountsOnce, names: list[str], simulated: list[_SimulatedRun], sigma: float, bar: float
) -> TableForecast:
    """Each column's line from the simulated runs; a column most runs found to be a row id is
    written as fresh ids, and a numeric one may collapse under the 1-way marginal's noise
    (``sigma``, filtered below ``bar``)."""
    runs = [(run.kept, run.excluded) for run in simulated]
    noises = [run.one_way_noise for run in simulated]
    thresholds = [t for run in simulated for t in run.thresholds.values()]
    threshold = float(np.median(thresholds)) if thresholds else None
    forecasts = []
    for name in names:
        own = [run.thresholds[name] for run in simulated if name in run.thresholds]
        line = _column_forecast(table, name, runs, float(np.median(own)) if own else threshold)
        ids = sum(name in run.identified for run in simulated)
        if ids * 2 >= len(simulated):
            line = replace(
                line,
                kind="identifier",
                kept="fresh unique ids 1 to n",
                reduced="a row id: written as fresh ids, not modelled",
                cover=1.0,
            )
        elif line.kind == "numeric" and not line.lost:
            reduced = _numbers_reduced(table, name, runs, noises, sigma, bar, line.cover)
            line = replace(line, reduced=reduced)
        forecasts.append(line)
    return TableForecast(tuple(forecasts), len(simulated), threshold)


def _numbers_reduced(
    table: CountsOnce,
    name: str,
    runs: list[tuple[dict[str, ColumnCodec], dict[str, str]]],
    noises: list[ForecastNoise],
    sigma: float,
    bar: float,
    cover: float,
) -> str:
    """What runs that keep numeric column ``name`` change of it: collapsed to one value (its
    1-way marginal, simulated with the run's noise, holds one bin above the filter's ``bar``,
    paper 5.3) in most runs, or values beyond the private bounds (``1 - cover``, the share
    :func:`_column_forecast` found outside them)."""
    codecs = [kept[name] for kept, _ in runs if isinstance(kept.get(name), BinnedCodec)]
    if not codecs:
        return ""
    collapsed = 0
    for codec, noise in zip(codecs, noises, strict=False):
        assert isinstance(codec, BinnedCodec)
        counts = table.numbers(codec).histogram(np.asarray(codec.edges), True)
        noisy = noise.add(np.asarray(counts, dtype=float), sigma, integer=False)
        collapsed += int(np.count_nonzero(noisy >= bar)) <= 1
    if collapsed * 2 >= len(codecs):
        return f"collapsed to one value in {collapsed} of {len(codecs)} runs"
    outside = 1.0 - cover
    if outside >= 0.01:
        return f"{outside:.0%} of its values lie beyond the private range and come out at its ends"
    return ""


def _column_forecast(
    table: CountsOnce,
    name: str,
    runs: list[tuple[dict[str, ColumnCodec], dict[str, str]]],
    threshold: float | None,
) -> ColumnForecast:
    """One column's line: what the runs did to it, explained with its exact counts (the
    forecast is the owner's: it may say how many rows its commonest value holds).
    ``threshold`` is the category threshold the column had to clear in the runs (after a
    second estimate, where it got one)."""
    codecs = [kept[name] for kept, _ in runs if name in kept]
    reasons = [why[name] for _, why in runs if name in why]
    lost = len(reasons) / len(runs)
    why = max(set(reasons), key=reasons.count) if reasons else ""
    categorical = [c for c in codecs if isinstance(c, CategoryCodec)]
    binned = [c for c in codecs if isinstance(c, BinnedCodec)]
    if (categorical and len(categorical) >= len(binned)) or (
        not codecs and "frequent enough" in why
    ):
        return _categorical_forecast(table, name, lost, why, categorical, threshold)
    classes = table.class_counts(name)
    present = float(sum(classes[k] for k in NUMBER_CLASSES))
    if not codecs:
        if why and "range could not be estimated" in why:
            why = (
                f"only {present:,.0f} values ({present / max(1.0, classes.sum()):.0%} of the "
                f"rows): {why}"
            )
        return ColumnForecast(name, "numeric", lost, "nothing", why, 0.0)
    cover = float(np.mean([_inside(table, c) for c in binned]))
    first = binned[0]
    kind = "datetime" if first.datetime else "numeric"
    kept = f"bounds about [{first.edges[0]:g}, {first.edges[-1]:g}], {cover:.0%} of its values"
    if kind == "datetime":
        kept = f"{cover:.0%} of its values inside the private bounds"
    if lost:
        kept = "when kept: " + kept
    if not why and cover < 0.9:
        why = "values beyond the private bounds fall in the end bins"
    return ColumnForecast(name, kind, lost, kept, why, cover)


def _categorical_forecast(
    table: CountsOnce,
    name: str,
    lost: float,
    why: str,
    codecs: list[CategoryCodec],
    threshold: float | None,
) -> ColumnForecast:
    values, counts = table.value_counts(name)
    total = max(1.0, float(np.sum(counts)))
    top = float(np.max(counts)) if len(counts) else 0.0
    if threshold is not None and (lost or not codecs):
        hint = ": free text or an identifier?" if len(values) > total / 4 else ""
        why = (
            f"its commonest value holds {_rows(top)}, {top / total:.0%} of its values{hint}"
            f"{'' if hint else '.'} A value needs about {threshold:,.0f} to be released at "
            "this budget: declare its categories to keep it"
        )
    if not codecs:
        return ColumnForecast(name, "categorical", lost, "nothing", why, 0.0)
    known = np.asarray(values, dtype=object)
    shares = [float(np.sum(counts[np.isin(known, c.categories)])) / total for c in codecs]
    cover = float(np.mean(shares))
    released = float(np.mean([len(c.categories) for c in codecs]))
    kept = f"about {released:.0f} of {len(values):,} values, {cover:.0%} of its rows"
    merged = len(values) - released
    reduced = ""
    if not lost and merged >= 0.5:
        rows = "under 1%" if cover > 0.99 else f"{1.0 - cover:.0%}"
        noun = "value" if round(merged) == 1 else "values"
        reduced = f"about {merged:.0f} rare {noun} merged into '(other)', {rows} of its rows"
    if lost:
        kept = "when kept: " + kept
    if not why and cover < 1.0:
        why = "rarer values become '(other)'"
        if threshold is not None:
            common = int(np.sum(counts >= threshold))
            need = f"a value needs about {threshold:,.0f} rows to be released half the time"
            why = (
                f"{need}; {common} of its {len(values):,} values hold that many or more, the "
                "rest become '(other)'"
                if common
                else f"{need}; its commonest value holds {_rows(top)}, and most become '(other)'"
            )
    return ColumnForecast(name, "categorical", lost, kept, why, cover, reduced)


def _rows(count: float) -> str:
    return f"{count:,.0f} row" + ("" if count == 1 else "s")


def _inside(table: CountsOnce, codec: BinnedCodec) -> float:
    """Share of the column's present numbers inside ``codec``'s outer edges."""
    edges = np.array([-np.inf, codec.edges[0], codec.edges[-1], np.inf])
    below, inside, above = table.numbers(codec).histogram(edges, False)
    return float(inside / max(1.0, below + inside + above))
