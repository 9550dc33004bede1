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
from privsyn_core.data.schema import ColumnSchema, Kind, Provenance, Schema, kind_from_type
from privsyn_core.domain import code_dtype
from privsyn_core.errors import InputError
from privsyn_core.measuring.counters import FrameTable, RawTable
from privsyn_core.measuring.private_domain import (
    CATEGORY_WEIGHT,
    DomainSplit,
    NoisyEvidence,
    PrivateCategories,
    categories_from_counts,
    range_from_histogram,
)
from privsyn_core.measuring.structure import StructureDecision, decide_structure, noisy_structure
from privsyn_core.privacy.ledger import Measurement
from privsyn_core.privacy.noise import NoiseSource

#: numeric columns of whole numbers get one bin per value up to this many values
MAX_INTEGER_BINS = 100
DEFAULT_BINS = 32


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
    """The open parts of ``schema``'s included columns (see :class:`OpenParts`)."""
    included = schema.included()
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
    split = DomainSplit(
        rho_per_estimate * (len(ranges) + len(categories)),
        len(ranges),
        len(categories),
        category_weight,
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
                spec, choices, table, value_counts, rho, delta, rng, raw_domains, prior
            )
        except InputError as error:  # the measurements made before this one were paid for
            raise InputError(str(error), spent=(*measurements, *error.spent)) from None
        if found.spend is not None:
            measurements.append(found.spend)
        return found

    for index in range(len(settled)):
        if index not in ranges and index not in categories:
            done[index] = estimate(index, 0.0)
    for index in ranges:
        done[index] = estimate(index, split.range_first)
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
    excluded: list[tuple[str, str]] = [
        (c.name, c.reason or "excluded by the schema") for c in schema.columns if c.exclude
    ]
    prepared: list[PreparedColumn] = []
    for index, (spec, _) in enumerate(settled):
        found = done[index]
        if found.item is None:
            excluded.append((spec.name, _why_left_out(spec, found)))
        else:
            prepared.append(found.item)
    if not prepared:
        raise InputError(
            "no column is left to synthesise: every column was excluded or had no value "
            "frequent enough to release privately at this budget; use a larger epsilon, or "
            "declare categories and bounds in a schema",
            spent=tuple(measurements),
        )
    return Preparation(tuple(prepared), tuple(measurements), tuple(excluded), not raw_domains)


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
        found = _binned(spec, table, may_be_missing, lenient, rho, rng, raw, evidence)
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
    note = f"{len(estimate.categories)} categories released; rarer values become 'other'"
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
) -> _Domain:
    is_datetime = spec.kind is Kind.DATETIME
    integer = True if is_datetime else bool(spec.integer)
    probe = _binned_codec(spec, (0.0, 1.0), integer, may_be_missing, lenient)
    numbers = table.numbers(probe)  # refuses values that do not read, if declared so
    spend = None
    provenance = Provenance.DECLARED
    note = ""
    if spec.edges is not None:
        edges = spec.edges
        if integer:  # whole-number columns need whole-number edges
            edges = tuple(float(e) for e in np.unique(np.ceil(spec.edges)))
            if len(edges) < 2:
                raise InputError(
                    f"column {spec.name!r}: its bin edges hold no whole number; widen them"
                )
    else:
        lower, upper = spec.lower, spec.upper
        if lower is None or upper is None:
            if raw:
                bounds = numbers.bounds()
                if bounds is None:
                    return _Domain(None)
                lower = bounds[0] if lower is None else lower
                upper = bounds[1] if upper is None else upper
                provenance, note = Provenance.RAW, "bounds read off the data"
            else:
                estimate = range_from_histogram(
                    numbers.histogram, rho, rng, integer=integer, prior=prior
                )
                spend = replace(estimate.measurement, attributes=(spec.name,))
                if estimate.lower is None or estimate.upper is None:
                    return _Domain(None, spend, estimate.evidence)
                lower = estimate.lower if lower is None else lower
                upper = estimate.upper if upper is None else upper
                provenance = Provenance.PRIVATE
                note = f"bounds [{lower:g}, {upper:g}] estimated privately"
                if prior is not None:
                    note += " (second estimate)"
                elif estimate.evidence is not None:
                    note += " (coarse: whole doublings)"
                short = integer and upper - lower + 1 <= (spec.bins or MAX_INTEGER_BINS)
                if spec.bins is None and not short and spec.lower is None and spec.upper is None:
                    quantiles = estimate.quantile_edges(DEFAULT_BINS, integer=integer)
                    if quantiles is not None:
                        note += "; bin edges at DP quantiles"
                        codec = _binned_codec(spec, quantiles, integer, may_be_missing, lenient)
                        return _Domain(PreparedColumn(codec, provenance, note), spend)
        if lower > upper:
            raise InputError(
                f"column {spec.name!r}: the lower bound {lower:g} is above the upper bound "
                f"{upper:g}; fix the bounds in the schema",
                spent=() if spend is None else (spend,),
            )
        bins = spec.bins or (MAX_INTEGER_BINS if integer else DEFAULT_BINS)
        edges = equal_width_edges(lower, upper, bins, integer=integer)
    codec = _binned_codec(spec, edges, integer, may_be_missing, lenient)
    return _Domain(PreparedColumn(codec, provenance, note), spend)


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
