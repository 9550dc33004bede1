"""Column codecs: a raw column's values to integer codes and back.

PrivSyn works on small discrete domains. Each column of a real table gets a codec built from
its (public or privately estimated) domain:

* :class:`CategoryCodec`: one code per category, plus an "other" code for values the domain
  does not list (when the categories were estimated privately, rare values end up there) and
  a "missing" code when values may be missing;
* :class:`BinnedCodec`: numbers (or datetimes, as seconds) cut at bin edges; values outside
  the bounds fall in the end bins. Decoding draws a value uniformly inside its bin, so whole
  numbers stay whole and every value stays within the bounds.

Decoding a code never needs the private table: everything a codec holds is either declared
or a DP estimate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from privsyn_core.table import TableError

OTHER_LABEL = "other"


@dataclass(frozen=True)
class CategoryCodec:
    """Categories in a fixed order; optional "other" and "missing" codes after them."""

    name: str
    categories: tuple[Any, ...]
    other: bool = False
    missing: bool = False
    dtype: Any = object

    @property
    def size(self) -> int:
        return len(self.categories) + int(self.other) + int(self.missing)

    @property
    def other_label(self) -> str:
        """ "other", or "other_" (and so on) when "other" is itself a category."""
        label = OTHER_LABEL
        while label in self.categories:
            label += "_"
        return label

    @property
    def other_code(self) -> int | None:
        return len(self.categories) if self.other else None

    @property
    def missing_code(self) -> int | None:
        return self.size - 1 if self.missing else None

    def encode(self, column: pd.Series) -> np.ndarray:
        absent = column.isna().to_numpy()
        if absent.any() and not self.missing:
            raise TableError(
                f"column {self.name!r} has a missing value (first at row "
                f"{int(np.flatnonzero(absent)[0])}, counting from 0) but its schema says it "
                f'has none; set "missing": true for it or fill the values'
            )
        as_text = all(isinstance(c, str) for c in self.categories)
        if as_text and pd.api.types.is_float_dtype(column.dtype):
            values = column.map(_as_text)  # a column with blanks reads as floats: 2.0 -> "2"
        elif as_text:
            values = column.astype(str).where(~absent, None)
        else:
            values = column.astype(object)
        # one vectorised hash lookup (-1: not a category)
        codes = pd.Index(list(self.categories)).get_indexer(values).astype(np.int64)
        unknown = (codes < 0) & ~absent
        if unknown.any():
            if not self.other:
                bad = sorted({str(v) for v in values[unknown]})[:5]
                raise TableError(
                    f"column {self.name!r} holds values not among its declared categories: "
                    f"{', '.join(repr(b) for b in bad)}; add them to the schema or fix the data"
                )
            codes[unknown] = self.other_code
        if self.missing:
            codes[absent] = self.missing_code
        return codes

    def decode(self, codes: np.ndarray, rng: np.random.Generator) -> pd.Series:
        labels = np.empty(self.size, dtype=object)
        labels[: len(self.categories)] = list(self.categories)
        if self.other:
            labels[self.other_code] = self.other_label
        if self.missing:
            labels[self.missing_code] = None
        series = pd.Series(labels[codes], name=self.name)
        return _restore_dtype(series, self.dtype)


@dataclass(frozen=True)
class BinnedCodec:
    """Numbers cut at ``edges`` (bins ``[e_k, e_k+1)``; values beyond the outer edges fall in
    the end bins); optional
    "missing" code after the bins. ``datetime_format`` marks a datetime column stored as
    seconds since 1970: None keeps datetime64 values, a format string writes text."""

    name: str
    edges: tuple[float, ...]
    integer: bool = False
    missing: bool = False
    dtype: Any = float
    datetime: bool = False
    datetime_format: str | None = None

    def __post_init__(self) -> None:
        if len(self.edges) < 2:
            raise TableError(f"column {self.name!r} needs at least one bin")

    @property
    def bins(self) -> int:
        return len(self.edges) - 1

    @property
    def size(self) -> int:
        return self.bins + int(self.missing)

    def numbers(self, column: pd.Series) -> np.ndarray:
        """The column as float numbers (seconds for datetimes), NaN where missing."""
        if self.datetime:
            stamps = pd.to_datetime(column, errors="coerce", format="mixed")
            unparsed = stamps.isna() & column.notna()
            if unparsed.any():
                bad = column[unparsed].iloc[0]
                raise TableError(
                    f"column {self.name!r} is declared datetime but {bad!r} is not a date; "
                    f"fix the value or declare the column categorical"
                )
            return seconds_since_epoch(stamps)
        numbers = pd.to_numeric(column, errors="coerce")
        unparsed = numbers.isna() & column.notna()
        if unparsed.any():
            bad = column[unparsed].iloc[0]
            raise TableError(
                f"column {self.name!r} is declared numeric but holds {bad!r}; fix the value "
                f"or declare the column categorical"
            )
        return numbers.to_numpy(dtype=float)

    def encode(self, column: pd.Series) -> np.ndarray:
        numbers = self.numbers(column)
        absent = np.isnan(numbers)
        if absent.any() and not self.missing:
            raise TableError(
                f"column {self.name!r} has a missing value (first at row "
                f"{int(np.flatnonzero(absent)[0])}, counting from 0) but its schema says it "
                f'has none; set "missing": true for it or fill the values'
            )
        inner = np.asarray(self.edges[1:-1])
        codes = np.searchsorted(inner, np.where(absent, self.edges[0], numbers), side="right")
        if self.missing:
            codes[absent] = self.bins
        return codes.astype(np.int64)

    def decode(self, codes: np.ndarray, rng: np.random.Generator) -> pd.Series:
        edges = np.asarray(self.edges)
        present = codes < self.bins
        bins = np.where(present, codes, 0)
        low, high = edges[bins], edges[bins + 1]
        if self.integer:  # whole-number edges: bin k holds low .. high - 1
            values = low + np.floor(rng.random(codes.size) * (high - low))
        else:
            values = low + rng.random(codes.size) * (high - low)
        values = np.where(present, values, np.nan)
        if self.datetime:
            stamps = pd.to_datetime(values * 1e9, unit="ns").round("s")
            series = pd.Series(stamps, name=self.name)
            if self.datetime_format is not None:
                text = series.dt.strftime(self.datetime_format)
                return text.where(series.notna(), None).astype(object)
            return series
        series = pd.Series(values, name=self.name)
        if self.integer:
            return series.astype("Int64" if not present.all() else "int64")
        return series


ColumnCodec = CategoryCodec | BinnedCodec


def seconds_since_epoch(stamps: pd.Series) -> np.ndarray:
    """Datetimes as float seconds since 1970 (NaN for NaT), whatever their resolution."""
    epoch = pd.Timestamp("1970-01-01", tz=getattr(stamps.dt, "tz", None))
    return ((stamps - epoch) / pd.Timedelta(seconds=1)).to_numpy(dtype=float, na_value=np.nan)


def equal_width_edges(lower: float, upper: float, bins: int, *, integer: bool) -> tuple[float, ...]:
    """Bin edges over [lower, upper]; whole numbers get whole-number edges and, when the range
    is short, one bin per value."""
    if upper < lower:
        raise TableError(f"the bounds [{lower}, {upper}] are reversed")
    if integer:  # whole-number edges, the last one past the upper bound: bins [e_k, e_k+1)
        lower, upper = math.floor(lower), math.floor(upper)
        edges = np.unique(np.round(np.linspace(lower, upper + 1, min(bins, upper - lower + 1) + 1)))
        return tuple(float(e) for e in edges)
    if upper == lower:
        return (lower, lower + 1.0)
    return tuple(float(e) for e in np.linspace(lower, upper, bins + 1))


def _as_text(value: Any) -> Any:
    """A value as the text a CSV would hold: 2.0 -> "2" (a column with blanks reads as floats)."""
    if isinstance(value, float | np.floating) and float(value).is_integer():
        return str(int(value))
    return value if pd.isna(value) else str(value)


def _restore_dtype(series: pd.Series, dtype: Any) -> pd.Series:
    if isinstance(dtype, pd.CategoricalDtype):
        return series.astype("category")
    try:
        if series.isna().any() and pd.api.types.is_integer_dtype(dtype):
            return series.astype("Int64")
        return series.astype(dtype)
    except (TypeError, ValueError):
        return series
