"""From a raw table and its (possibly partial) schema to codecs, paying for what is private.

:func:`prepare_columns` decides each column's codec. What the schema declares is used as is
and costs nothing. What it leaves open is measured privately, each measurement charged to the
ledger:

* an undeclared kind, whole-number flag or date format: noisy counts of how the column's
  values read (:mod:`privsyn_core.measuring.structure`);
* a categorical column without categories: thresholded noisy counts (costs rho and part of
  the delta reserved for thresholding);
* a numeric or datetime column without bounds or edges: a noisy log-grid histogram.

An undeclared ``missing`` costs nothing: the column gets a missing code and PrivSyn's noisy
1-way marginal measures its rate. Nothing here branches on the values outside those
measurements; in particular no pandas dtype decides anything (pandas infers dtypes from the
values, so one record could change them).

With ``raw_domains=True`` the open parts are read off the data instead (the same rules on exact
counts): a shortcut for demos that is *not* end-to-end DP, and every result produced that way
says so.

This module is the column plan: which estimates run, in what order, on what share of the
budget, and what the run keeps. A column's structural choices are in
:mod:`~privsyn_core.data.column_structure`, one domain estimate and its codec in
:mod:`~privsyn_core.data.column_domains`, and the frequent values of a number column in
:mod:`~privsyn_core.data.released_values`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from privsyn_core.data.column_domains import (
    ColumnDomain,
    estimates_categories,
    estimates_range,
    prepare_domain,
    why_left_out,
)
from privsyn_core.data.column_structure import (
    PreparedColumn,
    StructureChoice,
    declared_choices,
    needs_structure,
    resolve,
)
from privsyn_core.data.released_values import released_values, releases_values, with_released
from privsyn_core.data.rules import Rule
from privsyn_core.data.schema import ID_SHARE, ColumnSchema, Kind, Provenance, Schema
from privsyn_core.domain import code_dtype
from privsyn_core.errors import InputError
from privsyn_core.generation.identifiers import Identifier
from privsyn_core.measuring.counters import FrameTable, RawTable
from privsyn_core.measuring.domain_split import CATEGORY_WEIGHT, DomainSplit
from privsyn_core.measuring.identifiers import IDENTIFIER_RESERVE, laid_out_as_ids, noisy_distinct
from privsyn_core.measuring.structure import decide_structure, noisy_structure
from privsyn_core.privacy.ledger import FailedAfterSpending, Measurement
from privsyn_core.privacy.noise import NoiseSource

#: a column whose structure is settled, with its structural choices
Settled = tuple[ColumnSchema, list[StructureChoice]]


@dataclass(frozen=True)
class Preparation:
    columns: tuple[PreparedColumn, ...]
    measurements: tuple[Measurement, ...]
    excluded: tuple[tuple[str, str], ...]
    end_to_end_dp: bool
    #: row ids: not modelled, written as fresh ids (declared, or found privately), at their
    #: places among the output's columns
    identifiers: tuple[Identifier, ...] = ()
    #: the schema's rules whose columns are all synthesised, and those that are not (with
    #: why: a column left out or found to be a row id cannot keep a rule)
    rules: tuple[Rule, ...] = ()
    dropped_rules: tuple[tuple[Rule, str], ...] = ()


@dataclass(frozen=True)
class OpenParts:
    """What a schema leaves open, by the measurement that will settle it."""

    #: columns whose kind, whole-number flag or date format is undeclared
    structure: tuple[str, ...]
    #: categorical columns without categories
    categories: tuple[str, ...]
    #: numeric or datetime columns without bounds or edges
    ranges: tuple[str, ...]
    #: columns of undeclared kind: one domain estimate each, of a kind decided privately
    undecided: tuple[str, ...]

    @property
    def domain_estimates(self) -> int:
        return len(self.categories) + len(self.ranges) + len(self.undecided)

    @property
    def possible_category_estimates(self) -> int:
        """Estimates that may release categories by thresholding (and so spend delta)."""
        return len(self.categories) + len(self.undecided)


def open_parts(schema: Schema) -> OpenParts:
    """The open parts of ``schema``'s included columns (see :class:`OpenParts`); a column
    declared an identifier has none."""
    included = tuple(c for c in schema.included() if not c.identifier)
    return OpenParts(
        structure=tuple(c.name for c in included if needs_structure(c)),
        categories=tuple(
            c.name for c in included if c.kind is Kind.CATEGORICAL and not c.has_domain
        ),
        ranges=tuple(
            c.name for c in included if c.kind in (Kind.NUMERIC, Kind.DATETIME) and not c.has_domain
        ),
        undecided=tuple(c.name for c in included if c.kind is None),
    )


def check_schema_matches(table: pd.DataFrame | RawTable, schema: Schema) -> None:
    if isinstance(table, pd.DataFrame):
        names = [str(c) for c in table.columns]
    else:
        names = list(table.names)
    missing = [n for n in schema.names() if n not in names]
    if missing:
        raise InputError(
            f"the schema describes column {missing[0]!r}, which the table does not have; "
            f"remove it from the schema or check the file"
        )
    extra = [n for n in names if n not in schema.names()]
    if extra:
        raise InputError(
            f"column {extra[0]!r} is not in the schema; add it (or add it with "
            f'"exclude": true to leave it out)'
        )


def prepare_columns(
    table: pd.DataFrame | RawTable,
    schema: Schema,
    *,
    rho_per_structure: float = 0.0,
    rho_per_estimate: float,
    delta_for_thresholds: float,
    rng: NoiseSource | np.random.Generator,
    raw_domains: bool = False,
    category_weight: float = CATEGORY_WEIGHT,
    one_way_sigma: float | None = None,
) -> Preparation:
    """Codecs for every included column, with the measurements that paid for them.

    First the structure step settles every open kind, whole-number flag and date format;
    then each open domain is estimated, from a budget of ``rho_per_estimate`` times the
    number of estimates, spread by :class:`~privsyn_core.measuring.domain_split.DomainSplit`
    (a category weighs ``category_weight`` against 1 for a range; ranges that find nothing
    and category estimates that release nothing get a second estimate). The order is fixed:
    declared domains (which cost nothing, so a declared column the data contradicts is
    refused before anything is spent on domains), the ranges, their second estimates, the
    categories, then their second estimates, so that in debug mode the noise a range draws
    does not depend on how many distinct values another column has.
    ``delta_for_thresholds`` is split over the category estimates, whose number is known only
    once the kinds are (a DP output): part of it equally over the first estimates, the rest
    equally over the second ones: of the columns that released nothing, or of every column
    when each released a value (:class:`~privsyn_core.measuring.domain_split.DomainSplit`).

    ``one_way_sigma``, the noise PrivSyn's 1-way marginals will have (public: it follows from
    the budget), sets how many bins a numeric column with many values gets
    (:mod:`privsyn_core.data.number_bins`); None gives every one the default number.

    ``table`` is read only through :class:`~privsyn_core.measuring.counters.RawTable` (a
    DataFrame is wrapped in :class:`~privsyn_core.measuring.counters.FrameTable`): aggregates,
    so a SQL backend can answer them where the table lies.
    """
    if isinstance(table, pd.DataFrame):
        table = FrameTable(table)
    check_schema_matches(table, schema)
    measurements: list[Measurement] = []
    settled = _settled(table, schema, rho_per_structure, rng, raw_domains, measurements)
    plan = _EstimatePlan.of(settled, rho_per_estimate, category_weight, raw_domains)
    # a category's second estimate draws on the same exact counts as its first: read once
    # (a SQL backend would scan the table again)
    value_counts = functools.cache(table.value_counts)
    estimate = _Estimator(
        settled, table, value_counts, rng, raw_domains, one_way_sigma, measurements
    )
    done = _estimated_domains(estimate, plan, delta_for_thresholds)
    found_ids = _identifiers(
        settled, done, table, IDENTIFIER_RESERVE * plan.domain_rho, rng, raw_domains, measurements
    )
    return _assembled(schema, settled, done, found_ids, measurements, raw_domains)


def _settled(
    table: RawTable,
    schema: Schema,
    rho: float,
    rng: NoiseSource | np.random.Generator,
    raw: bool,
    measurements: list[Measurement],
) -> list[Settled]:
    """The structure step: every included column that is not a row id, its open kind,
    whole-number flag and date format settled from noisy counts of how its values read
    (``rho`` each, recorded in ``measurements``), or from exact ones with ``raw``."""
    settled: list[Settled] = []
    for spec in schema.included():
        if spec.identifier:
            continue
        if not needs_structure(spec):
            settled.append((spec, declared_choices(spec)))
        elif raw:
            decision = decide_structure(table.class_counts(spec.name), 0.0)
            settled.append(resolve(spec, decision, Provenance.RAW))
        else:
            counts = table.class_counts(spec.name)
            noisy = noisy_structure(spec.name, counts, rho, rng)
            measurements.append(noisy.measurement)
            settled.append(resolve(spec, noisy.decision, Provenance.PRIVATE))
    return settled


@dataclass(frozen=True)
class _EstimatePlan:
    """Which settled columns (by index) get a private range, categories, or released
    values, and how the domain budget is split over them."""

    ranges: tuple[int, ...]
    categories: tuple[int, ...]
    values: tuple[int, ...]
    domain_rho: float
    split: DomainSplit

    @classmethod
    def of(
        cls, settled: list[Settled], rho_per_estimate: float, category_weight: float, raw: bool
    ) -> _EstimatePlan:
        private = not raw
        ranges = tuple(
            i for i, (spec, _) in enumerate(settled) if private and estimates_range(spec)
        )
        categories = tuple(
            i for i, (spec, _) in enumerate(settled) if private and estimates_categories(spec)
        )
        # numbers with decimals, of a kind decided privately, get their frequent values
        # released too, as categories are (they share the categories' budget and delta)
        values = tuple(i for i in ranges if releases_values(*settled[i]))
        domain_rho = rho_per_estimate * (len(ranges) + len(categories))
        # a share of the domain budget is kept for the identifier checks, after the estimates
        split = DomainSplit(
            (1.0 - IDENTIFIER_RESERVE) * domain_rho,
            len(ranges),
            len(categories),
            category_weight,
            values=len(values),
        )
        return cls(ranges, categories, values, domain_rho, split)


@dataclass(frozen=True)
class _Estimator:
    """The domain estimates of the settled columns, one at a time, each recorded in
    ``measurements`` as it is made; an estimate refused after others were paid for fails
    holding them (:class:`~privsyn_core.privacy.ledger.FailedAfterSpending`)."""

    settled: list[Settled]
    table: RawTable
    value_counts: Callable[[str], tuple[tuple[str, ...], np.ndarray]]
    rng: NoiseSource | np.random.Generator
    raw: bool
    one_way_sigma: float | None
    measurements: list[Measurement]

    def __call__(
        self, index: int, rho: float, delta: float = 0.0, prior: ColumnDomain | None = None
    ) -> ColumnDomain:
        spec, choices = self.settled[index]
        try:
            found = prepare_domain(
                spec,
                choices,
                self.table,
                self.value_counts,
                rho,
                delta,
                self.rng,
                self.raw,
                prior,
                self.one_way_sigma,
            )
        except InputError as error:  # the measurements made before this one were paid for
            raise FailedAfterSpending.holding(error, self.measurements) from None
        if found.spend is not None:
            self.measurements.append(found.spend)
        return found

    def with_values(
        self, index: int, found: ColumnDomain, rho: float, delta: float
    ) -> ColumnDomain:
        """A numeric column's domain with its frequent values released and laid out among
        its bins (:mod:`privsyn_core.data.released_values`)."""
        spec = self.settled[index][0]
        texts, counts = self.value_counts(spec.name)
        try:
            released = released_values(spec.name, texts, counts, rho, delta, self.rng)
        except InputError as error:
            raise FailedAfterSpending.holding(error, self.measurements) from None
        self.measurements.append(released.measurement)
        return with_released(spec, found, released, self.one_way_sigma)


def _estimated_domains(
    estimate: _Estimator, plan: _EstimatePlan, delta_for_thresholds: float
) -> dict[int, ColumnDomain]:
    """Every settled column's domain, in the fixed order of :func:`prepare_columns`: the
    declared ones, the ranges, their second estimates, the categories, their second
    estimates, then the numbers' released values."""
    ranges, categories, split = plan.ranges, plan.categories, plan.split
    done: dict[int, ColumnDomain] = {}
    for index in range(len(estimate.settled)):
        if index not in ranges and index not in categories:
            done[index] = estimate(index, 0.0)
    for index in ranges:
        done[index] = estimate(
            index, split.valued_range_first if index in plan.values else split.range_first
        )
    failed = [i for i in ranges if done[i].item is None]
    for index in failed:
        second = estimate(index, split.range_second(len(failed)), prior=done[index])
        done[index] = replace(second, second=True)
    first_delta = split.category_first_delta(delta_for_thresholds)
    for index in categories:
        done[index] = estimate(index, split.category_first(len(failed)), first_delta)
    lost = [i for i in categories if done[i].item is None]
    second_rho = split.category_second(len(failed), len(lost))
    second_delta = split.category_second_delta(delta_for_thresholds, len(lost))
    for index in (lost or categories) if second_rho > 0 else []:
        second = estimate(index, second_rho, second_delta, done[index])
        done[index] = replace(second, second=True)
    for index in plan.values:  # each numeric column's frequent values, laid out with its range
        done[index] = estimate.with_values(index, done[index], split.value_rho, first_delta)
    return done


