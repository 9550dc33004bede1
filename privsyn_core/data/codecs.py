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
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any, Literal

import numpy as np
import pandas as pd

from privsyn_core.data.values import (
    NATIVE_DATETIME,
    canonical_text,
    categories_as_text,
    day_first_format,
    parse_datetimes,
    parse_numbers,
    seconds_since_epoch,
)
from privsyn_core.errors import TableError

#: what the values merged into one code are written as: a label in parentheses, because a
#: value that was not released may itself read "Other" or "other" (private: it cannot be
#: checked), and the merged label must not pass for it
OTHER_LABEL = "(other)"


@dataclass(frozen=True)
class CategoryCodec:
    """Categories in a fixed order; optional "other" and "missing" codes after them.

    Values are matched to categories by their canonical text
    (:func:`~privsyn_core.data.values.canonical_text`), one value at a time, so a column that reads
    as numbers, as floats with blanks, or as text maps to the same codes. Decoding gives the
    categories themselves: the output's type follows the schema, never the input's dtype
    (which pandas infers from the values).
    """

    name: str
    categories: tuple[Any, ...]
    other: bool = False
    missing: bool = False

    @property
    def size(self) -> int:
        return len(self.categories) + int(self.other) + int(self.missing)

    @property
    def other_label(self) -> str:
        """:data:`OTHER_LABEL`, or "(other)_" (and so on) when a category reads the same,
        whatever its case and surrounding spaces."""
        taken = {text.strip().casefold() for text in categories_as_text(self.categories)}
        label = OTHER_LABEL
        while label.casefold() in taken:
            label += "_"
        return label

    @property
    def other_code(self) -> int | None:
        return len(self.categories) if self.other else None

    @property
    def missing_code(self) -> int | None:
        return self.size - 1 if self.missing else None

    @cached_property
    def _keys(self) -> pd.Index:
        return pd.Index(categories_as_text(self.categories))

    def encode(self, column: pd.Series) -> np.ndarray:
        values = canonical_text(column)
        absent = values.isna().to_numpy()
        if absent.any() and not self.missing:
            raise TableError(
                f"column {self.name!r} has a missing value (first at row "
                f"{int(np.flatnonzero(absent)[0])}, counting from 0) but its schema says it "
                f'has none; set "missing": true for it or fill the values'
            )
        # one vectorised hash lookup (-1: not a category)
        codes = self._keys.get_indexer(values).astype(np.int64)
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

    def labels(self) -> list[Any]:
        """Each code's value as decoding writes it: its category, the "other" label, None
        for the missing code (the label of a released count)."""
        tail = [self.other_label] if self.other else []
        return [*self.categories, *tail, *([None] if self.missing else [])]

    def decode(self, codes: np.ndarray, rng: np.random.Generator) -> pd.Series:
        labels = np.empty(self.size, dtype=object)
        labels[:] = self.labels()
        series = pd.Series(labels[codes], name=self.name, dtype=object)
        return series if self.other else _typed(series, self.categories, self.missing)


