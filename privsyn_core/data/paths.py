"""File paths as each engine must spell them to read exactly one file, never a pattern.

Both engines' file readers take a path as a glob pattern, so a file named ``g*.csv`` was read
together with ``g1.csv`` and ``g2.csv`` beside it while the privacy budget was charged to
``g*.csv`` alone. :func:`duckdb_path` and :func:`spark_path` give each engine a name that reads
exactly the file named; :func:`is_parquet` is the one rule for which files are Parquet.
"""

from __future__ import annotations

import os
from pathlib import Path

from privsyn_core.errors import InputError

#: file name endings read and written as Parquet; anything else is CSV
PARQUET_SUFFIXES = (".parquet", ".pq")
#: the characters that make DuckDB's file readers take a path as a glob pattern (``**``
#: crosses folders; ``{a,b}`` is literal in DuckDB 2.0)
DUCKDB_PATTERN = "*?["
#: the characters Hadoop's FileSystem (Spark's file reader) takes as a pattern or an escape
HADOOP_PATTERN = "\\*?[]{},"


def duckdb_path(path: str | Path, folder: Path) -> str:
    """The name by which DuckDB reads exactly the file ``path``, never a pattern: its absolute
    path, or, when that holds a pattern character (:data:`DUCKDB_PATTERN`), a link to it in
    ``folder``, a private folder of the caller's, one file to a folder, kept until the last read
    (DuckDB reads the file again at each query of a view over it).

    Why a link and not an escape: DuckDB takes a character in brackets literally (``[*]``), but
    in a path it globs a backslash separates folders, so ``g\\*.csv`` would be read as the files
    of a folder ``g``, and no spelling makes that name literal. Absolute, because DuckDB reads a
    leading ``~`` as the home folder and looks a relative name up in ``file_search_path``. Not
    resolved: a link is read as itself (a table on disk hands in a link to the file it opened,
    ``/proc/self/fd/N``, which resolving would turn back into the name it was opened by)."""
    file = Path(os.path.abspath(path))
    if not _holds(str(file), DUCKDB_PATTERN):
        return str(file)
    suffixes = "".join(s for s in file.suffixes if s[1:].isalnum())
    link = Path(folder).resolve() / f"table{suffixes}"
    if _holds(str(link), DUCKDB_PATTERN):
        raise InputError(
            f"the temporary folder {folder} has one of {DUCKDB_PATTERN} in its path, which "
            "DuckDB reads as a pattern: set TMPDIR to a folder without them"
        )
    if not link.is_symlink():
        link.symlink_to(file)
    return str(link)


def duckdb_reader(path: str | Path, folder: Path, delimiter: str | None = None) -> str:
    """DuckDB's table function reading exactly the CSV or Parquet file ``path`` (by
    :func:`duckdb_path`, ``folder`` as there), with the file's own columns only: no Hive
    partition column made from a folder name such as ``year=2020/``, which the in-memory reader
    never adds. CSV is read as text with its header line; with ``delimiter`` by it, with ``"``
    quoting, else as DuckDB's sniffer finds it."""
    name = "'" + duckdb_path(path, folder).replace("'", "''") + "'"
    if is_parquet(path):
        return f"read_parquet({name}, hive_partitioning = false)"
    options = "hive_partitioning = false, header = true, all_varchar = true"
    if delimiter is not None:
        options += ", delim = '" + delimiter.replace("'", "''") + "', quote = '\"', escape = '\"'"
    return f"read_csv({name}, {options})"


def spark_path(path: str | Path) -> str:
    """``path`` spelled so that Spark reads exactly that file (or that folder of Parquet
    parts), never a pattern.

    Spark reads through Hadoop's FileSystem, which globs ``*``, ``?``, ``[...]`` and ``{a,b}``
    and takes a backslash as an escape (``a\\b.csv`` read ``ab.csv``). A backslash before a
    character makes it literal on every file system Hadoop reaches, so each of
    :data:`HADOOP_PATTERN` is escaped; a link, as for DuckDB, would lie on the driver, where a
    cluster's executors do not read. Only punctuation is escaped: Hadoop hands the pattern to
    Java's regular expressions, where a backslash before a letter means something else."""
    return "".join("\\" + ch if ch in HADOOP_PATTERN else ch for ch in str(path))


def is_parquet(path: str | Path) -> bool:
    """Whether ``path`` names a Parquet file (by its suffix; anything else is read and
    written as CSV)."""
    return Path(path).suffix.lower() in PARQUET_SUFFIXES


def _holds(text: str, characters: str) -> bool:
    return any(ch in text for ch in characters)
