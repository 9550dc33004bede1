"""A table on disk: a CSV or Parquet file on the server, too big to upload, read by DuckDB.

The Data page takes a path, checks it is a readable file, and shows only what describes the
file without its contents: the column names (read from the Parquet metadata or the CSV header)
and the file's size. No rows, and no row count: those are private. A run on it counts the file
where it lies, out of core, on DuckDB: a raw file is encoded in SQL with the session's schema,
a pre-coded one is counted as it is. The file is never loaded into pandas.

``PRIVSYN_DISK_ROOT`` limits the paths the page accepts to one folder (a server shared with
people who should not read every file the server's user can). The check when the path is typed
(:func:`checked_path`) gives early feedback; what protects is the check of the file a run
actually reads: :class:`DiskRun` opens it once, in the run's thread, checks the open file
(:class:`privsyn_core.data.opened.OpenedTable`: a regular file with one name, inside the root)
and has both the registry fingerprint and DuckDB's counting read that one opening. A name
swapped for a link after the check, a hard link to a file elsewhere, or a named pipe is refused
before anything is measured.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from privsyn_core.data.inputs import MAX_DECLARATION_BYTES, parse_declaration, readable_file
from privsyn_core.data.io import file_columns
from privsyn_core.data.opened import OpenedTable
from privsyn_core.errors import InputError
from privsyn_core.privacy.ledger import FailedAfterSpending

if TYPE_CHECKING:
    from privsyn_core.generation.synthesis import SynthesisResult

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
    readable_file(path)  # a pipe, a device or a file this user may not read: the CLI's words
    if path.suffix.lower() not in SUFFIXES:
        raise InputError(f"{path.name} is not a CSV (.csv, .txt) or Parquet (.parquet, .pq) file")
    return path


def opened(path: Path) -> OpenedTable:
    """``path`` opened once and checked as opened, against this server's root (see
    :class:`~privsyn_core.data.opened.OpenedTable`); close it after use."""
    return OpenedTable.open(path, allowed_root())


def describe(text: str) -> DiskTable:
    """Check ``text`` names a readable table file and read its column names (the Parquet
    footer, or the CSV header), never its rows (``privsyn_core.data.io.file_columns``),
    through the file as opened and checked, not through its name again."""
    path = checked_path(text)
    with opened(path) as table:
        try:
            described = file_columns(table.path_for_reading)
        except InputError as exc:
            raise InputError(table.named(str(exc)).split("\n")[0]) from None
    return DiskTable(path, table.size, described.columns)


@dataclass(eq=False)
class DiskRun:
    """One run's reading of a table on disk, shared by the run's two calls in the worker
    thread (``RunRequest.dataset`` then ``RunRequest.synthesize``): the file is opened on
    the first, checked as opened, fingerprinted and counted through that one opening, and
    closed when the synthesis ends (or, if the run stops before it, when this is collected).

    The file is checked again for writes (size, modification time) after the fingerprint,
    before anything is measured, and after the counts: a file changed during the run is
    not released (its spend is recorded, as for any run that failed after measuring).
    """

    path: Path
    root: Path | None
    _table: OpenedTable | None = field(default=None, init=False, repr=False)

    def table(self) -> OpenedTable:
        if self._table is None:
            self._table = OpenedTable.open(self.path, self.root)
        return self._table

    def fingerprint(self) -> str:
        """The registry's key: the hash of the bytes of the file as opened."""
        table = self.table()
        key = table.fingerprint()
        table.check_unchanged()
        return key

    def synthesize(
        self, count: Callable[..., SynthesisResult], *, on_progress: Any = None
    ) -> SynthesisResult:
        """``count(path, on_progress=...)`` (the engine call with all but the table bound)
        on a path that reads the opened file; messages name the file, not that path."""
        try:
            table = self.table()
            try:
                result = count(table.path_for_reading, on_progress=on_progress)
            except InputError as exc:
                exc.args = (table.named(str(exc)),)
                raise
            try:
                table.check_unchanged()
            except InputError as exc:
                raise FailedAfterSpending(str(exc), result.ledger) from None
            return result
        finally:
            self.close()

    def close(self) -> None:
        if self._table is not None:
            self._table.close()


def domain_codes(text: bytes, columns: tuple[str, ...]) -> dict[str, int | None]:
    """Numbers of codes per column from a domain file (JSON: column -> number of codes), for
    the file's columns; columns it leaves out stay open."""
    from privsyn_core.data.table import check_domain_spec

    if len(text) > MAX_DECLARATION_BYTES:
        raise InputError(
            f"it is {len(text) / 2**20:.0f} MB, more than the "
            f"{MAX_DECLARATION_BYTES // 2**20} MB a domain file may be"
        )
    declared = parse_declaration(text, "the domain file")
    if not isinstance(declared, dict):
        raise InputError('expected an object such as {"age": 85, "sex": 2}')
    unknown = [name for name in declared if name not in columns]
    if unknown:
        raise InputError(f"it declares column {unknown[0]!r}, which the file does not have")
    codes: dict[str, int | None] = {}
    for name in columns:
        value = declared.get(name)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
            got = f"a list of {len(value):,} values" if isinstance(value, list) else repr(value)
            raise InputError(
                f"column {name!r} needs a number of codes (a whole number), got {got}: a "
                "pre-coded table's domain gives each column its number of codes"
            )
        if value is not None and value < 1:
            raise InputError(f"column {name!r} needs at least 1 code, got {value}")
        codes[name] = value
    check_domain_spec({name: n for name, n in codes.items() if n is not None})
    return codes
