"""Reading tables from files: CSV (every value as text) and Parquet.

Nothing here decides how to read the data by looking at its records, since one record could
then change how the whole table is read and so the released structure (:mod:`privsyn_core.
values` says why). So:

* **Values stay text.** A CSV cell is read as the text it holds; pandas' dtype inference,
  which one ``unknown`` or one blank changes for the whole column, is off. Blank cells, the
  spellings pandas treats as missing (``NA``, ``N/A``, ``null``, ``NaN``, ...) and the
  ``na_values`` given are missing: a fixed rule applied to each cell on its own.
* **The delimiter comes from the header**, which holds the column names (public: they are in
  the output): the candidate among ``, ; tab |`` that occurs most often in it, comma when none
  does. A file without a header is read with commas unless the delimiter is given.
* **The encoding is decided per value.** A byte-order mark says UTF-8 or UTF-16 for the whole
  file (it precedes the header, no record sets it). Otherwise each value is read as UTF-8,
  and a value that is not valid UTF-8 is read as Windows-1252 (the usual encoding of
  spreadsheets saved in Western Europe and the Americas), so one record's bytes never change
  how another record reads. Pass the encoding to read the whole file one way.

Every failure says what is wrong with the file and what to try, as an :class:`InputError`.
Before a row is parsed, a file is refused if it is wider than PrivSyn can synthesise or
would not fit in memory (:mod:`privsyn_core.generation.memory`), from its header or Parquet footer
and
its size, and if it holds NUL bytes or two columns of one name.
The UCI Adult files as distributed (no header, ", " between values, "?" for missing) read
with ``header=False``, ``names=[...]`` and ``na_values=["?"]``.
"""

from __future__ import annotations

import codecs
import csv
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from privsyn_core.data.inputs import readable_file
from privsyn_core.data.paths import duckdb_path, duckdb_reader, is_parquet
from privsyn_core.data.values import parse_numbers
from privsyn_core.errors import InputError
from privsyn_core.generation.memory import check_load_fits, check_width

