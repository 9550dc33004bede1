"""A table on disk: a CSV or Parquet file on the server, too big to upload, read by DuckDB.

The Data page takes a path, checks it is a readable file, and shows only what describes the
file without its contents: the column names (read from the Parquet metadata or the CSV header)
and the file's size. No rows, and no row count: those are private. A run on it counts the file
where it lies, out of core, on DuckDB: a raw file is encoded in SQL with the session's schema,
a pre-coded one is counted as it is. The file is never loaded into pandas.

``PRIVSYN_DISK_ROOT`` limits the paths the page accepts to one folder (a server shared with
people who should not read every file the server's user can).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from privsyn_core.data.io import file_columns
from privsyn_core.errors import InputError

SUFFIXES = {".csv": "CSV", ".txt": "CSV", ".parquet": "Parquet", ".pq": "Parquet"}
ROOT_VARIABLE = "PRIVSYN_DISK_ROOT"


@dataclass(frozen=True)
class DiskTable:
    """A table file on the server: where it is, its size and its column names, nothing else."""

    path: Path
    size: int
    columns: tuple[str, ...]

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def kind(self) -> str:
        return SUFFIXES[self.path.suffix.lower()]


def human_size(size: int) -> str:
    value = float(size)
    for unit in ("bytes", "KB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{size:,} bytes" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1000
    raise AssertionError("unreachable")


def allowed_root() -> Path | None:
    text = os.environ.get(ROOT_VARIABLE, "").strip()
    return Path(text).expanduser().resolve() if text else None


def checked_path(text: str) -> Path:
    """The file ``text`` names, or an InputError saying plainly what is wrong with it."""
    text = text.strip().strip('"').strip("'")
    if not text:
        raise InputError("type the path of a CSV or Parquet file on this server")
    path = Path(text).expanduser()
    if not path.is_absolute():
        raise InputError(f"{text!r} is not a full path: start it with / (or ~ for your home)")
    path = path.resolve()
    root = allowed_root()
    if root is not None and not path.is_relative_to(root):
        raise InputError(
            f"{path} is outside {root}, the only folder this server reads tables from "
            f"({ROOT_VARIABLE})"
        )
    if not path.exists():
        raise InputError(f"there is no file at {path}")
    if path.is_dir():
        raise InputError(f"{path} is a folder: give the path of one CSV or Parquet file in it")
    if not path.is_file():
        raise InputError(f"{path} is not a regular file")
    if not os.access(path, os.R_OK):
        raise InputError(f"{path} cannot be read by the user the dashboard runs as")
    if path.suffix.lower() not in SUFFIXES:
        raise InputError(f"{path.name} is not a CSV (.csv, .txt) or Parquet (.parquet, .pq) file")
    return path


def describe(text: str) -> DiskTable:
    """Check ``text`` names a readable table file and read its column names (the Parquet
    footer, or the CSV header), never its rows (``privsyn_core.data.io.file_columns``)."""
    path = checked_path(text)
    try:
        described = file_columns(path)
    except InputError as exc:
        raise InputError(str(exc).split("\n")[0]) from None
    return DiskTable(path, described.size_bytes, described.columns)


def domain_codes(text: bytes, columns: tuple[str, ...]) -> dict[str, int | None]:
    """Numbers of codes per column from a domain file (JSON: column -> number of codes), for
    the file's columns; columns it leaves out stay open."""
    import json

    try:
        declared = json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"not JSON ({exc})") from None
    if not isinstance(declared, dict):
        raise InputError('expected an object such as {"age": 85, "sex": 2}')
    unknown = [name for name in declared if name not in columns]
    if unknown:
        raise InputError(f"it declares column {unknown[0]!r}, which the file does not have")
    codes: dict[str, int | None] = {}
    for name in columns:
        value = declared.get(name)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
            raise InputError(
                f"column {name!r} needs a number of codes (a whole number), got {value!r}"
            )
        if value is not None and value < 1:
            raise InputError(f"column {name!r} needs at least 1 code, got {value}")
        codes[name] = value
    return codes
