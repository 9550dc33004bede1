"""From a raw table and its (possibly partial) schema to codecs, paying for what is private.

:func:`prepare_columns` decides each column's codec. What the schema declares is used as is
and costs nothing. What it leaves open is estimated with :mod:`privsyn_core.private_domain`,
each estimate charged to the ledger:

* a categorical column without categories: thresholded noisy counts (costs rho and part of
  the delta reserved for thresholding);
* a numeric or datetime column without bounds or edges: a noisy log-grid histogram.

With ``raw_domains=True`` the open parts are read off the data instead: a shortcut for demos
that is *not* end-to-end DP, and every result produced that way says so.

Without a schema, each column's kind follows its dtype only (strings, booleans and
categoricals are categorical; numbers numeric; datetime64 and date-like text datetime), so
that no decision about the synthesis depends on the private values themselves.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from privsyn_core.codecs import BinnedCodec, CategoryCodec, ColumnCodec, equal_width_edges
from privsyn_core.errors import InputError
from privsyn_core.noise import NoiseSource
from privsyn_core.privacy import Measurement
from privsyn_core.private_domain import private_categories, private_range
from privsyn_core.schema import ColumnSchema, Kind, Provenance, Schema, kind_from_type

#: numeric columns of whole numbers get one bin per value up to this many values
MAX_INTEGER_BINS = 100
DEFAULT_BINS = 32


@dataclass(frozen=True)
class PreparedColumn:
    """A column's codec, where its domain came from, and a note for the user."""

    codec: ColumnCodec
    provenance: Provenance
    note: str = ""


@dataclass(frozen=True)
class Preparation:
    columns: tuple[PreparedColumn, ...]
    measurements: tuple[Measurement, ...]
    excluded: tuple[tuple[str, str], ...]
    end_to_end_dp: bool


def schema_from_dtypes(table: pd.DataFrame) -> Schema:
    """A schema that declares kinds only, each read from the column's type (with the reason)."""
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


def _nullable(column: pd.Series) -> bool:
    """Whether the column's type can hold missing values at all (numpy integers and booleans
    cannot; readers give those types only to columns without blanks). A type, not a count:
    it decides the missing code without looking at the values."""
    dtype = column.dtype
    return not (
        isinstance(dtype, np.dtype) and (np.issubdtype(dtype, np.integer) or dtype == np.bool_)
    )


def columns_needing_estimates(schema: Schema) -> tuple[list[str], list[str]]:
    """(categorical columns without categories, numeric/datetime columns without bounds)."""
    categories = [
        c.name for c in schema.included() if c.kind is Kind.CATEGORICAL and not c.has_domain
    ]
    ranges = [
        c.name for c in schema.included() if c.kind is not Kind.CATEGORICAL and not c.has_domain
    ]
    return categories, ranges


def check_schema_matches(table: pd.DataFrame, schema: Schema) -> None:
    names = [str(c) for c in table.columns]
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
    table: pd.DataFrame,
    schema: Schema,
    *,
    rho_per_estimate: float,
    delta_per_category_estimate: float,
    rng: NoiseSource | np.random.Generator,
    raw_domains: bool = False,
) -> Preparation:
    """Codecs for every included column, with the measurements that paid for them."""
    check_schema_matches(table, schema)
    prepared: list[PreparedColumn] = []
    measurements: list[Measurement] = []
    excluded: list[tuple[str, str]] = [
        (c.name, c.reason or "excluded by the schema") for c in schema.columns if c.exclude
    ]
    for spec in schema.included():
        try:
            item, spend = _prepare_column(
                spec,
                table[spec.name],
                rho_per_estimate,
                delta_per_category_estimate,
                rng,
                raw_domains,
            )
        except InputError as error:  # the columns measured before this one were paid for
            raise InputError(str(error), spent=(*measurements, *error.spent)) from None
        if spend is not None:
            measurements.append(spend)
        if item is None:
            excluded.append((spec.name, _why_left_out(spec)))
            continue
        prepared.append(item)
    if not prepared:
        raise InputError(
            "no column is left to synthesise: every column was excluded or had no value "
            "frequent enough to release privately at this budget; use a larger epsilon, or "
            "declare categories and bounds in a schema",
            spent=tuple(measurements),
        )
    return Preparation(tuple(prepared), tuple(measurements), tuple(excluded), not raw_domains)


def _why_left_out(spec: ColumnSchema) -> str:
    if spec.kind is Kind.CATEGORICAL:
        return "no value was frequent enough to release privately (an identifier?)"
    return (
        "its range could not be estimated privately at this budget (too few rows for the "
        "noise, or no values); declare its bounds in a schema or use a larger epsilon"
    )


def _prepare_column(
    spec: ColumnSchema,
    column: pd.Series,
    rho: float,
    delta: float,
    rng: NoiseSource | np.random.Generator,
    raw: bool,
) -> tuple[PreparedColumn | None, Measurement | None]:
    may_be_missing = spec.missing is not False and _nullable(column)
    if spec.kind is Kind.CATEGORICAL:
        item, spend = _categorical(spec, column, may_be_missing, rho, delta, rng, raw)
    else:
        item, spend = _binned(spec, column, may_be_missing, rho, rng, raw)
    if item is not None and spec.reason:
        item = PreparedColumn(item.codec, item.provenance, _join(spec.reason, item.note))
    return item, spend


