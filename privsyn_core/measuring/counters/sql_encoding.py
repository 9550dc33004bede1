"""Raw tables in SQL engines (DuckDB, Spark): the preparation's reads and the encoding, as SQL.

Everything the private preparation reads from a raw table
(:class:`~privsyn_core.measuring.counters.reading.RawTable`) comes from aggregates computed
where the table lies, so raw rows never come into Python: value-class counts for the structure
step, value counts for category estimates, counts over the public grids of the range
estimates. The encoding (categories, "other", missing, bins, datetimes) is a SQL expression per
column, and the coded relation it defines is counted with ``GROUPING SETS``
(:mod:`privsyn_core.measuring.counters.sql_counting`). The noisy steps and the decisions are
the numpy path's own functions, fed these counts.

The SQL reads each value as :mod:`privsyn_core.data.values` does, one value at a time:

* **canonical text**: text is stripped of the whitespace Python's ``str.strip`` removes; a
  blank is missing. A CSV cell is missing when, after its leading spaces, it is one of pandas'
  missing spellings (``NA``, ``null``, ``N/A``, ...; as :func:`~privsyn_core.data.io.read_table`
  reads it). Integers print as integers, booleans as ``True``/``False``, whole floats below
  2^53 as integers, dates as ISO text;
* **numbers**: the same regular expression (ASCII digits), cast to a double (both engines
  round decimal text correctly, as Python does), finite only; their decimals as written by
  the same regular expression's groups (fractional digits without trailing zeros, exponent);
* **dates**: the same regular expressions; a date is valid by arithmetic on its fields
  (months 1-12, days within the month, leap years; hours 0-23, minutes and seconds 0-59),
  which is what pandas' format parsing checks; seconds since 1970 by the civil-calendar
  formula.

Known differences from the in-memory reading, documented and tested: a *quoted* CSV cell
with leading spaces before a missing spelling (``"  NA"``) is missing here, text there;
a blank line of a one-column CSV file is a missing value here, skipped there (files of two
columns or more skip blank lines on both); fractional seconds of a datetime may differ in the
last bit of the double. Date-times with a UTC offset are read in UTC on both.
CSV files are read as UTF-8 (DuckDB) without pandas' per-value Windows-1252 fallback.
"""

from __future__ import annotations

import tempfile
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import count
from pathlib import Path
from typing import Any

import numpy as np

from privsyn_core.data.codecs import BinnedCodec, CategoryCodec, ColumnCodec
from privsyn_core.data.io import file_delimiter
from privsyn_core.data.paths import duckdb_reader, is_parquet
from privsyn_core.data.values import (
    ISO_DATE,
    ISO_DATETIME,
    MAX_COUNTED_DECIMALS,
    NUMBER,
    NUMBER_DECIMALS,
    SLASH_DATE,
    YMD_SLASH_DATE,
    YMD_SLASH_DATETIME,
    ValueClass,
    categories_as_text,
    day_first_format,
)
from privsyn_core.domain import Domain
from privsyn_core.errors import InputError, TableError
from privsyn_core.marginals import MarginalTable
from privsyn_core.measuring.counters.counting import Counter
from privsyn_core.measuring.counters.sql_counting import (
    check_codes,
    count_by_grouping_sets,
    declared_domain,
)

