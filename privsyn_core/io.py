"""Reading tables from files: CSV (delimiter and encoding detected or given) and Parquet.

Every failure says what is wrong with the file and what to try, as an :class:`InputError`.
The UCI Adult files as distributed (no header, ", " between values, "?" for missing) read
with ``header=False``, ``names=[...]`` and ``na_values=["?"]``.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path

import pandas as pd
from charset_normalizer import from_bytes

from privsyn_core.errors import InputError

_SAMPLE_BYTES = 64 * 1024
_DELIMITERS = ",;\t|"


def detect_encoding(sample: bytes) -> str:
    """The text encoding of ``sample``: UTF-8 if it decodes, else Windows-1252 (the usual
    encoding of spreadsheets saved in Western Europe and the Americas) if it decodes, else
    charset-normalizer's guess. Pass the encoding when the guess is wrong."""
    if b"\x00" in sample:
        raise InputError(
            "the file does not look like text (it contains NUL bytes); give a CSV or a Parquet file"
        )
    try:
        sample.decode("utf-8")
        return "utf-8-sig" if sample.startswith(b"\xef\xbb\xbf") else "utf-8"
    except UnicodeDecodeError as exc:
        if exc.start >= len(sample) - 3:  # a multi-byte character cut by the sample's end
            return "utf-8"
    try:
        sample.decode("cp1252")
        return "cp1252"
    except UnicodeDecodeError:
        pass
    best = from_bytes(sample).best()
    if best is None:
        raise InputError(
            "cannot tell the file's text encoding; save it as UTF-8 or pass the encoding"
        )
    return best.encoding


def detect_delimiter(text: str) -> str:
    """The delimiter of a CSV sample (comma when the sample has a single column)."""
    lines = [line for line in text.splitlines() if line.strip()][:50]
    if not lines:
        return ","
    try:
        return csv.Sniffer().sniff("\n".join(lines), delimiters=_DELIMITERS).delimiter
    except csv.Error:
        return ","


def read_table(
    path: str | Path,
    *,
    delimiter: str | None = None,
    encoding: str | None = None,
    header: bool = True,
    names: Sequence[str] | None = None,
    na_values: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Read a CSV or Parquet file (by extension) into a DataFrame."""
    file = Path(path)
    if file.is_dir():
        raise InputError(f"cannot read {path}: it is a folder, not a table file")
    if not file.is_file():
        raise InputError(f"cannot read {path}: no such file")
    if file.stat().st_size == 0:
        raise InputError(f"{path} is empty: give a table with a header row and data")
    if file.suffix.lower() in (".parquet", ".pq"):
        return _read_parquet(file, names)
    sample = file.open("rb").read(_SAMPLE_BYTES)
    encoding = encoding or detect_encoding(sample)
    try:
        text = sample.decode(encoding, errors="ignore")
    except LookupError:
        raise InputError(f"unknown text encoding {encoding!r}") from None
    delimiter = delimiter or detect_delimiter(text)
    try:
        table = pd.read_csv(
            file,
            sep=delimiter,
            encoding=encoding,
            header=0 if header else None,
            names=list(names) if names is not None else None,
            na_values=list(na_values) if na_values else None,
            skipinitialspace=True,
        )
    except UnicodeDecodeError:
        raise InputError(
            f"{path} is not readable as {encoding}; pass its encoding (for example latin-1)"
        ) from None
    except pd.errors.EmptyDataError:
        raise InputError(f"{path} has no data: give a table with a header row and rows") from None
    except pd.errors.ParserError as exc:
        raise InputError(f"{path} is not a well-formed table ({exc})") from None
    if names is None and not header:
        table.columns = [f"column_{i + 1}" for i in range(table.shape[1])]
    if table.shape[0] == 0:
        raise InputError(f"{path} has a header but no rows: there is nothing to synthesise from")
    unnamed = [c for c in table.columns if str(c).startswith("Unnamed: ")]
    if unnamed and header:
        raise InputError(
            f"{path}: column {table.columns.get_loc(unnamed[0]) + 1} has no name in the header; "
            f"name every column (or read the file without a header and give the names)"
        )
    return table


def _read_parquet(file: Path, names: Sequence[str] | None) -> pd.DataFrame:
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
