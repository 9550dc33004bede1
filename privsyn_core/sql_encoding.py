"""Raw tables in SQL engines (DuckDB, Spark): the preparation's reads and the encoding, as SQL.

Everything the private preparation reads from a raw table (:class:`~privsyn_core.reading.
RawTable`) comes from aggregates computed where the table lies, so raw rows never come into
Python: value-class counts for the structure step, value counts for category estimates,
counts over the public grids of the range estimates. The encoding (categories, "other",
missing, bins, datetimes) is a SQL expression per column, and the coded relation it defines is
counted with ``GROUPING SETS`` (:mod:`privsyn_core.sql_counting`). The noisy steps and the
decisions are the numpy path's own functions, fed these counts.

The SQL reads each value as :mod:`privsyn_core.values` does, one value at a time:

* **canonical text**: text is stripped of the whitespace Python's ``str.strip`` removes; a
  blank is missing. A CSV cell is missing when, after its leading spaces, it is one of pandas'
  missing spellings (``NA``, ``null``, ``N/A``, ...; as :func:`~privsyn_core.io.read_table`
  reads it). Integers print as integers, booleans as ``True``/``False``, whole floats below
  2^53 as integers, dates as ISO text;
* **numbers**: the same regular expression (ASCII digits), cast to a double (both engines
  round decimal text correctly, as Python does), finite only;
* **dates**: the same regular expressions; a date is valid by arithmetic on its fields
  (months 1-12, days within the month, leap years; hours 0-23, minutes and seconds 0-59),
  which is what pandas' format parsing checks; seconds since 1970 by the civil-calendar
  formula.

Known differences from the in-memory reading, documented and tested: a *quoted* CSV cell
with leading spaces before a missing spelling (``"  NA"``) is missing here, text there;
fractional seconds of a datetime may differ in the last bit of the double; date-times with a
UTC offset are converted to UTC here, while pandas refuses a column that mixes offsets.
CSV files are read as UTF-8 (DuckDB) without pandas' per-value Windows-1252 fallback.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import count
from pathlib import Path
from typing import Any

import numpy as np

from privsyn_core.codecs import BinnedCodec, CategoryCodec, ColumnCodec
from privsyn_core.counting import Counter
from privsyn_core.domain import Domain
from privsyn_core.errors import InputError
from privsyn_core.marginals import MarginalTable
from privsyn_core.sql_counting import count_by_grouping_sets
from privsyn_core.table import TableError
from privsyn_core.values import (
    _ISO_DATE,
    _SLASH,
    _YMD_SLASH,
    NUMBER,
    ValueClass,
    categories_as_text,
    day_first_format,
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
        stripped = f"NULLIF({dialect.trim(column, WHITESPACE)}, '')"
        if not csv:
            return stripped
        spellings = ", ".join(dialect.string(s) for s in CSV_MISSING)
        spelled = f"{dialect.ltrim_spaces(column)} IN ({spellings})"
        return f"CASE WHEN {spelled} THEN NULL ELSE {stripped} END"
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
    return f"NULLIF({dialect.trim(f'CAST({column} AS {text})', WHITESPACE)}, '')"


def number_expr(t: str, dialect: Dialect) -> str:
    """A plain decimal number as a finite double; NULL otherwise (``parse_numbers``)."""
    value = f"TRY_CAST({t} AS DOUBLE)"
    return (
        f"CASE WHEN {dialect.full_match(t, NUMBER)} AND abs({value}) <= {double_max()} "
        f"THEN {value} END"
    )


def double_max() -> str:
    return f"CAST('{_MAX_DOUBLE}' AS DOUBLE)"


def _int(expr: str) -> str:
    return f"TRY_CAST(NULLIF({expr}, '') AS BIGINT)"


def _days_in_month(y: str, m: str) -> str:
    leap = f"(({y}) % 4 = 0 AND (({y}) % 100 <> 0 OR ({y}) % 400 = 0))"
    return (
        f"CASE WHEN {m} = 2 THEN CASE WHEN {leap} THEN 29 ELSE 28 END "
        f"WHEN {m} IN (4, 6, 9, 11) THEN 30 ELSE 31 END"
    )


def _valid_date(y: str, m: str, d: str) -> str:
    return f"({y} >= 1 AND {m} BETWEEN 1 AND 12 AND {d} >= 1 AND {d} <= {_days_in_month(y, m)})"


def _days(y: str, m: str, d: str, dialect: Dialect) -> str:
    """Days since 1970-01-01 of a valid civil date (H. Hinnant's ``days_from_civil``)."""
    yy = f"({y} - CASE WHEN {m} <= 2 THEN 1 ELSE 0 END)"
    era = dialect.div(yy, 400)
    yoe = f"({yy} - {era} * 400)"
    doy = f"({dialect.div(f'153 * ({m} + CASE WHEN {m} > 2 THEN -3 ELSE 9 END) + 2', 5)} + {d} - 1)"
    doe = f"({yoe} * 365 + {dialect.div(yoe, 4)} - {dialect.div(yoe, 100)} + {doy})"
    return f"({era} * 146097 + {doe} - 719468)"


@dataclass(frozen=True)
class _DateParts:
    """A date pattern with its fields: (year, month, day) as SQL integer expressions."""

    matches: str
    y: str
    m: str
    d: str

    @property
    def valid(self) -> str:
        return f"({self.matches} AND {_valid_date(self.y, self.m, self.d)})"


def _date_parts(t: str, dialect: Dialect) -> dict[str, _DateParts]:
    def fields(pattern: str, order: tuple[int, int, int]) -> _DateParts:
        y, m, d = (_int(dialect.extract(t, pattern, g)) for g in order)
        return _DateParts(dialect.full_match(t, pattern), y, m, d)

    iso = r"([0-9]{4})-([0-9]{1,2})-([0-9]{1,2})"
    ymd = r"([0-9]{4})/([0-9]{1,2})/([0-9]{1,2})"
    slash = r"([0-9]{1,2})/([0-9]{1,2})/([0-9]{4})"
    assert _ISO_DATE.count("[0-9]") == 3 and _YMD_SLASH.count("/") == 2 and "/" in _SLASH
    return {
        "iso": fields(iso, (1, 2, 3)),
        "datetime": fields(_DATETIME_GROUPS, (1, 2, 3)),
        "ymd": fields(ymd, (1, 2, 3)),
        "dmy": fields(slash, (3, 2, 1)),
        "mdy": fields(slash, (3, 1, 2)),
    }


#: the ISO date-time pattern with its fields in groups: date, hour, minute, second, fraction,
#: zone ("Z", or sign, hours and minutes)
_DATETIME_GROUPS = (
    r"([0-9]{4})-([0-9]{1,2})-([0-9]{1,2})[T ]([0-9]{1,2}):([0-9]{2})"
    r"(?::([0-9]{2})(?:\.([0-9]+))?)?(Z|([+-])([0-9]{2}):?([0-9]{2}))?"
)


def _time_valid(t: str, dialect: Dialect) -> str:
    hour, minute, second = (_int(dialect.extract(t, _DATETIME_GROUPS, g)) for g in (4, 5, 6))
    return f"({hour} <= 23 AND {minute} <= 59 AND COALESCE({second}, 0) <= 59)"


def class_expr(t: str, dialect: Dialect) -> str:
    """The :class:`~privsyn_core.values.ValueClass` of canonical text ``t`` (``classify``)."""
    value = f"TRY_CAST({t} AS DOUBLE)"
    parts = _date_parts(t, dialect)
    dt = parts["datetime"]
    dmy, mdy = parts["dmy"].valid, parts["mdy"].valid
    c = ValueClass
    return (
        f"CASE WHEN {t} IS NULL THEN {c.MISSING.value} "
        f"WHEN {dialect.full_match(t, NUMBER)} AND abs({value}) <= {double_max()} "
        f"THEN CASE WHEN {value} % 1 = 0 THEN {c.INTEGER.value} ELSE {c.DECIMAL.value} END "
        f"WHEN {parts['iso'].valid} THEN {c.DATE_ISO.value} "
        f"WHEN {dt.valid} AND {_time_valid(t, dialect)} THEN {c.DATETIME_ISO.value} "
        f"WHEN {parts['ymd'].valid} THEN {c.DATE_YMD_SLASH.value} "
        f"WHEN {dmy} AND {mdy} THEN {c.DATE_SLASH_AMBIGUOUS.value} "
        f"WHEN {dmy} THEN {c.DATE_DMY.value} "
        f"WHEN {mdy} THEN {c.DATE_MDY.value} "
        f"ELSE {c.TEXT.value} END"
    )


def seconds_expr(t: str, dialect: Dialect, *, day_first: bool) -> str:
    """Seconds since 1970 of a value in a recognised date format, NULL otherwise
    (``parse_datetimes``: the first format that reads the value wins)."""
    parts = _date_parts(t, dialect)

    def day_seconds(p: _DateParts) -> str:
        return f"CAST({_days(p.y, p.m, p.d, dialect)} AS DOUBLE) * 86400"

    dt = parts["datetime"]
    g = [_int(dialect.extract(t, _DATETIME_GROUPS, i)) for i in range(4, 7)]
    fraction = dialect.extract(t, _DATETIME_GROUPS, 7)
    sign = dialect.extract(t, _DATETIME_GROUPS, 9)
    zone_h, zone_m = (_int(dialect.extract(t, _DATETIME_GROUPS, i)) for i in (10, 11))
    offset = (
        f"CASE WHEN {sign} = '' THEN 0 ELSE (CASE WHEN {sign} = '-' THEN -1 ELSE 1 END) * "
        f"({zone_h} * 3600 + {zone_m} * 60) END"
    )
    clock = f"({g[0]} * 3600 + {g[1]} * 60 + COALESCE({g[2]}, 0) - {offset})"
    frac = f"CASE WHEN {fraction} = '' THEN 0.0 ELSE TRY_CAST('0.' || {fraction} AS DOUBLE) END"
    first, second = ("dmy", "mdy") if day_first else ("mdy", "dmy")
    return (
        f"CASE WHEN {parts['iso'].valid} THEN {day_seconds(parts['iso'])} "
        f"WHEN {dt.valid} AND {_time_valid(t, dialect)} "
        f"THEN {day_seconds(dt)} + CAST({clock} AS DOUBLE) + {frac} "
        f"WHEN {parts['ymd'].valid} THEN {day_seconds(parts['ymd'])} "
        f"WHEN {parts[first].valid} THEN {day_seconds(parts[first])} "
        f"WHEN {parts[second].valid} THEN {day_seconds(parts[second])} END"
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
    """The code of canonical text ``t`` under ``codec``; NULL where the codec refuses the
    value (a missing value it has no code for, a category it does not list)."""
    if isinstance(codec, CategoryCodec):
        keys = categories_as_text(codec.categories)
        branches = " ".join(f"WHEN {dialect.string(k)} THEN {i}" for i, k in enumerate(keys))
        other = codec.other_code if codec.other else "NULL"
        missing = codec.missing_code if codec.missing else "NULL"
        cases = f"CASE {t} {branches} ELSE {other} END" if keys else str(other)
        return f"CASE WHEN {t} IS NULL THEN {missing} ELSE {cases} END"
    number = _codec_number(codec, t, dialect)
    missing = codec.missing_code if codec.missing else "NULL"
    return (
        f"CASE WHEN {number} IS NULL THEN {missing} ELSE {cell_expr(number, codec.edges[1:-1])} END"
    )


def _codec_number(codec: BinnedCodec, t: str, dialect: Dialect) -> str:
    if codec.datetime:
        return f"({seconds_expr(t, dialect, day_first=day_first_format(codec.datetime_format))})"
    return f"({number_expr(t, dialect)})"


# ---------------------------------------------------------------------------------------------
# the table


Run = Callable[[str], list[tuple]]


@dataclass(frozen=True)
class _SqlNumbers:
    table: SqlTable
    t: str
    number: str

    def histogram(self, edges: np.ndarray, clip: bool) -> np.ndarray:
        cells = len(edges) - 1
        rows = self.table.run(
            f"SELECT cell, count(*) FROM (SELECT {cell_expr('v', list(edges))} - 1 AS cell "
            f"FROM (SELECT {self.number} AS v FROM {self.table.texts}) AS n "
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
            f"SELECT min(v), max(v) FROM (SELECT {self.number} AS v FROM {self.table.texts}) AS n"
        )[0]
        return None if low is None else (float(low), float(high))


@dataclass(eq=False)
class SqlTable:
    """A raw table in a SQL engine, read through aggregates (a
    :class:`~privsyn_core.reading.RawTable`). ``source`` names a relation whose columns are
    ``columns`` with SQL types ``types``; ``csv`` says its text came from a CSV file (pandas'
    missing spellings apply). ``run`` executes a query and returns its rows; ``define`` creates
    a view (name, query)."""

    source: str
    columns: tuple[str, ...]
    types: tuple[str, ...]
    csv: bool
    dialect: Dialect
    run: Run
    define: Callable[[str, str], None]
    coded_counter: Callable[[dict[str, int]], Counter] | None = None
    encoded_counter: Callable[[str, Domain], Counter] | None = None
    texts: str = field(init=False)
    _classes: dict[str, np.ndarray] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.texts = f"privsyn_text_{next(_names)}"
        texts = ", ".join(
            f"{canonical_expr(quoted(c, self.dialect), k, self.dialect, csv=self.csv)} AS t{i}"
            for i, (c, k) in enumerate(zip(self.columns, self.types, strict=True))
        )
        self.define(self.texts, f"SELECT {texts} FROM {self.source}")

    @property
    def names(self) -> tuple[str, ...]:
        return self.columns

    def _t(self, name: str) -> str:
        return f"t{self.columns.index(name)}"

    def class_counts(self, name: str) -> np.ndarray:
        if not self._classes:  # every column's classes in one scan
            k = len(ValueClass)
            aggregates = ", ".join(
                f"count(*) FILTER (WHERE k{i} = {v})"
                for i in range(len(self.columns))
                for v in range(k)
            )
            inner = ", ".join(
                f"{class_expr(f't{i}', self.dialect)} AS k{i}" for i in range(len(self.columns))
            )
            row = self.run(f"SELECT {aggregates} FROM (SELECT {inner} FROM {self.texts}) AS k")[0]
            for i, c in enumerate(self.columns):
                self._classes[c] = np.array(row[i * k : (i + 1) * k], dtype=float)
        return self._classes[name].copy()

    def value_counts(self, name: str) -> tuple[tuple[str, ...], np.ndarray]:
        t = self._t(name)
        rows = sorted(
            self.run(f"SELECT {t}, count(*) FROM {self.texts} WHERE {t} IS NOT NULL GROUP BY {t}")
        )
        return tuple(str(v) for v, _ in rows), np.array([n for _, n in rows], dtype=float)

    def numbers(self, codec: BinnedCodec) -> _SqlNumbers:
        t = self._t(codec.name)
        number = _codec_number(codec, t, self.dialect)
        if codec.unparsed == "error":
            bad = self.run(
                f"SELECT min({t}) FROM {self.texts} WHERE {t} IS NOT NULL AND {number} IS NULL"
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
        return _SqlNumbers(self, t, number)

    def encoded(self, codecs: Sequence[ColumnCodec], dtype: np.dtype) -> Counter:
        del dtype  # codes stay in the engine
        view = f"privsyn_coded_{next(_names)}"
        ts = [self._t(c.name) for c in codecs]
        selected = ", ".join(
            f"{code_expr(c, t, self.dialect)} AS c{i}"
            for i, (c, t) in enumerate(zip(codecs, ts, strict=True))
        )
        raw = ", ".join(f"{t} AS r{i}" for i, t in enumerate(ts))
        self.define(
            view,
            f"SELECT {selected}, {raw} FROM {self.texts}",
        )
        checks = ", ".join(
            f"count(*) FILTER (WHERE c{i} IS NULL AND r{i} IS NULL), "
            f"min(r{i}) FILTER (WHERE c{i} IS NULL)"
            for i in range(len(codecs))
        )
        row = self.run(f"SELECT {checks} FROM {view}")[0]
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
        domain = Domain(tuple(c.name for c in codecs), tuple(c.size for c in codecs))
        assert self.encoded_counter is not None
        return self.encoded_counter(view, domain)

    def coded(self, sizes: dict[str, int]) -> Counter:
        """A counter over a pre-coded table (every column a code of ``sizes``)."""
        assert self.coded_counter is not None
        return self.coded_counter(sizes)


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


def _csv_source(path: Path) -> str:
    from privsyn_core.io import _HEADER_BYTES, _bom_encoding, _first_line, header_delimiter

    with path.open("rb") as handle:
        head = handle.read(_HEADER_BYTES)
    delimiter = header_delimiter(_first_line(head, _bom_encoding(head) or "utf-8"))
    literal = "'" + str(path).replace("'", "''") + "'"
    delim = delimiter.replace("'", "''")
    return (
        f"read_csv({literal}, header = true, all_varchar = true, delim = '{delim}', "
        "quote = '\"', escape = '\"')"
    )


def duckdb_table(path: str | Path) -> SqlTable:
    """A CSV or Parquet file counted by DuckDB out of core (its memory capped)."""
    import duckdb

    from privsyn_core.duckdb_counter import MEMORY_LIMIT, DuckDBCounter

    if not isinstance(path, str | Path):
        raise InputError(
            f"the duckdb engine reads a CSV or Parquet file: give its path, not a "
            f"{type(path).__name__} (or use engine='numpy')"
        )
    file = Path(path)
    if not file.is_file():
        raise InputError(f"cannot read {path}: no such file")
    parquet = file.suffix.lower() in (".parquet", ".pq")
    literal = "'" + str(file).replace("'", "''") + "'"
    relation = f"read_parquet({literal})" if parquet else _csv_source(file)
    connection = duckdb.connect(config={"memory_limit": MEMORY_LIMIT})

    def run(query: str) -> list[tuple]:
        return connection.execute(query).fetchall()

    def define(name: str, query: str) -> None:
        connection.execute(f"CREATE OR REPLACE TEMP VIEW {name} AS {query}")

    try:
        described = run(f"DESCRIBE SELECT * FROM {relation}")
    except duckdb.Error as exc:
        raise InputError(f"{path} is not a readable table ({exc})") from None
    columns = tuple(str(r[0]) for r in described)
    types = tuple(str(r[1]) for r in described)

    def coded(sizes: dict[str, int]) -> Counter:
        return DuckDBCounter.for_file(file, sizes)

    def encoded(view: str, domain: Domain) -> Counter:
        return GroupingSetsCounter(view, domain, run, DUCKDB)

    table = SqlTable(relation, columns, types, not parquet, DUCKDB, run, define, coded, encoded)
    table._connection = connection  # type: ignore[attr-defined]  # kept open with the table
    return table


def spark_table(source: Any, *, spark: Any = None, master: str | None = None) -> SqlTable:
    """A Spark DataFrame, a catalogue table or a CSV or Parquet path, on Spark."""
    from privsyn_core.spark_counter import SparkCounter, spark_session

    csv = False
    if isinstance(source, str | Path):
        session = spark or spark_session(master)
        path = Path(source)
        if path.suffix.lower() in (".parquet", ".pq") or path.is_dir():
            frame = session.read.parquet(str(path))
        elif path.is_file():
            from privsyn_core.io import _HEADER_BYTES, _bom_encoding, _first_line, header_delimiter

            with path.open("rb") as handle:
                head = handle.read(_HEADER_BYTES)
            delimiter = header_delimiter(_first_line(head, _bom_encoding(head) or "utf-8"))
            frame = (
                session.read.option("header", "true")
                .option("sep", delimiter)
                .option("quote", '"')
                .option("escape", '"')
                .option("multiLine", "true")
                .csv(str(path))
            )
            csv = True
        else:
            frame = session.table(str(source))
    else:
        frame = source
    session = frame.sparkSession
    view = f"privsyn_source_{next(_names)}"
    frame.createOrReplaceTempView(view)

    def run(query: str) -> list[tuple]:
        return [tuple(r) for r in session.sql(query).collect()]

    def define(name: str, query: str) -> None:
        session.sql(f"CREATE OR REPLACE TEMP VIEW {name} AS {query}")

    columns = tuple(frame.columns)
    types = tuple(t.upper() for _, t in frame.dtypes)

    def coded(sizes: dict[str, int]) -> Counter:
        return SparkCounter.for_source(frame, sizes, spark=session)

    def encoded(coded_view: str, domain: Domain) -> Counter:
        names = ", ".join(f"c{i} AS {quoted(a, SPARK)}" for i, a in enumerate(domain.attributes))
        return SparkCounter(session.sql(f"SELECT {names} FROM {coded_view}"), domain)

    return SqlTable(view, columns, types, csv, SPARK, run, define, coded, encoded)