def _identifiers(
    settled: list[Settled],
    done: dict[int, ColumnDomain],
    table: RawTable,
    rho: float,
    rng: NoiseSource | np.random.Generator,
    raw: bool,
    measurements: list[Measurement],
) -> set[int]:
    """The settled columns that are row ids (:mod:`privsyn_core.measuring.identifiers`),
    checked only where the domain estimates point to one, sharing ``rho``: text whose
    category estimates released no value (every id's values are too rare to release), and
    whole numbers whose DP range holds few more numbers than its noisy histogram holds rows
    (the layout of ids, not of amounts or dates). A column the schema declares either way is
    not checked. With ``raw`` (the demo shortcut, not DP) every text and whole-number column
    is checked on its exact counts."""
    candidates = []
    for index, (spec, _) in enumerate(settled):
        if spec.identifier is not None or index not in done:
            continue
        found = done[index]
        if raw:
            looks = spec.kind is Kind.CATEGORICAL or (spec.kind is Kind.NUMERIC and spec.integer)
        elif estimates_categories(spec):
            looks = found.item is None and found.categories is not None
        else:
            looks = (
                spec.kind is Kind.NUMERIC
                and bool(spec.integer)
                and found.bounds is not None
                and found.mass is not None
                and laid_out_as_ids(*found.bounds, found.mass)
            )
        if looks:
            candidates.append(index)
    ids: set[int] = set()
    for index in candidates:
        name = settled[index][0].name
        distinct, present = table.distinct_counts(name)
        if raw:
            if present and distinct >= ID_SHARE * present:
                ids.add(index)
            continue
        count = noisy_distinct(name, distinct, present, rho / len(candidates), rng)
        measurements.append(count.measurement)
        if count.unique:
            ids.add(index)
    return ids


