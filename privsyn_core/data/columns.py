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
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from privsyn_core.data.codecs import BinnedCodec, CategoryCodec, ColumnCodec, equal_width_edges
from privsyn_core.data.number_bins import (
    MAX_INTEGER_BINS,
    declared_amount_bins,
    estimated_bins,
)
from privsyn_core.data.rules import Rule
from privsyn_core.data.schema import (
    DEFAULT_BINS,
    ID_SHARE,
    ColumnSchema,
    Kind,
    Provenance,
    Schema,
    kind_from_type,
)
from privsyn_core.data.values import parse_numbers
from privsyn_core.domain import code_dtype
from privsyn_core.errors import InputError
from privsyn_core.generation.identifiers import Identifier
from privsyn_core.measuring.counters import FrameTable, RawTable
from privsyn_core.measuring.identifiers import IDENTIFIER_RESERVE, laid_out_as_ids, noisy_distinct
from privsyn_core.measuring.private_domain import (
    CATEGORY_WEIGHT,
    DomainSplit,
    NoisyEvidence,
    PrivateCategories,
    PrivateRange,
    categories_from_counts,
    range_from_histogram,
)
from privsyn_core.measuring.structure import StructureDecision, decide_structure, noisy_structure
from privsyn_core.privacy.ledger import FailedAfterSpending, Measurement
from privsyn_core.privacy.noise import NoiseSource


@dataclass(frozen=True)
class StructureChoice:
    """One structural choice about a column (its kind, whole numbers, date format, missing
    values, domain), what was chosen, and where the choice came from."""

    name: str
    value: str
    provenance: Provenance


@dataclass(frozen=True)
class PreparedColumn:
    """A column's codec, where its domain came from, a note for the user, and every
    structural choice with its provenance."""

    codec: ColumnCodec
    provenance: Provenance
    note: str = ""
    choices: tuple[StructureChoice, ...] = ()


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


def needs_structure(spec: ColumnSchema) -> bool:
    """Whether a structural choice of ``spec`` is left open (and must be measured)."""
    if spec.kind is None:
        return True
    if spec.kind is Kind.NUMERIC:
        return spec.integer is None
    if spec.kind is Kind.DATETIME:
        return spec.datetime_format is None
    return False


def schema_from_dtypes(table: pd.DataFrame) -> Schema:
    """A schema that *declares* each column's kind from its pandas type, with the reason.

    Only for types that are public: set by the data owner, or a typed file's declared
    types the owner confirms as public. Types pandas inferred from the values are not: one
    record can change them. Without a schema the engine decides kinds privately instead.
    """
    columns = []
    for name in table.columns:
        kind, reason = _kind_of_dtype(table[name])
        columns.append(ColumnSchema(str(name), kind, reason=reason))
    return Schema(tuple(columns))