#: the seconds since 1970 a datetime can hold (pandas' nanosecond range, a second inside it)
DATETIME_SECONDS = (pd.Timestamp.min.value // 10**9 + 1, pd.Timestamp.max.value // 10**9 - 1)


@dataclass(frozen=True)
class BinnedCodec:
    """Numbers cut at ``edges`` (bins ``[e_k, e_k+1)``; values beyond the outer edges fall in
    the end bins); optional "missing" code after the bins. ``datetime_format`` marks a
    datetime column stored as seconds since 1970: a strftime format writes text,
    ``"datetime64"`` (or None) keeps pandas datetimes.

    ``unparsed`` says what a value that is not a number (not a date) becomes: an error naming
    it (a declared kind: the data contradicts the schema) or a missing value (a kind decided
    from DP counts: the minority of values that do not fit are read as missing).

    ``decimals`` is the precision of decoded numbers (not whole, not dates): values are drawn
    uniformly among the multiples of ``10**-decimals`` inside their bin. It is declared or
    counted by the structure step (DP); None uses :func:`default_decimals` of the edges,
    which are public or DP: the precision reads nothing private. A column decoded with 0
    decimals comes back as whole numbers.

    ``points`` are the bins that hold one value, their lower edge (zero in a column of
    amounts: :mod:`privsyn_core.data.number_bins`), decoded as that value exactly. With
    ``log``, a bin that does not hold zero is decoded uniformly on the log scale (its bins
    were cut there: amounts spread evenly over doublings, not over dollars). The bins of
    ``fall`` (an upper tail) are decoded with a density that halves every quarter of the bin
    outward from its lower edge, those of ``rise`` (a lower tail) toward its lower edge:
    beyond the estimated bounds values thin out. ``bounds`` are those DP bounds (the last
    whole number, for whole numbers), when the bins were widened past them: the bins
    beyond are the tails (:meth:`tail_codes`). ``halvings`` sets, for some tail bins, how
    many times their density halves across them instead (:func:`with_fitted_tails`: fitted
    at sampling time to the 1-way targets, never stored).
    """

    name: str
    edges: tuple[float, ...]
    integer: bool = False
    missing: bool = False
    datetime: bool = False
    datetime_format: str | None = None
    unparsed: Literal["error", "missing"] = "error"
    decimals: int | None = None
    points: tuple[int, ...] = ()
    log: bool = False
    fall: tuple[int, ...] = ()
    rise: tuple[int, ...] = ()
    bounds: tuple[float, float] | None = None
    halvings: tuple[tuple[int, float], ...] = ()

    def __post_init__(self) -> None:
        if len(self.edges) < 2:
            raise TableError(f"column {self.name!r} needs at least one bin")
        for bins in (self.points, self.fall, self.rise, tuple(b for b, _ in self.halvings)):
            if any(not 0 <= b < len(self.edges) - 1 for b in bins):
                raise TableError(f"column {self.name!r}: a bin it names is not one of its bins")

    @property
    def precision(self) -> int:
        """Decimals of decoded values: 0 for whole numbers, else declared or the default
        (of the bins that are not single values)."""
        if self.integer:
            return 0
        if self.decimals is not None:
            return self.decimals
        return default_decimals(self.edges, self.points)

    @property
    def bins(self) -> int:
        return len(self.edges) - 1

    def tail_codes(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """The bins wholly below the DP lower bound, and wholly above the upper one (none
        without :attr:`bounds`)."""
        if self.bounds is None:
            return (), ()
        lower, upper = self.bounds
        top = upper + 1.0 if self.integer else upper
        below = tuple(k for k in range(self.bins) if self.edges[k + 1] <= lower)
        above = tuple(k for k in range(self.bins) if self.edges[k] >= top)
        return below, above

    @property
    def size(self) -> int:
        return self.bins + int(self.missing)

    @property
    def missing_code(self) -> int | None:
        return self.bins if self.missing else None

    def numbers(self, column: pd.Series) -> np.ndarray:
        """The column as float numbers (seconds for datetimes), NaN where missing. Each value
        is read on its own (:mod:`privsyn_core.data.values`)."""
        what = "a date" if self.datetime else "a finite number"
        if self.datetime and pd.api.types.is_datetime64_any_dtype(column.dtype):
            return seconds_since_epoch(column)
        if (
            not self.datetime
            and pd.api.types.is_numeric_dtype(column.dtype)
            and not pd.api.types.is_bool_dtype(column.dtype)
        ):
            numbers = column.to_numpy(dtype=float, na_value=np.nan)
            unparsed = ~np.isfinite(numbers) & ~np.isnan(numbers)
            numbers = np.where(unparsed, np.nan, numbers)
            bad = column[unparsed]
        else:
            text = canonical_text(column)
            numbers = (
                parse_datetimes(text, day_first_format(self.datetime_format))
                if self.datetime
                else parse_numbers(text)
            )
            bad = text[np.isnan(numbers) & text.notna().to_numpy()]
        if len(bad) and self.unparsed == "error":
            kind = "datetime" if self.datetime else "numeric"
            value = bad.iloc[0]
            value = value.item() if isinstance(value, np.generic) else value
            raise TableError(
                f"column {self.name!r} is declared {kind} but holds {value!r}, not "
                f"{what}; fix the value, declare the column categorical, or leave its kind "
                f"undeclared so values that do not fit are read as missing"
            )
        return numbers

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

    def span_label(self, first: int, last: int) -> str:
        """The values bins ``first..last`` decode to, as text: ``[low, high)`` (numbers and
        dates, in the column's date format), ``low to high`` for whole numbers (both
        included, as decoding draws them), or the one whole number a bin holds."""
        low, high = self.edges[first], self.edges[last + 1]
        if first == last and first in self.points:
            return f"{low:.{self.precision}f}".rstrip("0").rstrip(".") or "0"
        if self.datetime:
            ends = [pd.Timestamp(int(np.clip(e, *DATETIME_SECONDS)), unit="s") for e in (low, high)]
            spelling = self.datetime_format
            text = [
                e.isoformat(sep=" ")
                if spelling in (None, NATIVE_DATETIME)
                else e.strftime(spelling)
                for e in ends
            ]
            return f"[{text[0]}, {text[1]})"
        if self.integer:
            whole = (int(low), int(high) - 1)
            return str(whole[0]) if whole[0] >= whole[1] else f"{whole[0]} to {whole[1]}"
        # one decimal finer than the values drawn in the bin: readable, and adjacent bins
        # still share their edge
        shown = [f"{e:.{self.precision + 1}f}".rstrip("0").rstrip(".") for e in (low, high)]
        return f"[{shown[0]}, {shown[1]})"

    def labels(self) -> list[str | None]:
        """Each code's values as text (:meth:`span_label` of its bin), None for the missing
        code."""
        spans: list[str | None] = [self.span_label(k, k) for k in range(self.bins)]
        return spans + ([None] if self.missing else [])

    def decode(self, codes: np.ndarray, rng: np.random.Generator) -> pd.Series:
        edges = np.asarray(self.edges)
        present = codes < self.bins
        bins = np.where(present, codes, 0)
        low, high = edges[bins], edges[bins + 1]
        u = rng.random(codes.size)
        if self.log:
            u = _log_share(low, high, u)
        if self.fall or self.rise:
            halvings = np.full(self.bins, float(TAIL_HALVINGS))
            for b, h in self.halvings:
                halvings[b] = h
            rate = halvings[bins]
            if self.fall:
                u = np.where(np.isin(bins, self.fall), _thinning(u, rate), u)
            if self.rise:
                u = np.where(np.isin(bins, self.rise), 1.0 - _thinning(1.0 - u, rate), u)
        if self.integer:  # whole-number edges: bin k holds low .. high - 1
            values = np.minimum(low + np.floor(u * (high - low)), high - 1)
        else:
            values = _on_grid(low, high, self.precision, u)
        if self.points:
            single = np.isin(bins, self.points)
            values = np.where(single, low, values)
        values = np.where(present, values, np.nan)
        if self.datetime:
            # a DP range can reach past what pandas represents (a noisy cell of the coarse
            # grid clearing its threshold by chance): no parsed date lies there, so clip
            values = np.clip(values, *DATETIME_SECONDS)
            stamps = pd.to_datetime(values * 1e9, unit="ns").round("s")
            series = pd.Series(stamps, name=self.name)
            if self.datetime_format not in (None, NATIVE_DATETIME):
                text = series.dt.strftime(self.datetime_format)
                return text.where(series.notna(), None).astype(object)
            return series
        series = pd.Series(values, name=self.name)
        if self.precision == 0:  # the type follows the codec, not whether a value is missing
            return series.astype("Int64" if self.missing else "int64")
        return series


@dataclass(frozen=True)
class CodesCodec:
    """A pre-coded column's codes (``0..size-1``) back to values: the codes themselves, or
    the declared ``categories`` (``categories`` None for integer codes). ``dtype`` is the type
    the caller gave the column (a pandas ``Categorical`` keeps its categories' order).

    Everything here is declared by the data owner; ``rng`` is unused (no value is drawn) and
    accepted so every codec decodes through the same call.
    """

    name: str
    size: int
    categories: tuple[object, ...] | None
    dtype: object

    def labels(self) -> list[object]:
        """Each code's value as decoding writes it: its declared category, else the code."""
        return list(range(self.size)) if self.categories is None else list(self.categories)

    def decode(self, codes: np.ndarray, rng: np.random.Generator | None = None) -> pd.Series:
        if self.categories is None:
            return pd.Series(codes.astype(np.int64), name=self.name)
        if isinstance(self.dtype, pd.CategoricalDtype):
            declared = pd.CategoricalDtype(list(self.categories), ordered=self.dtype.ordered)
            return pd.Series(pd.Categorical.from_codes(codes, dtype=declared), name=self.name)
        labels = np.empty(len(self.categories), dtype=object)
        labels[:] = list(self.categories)
        series = pd.Series(labels[codes], name=self.name)
        try:
            return series.astype(self.dtype)
        except (TypeError, ValueError):
            return series


ColumnCodec = CategoryCodec | BinnedCodec


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


#: the finest default precision: bins narrower than 1e-11 are not refined further
MAX_DEFAULT_DECIMALS = 12


def default_decimals(edges: tuple[float, ...], points: tuple[int, ...] = ()) -> int:
    """The default precision of a binned column: the fewest decimals whose step is at most a
    tenth of the narrowest bin, ``ceil(-log10(w / 10))`` clipped to 0 ..
    :data:`MAX_DEFAULT_DECIMALS` (width 1 -> 1 decimal, 0.5 -> 2, 10 or more -> 0).

    The bins in ``points`` hold one value each and do not count. It is read off the bin
    edges alone, which are declared or DP estimates, so it costs no budget and reveals
    nothing about the table; every bin then holds at least about ten
    distinct printable values, so rounding barely coarsens the uniform draw inside a bin.
    """
    widths = np.delete(np.diff(np.asarray(edges, dtype=float)), list(points))
    narrowest = float(widths.min()) if widths.size else math.inf
    if not math.isfinite(narrowest) or narrowest <= 0:
        return MAX_DEFAULT_DECIMALS
    decimals = math.ceil(-math.log10(narrowest / 10) - 1e-9)
    return min(max(decimals, 0), MAX_DEFAULT_DECIMALS)


def _on_grid(low: np.ndarray, high: np.ndarray, decimals: int, u: np.ndarray) -> np.ndarray:
    """A value drawn uniformly (from ``u`` in [0, 1)) among the multiples of
    ``10**-decimals`` in ``[low, high)``. A bin too narrow to hold one (possible only with a
    declared precision coarser than the bins) gives its midpoint rounded to that precision:
    the declared precision wins over the bin."""
    scale = 10.0**decimals
    first = np.ceil(np.round(low * scale, 6))
    last = np.ceil(np.round(high * scale, 6)) - 1  # high itself belongs to the next bin
    count = last - first + 1
    steps = np.where(count >= 1, first + np.floor(u * np.maximum(count, 1)),
                     np.round((low + high) / 2 * scale))  # fmt: skip
    return steps / scale  # a correctly rounded quotient: prints as the short decimal


#: a tail bin's density halves this many times from its inner edge to its outer one
TAIL_HALVINGS = 4


def _thinning(u: np.ndarray, halvings: np.ndarray | float = TAIL_HALVINGS) -> np.ndarray:
    """Uniform draws ``u`` as shares of a bin whose density halves ``halvings`` times across
    it (a truncated exponential, by its inverse distribution)."""
    kept = 1.0 - 2.0 ** -np.asarray(halvings, dtype=float)
    share = -np.log2(1.0 - u * kept) / halvings
    return np.clip(share, 0.0, np.nextafter(1.0, 0))


#: the steepest fitted tail: its density halves this many times across the bin
MAX_HALVINGS = 64.0


def with_fitted_tails(codec: BinnedCodec, shares: np.ndarray) -> BinnedCodec:
    """``codec`` with each tail bin thinning as fast as continuity asks (post-processing).

    A tail bin (beyond a DP bound, widened by doublings: :mod:`~privsyn_core.data.
    number_bins`) holds the rows the noisy evidence could not place. Drawn with a fixed
    thinning across a bin four times its bound wide, they land far out, beyond the real
    maximum: a tail [2, 8] whose rows hold values up to 2.56 puts most of them above it.
    Where the 1-way targets ``shares`` (per bin, DP) give the bins beside the tail a
    density (inward, as many as hold the tail's share, the outermost cuts being thin), the
    tail starts at that density and falls off exponentially so as to hold its own share: a
    thin tail beside dense bins stays near the bound, a heavy one spreads (never slower than
    :data:`TAIL_HALVINGS`). A tail with no such bins beside it (a single value, another
    tail, nothing measured) keeps the default, and so do the tails of a codec on the log
    scale: decoded evenly over doublings before they thin, they would need the density per
    doubling, and fitted on the linear one they cut heavy tails short (k401k's incsq: its
    99th percentile 14,765 came out 9,565, the real one is 14,431). On raw Adult the shares
    of values outside the real ranges, summed over its numeric columns and 4 seeds, fell from
    0.020 to 0.015."""
    if (not codec.fall and not codec.rise) or codec.log:
        return codec
    edges = np.asarray(codec.edges, dtype=float)
    special = {*codec.fall, *codec.rise, *codec.points}
    fitted = dict(codec.halvings)
    for tail, step in [(b, -1) for b in codec.fall] + [(b, 1) for b in codec.rise]:
        mass, width = float(shares[tail]), edges[tail + 1] - edges[tail]
        near = near_width = 0.0  # the bins beside the tail, inward, until they hold as much
        beside = tail + step
        while 0 <= beside < codec.bins and beside not in special and near < mass:
            near += float(shares[beside])
            near_width += edges[beside + 1] - edges[beside]
            beside += step
        if mass <= 0 or near <= 0 or width <= 0 or near_width <= 0:
            continue
        fitted[tail] = _halvings_for(near / near_width * width / mass)
    return replace(codec, halvings=tuple(sorted(fitted.items())))


def _halvings_for(ratio: float) -> float:
    """Halvings ``h`` of a truncated exponential over a bin whose density at its inner edge
    is ``ratio`` times its mean density: ``x / (1 - exp(-x)) = ratio`` with ``x = h ln 2``
    (bisection; at least :data:`TAIL_HALVINGS`, at most :data:`MAX_HALVINGS`)."""
    low, high = TAIL_HALVINGS * math.log(2), MAX_HALVINGS * math.log(2)
    if ratio <= low / (1 - math.exp(-low)):
        return float(TAIL_HALVINGS)
    if ratio >= high / (1 - math.exp(-high)):
        return MAX_HALVINGS
    for _ in range(60):
        middle = (low + high) / 2
        if middle / (1 - math.exp(-middle)) < ratio:
            low = middle
        else:
            high = middle
    return (low + high) / 2 / math.log(2)


def _log_share(low: np.ndarray, high: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Uniform draws ``u`` moved so that a value ``low + share (high - low)`` is uniform on
    the log scale inside a bin that does not hold zero (on its magnitude, for negative
    bins); bins that hold zero keep ``u``."""
    same_sign = low * high > 0
    near = np.where(low > 0, low, np.abs(high))
    far = np.where(low > 0, high, np.abs(low))
    near = np.where(same_sign, near, 1.0)
    magnitude = near * (np.where(same_sign, far, 1.0) / near) ** u
    value = np.where(low > 0, magnitude, -magnitude)
    width = np.where(high > low, high - low, 1.0)
    return np.where(same_sign, np.clip((value - low) / width, 0.0, np.nextafter(1.0, 0)), u)


def _typed(series: pd.Series, categories: tuple[Any, ...], missing: bool) -> pd.Series:
    """Categories that are all booleans, whole numbers or numbers come back as such (pandas'
    nullable types when the codec has a missing code); anything else stays as objects. The
    type depends on the codec alone, never on which values the synthetic sample holds."""
    if all(isinstance(v, bool | np.bool_) for v in categories):
        return series.astype("boolean" if missing else bool)
    if all(isinstance(v, int | np.integer) and not isinstance(v, bool) for v in categories):
        return series.astype("Int64" if missing else "int64")
    if all(isinstance(v, int | float | np.number) and not isinstance(v, bool) for v in categories):
        return series.astype("Float64" if missing else float)
    return series