def _assembled(
    schema: Schema,
    settled: list[Settled],
    done: dict[int, ColumnDomain],
    found_ids: set[int],
    measurements: list[Measurement],
    raw: bool,
) -> Preparation:
    """The preparation: the columns kept, those left out (with why), the row ids at their
    places among the output's columns, and the schema's rules split into those kept and
    those dropped. Refused, holding what was spent, when no column is left to synthesise."""
    excluded: list[tuple[str, str]] = [
        (c.name, c.reason or "excluded by the schema") for c in schema.columns if c.exclude
    ]
    identified = {settled[i][0].name for i in found_ids} | {
        c.name for c in schema.included() if c.identifier
    }
    prepared: list[PreparedColumn] = []
    for index, (spec, _) in enumerate(settled):
        found = done.get(index, ColumnDomain(None))
        if spec.name in identified:
            continue
        if found.item is None:
            excluded.append((spec.name, why_left_out(spec, found)))
        else:
            prepared.append(found.item)
    if not prepared:
        ids = ", ".join(sorted(identified))
        ids = f" (the row ids {ids} are not modelled)" if ids else ""
        raise FailedAfterSpending.holding(
            InputError(
                "no column is left to synthesise: every column was excluded or had no value "
                f"frequent enough to release privately at this budget{ids}; use a larger "
                "epsilon, or declare categories and bounds in a schema"
            ),
            measurements,
        )
    kept = [
        c.name for c in schema.included() if c.name in identified or c.name not in dict(excluded)
    ]
    identifiers = tuple(Identifier(name, kept.index(name)) for name in kept if name in identified)
    rules, dropped_rules = _rules_kept(schema, {p.codec.name for p in prepared})
    return Preparation(
        tuple(prepared),
        tuple(measurements),
        tuple(excluded),
        not raw,
        identifiers,
        rules,
        dropped_rules,
    )