#: the spellings pandas reads as missing in a CSV cell (pandas' ``STR_NA_VALUES``)
CSV_MISSING = (
    "", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN",
    "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null",
)  # fmt: skip
#: the characters Python's ``str.strip()`` removes (``str.isspace``)
WHITESPACE = (
    "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
    "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
_MAX_DOUBLE = "1.7976931348623157e308"
_names = count()


@dataclass(frozen=True)
class Dialect:
    """What differs between the engines' SQL."""

    name: str
    #: the engine's name for the bitmask of left-out grouping columns
    grouping: str
    text_type: str

    def string(self, text: str) -> str:
        if self.name == "spark":  # Spark reads backslashes in literals as escapes
            return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
        return "'" + text.replace("'", "''") + "'"

    def full_match(self, expr: str, pattern: str) -> str:
        if self.name == "spark":
            return f"({expr} RLIKE {self.string('^(?:' + pattern + ')$')})"
        return f"regexp_full_match({expr}, {self.string(pattern)})"

    def extract(self, expr: str, pattern: str, group: int) -> str:
        return f"regexp_extract({expr}, {self.string('^(?:' + pattern + ')$')}, {group})"

    def trim(self, expr: str, chars: str) -> str:
        if self.name == "spark":
            return f"trim(BOTH {self.string(chars)} FROM {expr})"
        return f"trim({expr}, {self.string(chars)})"

    def ltrim_spaces(self, expr: str) -> str:
        return f"ltrim({expr})" if self.name == "spark" else f"ltrim({expr}, ' ')"

    def div(self, a: str, b: int) -> str:
        return f"(({a}) div {b})" if self.name == "spark" else f"(({a}) // {b})"


DUCKDB = Dialect("duckdb", "GROUPING", "VARCHAR")
SPARK = Dialect("spark", "grouping_id", "STRING")


def quoted(name: str, dialect: Dialect) -> str:
    if dialect.name == "spark":
        return "`" + name.replace("`", "``") + "`"
    return '"' + name.replace('"', '""') + '"'


def one_of(expr: str, values: Sequence[str]) -> str:
    """``expr IN (values)`` spelled as comparisons: DuckDB's IN-list optimizer takes seconds
    to plan the nested expressions of this module when they hold IN lists."""
    return "(" + " OR ".join(f"{expr} = {v}" for v in values) + ")"


def double(value: float) -> str:
    """A double literal that reads back exactly (shortest round-trip text)."""
    return f"CAST('{float(value)!r}' AS DOUBLE)"


# ---------------------------------------------------------------------------------------------
# reading values


def canonical_expr(column: str, kind: str, dialect: Dialect, *, csv: bool) -> str:
    """The canonical text of a column of SQL type ``kind`` (see the module docstring)."""
    kind = kind.upper()
    text = dialect.text_type
    if kind.startswith(("VARCHAR", "STRING", "CHAR", "TEXT")):
        stripped = f"NULLIF({_stripped(column, dialect)}, '')"
        if not csv:
            return stripped
        spellings = [dialect.string(s) for s in CSV_MISSING]
        # a cell is missing when its text after leading spaces is a spelling; the stripped
        # text being one is necessary for that, and cheap to test first
        return (
            f"CASE WHEN {one_of(stripped, spellings)} AND "
            f"{one_of(dialect.ltrim_spaces(column), spellings)} THEN NULL ELSE {stripped} END"
        )
    if kind.startswith(("BOOL",)):
        return f"CASE WHEN {column} IS NULL THEN NULL WHEN {column} THEN 'True' ELSE 'False' END"
    if kind.startswith(("TINYINT", "SMALLINT", "INT", "BIGINT", "HUGEINT", "UTINYINT",
                        "USMALLINT", "UINTEGER", "UBIGINT", "LONG", "SHORT", "BYTE")):  # fmt: skip
        return f"CAST({column} AS {text})"
    if kind.startswith(("DOUBLE", "FLOAT", "REAL")):
        value = f"CAST({column} AS DOUBLE)"
        return (
            f"CASE WHEN {value} IS NULL OR isnan({value}) THEN NULL "
            f"WHEN abs({value}) < 9007199254740992 AND {value} % 1 = 0 "
            f"THEN CAST(CAST({value} AS BIGINT) AS {text}) ELSE CAST({value} AS {text}) END"
        )
    if kind == "DATE":
        return f"CAST({column} AS {text})"
    if kind.startswith("TIMESTAMP") and dialect.name == "duckdb":
        return (
            f"CASE WHEN {column} IS NULL THEN NULL WHEN CAST({column} AS DATE) = {column} "
            f"THEN strftime({column}, '%Y-%m-%d') WHEN microsecond({column}) % 1000000 = 0 "
            f"THEN strftime({column}, '%Y-%m-%d %H:%M:%S') "
            f"ELSE strftime({column}, '%Y-%m-%d %H:%M:%S.%f') END"
        )
    return f"NULLIF({_stripped(f'CAST({column} AS {text})', dialect)}, '')"


def _stripped(column: str, dialect: Dialect) -> str:
    """``str.strip()``: the full trim only for values that start or end with a character
    that may be whitespace (control characters, space, non-ASCII), which most do not."""
    ends = f"ascii({column})", f"ascii(right({column}, 1))"
    suspicious = " OR ".join(f"{e} <= 32 OR {e} > 127" for e in ends)
    return f"CASE WHEN {suspicious} THEN {dialect.trim(column, WHITESPACE)} ELSE {column} END"


def double_max() -> str:
    return f"CAST('{_MAX_DOUBLE}' AS DOUBLE)"


def _int(expr: str) -> str:
    return f"TRY_CAST(NULLIF({expr}, '') AS BIGINT)"


def _days_in_month(y: str, m: str) -> str:
    leap = f"({y} % 4 = 0 AND ({y} % 100 <> 0 OR {y} % 400 = 0))"
    return (
        f"CASE WHEN {m} = 2 THEN CASE WHEN {leap} THEN 29 ELSE 28 END "
        f"WHEN {one_of(m, ['4', '6', '9', '11'])} THEN 30 ELSE 31 END"
    )


def _valid_date(y: str, m: str, d: str) -> str:
    return (
        f"COALESCE({y} >= 1 AND {m} BETWEEN 1 AND 12 AND {d} >= 1 "
        f"AND {d} <= {_days_in_month(y, m)}, FALSE)"
    )


def _days(y: str, m: str, d: str, dialect: Dialect) -> str:
    """Days since 1970-01-01 of a valid civil date (H. Hinnant's ``days_from_civil``)."""
    yy = f"({y} - CASE WHEN {m} <= 2 THEN 1 ELSE 0 END)"
    era = dialect.div(yy, 400)
    yoe = f"({yy} - {era} * 400)"
    doy = f"({dialect.div(f'153 * ({m} + CASE WHEN {m} > 2 THEN -3 ELSE 9 END) + 2', 5)} + {d} - 1)"
    doe = f"({yoe} * 365 + {dialect.div(yoe, 4)} - {dialect.div(yoe, 100)} + {doy})"
    return f"({era} * 146097 + {doe} - 719468)"


#: which pattern a value's text matches (the patterns exclude each other)
_MISSING, _NUMBER, _ISO, _DATETIME, _YMD, _SLASHED, _YMD_TIME, _OTHER = 0, 1, 3, 4, 5, 6, 7, 9
#: the three numeric fields of every date pattern: Y-m-d, Y/m/d and a/b/Y alike
_FIELDS = r"([0-9]+)[-/]([0-9]+)[-/]([0-9]+)(.*)"
#: the date-time patterns (ISO, and Y/m/d H:M:S) with their time fields in groups: hour,
#: minute, second, fraction, zone sign, hours and minutes (engines read at most 9 groups)
_TIME_GROUPS = (
    r"[0-9]{4}[-/][0-9]{1,2}[-/][0-9]{1,2}[T ]([0-9]{1,2}):([0-9]{2})"
    r"(?::([0-9]{2})(?:\.([0-9]+))?)?(?:Z|([+-])([0-9]{2}):?([0-9]{2}))?"
)


def reading_query(
    source: str, texts: Sequence[str], dialect: Dialect, keep: Sequence[str] = ()
) -> str:
    """A query over ``source`` that reads each canonical-text column ``t`` of ``texts`` value
    by value, as :mod:`privsyn_core.data.values` does, into the columns

    * ``{t}_class``: its :class:`~privsyn_core.data.values.ValueClass` (``classify``);
    * ``{t}_number``: a plain decimal number as a finite double, else NULL (``parse_numbers``);
    * ``{t}_dmy``, ``{t}_mdy``: seconds since 1970 of a date (``parse_datetimes``, slashed
      dates read day first or month first), else NULL.

    In layers, each naming what the next reads, so every field is extracted once and a
    value's fields are read only for the pattern it matched. Columns ``keep`` of ``source``
    pass through.
    """
    layer1 = ", ".join(_pattern(t, dialect) for t in texts)
    q1 = f"SELECT {''.join(f'{k}, ' for k in keep)}{layer1} FROM {source}"
    q2 = f"SELECT *, {', '.join(_fields(t, dialect) for t in texts)} FROM ({q1}) AS l1"
    q3 = f"SELECT *, {', '.join(_checks(t, dialect) for t in texts)} FROM ({q2}) AS l2"
    kept = "".join(f"{k}, " for k in keep)
    return f"SELECT {kept}{', '.join(_outputs(t) for t in texts)} FROM ({q3}) AS l3"


def _pattern(t: str, dialect: Dialect) -> str:
    """Layer 1: the column and which pattern its text matches (``{t}_p``)."""
    return (
        f"{t}, CASE WHEN {t} IS NULL THEN {_MISSING} "
        f"WHEN {dialect.full_match(t, NUMBER)} THEN {_NUMBER} "
        f"WHEN {dialect.full_match(t, ISO_DATE)} THEN {_ISO} "
        f"WHEN {dialect.full_match(t, ISO_DATETIME)} THEN {_DATETIME} "
        f"WHEN {dialect.full_match(t, YMD_SLASH_DATE)} THEN {_YMD} "
        f"WHEN {dialect.full_match(t, YMD_SLASH_DATETIME)} THEN {_YMD_TIME} "
        f"WHEN {dialect.full_match(t, SLASH_DATE)} THEN {_SLASHED} ELSE {_OTHER} END AS {t}_p"
    )


def _fields(t: str, dialect: Dialect) -> str:
    """Layer 2: the fields of the pattern matched, each extracted once: a number's value and
    decimals as written, a date's three numbers, a time's clock and zone."""
    dated = f"{t}_p BETWEEN {_ISO} AND {_YMD_TIME}"
    out = [f"CASE WHEN {t}_p = {_NUMBER} THEN TRY_CAST({t} AS DOUBLE) END AS {t}_v"]
    # a number's decimals as written (values.written_decimals): digits, exponent
    digits = f"length({dialect.extract(t, NUMBER_DECIMALS, 1)})"
    out.append(f"CASE WHEN {t}_p = {_NUMBER} THEN {digits} END AS {t}_dd")
    exponent = _int(dialect.extract(t, NUMBER_DECIMALS, 2))
    out.append(f"CASE WHEN {t}_p = {_NUMBER} THEN {exponent} END AS {t}_de")
    out += [
        f"CASE WHEN {dated} THEN {_int(dialect.extract(t, _FIELDS, g))} END AS {t}_f{g}"
        for g in (1, 2, 3)
    ]
    timed = f"({t}_p = {_DATETIME} OR {t}_p = {_YMD_TIME})"
    for g, name in ((1, "hh"), (2, "mi"), (3, "ss"), (6, "zh"), (7, "zm")):
        value = _int(dialect.extract(t, _TIME_GROUPS, g))
        out.append(f"CASE WHEN {timed} THEN {value} END AS {t}_{name}")
    for g, name in ((4, "frac"), (5, "sign")):
        value = dialect.extract(t, _TIME_GROUPS, g)
        out.append(f"CASE WHEN {timed} THEN {value} END AS {t}_{name}")
    return ", ".join(out)


def _checks(t: str, dialect: Dialect) -> str:
    """Layer 3: whether the fields make a valid date (read year first, day first or month
    first) and time, and the seconds since 1970 of each reading."""
    f1, f2, f3 = f"{t}_f1", f"{t}_f2", f"{t}_f3"
    clock = (
        f"{t}_hh * 3600 + {t}_mi * 60 + COALESCE({t}_ss, 0) - CASE WHEN {t}_sign = '-' "
        f"THEN -1 WHEN {t}_sign = '+' THEN 1 ELSE 0 END "
        f"* (COALESCE({t}_zh, 0) * 3600 + COALESCE({t}_zm, 0) * 60)"
    )
    fraction = f"CASE WHEN {t}_frac = '' THEN 0.0 ELSE TRY_CAST('0.' || {t}_frac AS DOUBLE) END"
    return ", ".join(
        [
            f"{_valid_date(f1, f2, f3)} AS {t}_ok",
            f"{_valid_date(f3, f2, f1)} AS {t}_okd",
            f"{_valid_date(f3, f1, f2)} AS {t}_okm",
            f"COALESCE({t}_hh <= 23 AND {t}_mi <= 59 AND COALESCE({t}_ss, 0) <= 59, FALSE) "
            f"AS {t}_tok",
            f"CAST({_days(f1, f2, f3, dialect)} AS DOUBLE) * 86400 AS {t}_s",
            f"CAST({_days(f3, f2, f1, dialect)} AS DOUBLE) * 86400 AS {t}_sd",
            f"CAST({_days(f3, f1, f2, dialect)} AS DOUBLE) * 86400 AS {t}_sm",
            f"CAST({clock} AS DOUBLE) + {fraction} AS {t}_clock",
        ]
    )


def _outputs(t: str) -> str:
    """Layer 4: the column, its value class, its number and its two readings as a date."""
    finite = f"abs({t}_v) <= {double_max()}"
    number = f"CASE WHEN {t}_p = {_NUMBER} AND {finite} THEN {t}_v END AS {t}_number"
    dmy, mdy = _seconds(t, "d", "m", "dmy"), _seconds(t, "m", "d", "mdy")
    return ", ".join([t, _value_class(t, finite), number, dmy, mdy])


def _value_class(t: str, finite: str) -> str:
    """``{t}_class``: the :class:`~privsyn_core.data.values.ValueClass` of the pattern matched,
    text where its fields are not a valid number, date or time."""
    c = ValueClass
    places = f"least(greatest({t}_dd - COALESCE({t}_de, 0), 1), {MAX_COUNTED_DECIMALS + 1})"
    return (
        f"CASE {t}_p WHEN {_MISSING} THEN {c.MISSING.value} "
        f"WHEN {_NUMBER} THEN CASE WHEN {finite} THEN CASE WHEN {t}_v % 1 = 0 "
        f"THEN {c.INTEGER.value} ELSE {c.DECIMAL_1.value - 1} + {places} END "
        f"ELSE {c.TEXT.value} END "
        f"WHEN {_ISO} THEN CASE WHEN {t}_ok THEN {c.DATE_ISO.value} ELSE {c.TEXT.value} END "
        f"WHEN {_DATETIME} THEN CASE WHEN {t}_ok AND {t}_tok THEN {c.DATETIME_ISO.value} "
        f"ELSE {c.TEXT.value} END "
        f"WHEN {_YMD} THEN CASE WHEN {t}_ok THEN {c.DATE_YMD_SLASH.value} "
        f"ELSE {c.TEXT.value} END "
        f"WHEN {_YMD_TIME} THEN CASE WHEN {t}_ok AND {t}_tok "
        f"THEN {c.DATETIME_YMD_SLASH.value} ELSE {c.TEXT.value} END "
        f"WHEN {_SLASHED} THEN CASE WHEN {t}_okd AND {t}_okm "
        f"THEN {c.DATE_SLASH_AMBIGUOUS.value} WHEN {t}_okd THEN {c.DATE_DMY.value} "
        f"WHEN {t}_okm THEN {c.DATE_MDY.value} ELSE {c.TEXT.value} END "
        f"ELSE {c.TEXT.value} END AS {t}_class"
    )


def _seconds(t: str, first: str, second: str, name: str) -> str:
    """``{t}_{name}``: seconds since 1970 of a valid date or date-time; a slashed date read
    ``first`` (``d``: day first, ``m``: month first) where that reading is valid, else
    ``second``."""
    return (
        f"CASE WHEN ({t}_p = {_ISO} OR {t}_p = {_YMD}) AND {t}_ok THEN {t}_s "
        f"WHEN {t}_p IN ({_DATETIME}, {_YMD_TIME}) AND {t}_ok AND {t}_tok "
        f"THEN {t}_s + {t}_clock "
        f"WHEN {t}_p = {_SLASHED} THEN CASE WHEN {t}_ok{first} THEN {t}_s{first} "
        f"WHEN {t}_ok{second} THEN {t}_s{second} END END AS {t}_{name}"
    )


def cell_expr(value: str, edges: Sequence[float]) -> str:
    """``numpy.searchsorted(edges, value, side="right")`` (how many edges are at most
    ``value``) as a balanced tree of exact comparisons: about log2(len(edges)) per row."""

    def search(low: int, high: int) -> str:
        if low == high:
            return str(low)
        mid = (low + high) // 2
        return (
            f"CASE WHEN {value} < {double(edges[mid])} THEN {search(low, mid)} "
            f"ELSE {search(mid + 1, high)} END"
        )

    return search(0, len(edges))


def code_expr(codec: ColumnCodec, t: str, dialect: Dialect) -> str:
    """The code of the value read in column ``t`` of :func:`reading_query` under ``codec``;
    NULL where the codec refuses it (a missing value it has no code for, a category it does
    not list)."""
    if isinstance(codec, CategoryCodec):
        keys = categories_as_text(codec.categories)
        branches = " ".join(f"WHEN {dialect.string(k)} THEN {i}" for i, k in enumerate(keys))
        other = codec.other_code if codec.other else "NULL"
        missing = codec.missing_code if codec.missing else "NULL"
        cases = f"CASE {t} {branches} ELSE {other} END" if keys else str(other)
        return f"CASE WHEN {t} IS NULL THEN {missing} ELSE {cases} END"
    number = codec_number(codec, t)
    missing = codec.missing_code if codec.missing else "NULL"
    cell = cell_expr(number, codec.edges[1:-1])
    return f"CASE WHEN {number} IS NULL THEN {missing} ELSE {cell} END"


def codec_number(codec: BinnedCodec, t: str) -> str:
    """The column of :func:`reading_query` that holds ``t`` read by ``codec``."""
    if codec.datetime:
        return f"{t}_dmy" if day_first_format(codec.datetime_format) else f"{t}_mdy"
    return f"{t}_number"


# ---------------------------------------------------------------------------------------------
# the table


Run = Callable[[str], list[tuple]]


@dataclass(frozen=True)
class _SqlNumbers:
    table: SqlTable
    readings: str
    number: str

    def histogram(self, edges: np.ndarray, clip: bool) -> np.ndarray:
        cells = len(edges) - 1
        rows = self.table.run(
            f"SELECT cell, count(*) FROM (SELECT {cell_expr('v', list(edges))} - 1 AS cell "
            f"FROM (SELECT {self.number} AS v FROM {self.readings}) AS n "
            f"WHERE v IS NOT NULL) AS c GROUP BY cell"
        )
        counts = np.zeros(cells)
        for cell, n in rows:
            cell = int(cell)
            if clip:
                cell = min(max(cell, 0), cells - 1)
            elif not 0 <= cell < cells:
                continue
            counts[cell] += n
        return counts

    def bounds(self) -> tuple[float, float] | None:
        low, high = self.table.run(
            f"SELECT min({self.number}), max({self.number}) FROM {self.readings}"
        )[0]
        return None if low is None else (float(low), float(high))


@dataclass(eq=False)
class SqlTable:
    """A raw table in a SQL engine, read through aggregates (a
    :class:`~privsyn_core.measuring.counters.reading.RawTable`). ``source`` names a relation
    whose columns are ``columns`` with SQL types ``types``; ``csv`` says its text came from a
    CSV file (pandas' missing spellings apply). ``run`` executes a query and returns its rows;
    ``define`` creates a view (name, query); ``store`` keeps a query's result where the engine
    keeps tables (DuckDB: on disk), or defines a view."""

    source: str
    columns: tuple[str, ...]
    types: tuple[str, ...]
    csv: bool
    dialect: Dialect
    run: Run
    define: Callable[[str, str], None]
    store: Callable[[str, str], None]
    coded_counter: Callable[[SqlTable, dict[str, int]], Counter] | None = None
    encoded_counter: Callable[[str, Domain], Counter] | None = None
    _classes: dict[str, np.ndarray] = field(default_factory=dict, repr=False)

    def texts(self, names: Sequence[str]) -> str:
        """A subquery: the canonical text ``t{i}`` of each column of ``names`` (``i`` its
        position in the table). Queries name only the columns they read: planning the
        reading of every column costs time on wide tables."""
        texts = ", ".join(
            f"{canonical_expr(quoted(c, self.dialect), self.types[i], self.dialect, csv=self.csv)}"
            f" AS t{i}"
            for i, c in ((self.columns.index(n), n) for n in names)
        )
        return f"(SELECT {texts} FROM {self.source}) AS texts"

    def readings(self, names: Sequence[str]) -> str:
        """A subquery: :func:`reading_query` of the columns ``names``."""
        ts = [self._t(n) for n in names]
        return f"({reading_query(self.texts(names), ts, self.dialect)}) AS readings"

    @property
    def names(self) -> tuple[str, ...]:
        return self.columns

    def _t(self, name: str) -> str:
        return f"t{self.columns.index(name)}"

    def class_counts(self, name: str) -> np.ndarray:
        if not self._classes:
            # one scan: each column's distinct values and their counts (GROUPING SETS), then
            # each distinct value classified once, its class weighted by its count
            ts = [f"t{i}" for i in range(len(self.columns))]
            grouped = (
                f"(SELECT {', '.join(ts)}, {self.dialect.grouping}({', '.join(ts)}) AS g, "
                f"count(*) AS n FROM {self.texts(self.columns)} "
                f"GROUP BY GROUPING SETS ({', '.join(f'({t})' for t in ts)})) AS grouped"
            )
            readings = reading_query(grouped, ts, self.dialect, keep=("g", "n"))
            full = (1 << len(ts)) - 1
            k = len(ValueClass)
            aggregates = ", ".join(
                f"sum(n) FILTER (WHERE g = {full & ~(1 << (len(ts) - 1 - i))} AND t{i}_class = {v})"
                for i in range(len(ts))
                for v in range(k)
            )
            row = self.run(f"SELECT {aggregates} FROM ({readings}) AS readings")[0]
            for i, c in enumerate(self.columns):
                counts = [0 if x is None else x for x in row[i * k : (i + 1) * k]]
                self._classes[c] = np.array(counts, dtype=float)
        return self._classes[name].copy()

    def value_counts(self, name: str) -> tuple[tuple[str, ...], np.ndarray]:
        t = self._t(name)
        rows = sorted(
            self.run(
                f"SELECT {t}, count(*) FROM {self.texts([name])} WHERE {t} IS NOT NULL GROUP BY {t}"
            )
        )
        return tuple(str(v) for v, _ in rows), np.array([n for _, n in rows], dtype=float)

    def distinct_counts(self, name: str) -> tuple[int, int]:
        t = self._t(name)
        distinct, present = self.run(
            f"SELECT count(DISTINCT {t}), count({t}) FROM {self.texts([name])}"
        )[0]
        return int(distinct), int(present)

    def numbers(self, codec: BinnedCodec) -> _SqlNumbers:
        t = self._t(codec.name)
        number = codec_number(codec, t)
        if codec.unparsed == "error":
            bad = self.run(
                f"SELECT min({t}) FROM {self.readings([codec.name])} "
                f"WHERE {t} IS NOT NULL AND {number} IS NULL"
            )[0][0]
            if bad is not None:
                kind, what = (
                    ("datetime", "a date") if codec.datetime else ("numeric", "a finite number")
                )
                raise TableError(
                    f"column {codec.name!r} is declared {kind} but holds {bad!r}, not "
                    f"{what}; fix the value, declare the column categorical, or leave its kind "
                    f"undeclared so values that do not fit are read as missing"
                )
        return _SqlNumbers(self, self.readings([codec.name]), number)

    def encoded(self, codecs: Sequence[ColumnCodec], dtype: np.dtype) -> Counter:
        del dtype  # codes stay in the engine
        view = f"privsyn_coded_{next(_names)}"
        ts = [self._t(c.name) for c in codecs]
        selected = ", ".join(
            f"{code_expr(c, t, self.dialect)} AS c{i}"
            for i, (c, t) in enumerate(zip(codecs, ts, strict=True))
        )
        raw = ", ".join(f"{t} AS r{i}" for i, t in enumerate(ts))
        readings = self.readings([c.name for c in codecs])
        self.define(f"{view}_checked", f"SELECT {selected}, {raw} FROM {readings}")
        # the codes alone, stored once where the engine keeps them (DuckDB: a table in a
        # temporary database file), so every count reads small integers, not the raw file
        codes = ", ".join(f"c{i}" for i in range(len(codecs)))
        self.store(view, f"SELECT {codes} FROM {view}_checked")
        refused = ", ".join(f"count(*) - count(c{i})" for i in range(len(codecs)))
        if any(self.run(f"SELECT {refused} FROM {view}")[0]):
            self._refuse(codecs, f"{view}_checked")
        domain = Domain(tuple(c.name for c in codecs), tuple(c.size for c in codecs))
        assert self.encoded_counter is not None
        return self.encoded_counter(view, domain)

    def _refuse(self, codecs: Sequence[ColumnCodec], checked: str) -> None:
        """Name the first value that a codec refuses (one more scan, on failure only)."""
        checks = ", ".join(
            f"count(*) FILTER (WHERE c{i} IS NULL AND r{i} IS NULL), "
            f"min(r{i}) FILTER (WHERE c{i} IS NULL)"
            for i in range(len(codecs))
        )
        row = self.run(f"SELECT {checks} FROM {checked}")[0]
        for i, codec in enumerate(codecs):
            missing, bad = row[2 * i], row[2 * i + 1]
            if isinstance(codec, CategoryCodec) and bad is not None:
                raise TableError(
                    f"column {codec.name!r} holds values not among its declared categories: "
                    f"{bad!r}; add them to the schema or fix the data"
                )
            if missing or bad is not None:
                raise TableError(
                    f"column {codec.name!r} has a missing value but its schema says it has "
                    f'none; set "missing": true for it or fill the values'
                )

    def coded(self, sizes: dict[str, int]) -> Counter:
        """A counter over this table read as pre-coded (every column a code of ``sizes``):
        the file or frame as it lies, or the rows a person-level run keeps of it
        (:func:`~privsyn_core.measuring.persons.bounded`, which replaces the source)."""
        assert self.coded_counter is not None
        return self.coded_counter(self, sizes)


@dataclass(frozen=True, eq=False)
class GroupingSetsCounter:
    """Counts over a coded relation (columns ``c0, c1, ...``) with ``GROUPING SETS``."""

    view: str
    domain: Domain
    run: Run
    dialect: Dialect

    def count(self, attribute_sets: Sequence[tuple[str, ...]]) -> list[MarginalTable]:
        return count_by_grouping_sets(
            self.domain,
            attribute_sets,
            lambda q: self.run(q.format(table=self.view, grouping=self.dialect.grouping)),
        )


# ---------------------------------------------------------------------------------------------
# engines


def sql_table(source: Any, engine: str, *, spark: Any = None) -> SqlTable:
    """``source`` (a file path; on Spark also a Spark DataFrame or a table name) as a
    :class:`SqlTable` of the ``engine``."""
    if engine == "duckdb":
        return duckdb_table(source)
    if engine == "spark":
        return spark_table(source, spark=spark)
    raise InputError(f"unknown SQL engine {engine!r}")


def _file_source(path: Path, folder: Path) -> str:
    """DuckDB's reader of the file ``path`` (a pattern-free link to it, if needed, made in
    ``folder``); a CSV file by the delimiter its header line shows, as the in-memory reader."""
    if is_parquet(path):
        return duckdb_reader(path, folder)
    return duckdb_reader(path, folder, file_delimiter(path))


def duckdb_table(path: str | Path) -> SqlTable:
    """A CSV or Parquet file counted by DuckDB out of core (its memory capped)."""
    import duckdb

    from privsyn_core.measuring.counters.duckdb_counter import (
        MEMORY_LIMIT,
        DuckDBCounter,
        coded_columns,
    )

    if not isinstance(path, str | Path):
        raise InputError(
            f"the duckdb engine reads a CSV or Parquet file: give its path, not a "
            f"{type(path).__name__} (or use engine='numpy')"
        )
    file = Path(path)
    if not file.is_file():
        raise InputError(f"cannot read {path}: no such file")
    # a temporary folder holds the coded table's database file (codes only, spilled out of
    # memory) and, where the file's name holds a pattern, a link to it
    folder = tempfile.TemporaryDirectory(prefix="privsyn-duckdb-")
    relation = _file_source(file, Path(folder.name))
    connection = duckdb.connect(
        str(Path(folder.name) / "coded.duckdb"), config={"memory_limit": MEMORY_LIMIT}
    )
    connection.execute("SET enable_progress_bar = false")

    def run(query: str) -> list[tuple]:
        return connection.execute(query).fetchall()

    def define(name: str, query: str) -> None:
        connection.execute(f"CREATE OR REPLACE TEMP VIEW {name} AS {query}")

    def store(name: str, query: str) -> None:
        connection.execute(f"CREATE OR REPLACE TABLE {name} AS {query}")

    try:
        described = run(f"DESCRIBE SELECT * FROM {relation}")
    except duckdb.Error as exc:
        raise InputError(f"{path} is not a readable table ({exc})") from None
    columns = tuple(str(r[0]) for r in described)
    types = tuple(str(r[1]) for r in described)

    def coded(table: SqlTable, sizes: dict[str, int]) -> Counter:
        if table.source == relation:  # the file as it lies, by a reader of its own
            return DuckDBCounter.for_file(file, sizes)
        # rows this database keeps (at most K per person): checked and counted here
        domain = declared_domain(table.columns, sizes)
        view = f"privsyn_codes_{next(_names)}"
        define(view, f"SELECT {coded_columns(domain.attributes)} FROM {table.source}")
        check_codes(domain, lambda query: run(query.format(table=view))[0])
        return GroupingSetsCounter(view, domain, run, DUCKDB)

    def encoded(view: str, domain: Domain) -> Counter:
        return GroupingSetsCounter(view, domain, run, DUCKDB)

    csv = not is_parquet(file)
    table = SqlTable(relation, columns, types, csv, DUCKDB, run, define, store, coded, encoded)
    # the database file goes when the table does
    weakref.finalize(table, _close, connection, folder)
    return table


def _close(connection: Any, folder: tempfile.TemporaryDirectory) -> None:
    connection.close()
    folder.cleanup()


def spark_table(source: Any, *, spark: Any = None, master: str | None = None) -> SqlTable:
    """A Spark DataFrame, a catalogue table or a CSV or Parquet path, on Spark."""
    from privsyn_core.measuring.counters.spark_counter import SparkCounter, spark_frame

    frame, csv = spark_frame(source, spark=spark, master=master)
    session = frame.sparkSession
    view = f"privsyn_source_{next(_names)}"
    frame.createOrReplaceTempView(view)

    def run(query: str) -> list[tuple]:
        return [tuple(r) for r in session.sql(query).collect()]

    def define(name: str, query: str) -> None:
        session.sql(f"CREATE OR REPLACE TEMP VIEW {name} AS {query}")

    columns = tuple(frame.columns)
    types = tuple(t.upper() for _, t in frame.dtypes)

    def coded(table: SqlTable, sizes: dict[str, int]) -> Counter:
        # the frame itself, or the rows a person-level run keeps of it (a cached table)
        return SparkCounter.for_source(session.table(table.source), sizes, spark=session)

    def encoded(coded_view: str, domain: Domain) -> Counter:
        names = ", ".join(f"c{i} AS {quoted(a, SPARK)}" for i, a in enumerate(domain.attributes))
        return SparkCounter(session.sql(f"SELECT {names} FROM {coded_view}"), domain)

    def store(name: str, query: str) -> None:
        # cached where Spark keeps data (executors' memory, spilling to their disks), so each
        # count reads codes instead of reading and encoding the source again
        session.sql(f"CACHE TABLE {name} AS {query}")

    return SqlTable(view, columns, types, csv, SPARK, run, define, store, coded, encoded)
