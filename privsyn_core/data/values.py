r"""How single values are read: as canonical text, as numbers, as dates, one value at a time.

Why one value at a time: differential privacy compares neighbouring tables, ``D`` and ``D``
plus one record. A rule that decides how to read a value by looking at *other* values lets one
record change how every record is read. pandas' type inference is such a rule: one ``unknown``
in a column of ages turns the whole column into text, one blank turns it into floats, and the
released table then shows it. Every function here maps each value on its own, with fixed public
rules, so adding a record changes the reading of that record only. The structure of the table
(kinds, whole numbers, date formats) is then decided from DP counts of these readings
(:mod:`privsyn_core.measuring.structure`).

The rules:

* **Canonical text** (:func:`canonical_text`): a value as the text a CSV file would hold, so a
  typed table (Parquet, a DataFrame) and the same table read from CSV give the same text.
  Whole floats print as integers (``21.0`` -> ``"21"``: a column read as float only because it
  has blanks), datetimes in ISO form, surrounding spaces removed; blanks and NaN are missing.
* **Digits are ASCII** (``0-9``) in every pattern, as SQL engines' regular expressions read
  ``\d``, so every counting backend classifies a value the same way.
* **Numbers** (:func:`parse_numbers`): plain decimal notation with an optional exponent
  (``-12``, ``3.5``, ``.5``, ``1e6``). ``inf``, ``nan``, ``1,000``, ``12%`` are not numbers.
* **Dates** (:data:`DATE_FORMATS`): ISO dates and date-times, ``Y/m/d`` and ``Y/m/d H:M:S``,
  and ``d/m/Y`` or ``m/d/Y`` (a slashed date whose first two fields are both at most 12 is
  ambiguous).
* **Decimals** (:func:`written_decimals`): a number's decimals as written, trailing zeros
  dropped and the exponent applied (``32.50`` -> 1, ``1.5e-3`` -> 4, ``2.5e1`` -> 0). A typed
  float is read from its shortest repr (``32.5``), so a typed table and its CSV text agree.
* **Value classes** (:func:`classify`): each value falls in exactly one class (a number with
  decimals in the class of its count of decimals, 1 to :data:`MAX_COUNTED_DECIMALS` or more),
  so a record moves one count per column: the sensitivity of the structure measurement.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import date, datetime
from enum import IntEnum

import numpy as np
import pandas as pd

#: plain decimal numbers, optional sign and exponent; no thousands separators, no inf or nan
NUMBER = r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
#: a :data:`NUMBER`'s fractional digits without trailing zeros (group 1), and its exponent
#: (group 2): the same groups in Python's, RE2's (DuckDB) and Java's (Spark) regular expressions
NUMBER_DECIMALS = r"[+-]?[0-9]*(?:\.([0-9]*?)0*)?(?:[eE]([+-]?[0-9]+))?"
#: numbers with decimals are counted by their decimals up to this many; more share one class
MAX_COUNTED_DECIMALS = 4
#: numbers with more decimals than ``d``, as a share of all numbers, that still count as
#: having ``d`` decimals (``d = 0``: whole numbers; :func:`fewest_decimals`)
DECIMAL_SHARE = 0.01
#: the date and date-time spellings read (:class:`ValueClass`), as regular expressions that mean
#: the same in Python and in the SQL engines (:mod:`privsyn_core.measuring.counters.sql_encoding`);
#: :data:`SLASH_DATE` (day and month in either order) holds its first two fields as groups
ISO_DATE = r"[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}"
ISO_DATETIME = (
    r"[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}[T ][0-9]{1,2}:[0-9]{2}(?::[0-9]{2}(?:\.[0-9]+)?)?"
    r"(?:Z|[+-][0-9]{2}:?[0-9]{2})?"
)
SLASH_DATE = r"([0-9]{1,2})/([0-9]{1,2})/[0-9]{4}"
YMD_SLASH_DATE = r"[0-9]{4}/[0-9]{1,2}/[0-9]{1,2}"
#: seconds up to 59 in the pattern: strptime reads 60 and 61 (leap seconds) as the next minute
YMD_SLASH_DATETIME = r"[0-9]{4}/[0-9]{1,2}/[0-9]{1,2} [0-9]{1,2}:[0-5][0-9]:[0-5][0-9]"

#: how date-times are written back when their column's values carry a time of day
ISO_DATETIME_FORMAT = "%Y-%m-%d %H:%M:%S"
#: a declared ``datetime_format`` that keeps pandas datetimes instead of writing text
NATIVE_DATETIME = "datetime64"


class ValueClass(IntEnum):
    """The reading of one value. Every value is in exactly one class."""

    MISSING = 0
    INTEGER = 1
    #: a number with 1 decimal (``2.5``), 2 (``0.25``), ...
    DECIMAL_1 = 2
    DECIMAL_2 = 3
    DECIMAL_3 = 4
    DECIMAL_4 = 5
    #: a number with more than :data:`MAX_COUNTED_DECIMALS` decimals
    DECIMAL_MORE = 6
    DATE_ISO = 7
    DATETIME_ISO = 8
    DATE_YMD_SLASH = 9
    DATE_DMY = 10
    DATE_MDY = 11
    DATE_SLASH_AMBIGUOUS = 12
    TEXT = 13
    #: ``2016/01/01 00:47:36`` (openintro's police tables): after TEXT, so the codes of the
    #: classes before it stay what they were
    DATETIME_YMD_SLASH = 14


#: the format each date class is written in (the ambiguous class takes d/m or m/d by vote)
DATE_FORMATS: dict[ValueClass, str] = {
    ValueClass.DATE_ISO: "%Y-%m-%d",
    ValueClass.DATETIME_ISO: ISO_DATETIME_FORMAT,
    ValueClass.DATE_YMD_SLASH: "%Y/%m/%d",
    ValueClass.DATETIME_YMD_SLASH: "%Y/%m/%d %H:%M:%S",
    ValueClass.DATE_DMY: "%d/%m/%Y",
    ValueClass.DATE_MDY: "%m/%d/%Y",
}
#: numbers with decimals: the class of ``d`` decimals is ``DECIMAL_CLASSES[d - 1]``
DECIMAL_CLASSES = (
    ValueClass.DECIMAL_1,
    ValueClass.DECIMAL_2,
    ValueClass.DECIMAL_3,
    ValueClass.DECIMAL_4,
    ValueClass.DECIMAL_MORE,
)
assert len(DECIMAL_CLASSES) == MAX_COUNTED_DECIMALS + 1
NUMBER_CLASSES = (ValueClass.INTEGER, *DECIMAL_CLASSES)
DATE_CLASSES = (
    ValueClass.DATE_ISO,
    ValueClass.DATETIME_ISO,
    ValueClass.DATE_YMD_SLASH,
    ValueClass.DATETIME_YMD_SLASH,
    ValueClass.DATE_DMY,
    ValueClass.DATE_MDY,
    ValueClass.DATE_SLASH_AMBIGUOUS,
)


#: marks a Series that is already canonical text, so reading it again costs nothing
_CANONICAL = "privsyn_canonical_text"


def canonical_text(column: pd.Series) -> pd.Series:
    """Each value as text (object dtype), None where missing; see the module docstring."""
    if column.attrs.get(_CANONICAL):
        return column
    dtype = column.dtype
    if pd.api.types.infer_dtype(column, skipna=True) in ("string", "empty"):
        # text (every CSV column): strip each distinct value once; blanks are missing
        out = _by_unique(column, _stripped, None)
    else:
        present = column.notna().to_numpy()
        out = np.full(len(column), None, dtype=object)
        if pd.api.types.is_bool_dtype(dtype):
            out[present] = np.where(column[present].to_numpy(dtype=bool), "True", "False")
        elif pd.api.types.is_integer_dtype(dtype):
            out[present] = column[present].to_numpy(dtype=np.int64).astype(str)
        elif pd.api.types.is_float_dtype(dtype):
            out[present] = [_number_text(v) for v in column[present].to_numpy(dtype=float)]
        elif pd.api.types.is_datetime64_any_dtype(dtype):
            out[present] = [_datetime_text(v) for v in column[present]]
        else:
            out[present] = [_text(v) for v in column[present].to_numpy(dtype=object)]
        out[out == ""] = None
    text = pd.Series(out, index=column.index, name=column.name, dtype=object)
    text.attrs[_CANONICAL] = True
    return text


def _stripped(unique: pd.Series) -> np.ndarray:
    out = unique.str.strip().to_numpy(dtype=object, copy=True)
    out[out == ""] = None
    return out


def _by_unique(text: pd.Series, read: Callable[[pd.Series], np.ndarray], missing: object):
    """``read`` applied to each distinct value once and spread back to every row (``missing``
    where the value is missing): the same value-by-value reading, at the cost of the distinct
    values rather than the rows."""
    codes, unique = pd.factorize(text.to_numpy(dtype=object), use_na_sentinel=True)
    per_value = np.asarray(read(pd.Series(unique, dtype=object)))
    if missing is None:
        per_value = per_value.astype(object)
    out = per_value[np.maximum(codes, 0)] if len(per_value) else np.empty(len(codes), object)
    if (codes < 0).any():
        out = out.copy() if len(per_value) else out
        out[codes < 0] = missing
    return out


def _number_text(value: float) -> str:
    if np.isfinite(value) and value.is_integer() and abs(value) < 2**53:
        return str(int(value))
    return repr(float(value))


def _datetime_text(value: datetime) -> str:
    if isinstance(value, datetime):
        if (value.hour, value.minute, value.second, value.microsecond) == (0, 0, 0, 0):
            return value.strftime("%Y-%m-%d")
        return value.isoformat(sep=" ")
    return value.isoformat()


def _text(value: object) -> str:
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, bool | np.bool_):
        return "True" if value else "False"
    if isinstance(value, int | np.integer):
        return str(int(value))
    if isinstance(value, float | np.floating):
        return _number_text(float(value))
    if isinstance(value, datetime | date | np.datetime64):
        return _datetime_text(pd.Timestamp(value).to_pydatetime())
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace").strip()
    return str(value).strip()


def _matches(text: pd.Series, pattern: str) -> np.ndarray:
    return text.str.fullmatch(pattern).fillna(False).to_numpy(dtype=bool)


def parse_numbers(text: pd.Series) -> np.ndarray:
    """Floats for values in plain decimal notation, NaN for everything else (missing values,
    text, and non-finite numbers such as ``1e999``)."""
    return _by_unique(text, _parse_numbers, np.nan).astype(float)


def _parse_numbers(text: pd.Series) -> np.ndarray:
    out = np.full(len(text), np.nan)
    is_number = _matches(text.astype(object), NUMBER)
    if is_number.any():
        with np.errstate(over="ignore"):
            numbers = text[is_number].astype(float).to_numpy()
        out[is_number] = np.where(np.isfinite(numbers), numbers, np.nan)
    return out


def written_decimals(text: pd.Series) -> np.ndarray:
    """The decimals of each number (text matching :data:`NUMBER`) as written: its fractional
    digits without trailing zeros, less its exponent, at least 0 (``32.50`` -> 1, ``1.5e-3``
    -> 4, ``2.5e1`` -> 0)."""
    groups = text.astype(object).str.extract(f"^(?:{NUMBER_DECIMALS})$")
    digits = groups[0].fillna("").str.len().to_numpy(dtype=np.int64)
    # Python's ints read an exponent of any length (a number with decimals has a small one)
    exponents = [int(e) if isinstance(e, str) and e else 0 for e in groups[1]]
    places = [min(max(0, int(d) - e), 1 << 30) for d, e in zip(digits, exponents, strict=True)]
    return np.array(places, dtype=np.int64)


def fewest_decimals(by_places: Sequence[float] | np.ndarray, numbers: float) -> int | None:
    """The fewest decimals ``d`` such that the numbers with more than ``d`` decimals are at
    most :data:`DECIMAL_SHARE` of ``numbers``, where ``by_places[i]`` counts the numbers with
    ``i + 1`` decimals; None when no ``d < len(by_places)`` does (the last count may gather
    every number with more decimals)."""
    counts = np.asarray(by_places, dtype=float)
    for places in range(len(counts)):
        if float(counts[places:].sum()) <= DECIMAL_SHARE * numbers:
            return places
    return None


def decimal_class(places: np.ndarray) -> np.ndarray:
    """The :class:`ValueClass` of numbers with decimals, from their :func:`written_decimals`
    (at least 1: a number with none is whole)."""
    counted = np.clip(places, 1, MAX_COUNTED_DECIMALS + 1)
    return (ValueClass.DECIMAL_1 + counted - 1).astype(np.int8)


def classify(text: pd.Series) -> np.ndarray:
    """The :class:`ValueClass` of each value of a canonical-text column (int8 codes)."""
    return _by_unique(text, _classify, ValueClass.MISSING.value).astype(np.int8)


def _classify(text: pd.Series) -> np.ndarray:
    text = text.astype(object)
    classes = np.full(len(text), ValueClass.TEXT, dtype=np.int8)
    missing = text.isna().to_numpy()
    classes[missing] = ValueClass.MISSING
    numbers = parse_numbers(text)
    is_number = ~np.isnan(numbers)
    whole = np.zeros(len(text), dtype=bool)
    whole[is_number] = np.mod(numbers[is_number], 1) == 0
    classes[is_number & whole] = ValueClass.INTEGER
    fractional = is_number & ~whole
    if fractional.any():
        classes[fractional] = decimal_class(written_decimals(text[fractional]))
    rest = ~missing & ~is_number
    if not rest.any():
        return classes
    candidates = text[rest]
    where = np.flatnonzero(rest)
    for klass, pattern, fmt in (
        (ValueClass.DATE_ISO, ISO_DATE, "%Y-%m-%d"),
        (ValueClass.DATETIME_ISO, ISO_DATETIME, "ISO8601"),
        (ValueClass.DATE_YMD_SLASH, YMD_SLASH_DATE, "%Y/%m/%d"),
        (ValueClass.DATETIME_YMD_SLASH, YMD_SLASH_DATETIME, "%Y/%m/%d %H:%M:%S"),
    ):
        hit = _matches(candidates, pattern)
        if hit.any():
            valid = _parses(candidates[hit], fmt)
            classes[where[hit][valid]] = klass
    slash = candidates.str.extract(f"^{SLASH_DATE}$")
    is_slash = slash[0].notna().to_numpy()
    if is_slash.any():
        first = slash[0][is_slash].astype(int).to_numpy()
        second = slash[1][is_slash].astype(int).to_numpy()
        rows = where[is_slash]
        day_first = _parses(candidates[is_slash], "%d/%m/%Y")
        month_first = _parses(candidates[is_slash], "%m/%d/%Y")
        classes[rows[day_first & month_first & (first <= 12) & (second <= 12)]] = (
            ValueClass.DATE_SLASH_AMBIGUOUS
        )
        classes[rows[day_first & ~month_first]] = ValueClass.DATE_DMY
        classes[rows[month_first & ~day_first]] = ValueClass.DATE_MDY
    return classes


def _parses(text: pd.Series, fmt: str) -> np.ndarray:
    # utc: a value's UTC offset is read on its own (without it pandas refuses a column whose
    # values mix offsets, so one record could stop the run)
    parsed = pd.to_datetime(text, format=fmt, errors="coerce", utc=True)
    return parsed.notna().to_numpy(dtype=bool)


def class_counts(text: pd.Series) -> np.ndarray:
    """How many values of the column fall in each :class:`ValueClass` (exact; private)."""
    return np.bincount(classify(text), minlength=len(ValueClass)).astype(float)


def parse_datetimes(text: pd.Series, day_first: bool) -> np.ndarray:
    """Seconds since 1970 for each value in a recognised date format (NaN otherwise).

    Every recognised format is tried on every value, so one value's reading never depends on
    the others; ``day_first`` (a decision made for the whole column, from DP counts) settles
    only slashed dates that read both ways.
    """
    text = text.astype(object)
    seconds = np.full(len(text), np.nan)
    slashed = ("%d/%m/%Y", "%m/%d/%Y") if day_first else ("%m/%d/%Y", "%d/%m/%Y")
    for fmt, pattern in (
        ("%Y-%m-%d", ISO_DATE),
        ("ISO8601", ISO_DATETIME),
        ("%Y/%m/%d", YMD_SLASH_DATE),
        ("%Y/%m/%d %H:%M:%S", YMD_SLASH_DATETIME),
        (slashed[0], SLASH_DATE),
        (slashed[1], SLASH_DATE),
    ):
        todo = np.isnan(seconds) & _matches(text, pattern)
        if todo.any():
            stamps = pd.to_datetime(text[todo], format=fmt, errors="coerce", utc=True)
            seconds[todo] = seconds_since_epoch(stamps)
    return seconds


def seconds_since_epoch(stamps: pd.Series) -> np.ndarray:
    """Datetimes as float seconds since 1970 (NaN for NaT), whatever their resolution."""
    epoch = pd.Timestamp("1970-01-01", tz=getattr(stamps.dt, "tz", None))
    return ((stamps - epoch) / pd.Timedelta(seconds=1)).to_numpy(dtype=float, na_value=np.nan)


def day_first_format(fmt: str | None) -> bool:
    """Whether slashed dates read day first under a column's chosen format."""
    return fmt == "%d/%m/%Y"


def categories_as_text(categories: Sequence[object]) -> list[str]:
    """Declared categories in the same canonical text the values are matched in."""
    return [str(c) for c in canonical_text(pd.Series(list(categories), dtype=object))]