_HEADER_BYTES = 64 * 1024
_DELIMITERS = ",;\t|"
_FALLBACK = "cp1252"
_SURROGATES = re.compile("[\udc80-\udcff]")
_BOMS = (
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


def header_delimiter(header: str) -> str:
    """The delimiter of a CSV file from its header line alone: the candidate that occurs most
    often outside quotes (comma on a tie or when none occurs)."""
    counts = dict.fromkeys(_DELIMITERS, 0)
    quoted = False
    for char in header:
        if char == '"':
            quoted = not quoted
        elif not quoted and char in counts:
            counts[char] += 1
    best = max(_DELIMITERS, key=lambda d: counts[d])  # max keeps the first on a tie: comma
    return best if counts[best] else ","


def file_delimiter(path: Path) -> str:
    """The delimiter of the CSV file at ``path``, from its header line
    (:func:`header_delimiter`), as every reader of the file takes it: pandas here, DuckDB and
    Spark where they count it (:mod:`privsyn_core.measuring.counters`)."""
    with path.open("rb") as handle:
        head = handle.read(_HEADER_BYTES)
    return header_delimiter(_first_line(head, _bom_encoding(head) or "utf-8", path))


def _bom_encoding(head: bytes) -> str | None:
    for bom, encoding in _BOMS:
        if head.startswith(bom):
            return encoding
    return None


def _first_line(head: bytes, encoding: str, path: Path) -> str:
    """The header line in ``head`` (the first :data:`_HEADER_BYTES` of ``path``). A header
    that goes on past them is refused, naming its size: every engine reads the header from
    these bytes (the delimiter, the names DuckDB is checked against), so it must end in them."""
    text = head.decode(encoding, errors="replace")
    in_quotes = False
    for i, char in enumerate(text):  # the header may hold a quoted line break
        if char == '"':
            in_quotes = not in_quotes
        elif char in "\r\n" and not in_quotes:
            return text[:i]
    if len(head) >= _HEADER_BYTES and path.stat().st_size > len(head):
        raise InputError(
            f"{path}: its header line is longer than {_HEADER_BYTES // 1024} KB (no line end in "
            f"its first {_HEADER_BYTES:,} bytes); shorten its column names, or check that the "
            "file has a header line"
        )
    return text


def _fix_undecodable(text: object) -> object:
    """A value read as UTF-8 with its bad bytes kept as surrogates, read again as cp1252 when
    it holds any (one value at a time)."""
    if isinstance(text, str) and any("\udc80" <= ch <= "\udcff" for ch in text):
        raw = text.encode("utf-8", errors="surrogateescape")
        return raw.decode(_FALLBACK, errors="replace")
    return text


def _decodes(file: Path, encoding: str) -> bool:
    """Whether the whole file is valid ``encoding``: then no value kept a bad byte and there
    is nothing to read again as cp1252. One pass of the codec over the bytes, where scanning
    every text column for kept bytes costs a tenth of a second on Adult's 49,000 rows."""
    decoder = codecs.getincrementaldecoder(encoding)()
    try:
        with file.open("rb") as handle:
            while chunk := handle.read(1 << 24):
                decoder.decode(chunk)
            decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        return False
    return True


def _has_undecodable(column: pd.Series) -> bool:
    """Whether any value of a text column kept bad bytes (one scan of the joined text)."""
    values = column.dropna()
    if values.empty or not isinstance(values.iloc[0], str):
        return False
    return _SURROGATES.search("\n".join(map(str, values.tolist()))) is not None


def _duplicate(names: Sequence[object]) -> object | None:
    """The first name that occurs twice, or None."""
    seen: set[object] = set()
    for name in names:
        if name in seen:
            return name
        seen.add(name)
    return None


def _refuse_duplicates(names: Sequence[object], where: str) -> None:
    """Refuse two columns of one name: pandas would rename the second (``a.1``) or pyarrow
    refuse it deep in a read, and the synthetic table's layout would not be the input's."""
    twice = _duplicate(names)
    if twice is not None:
        raise InputError(f"{where} has two columns named {twice!r}; give every column its own name")


def _check_written_names(names: Sequence[str], where: str) -> None:
    """The column names as the file writes them: each named, each once, not too many."""
    check_width(len(names))
    _refuse_duplicates(names, where)
    for position, name in enumerate(names, start=1):
        if not str(name).strip():
            raise InputError(
                f"{where}: column {position} has no name in the header; name every column"
            )


def _refuse_nul_bytes(file: Path) -> None:
    """Refuse a file with a NUL byte anywhere (the header check sees only its first 64 KB):
    text tables hold none, and pandas would cut or keep such a value silently. One pass of
    fast byte search, cheap beside the parse that follows."""
    with file.open("rb") as handle:
        offset = 0
        while chunk := handle.read(1 << 24):
            at = chunk.find(b"\x00")
            if at >= 0:
                raise InputError(
                    f"{file} does not look like text (it contains a NUL byte at byte "
                    f"{offset + at:,}); give a CSV or a Parquet file, or its encoding if it is "
                    "UTF-16"
                )
            offset += len(chunk)


def _check_csv_fits(file: Path, head: bytes, first_line: str, delimiter: str) -> None:
    """Refuse a CSV file too wide or too big to load, before parsing it: columns from the
    first line (pandas takes seconds per thousand columns), rows estimated from the file's
    size and the first 64 KB's bytes per line. The estimate only decides a refusal (shown to
    the owner, never released)."""
    columns = len(next(csv.reader([first_line], delimiter=delimiter), [])) or 1
    check_width(columns)
    size = file.stat().st_size
    if size <= len(head):
        return  # the whole file is in the head: small
    lines = max(1, head.count(b"\n"))
    rows = int(size * lines / len(head))
    check_load_fits(str(file), rows, columns, "csv", file_bytes=size)


def read_table(
    path: str | Path,
    *,
    delimiter: str | None = None,
    encoding: str | None = None,
    header: bool = True,
    names: Sequence[str] | None = None,
    na_values: Sequence[str] | None = None,
    infer_types: bool = False,
) -> pd.DataFrame:
    """Read a CSV or Parquet file (by extension) into a DataFrame.

    CSV values come back as text (object columns, None or NaN where missing). With
    ``infer_types`` (owner-only uses such as :mod:`privsyn_core.evaluation`), columns whose
    values are all numbers become numeric; never use it on data headed for synthesis.
    """
    file = _table_file(path)
    if is_parquet(file):
        table = _read_parquet(file, names)
    else:
        table = _read_csv(file, delimiter, encoding, header, names, na_values)
    return _numbers_inferred(table) if infer_types else table


def _read_csv(
    file: Path,
    delimiter: str | None,
    encoding: str | None,
    header: bool,
    names: Sequence[str] | None,
    na_values: Sequence[str] | None,
) -> pd.DataFrame:
    with file.open("rb") as handle:
        head = handle.read(_HEADER_BYTES)
    per_value = encoding is None
    encoding = encoding or _bom_encoding(head) or "utf-8"
    try:
        codecs.lookup(encoding)
    except LookupError:
        raise InputError(
            f"unknown text encoding {encoding!r}; give a codec name such as utf-8, latin-1 or "
            "cp1252"
        ) from None
    if b"\x00" in head and not encoding.startswith("utf-16"):
        raise InputError(
            f"{file} does not look like text (it contains NUL bytes); give a CSV or a Parquet "
            "file, or its encoding if it is UTF-16 without a byte-order mark"
        )
    if delimiter is None:
        delimiter = header_delimiter(_first_line(head, encoding, file)) if header else ","
    if not encoding.startswith("utf-16"):
        _refuse_nul_bytes(file)
    _check_csv_fits(file, head, _first_line(head, encoding, file), delimiter)
    if names is not None:
        _refuse_duplicates(names, "--names")
    try:
        table = pd.read_csv(
            file,
            sep=delimiter,
            encoding=encoding,
            encoding_errors="surrogateescape" if per_value else "strict",
            dtype=object,
            header=0 if header else None,
            names=list(names) if names is not None else None,
            na_values=list(na_values) if na_values else None,
            skipinitialspace=True,
        )
    except UnicodeError:
        raise InputError(
            f"{file} is not readable as {encoding}; pass its encoding (for example latin-1)"
        ) from None
    except pd.errors.EmptyDataError:
        raise InputError(f"{file} has no data: give a table with a header row and rows") from None
    except pd.errors.ParserError as exc:
        raise InputError(
            f"{file} is not a well-formed table ({_parser_problem(exc)}); give every "
            "row as many values as the header has names, and quote values that hold the delimiter"
        ) from None
    except csv.Error as exc:
        raise InputError(f"{file} is not a well-formed table ({exc})") from None
    if header and names is None and _maybe_renamed(table.columns):
        _refuse_duplicates(_header_names(file, delimiter, encoding, per_value), str(file))
    if per_value and not _decodes(file, encoding):
        table.columns = [_fix_undecodable(c) for c in table.columns]
        for name in table.columns:
            if _has_undecodable(table[name]):
                table[name] = table[name].map(_fix_undecodable)
    if names is None and not header:
        table.columns = [f"column_{i + 1}" for i in range(table.shape[1])]
    if table.shape[0] == 0:
        raise InputError(f"{file} has a header but no rows: there is nothing to synthesise from")
    unnamed = [c for c in table.columns if str(c).startswith("Unnamed: ")]
    if unnamed and header:
        raise InputError(
            f"{file}: column {table.columns.get_loc(unnamed[0]) + 1} has no name in the header; "
            f"name every column (or read the file without a header and give the names)"
        )
    return table


def _parser_problem(exc: Exception) -> str:
    """pandas' parser error in words a person can act on ("Error tokenizing data. C error:
    Expected 2 fields in line 3, saw 3" names no names)."""
    text = " ".join(str(exc).split())
    found = re.search(r"Expected (\d+) fields in line (\d+), saw (\d+)", text)
    if found is None:
        return text
    expected, line, saw = found.groups()
    return f"line {line} has {saw} values, but the header has {expected} names"


def _maybe_renamed(columns: pd.Index) -> bool:
    """Whether pandas may have renamed a repeated name: some ``name.k`` beside ``name``."""
    present = set(map(str, columns))
    return any(
        str(c).rpartition(".")[0] in present and str(c).rpartition(".")[2].isdigit()
        for c in columns
    )


def _header_names(file: Path, delimiter: str, encoding: str, per_value: bool) -> list[object]:
    """The header row's names as written: pandas renames a repeated name (``a``, ``a.1``), so
    the first record is parsed again, as data, by the same parser."""
    row = pd.read_csv(
        file,
        sep=delimiter,
        encoding=encoding,
        encoding_errors="surrogateescape" if per_value else "strict",
        dtype=object,
        header=None,
        nrows=1,
        skipinitialspace=True,
    )
    return [_fix_undecodable(v) for v in row.iloc[0].tolist()] if len(row) else []


def _numbers_inferred(table: pd.DataFrame) -> pd.DataFrame:
    """Columns of text whose present values all read as numbers, as numbers (whole numbers
    without blanks as int64). Reads every value: owner-only."""
    out = table.copy()
    for name in out.columns:
        column = out[name]
        if not (column.dtype == object or pd.api.types.is_string_dtype(column.dtype)):
            continue
        numbers = parse_numbers(column)
        present = column.notna().to_numpy()
        if not present.any() or np.isnan(numbers[present]).any():
            continue
        whole = bool(np.all(np.mod(numbers[present], 1) == 0))
        out[name] = numbers.astype(np.int64) if whole and present.all() else numbers
    return out


def _read_parquet(file: Path, names: Sequence[str] | None) -> pd.DataFrame:
    import pyarrow.parquet as pq

    try:  # the footer alone: row count and columns, whatever the rows expand to
        metadata = pq.ParquetFile(file).metadata
    except Exception as exc:  # pyarrow raises many types for a bad file
        raise InputError(
            f"{file} is not a readable Parquet file ({' '.join(str(exc).split())}); it may be "
            "truncated or not Parquet: write it again, or give a CSV file"
        ) from None
    _refuse_duplicates(
        names if names is not None else metadata.schema.to_arrow_schema().names,
        "--names" if names is not None else str(file),
    )
    check_width(metadata.num_columns)
    check_load_fits(str(file), metadata.num_rows, metadata.num_columns, "parquet")
    try:
        table = pd.read_parquet(file)
    except Exception as exc:  # pyarrow raises many types for a bad file
        raise InputError(f"{file} is not a readable Parquet file ({exc})") from None
    if names is not None:
        if len(names) != table.shape[1]:
            raise InputError(f"{len(names)} names given for {table.shape[1]} columns in {file}")
        table.columns = list(names)
    if table.shape[0] == 0:
        raise InputError(f"{file} has no rows: there is nothing to synthesise from")
    return table


@dataclass(frozen=True)
class FileDescription:
    """What can be said of a table file without reading its rows: its column names (public:
    they are in the output), its size on disk and its format."""

    path: Path
    columns: tuple[str, ...]
    size_bytes: int
    format: str


def _table_file(path: str | Path) -> Path:
    """``path`` as a readable, non-empty file, or an error that says what it is instead."""
    file = readable_file(path)
    if file.stat().st_size == 0:
        raise InputError(f"{path} is empty: give a table with a header row and data")
    return file


def file_columns(path: str | Path) -> FileDescription:
    """A CSV (with a header) or Parquet file's column names and size, read by DuckDB from the
    header or the Parquet metadata: no row is loaded, whatever the file's size.

    The names as written (the Parquet schema, the CSV header line) are checked first, as
    :func:`read_table` checks them: DuckDB would silently rename a repeated name (``a_1``) or
    name an unnamed column (``column1``), and a CSV whose rows hold more values than its header
    has names is read by its sniffer with a made-up header."""
    import duckdb

    file = _table_file(path)
    parquet = is_parquet(file)
    delimiter: str | None = None
    if parquet:
        written = None
    else:
        with file.open("rb") as handle:
            head = handle.read(_HEADER_BYTES)
        encoding = _bom_encoding(head) or "utf-8"
        if b"\x00" in head and not encoding.startswith("utf-16"):
            raise InputError(
                f"{path} does not look like text (it contains NUL bytes); give a CSV or a "
                "Parquet file"
            )
        delimiter = header_delimiter(_first_line(head, encoding, file))
        written = next(csv.reader([_first_line(head, encoding, file)], delimiter=delimiter), [])
        _check_written_names(written, str(path))
    try:
        # the folder: where a pattern-free link to the file lies, if its name needs one
        with tempfile.TemporaryDirectory(prefix="privsyn-") as folder, duckdb.connect() as db:
            reader = duckdb_reader(file, Path(folder), delimiter)
            described = db.execute(f"DESCRIBE SELECT * FROM {reader}").fetchall()
            if parquet:
                literal = "'" + duckdb_path(file, Path(folder)).replace("'", "''") + "'"
                names = db.execute(
                    f"SELECT name FROM parquet_schema({literal}) WHERE num_children IS NULL"
                ).fetchall()
                _check_written_names([str(row[0]) for row in names], str(path))
    except duckdb.Error as exc:
        problem = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        fix = (
            ""
            if parquet
            else "; DuckDB reads CSV files in UTF-8 with lines of up to 2 MB: save it so, or "
            "as Parquet"
        )
        raise InputError(f"{path} is not a readable table ({problem}){fix}") from None
    if written is not None and len(written) != len(described):
        raise InputError(
            f"{path}: its header names {len(written)} columns but its rows hold "
            f"{len(described)} values; give every row as many values as the header has names, "
            "and quote values that hold the delimiter"
        )
    return FileDescription(
        file,
        tuple(str(row[0]) for row in described),
        file.stat().st_size,
        "parquet" if parquet else "csv",
    )