def _rules_kept(
    schema: Schema, synthesised: set[str]
) -> tuple[tuple[Rule, ...], tuple[tuple[Rule, str], ...]]:
    """The schema's rules whose columns are all synthesised, and the others with why."""
    rules = tuple(r for r in schema.rules if set(r.columns) <= synthesised)
    dropped_rules = tuple(
        (r, f"{next(c for c in r.columns if c not in synthesised)} is not synthesised")
        for r in schema.rules
        if r not in rules
    )
    return rules, dropped_rules


def encode_columns(table: pd.DataFrame, prepared: Preparation) -> np.ndarray:
    """The engine's ``(d, n)`` array of codes, in the smallest unsigned type that fits."""
    largest = max(p.codec.size for p in prepared.columns)
    records = np.empty((len(prepared.columns), len(table)), dtype=code_dtype(largest))
    for row, item in enumerate(prepared.columns):
        records[row] = item.codec.encode(table[item.codec.name])
    return records


def decode_columns(
    records: np.ndarray, prepared: Preparation, rng: np.random.Generator
) -> pd.DataFrame:
    return pd.concat(
        [
            item.codec.decode(records[row].astype(np.int64), rng)
            for row, item in enumerate(prepared.columns)
        ],
        axis=1,
    )


def coded_frame(columns: tuple[PreparedColumn, ...], table: pd.DataFrame) -> pd.DataFrame:
    """``table`` coded by a run's codecs, one integer column each: the binned view in which
    real and synthetic tables are compared (owner-only when ``table`` is the real one)."""
    return pd.DataFrame({c.codec.name: c.codec.encode(table[c.codec.name]) for c in columns})