def _join(*parts: str) -> str:
    return "; ".join(p for p in parts if p)


def _categorical(
    spec: ColumnSchema,
    column: pd.Series,
    may_be_missing: bool,
    rho: float,
    delta: float,
    rng: NoiseSource | np.random.Generator,
    raw: bool,
) -> tuple[PreparedColumn | None, Measurement | None]:
    if spec.categories is not None:
        codec = CategoryCodec(spec.name, spec.categories, False, may_be_missing, column.dtype)
        return PreparedColumn(codec, Provenance.DECLARED), None
    if raw:
        values = sorted(column.dropna().unique().tolist(), key=lambda v: (type(v).__name__, v))
        codec = CategoryCodec(spec.name, tuple(values), False, may_be_missing, column.dtype)
        return PreparedColumn(codec, Provenance.RAW, "categories read off the data"), None
    estimate = private_categories(column.rename(spec.name), rho, delta, rng)
    if not estimate.categories:
        return None, estimate.measurement
    codec = CategoryCodec(spec.name, estimate.categories, True, may_be_missing, column.dtype)
    note = f"{len(estimate.categories)} categories released; rarer values become 'other'"
    return PreparedColumn(codec, Provenance.PRIVATE, note), estimate.measurement


def _binned(
    spec: ColumnSchema,
    column: pd.Series,
    may_be_missing: bool,
    rho: float,
    rng: NoiseSource | np.random.Generator,
    raw: bool,
) -> tuple[PreparedColumn | None, Measurement | None]:
    is_datetime = spec.kind is Kind.DATETIME
    probe = BinnedCodec(spec.name, (0.0, 1.0), datetime=is_datetime)
    numbers = probe.numbers(column)
    present = numbers[~np.isnan(numbers)]
    integer = spec.integer
    if integer is None:
        integer = (
            is_datetime
            or pd.api.types.is_integer_dtype(column.dtype)
            or (
                column.dtype == object
                and len(present) > 0
                and bool(np.all(np.mod(present, 1) == 0))
            )
        )
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
                if present.size == 0:
                    return None, None
                lower = float(present.min()) if lower is None else lower
                upper = float(present.max()) if upper is None else upper
                provenance, note = Provenance.RAW, "bounds read off the data"
            else:
                estimate = private_range(present, rho, rng, integer=bool(integer))
                spend = Measurement(
                    estimate.measurement.step,
                    (spec.name,),
                    estimate.measurement.sensitivity,
                    estimate.measurement.rho,
                    estimate.measurement.sigma,
                    estimate.measurement.n_queries,
                    estimate.measurement.mechanism,
                )
                if estimate.lower is None or estimate.upper is None:
                    return None, spend
                lower = estimate.lower if lower is None else lower
                upper = estimate.upper if upper is None else upper
                provenance = Provenance.PRIVATE
                note = f"bounds [{lower:g}, {upper:g}] estimated privately"
                short = integer and upper - lower + 1 <= (spec.bins or MAX_INTEGER_BINS)
                if spec.bins is None and not short and spec.lower is None and spec.upper is None:
                    quantiles = estimate.quantile_edges(DEFAULT_BINS, integer=bool(integer))
                    if quantiles is not None:
                        note += "; bin edges at DP quantiles"
                        return _binned_codec(
                            spec, column, quantiles, integer, may_be_missing
                        ), spend
        if lower > upper:
            raise InputError(
                f"column {spec.name!r}: the lower bound {lower:g} is above the upper bound "
                f"{upper:g}; fix the bounds in the schema",
                spent=() if spend is None else (spend,),
            )
        bins = spec.bins or (MAX_INTEGER_BINS if integer else DEFAULT_BINS)
        edges = equal_width_edges(lower, upper, bins, integer=bool(integer))
    codec = _binned_codec(spec, column, edges, integer, may_be_missing)
    return PreparedColumn(codec, provenance, note), spend


def _binned_codec(
    spec: ColumnSchema,
    column: pd.Series,
    edges: tuple[float, ...],
    integer: bool | None,
    may_be_missing: bool,
) -> BinnedCodec:
    is_datetime = spec.kind is Kind.DATETIME
    return BinnedCodec(
        spec.name,
        tuple(edges),
        integer=bool(integer),
        missing=may_be_missing,
        dtype=column.dtype,
        datetime=is_datetime,
        datetime_format=spec.datetime_format
        if is_datetime and not pd.api.types.is_datetime64_any_dtype(column.dtype)
        else None,
    )


def encode_columns(table: pd.DataFrame, prepared: Preparation) -> np.ndarray:
    """The engine's ``(d, n)`` array of codes, in the smallest unsigned type that fits."""
    largest = max(p.codec.size for p in prepared.columns)
    dtype = np.uint8 if largest <= 256 else np.uint16 if largest <= 65536 else np.uint32
    records = np.empty((len(prepared.columns), len(table)), dtype=dtype)
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