def _kind_of_dtype(column: pd.Series) -> tuple[Kind, str]:
    dtype = column.dtype
    decided = kind_from_type(dtype)
    if decided is not None:
        return decided
    if pd.api.types.is_integer_dtype(dtype):
        return Kind.NUMERIC, (
            "integer column type -> numeric (one bin per value over a short range, so small "
            "codes behave as categories)"
        )
    if pd.api.types.is_numeric_dtype(dtype):
        return Kind.NUMERIC, "number column type -> numeric, binned"
    return Kind.CATEGORICAL, "text column type -> categorical"


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
    number of estimates, spread by :class:`~privsyn_core.measuring.private_domain.DomainSplit`
    (a category weighs ``category_weight`` against 1 for a range; ranges that find nothing
    and category estimates that release nothing get a second estimate). The order is fixed:
    declared domains (which cost nothing, so a declared column the data contradicts is
    refused before anything is spent on domains), the ranges, their second estimates, the
    categories, then their second estimates, so that in debug mode the noise a range draws
    does not depend on how many distinct values another column has.
    ``delta_for_thresholds`` is split over the category estimates, whose number is known only
    once the kinds are (a DP output): part of it equally over the first estimates, the rest
    equally over the second ones: of the columns that released nothing, or of every column
    when each released a value (:class:`~privsyn_core.measuring.private_domain.DomainSplit`).

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
    settled: list[tuple[ColumnSchema, list[StructureChoice]]] = []
    for spec in schema.included():
        if spec.identifier:
            continue
        if not needs_structure(spec):
            settled.append((spec, _declared_choices(spec)))
        elif raw_domains:
            decision = decide_structure(table.class_counts(spec.name), 0.0)
            settled.append(_resolve(spec, decision, Provenance.RAW))
        else:
            counts = table.class_counts(spec.name)
            noisy = noisy_structure(spec.name, counts, rho_per_structure, rng)
            measurements.append(noisy.measurement)
            settled.append(_resolve(spec, noisy.decision, Provenance.PRIVATE))
    private = not raw_domains
    ranges = [i for i, (spec, _) in enumerate(settled) if private and _estimates_range(spec)]
    categories = [
        i for i, (spec, _) in enumerate(settled) if private and _estimates_categories(spec)
    ]
    # numbers with decimals, of a kind decided privately, get their frequent values released
    # too, as categories are (they share the categories' budget and delta)
    values = [i for i in ranges if _releases_values(*settled[i])]
    domain_rho = rho_per_estimate * (len(ranges) + len(categories))
    # a share of the domain budget is kept for the identifier checks, after the estimates
    split = DomainSplit(
        (1.0 - IDENTIFIER_RESERVE) * domain_rho,
        len(ranges),
        len(categories),
        category_weight,
        values=len(values),
    )
    done: dict[int, _Domain] = {}
    # a category's second estimate draws on the same exact counts as its first: read once
    # (a SQL backend would scan the table again)
    value_counts = functools.cache(table.value_counts)

    def estimate(
        index: int, rho: float, delta: float = 0.0, prior: _Domain | None = None
    ) -> _Domain:
        spec, choices = settled[index]
        try:
            found = _prepare_domain(
                spec,
                choices,
                table,
                value_counts,
                rho,
                delta,
                rng,
                raw_domains,
                prior,
                one_way_sigma,
            )
        except InputError as error:  # the measurements made before this one were paid for
            raise FailedAfterSpending.holding(error, measurements) from None
        if found.spend is not None:
            measurements.append(found.spend)
        return found

    for index in range(len(settled)):
        if index not in ranges and index not in categories:
            done[index] = estimate(index, 0.0)
    for index in ranges:
        done[index] = estimate(
            index, split.valued_range_first if index in values else split.range_first
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
    for index in values:  # each numeric column's frequent values, laid out with its range
        spec = settled[index][0]
        texts, counts = value_counts(spec.name)
        try:
            released = released_values(spec.name, texts, counts, split.value_rho, first_delta, rng)
        except InputError as error:
            raise FailedAfterSpending.holding(error, measurements) from None
        measurements.append(released.measurement)
        done[index] = _with_released(spec, done[index], released, one_way_sigma)
    found_ids = _identifiers(
        settled, done, table, IDENTIFIER_RESERVE * domain_rho, rng, raw_domains, measurements
    )
    excluded: list[tuple[str, str]] = [
        (c.name, c.reason or "excluded by the schema") for c in schema.columns if c.exclude
    ]
    identified = {settled[i][0].name for i in found_ids} | {
        c.name for c in schema.included() if c.identifier
    }
    prepared: list[PreparedColumn] = []
    for index, (spec, _) in enumerate(settled):
        found = done.get(index, _Domain(None))
        if spec.name in identified:
            continue
        if found.item is None:
            excluded.append((spec.name, _why_left_out(spec, found)))
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
    synthesised = {p.codec.name for p in prepared}
    rules = tuple(r for r in schema.rules if set(r.columns) <= synthesised)
    dropped_rules = tuple(
        (r, f"{next(c for c in r.columns if c not in synthesised)} is not synthesised")
        for r in schema.rules
        if r not in rules
    )
    return Preparation(
        tuple(prepared),
        tuple(measurements),
        tuple(excluded),
        not raw_domains,
        identifiers,
        rules,
        dropped_rules,
    )


def _identifiers(
    settled: list[tuple[ColumnSchema, list[StructureChoice]]],
    done: dict[int, _Domain],
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
        elif _estimates_categories(spec):
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


def _releases_values(spec: ColumnSchema, choices: list[StructureChoice]) -> bool:
    """Whether a numeric column gets its frequent values released: numbers with decimals
    (whole numbers over a short range get a bin per value anyway), of a kind decided
    privately (a threshold needs delta, reserved for the columns that may be categorical)."""
    kind = next((c for c in choices if c.name == "kind"), None)
    return (
        spec.kind is Kind.NUMERIC
        and spec.integer is False
        and kind is not None
        and kind.provenance is Provenance.PRIVATE
    )


def released_values(
    name: str,
    texts: tuple[str, ...],
    counts: np.ndarray,
    rho: float,
    delta: float,
    rng: NoiseSource | np.random.Generator,
) -> PrivateCategories:
    """A numeric column's frequent values released as categories are
    (:func:`~privsyn_core.measuring.private_domain.categories_from_counts`: thresholded noisy
    counts of each distinct number, however it is written, in increasing order): the values
    the output may draw exactly. Values that do not read as numbers are left out."""
    numbers = parse_numbers(pd.Series(texts, dtype=object))
    finite = np.isfinite(numbers)
    values, where = np.unique(numbers[finite], return_inverse=True)
    by_value = np.bincount(
        where, weights=np.asarray(counts, dtype=float)[finite], minlength=values.size
    )
    found = categories_from_counts(name, [float(v) for v in values], by_value, rho, delta, rng)
    mechanism = f"{found.measurement.mechanism}; values of a number column"
    return replace(found, measurement=replace(found.measurement, mechanism=mechanism))


def _with_released(
    spec: ColumnSchema,
    found: _Domain,
    values: PrivateCategories,
    one_way_sigma: float | None,
) -> _Domain:
    """A numeric column's domain with its released values laid out among its bins."""
    if found.item is None or found.range is None or not values.categories:
        return found
    by_number = {
        float(v): c  # type: ignore[arg-type]  # numbers: released_values gives floats
        for v, c in zip(values.categories, values.counts, strict=True)
    }
    codec = found.item.codec
    assert isinstance(codec, BinnedCodec)
    laid = _laid_codec(
        spec,
        found.range,
        codec.missing,
        codec.unparsed == "missing",
        one_way_sigma,
        tuple(by_number.items()),
    )
    note = f"{found.item.note}; {len(by_number)} frequent values released"
    return replace(found, item=replace(found.item, codec=laid, note=note))


def _estimates_categories(spec: ColumnSchema) -> bool:
    """Whether the settled ``spec`` leaves its categories to a private estimate."""
    return spec.kind is Kind.CATEGORICAL and spec.categories is None


def _estimates_range(spec: ColumnSchema) -> bool:
    """Whether the settled ``spec`` leaves a bound to a private estimate."""
    return (
        spec.kind in (Kind.NUMERIC, Kind.DATETIME)
        and spec.edges is None
        and (spec.lower is None or spec.upper is None)
    )


@dataclass(frozen=True)
class _Domain:
    """One column's domain: its codec (None: left out), the estimate it paid for, the
    threshold a category had to clear and what a second estimate builds on: for a range
    that found nothing its evidence, for categories the estimate."""

    item: PreparedColumn | None
    spend: Measurement | None = None
    evidence: NoisyEvidence | None = None
    threshold: float | None = None
    second: bool = False
    categories: PrivateCategories | None = None
    #: a numeric column's bounds (DP, declared, or the demo's raw ones)
    bounds: tuple[float, float] | None = None
    #: the noisy count of a numeric column's values inside its DP bounds
    mass: float | None = None
    #: a numeric column's range estimate, which its released values are laid out with
    range: PrivateRange | None = None


def _why_left_out(spec: ColumnSchema, found: _Domain) -> str:
    """Why a column whose domain estimate released nothing is left out, in words (the
    threshold and the noise are public: they follow from the budget alone)."""
    second = ", even after a second estimate" if found.second else ""
    if spec.kind is Kind.CATEGORICAL:
        need = ""
        if found.threshold is not None:
            need = f" (a value needs about {found.threshold:,.0f} rows)"
        return (
            f"no value was frequent enough to release privately at this budget{need}"
            f"{second}: free text or an identifier? Declare its categories (Data page, or a "
            "schema) to keep it"
        )
    noise = ""
    if found.evidence is not None:
        noise = f" (noise sigma {found.evidence.sigma:,.0f} per doubling)"
    return (
        f"its range could not be estimated privately at this budget: no doubling of its values "
        f"held enough rows for the noise{noise}{second}; most rows missing, or too few rows. "
        "Declare its bounds (Data page, or a schema) or use a larger epsilon"
    )


def _prepare_domain(
    spec: ColumnSchema,
    choices: list[StructureChoice],
    table: RawTable,
    value_counts: Callable[[str], tuple[tuple[str, ...], np.ndarray]],
    rho: float,
    delta: float,
    rng: NoiseSource | np.random.Generator,
    raw: bool,
    prior: _Domain | None = None,
    one_way_sigma: float | None = None,
) -> _Domain:
    """The codec of a column whose structure is settled, and the domain estimate it paid
    (None when declared); no codec when the estimate released nothing (left out). ``prior``
    is the column's first estimate, which a second one adds to."""
    # missing values: declared, or a missing code whose rate the 1-way marginal measures
    may_be_missing = spec.missing is not False
    choices = [
        *choices,
        StructureChoice(
            "missing values",
            "allowed (rate measured privately)" if may_be_missing else "none",
            Provenance.DECLARED if spec.missing is not None else Provenance.PRIVATE,
        ),
    ]
    lenient = any(c.name == "kind" and c.provenance is not Provenance.DECLARED for c in choices)
    if spec.kind is Kind.CATEGORICAL:
        first = None if prior is None else prior.categories
        found = _categorical(spec, value_counts, may_be_missing, rho, delta, rng, raw, first)
    else:
        evidence = None if prior is None else prior.evidence
        found = _binned(
            spec, table, may_be_missing, lenient, rho, rng, raw, evidence, one_way_sigma
        )
    item = found.item
    if item is None:
        return found
    choices.append(StructureChoice("domain", item.note or "declared", item.provenance))
    if isinstance(item.codec, BinnedCodec) and not item.codec.datetime:
        precision = _precision_choice(spec, item, choices)
        choices = [c for c in choices if c.name != "decimals"] + [precision]
    item = replace(item, note=_join(spec.reason, item.note), choices=tuple(choices))
    return replace(found, item=item)


def _precision_choice(
    spec: ColumnSchema, item: PreparedColumn, choices: list[StructureChoice]
) -> StructureChoice:
    """The decimals of the column's output: 0 for whole numbers (as sourced as that choice),
    declared, decided by the structure step (from its noisy counts of decimals), or else a
    tenth of the narrowest bin (:func:`~privsyn_core.data.codecs.default_decimals`), which
    comes from the edges and so has the domain's provenance."""
    codec = item.codec
    assert isinstance(codec, BinnedCodec)
    if codec.integer:
        whole = next(c.provenance for c in choices if c.name == "whole numbers")
        return StructureChoice("decimals", "0 (whole numbers)", whole)
    decided = next((c for c in choices if c.name == "decimals"), None)
    if decided is not None:
        return decided
    if spec.decimals is not None:
        return StructureChoice("decimals", str(spec.decimals), Provenance.DECLARED)
    return StructureChoice(
        "decimals", f"{codec.precision} (a tenth of the narrowest bin)", item.provenance
    )


def _resolve(
    spec: ColumnSchema, decision: StructureDecision, source: Provenance
) -> tuple[ColumnSchema, list[StructureChoice]]:
    """``spec`` with its open structural choices filled in from ``decision``."""
    kind = spec.kind if spec.kind is not None else decision.kind
    kind_source = Provenance.DECLARED if spec.kind is not None else source
    integer, fmt, decimals = spec.integer, spec.datetime_format, spec.decimals
    choices = [StructureChoice("kind", kind.value, kind_source)]
    decided_decimals: StructureChoice | None = None
    if kind is Kind.NUMERIC:
        if integer is None and spec.decimals:
            # declared decimals say the values have fractional parts: that is public, and a
            # noisy "whole numbers" (likely on a small table) must not contradict it
            integer = False
            choices.append(StructureChoice("whole numbers", "no", Provenance.DECLARED))
        elif integer is None:
            integer = decision.integer
            choices.append(StructureChoice("whole numbers", _yes(integer), source))
        else:
            choices.append(StructureChoice("whole numbers", _yes(integer), Provenance.DECLARED))
        if not integer and decimals is None and decision.decimals:
            # the decimals the structure step counted (None: more than it counts, or a
            # declared "integer": false it contradicts: the bins' precision then)
            decimals = decision.decimals
            decided_decimals = StructureChoice(
                "decimals", f"{decimals} (counted with the kinds)", source
            )
    elif kind is Kind.DATETIME:
        if fmt is None:
            fmt = decision.datetime_format
            choices.append(StructureChoice("date format", fmt, source))
        else:
            choices.append(StructureChoice("date format", fmt, Provenance.DECLARED))
    if decided_decimals is not None:
        choices.append(decided_decimals)
    reason = _join(spec.reason, decision.reason if source is not Provenance.DECLARED else "")
    resolved = replace(
        spec, kind=kind, integer=integer, datetime_format=fmt, decimals=decimals, reason=reason
    )
    return resolved, choices


def _declared_choices(spec: ColumnSchema) -> list[StructureChoice]:
    assert spec.kind is not None
    choices = [StructureChoice("kind", spec.kind.value, Provenance.DECLARED)]
    if spec.kind is Kind.NUMERIC:
        choices.append(StructureChoice("whole numbers", _yes(spec.integer), Provenance.DECLARED))
    elif spec.kind is Kind.DATETIME:
        choices.append(
            StructureChoice("date format", str(spec.datetime_format), Provenance.DECLARED)
        )
    return choices


def _yes(flag: bool | None) -> str:
    return "yes" if flag else "no"


def _join(*parts: str) -> str:
    return "; ".join(p for p in parts if p)


def _categorical(
    spec: ColumnSchema,
    value_counts: Callable[[str], tuple[tuple[str, ...], np.ndarray]],
    may_be_missing: bool,
    rho: float,
    delta: float,
    rng: NoiseSource | np.random.Generator,
    raw: bool,
    prior: PrivateCategories | None = None,
) -> _Domain:
    if spec.categories is not None:
        codec = CategoryCodec(spec.name, spec.categories, False, may_be_missing)
        return _Domain(PreparedColumn(codec, Provenance.DECLARED))
    values, counts = value_counts(spec.name)
    if raw:
        codec = CategoryCodec(spec.name, tuple(values), False, may_be_missing)
        return _Domain(PreparedColumn(codec, Provenance.RAW, "categories read off the data"))
    estimate = categories_from_counts(spec.name, values, counts, rho, delta, rng, prior)
    found = _Domain(None, estimate.measurement, threshold=estimate.threshold, categories=estimate)
    if not estimate.categories:
        return found
    codec = CategoryCodec(spec.name, estimate.categories, True, may_be_missing)
    note = f"{len(estimate.categories)} categories released; rarer values become '(other)'"
    if prior is not None and not prior.categories:
        note += " (second estimate)"
    return replace(found, item=PreparedColumn(codec, Provenance.PRIVATE, note))


def _binned(
    spec: ColumnSchema,
    table: RawTable,
    may_be_missing: bool,
    lenient: bool,
    rho: float,
    rng: NoiseSource | np.random.Generator,
    raw: bool,
    prior: NoisyEvidence | None = None,
    one_way_sigma: float | None = None,
) -> _Domain:
    is_datetime = spec.kind is Kind.DATETIME
    integer = True if is_datetime else bool(spec.integer)
    probe = _binned_codec(spec, (0.0, 1.0), integer, may_be_missing, lenient)
    numbers = table.numbers(probe)  # refuses values that do not read, if declared so
    if spec.edges is not None:
        edges = spec.edges
        if integer:  # whole-number columns need whole-number edges
            edges = tuple(float(e) for e in np.unique(np.ceil(spec.edges)))
            if len(edges) < 2:
                raise InputError(
                    f"column {spec.name!r}: its bin edges hold no whole number; widen them"
                )
        codec = _binned_codec(spec, edges, integer, may_be_missing, lenient)
        return _Domain(PreparedColumn(codec, Provenance.DECLARED))
    lower, upper = spec.lower, spec.upper
    if lower is not None and upper is not None:
        return _declared_bins(spec, lower, upper, integer, may_be_missing, lenient)
    if raw:
        bounds = numbers.bounds()
        if bounds is None:
            return _Domain(None)
        lower = bounds[0] if lower is None else lower
        upper = bounds[1] if upper is None else upper
        found = _declared_bins(spec, lower, upper, integer, may_be_missing, lenient)
        assert found.item is not None
        item = replace(found.item, provenance=Provenance.RAW, note="bounds read off the data")
        return replace(found, item=item, bounds=(lower, upper))
    estimate = range_from_histogram(
        numbers.histogram, rho, rng, integer=integer, prior=prior, zero_spike=not is_datetime
    )
    spend = replace(estimate.measurement, attributes=(spec.name,))
    if estimate.lower is None or estimate.upper is None:
        return _Domain(None, spend, estimate.evidence)
    if spec.lower is not None or spec.upper is not None:
        # one bound declared: it holds as declared, the other is estimated
        lower = estimate.lower if spec.lower is None else spec.lower
        upper = estimate.upper if spec.upper is None else spec.upper
        if lower > upper:
            raise FailedAfterSpending.holding(
                InputError(
                    f"column {spec.name!r}: the lower bound {lower:g} is above the upper "
                    f"bound {upper:g}; fix the bounds in the schema"
                ),
                (spend,),
            )
        found = _declared_bins(spec, lower, upper, integer, may_be_missing, lenient)
        assert found.item is not None
        note = f"bounds [{lower:g}, {upper:g}], one estimated privately"
        item = replace(found.item, provenance=Provenance.PRIVATE, note=note)
        return _Domain(item, spend)
    note = f"bounds [{estimate.lower:g}, {estimate.upper:g}] estimated privately"
    if prior is not None:
        note += " (second estimate)"
    elif estimate.evidence is not None:
        note += " (coarse: whole doublings)"
    if estimate.zeros is not None:
        note += "; zero kept as a value of its own"
    codec = _laid_codec(spec, estimate, may_be_missing, lenient, one_way_sigma)
    bounds = (estimate.lower, estimate.upper)
    mass = float(sum(estimate.cell_counts)) + (estimate.zeros or 0.0)
    item = PreparedColumn(codec, Provenance.PRIVATE, note)
    return _Domain(
        item, spend, bounds=bounds, mass=mass if estimate.cell_counts else None, range=estimate
    )


def _laid_codec(
    spec: ColumnSchema,
    estimate: PrivateRange,
    may_be_missing: bool,
    lenient: bool,
    one_way_sigma: float | None,
    values: tuple[tuple[float, float], ...] = (),
) -> BinnedCodec:
    """The codec of a column whose range (and frequent values) were estimated privately,
    its bins laid out by :func:`~privsyn_core.data.number_bins.estimated_bins`."""
    is_datetime = spec.kind is Kind.DATETIME
    integer = True if is_datetime else bool(spec.integer)
    step = 1.0 if integer else (10.0**-spec.decimals if spec.decimals else None)
    laid = estimated_bins(
        estimate,
        integer=integer,
        step=step,
        bins=spec.bins,
        one_way_sigma=one_way_sigma,
        tails=not is_datetime,
        values=values,
    )
    return replace(
        _binned_codec(spec, laid.edges, integer, may_be_missing, lenient),
        points=laid.points,
        log=laid.log,
        fall=laid.fall,
        rise=laid.rise,
        bounds=laid.bounds,
    )


def _declared_bins(
    spec: ColumnSchema,
    lower: float,
    upper: float,
    integer: bool,
    may_be_missing: bool,
    lenient: bool,
) -> _Domain:
    """Bins over bounds that cost nothing (declared, or the demo's raw ones): equal widths,
    or, from zero over at least three orders of magnitude without declared bins (amounts:
    :func:`~privsyn_core.data.number_bins.declared_amount_bins`), zero alone and the rest on
    the log scale."""
    if lower > upper:
        raise InputError(
            f"column {spec.name!r}: the lower bound {lower:g} is above the upper bound "
            f"{upper:g}; fix the bounds in the schema"
        )
    step = 1.0 if integer else (10.0**-spec.decimals if spec.decimals else None)
    amounts = declared_amount_bins(lower, upper, integer=integer, step=step)
    if spec.bins is None and amounts is not None:
        codec = replace(
            _binned_codec(spec, amounts.edges, integer, may_be_missing, lenient),
            points=amounts.points,
            log=amounts.log,
        )
        return _Domain(PreparedColumn(codec, Provenance.DECLARED))
    bins = spec.bins or (MAX_INTEGER_BINS if integer else DEFAULT_BINS)
    edges = equal_width_edges(lower, upper, bins, integer=integer)
    codec = _binned_codec(spec, edges, integer, may_be_missing, lenient)
    return _Domain(PreparedColumn(codec, Provenance.DECLARED))


def _binned_codec(
    spec: ColumnSchema,
    edges: tuple[float, ...],
    integer: bool,
    may_be_missing: bool,
    lenient: bool,
) -> BinnedCodec:
    return BinnedCodec(
        spec.name,
        tuple(edges),
        integer=integer,
        missing=may_be_missing,
        datetime=spec.kind is Kind.DATETIME,
        datetime_format=spec.datetime_format,
        unparsed="missing" if lenient else "error",
        decimals=None if spec.kind is Kind.DATETIME else spec.decimals,
    )


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
