"""A table file opened once, checked as it was opened, and then read only through that opening.

Why: a path checked when it is typed and opened again when a run reads it can name another
file by then. A file swapped for a symbolic link in between was read from outside the folder
the server allows; a hard link inside that folder to a file outside it passed every check on
the name. So the file is opened once (``O_NONBLOCK``, so a named pipe cannot hang the open),
the *open* file is checked (a regular file, with one name, lying inside the allowed root), and
its fingerprint (the run registry's key) and every read DuckDB makes go through that one
opening, which stays open for the whole run. What the name points at afterwards no longer
matters.

Where the open file lies: on Linux, ``/proc/self/fd/N`` names it (its link text is where the
kernel opened it), and DuckDB reads CSV and Parquet through that name: checked with duckdb
2.0.1, also after the name was swapped for a link to another file. The readers decide CSV or
Parquet from the path's suffix, so DuckDB gets a link named after the file (``table.parquet``)
in a private folder (mode 0700), pointing at ``/proc/self/fd/N``. Elsewhere (no ``/proc``), the
file is reached from the root one folder at a time without following links (``O_NOFOLLOW``
with ``dir_fd``), and copied into a private folder: the copy is what is hashed and read.

The fingerprint is :func:`file_bytes_fingerprint` of the bytes read through that opening: the
one rule the run registry also applies to a file it is given by path or as uploaded bytes, so a
file spends from one budget however it is read.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import shutil
import stat
import tempfile
import weakref
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from privsyn_core.errors import InputError

#: the file kinds the readers know, by suffix
KINDS = {".csv": "csv", ".txt": "csv", ".parquet": "parquet", ".pq": "parquet"}
#: the open files of this process, by number (Linux)
PROC_FD = Path("/proc/self/fd")
#: a read-only open that never waits: a FIFO (or a terminal) opens at once and is refused
_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_NOCTTY", 0)
    | getattr(os, "O_CLOEXEC", 0)
)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_BLOCK = 1 << 20
#: a file name DuckDB reads as it is (no glob characters, no quotes)
_PLAIN_NAME = re.compile(r"[A-Za-z0-9._ -]+")
_DELETED = " (deleted)"


@dataclass(frozen=True)
class OpenedTable:
    """A CSV or Parquet file held open: where it lies, its kind and size, and a path that
    names this open file (:attr:`path_for_reading`) for readers that take a path.

    Made by :meth:`open`; a context manager (the file closes, and the private folder goes, on
    exit or :meth:`close`, or when the object is collected).
    """

    #: the path as it was given (for messages)
    given: Path
    #: where the open file lies (no links)
    real: Path
    #: "csv" or "parquet"
    kind: str
    #: bytes, when it was opened
    size: int
    #: a path that reads the open file, named with its suffix; only valid until closed
    path_for_reading: Path
    _fd: int = field(repr=False)
    _modified: int = field(repr=False)
    #: closes the file and removes the private folder, once (at close or collection)
    _closer: weakref.finalize = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        folder = self.path_for_reading.parent
        object.__setattr__(self, "_closer", weakref.finalize(self, _release, self._fd, folder))

    @classmethod
    def open(cls, path: str | Path, root: Path | None = None, *, proc: bool = True) -> OpenedTable:
        """Open ``path`` once and check the open file: a regular file, and with ``root``, one
        whose only name lies inside ``root`` (a resolved folder). Every refusal is an
        :class:`InputError` of one line: what, where, what to do. ``proc=False`` takes the
        way used where ``/proc/self/fd`` is missing (for tests on Linux).

        With ``/proc``, links in ``path`` are followed (no ``O_NOFOLLOW``): what is checked is
        where the kernel opened the file, so a link inside the root to a file inside it is
        read as that file, and one to a file outside is refused. Without ``/proc``, the
        resolved path is walked with ``O_NOFOLLOW``, with the same outcome."""
        given = Path(path)
        named = proc and PROC_FD.is_dir()
        fd, real = _open_named(given) if named else _open_walked(given, root)
        folder: Path | None = None
        try:
            status = _checked(fd, given, real, root)
            kind = KINDS.get(real.suffix.lower())
            if kind is None:
                raise InputError(
                    f"{real.name} is not a CSV (.csv, .txt) or Parquet (.parquet, .pq) file: "
                    "give the path of one"
                )
            folder = Path(tempfile.mkdtemp(prefix="privsyn-opened-"))  # mode 0700
            name = real.name if _PLAIN_NAME.fullmatch(real.name) else f"table{real.suffix}"
            reading = folder / name
            if named:
                os.symlink(PROC_FD / str(fd), reading)
            else:
                original, fd = fd, _copied(fd, status, reading, real)
                os.close(original)
                status = os.fstat(fd)
        except BaseException:
            _release(fd, folder)
            raise
        return cls(given, real, kind, status.st_size, reading, fd, status.st_mtime_ns)

    @property
    def name(self) -> str:
        return self.real.name

    def fingerprint(self) -> str:
        """The registry's key for the open file: :func:`file_bytes_fingerprint` of its bytes,
        read through this opening (positioned reads, so no reader's offset moves)."""
        return file_bytes_fingerprint(self._blocks())

    def _blocks(self) -> Iterable[bytes]:
        offset = 0
        while block := os.pread(self._fd, _BLOCK, offset):
            yield block
            offset += len(block)

    def check_unchanged(self) -> None:
        """Refuse a file written to since it was opened (its size or modification time
        moved): its fingerprint and its counts could then be of different contents."""
        now = os.fstat(self._fd)
        if (now.st_size, now.st_mtime_ns) != (self.size, self._modified):
            raise InputError(
                f"{self.real} changed while it was being read (its size or modification time "
                "moved): run again once nothing writes to it"
            )

    def named(self, message: str) -> str:
        """``message`` from a reader, with the reading path replaced by the file's own."""
        return message.replace(str(self.path_for_reading), str(self.real))

    def close(self) -> None:
        """Close the file and remove the private folder (once; later calls do nothing)."""
        self._closer()

    def __enter__(self) -> OpenedTable:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()


def file_bytes_fingerprint(blocks: Iterable[bytes]) -> str:
    """The run registry's key for a table file (owner-only: it identifies the data): SHA-256
    of ``file:`` and then the file's bytes, given in ``blocks`` of any size.

    The one rule for a file, whether it is read by path
    (:func:`~privsyn_core.release.registry.file_fingerprint`), through an opening
    (:meth:`OpenedTable.fingerprint`) or uploaded
    (:func:`~privsyn_core.release.registry.bytes_fingerprint`), so the same file spends from
    one budget however it arrives. The prefix keeps it apart from the hash of a table's
    values (:func:`~privsyn_core.release.registry.fingerprint`).
    """
    digest = hashlib.sha256(b"file:")
    for block in blocks:
        digest.update(block)
    return digest.hexdigest()


def _release(fd: int, folder: Path | None) -> None:
    try:
        os.close(fd)
    finally:
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


def _open_named(given: Path) -> tuple[int, Path]:
    """Open ``given`` as named (links followed) and say where the kernel opened it."""
    fd = _opened(given, given, _FLAGS)
    try:
        text = os.readlink(PROC_FD / str(fd))
    except OSError:
        os.close(fd)
        raise
    if text.endswith(_DELETED):
        os.close(fd)
        raise InputError(f"{given} was removed as it was opened: put it back and run again")
    return fd, Path(text)


def _open_walked(given: Path, root: Path | None) -> tuple[int, Path]:
    """Open ``given`` without ``/proc``: with ``root``, its resolved path is walked from the
    root one folder at a time, following no link, so the file opened is the one at that path
    inside the root (a link swapped in on the way is refused, not followed)."""
    real = given.resolve()
    if root is None:
        return _opened(given, real, _FLAGS), real
    _inside(given, real, root)
    if os.open not in os.supports_dir_fd or not _NOFOLLOW:
        raise InputError(
            f"this system cannot open {given} without following links, so it cannot check "
            f"that the file lies inside {root}: run the server on Linux, or without a root"
        )
    parts = real.relative_to(root).parts
    if not parts:
        raise InputError(f"{given} is a folder: give the path of one CSV or Parquet file in it")
    *folders, last = parts
    at = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for part in folders:
            inner = _opened(given, part, os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW, at)
            os.close(at)
            at = inner
        return _opened(given, last, _FLAGS | _NOFOLLOW, at), real
    finally:
        os.close(at)


def _opened(given: Path, target: str | Path, flags: int, at: int | None = None) -> int:
    """``os.open(target, flags, dir_fd=at)``, its failures turned into one readable line.
    Walked from a folder (``at``) without following links, a link met on the way means the
    path changed since it was resolved."""
    try:
        return os.open(target, flags, dir_fd=at)
    except FileNotFoundError:
        raise InputError(f"there is no file at {given}") from None
    except PermissionError:
        raise InputError(
            f"{given} cannot be read by the user the server runs as: make it readable to it"
        ) from None
    except OSError as exc:
        if at is not None and exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise InputError(
                f"{given} changed as it was opened (a link appeared on its way): run again"
            ) from None
        raise InputError(
            f"cannot open {given} ({exc.strerror}): give the path of a CSV or Parquet file"
        ) from None


def _inside(given: Path, real: Path, root: Path) -> None:
    if not real.is_relative_to(root):
        raise InputError(
            f"{given} leads to {real}, outside {root}, the only folder tables are read from: "
            f"put the table file itself in {root}"
        )


def _checked(fd: int, given: Path, real: Path, root: Path | None) -> os.stat_result:
    """The open file's status, once it is known to be a regular file and, with ``root``, one
    whose only name lies inside the root."""
    if root is not None:
        _inside(given, real, root)
    status = os.fstat(fd)
    if stat.S_ISDIR(status.st_mode):
        raise InputError(f"{given} is a folder: give the path of one CSV or Parquet file in it")
    if not stat.S_ISREG(status.st_mode):
        what = "a named pipe" if stat.S_ISFIFO(status.st_mode) else "a device or socket"
        raise InputError(
            f"{given} is {what}, not a regular file: give the path of a CSV or Parquet file"
        )
    if root is None:
        return status
    try:
        named = os.stat(real, follow_symlinks=False)
    except OSError:
        named = None
    if named is None or (named.st_dev, named.st_ino) != (status.st_dev, status.st_ino):
        raise InputError(f"{given} changed as it was opened: run again")
    if status.st_nlink != 1:
        raise InputError(
            f"{real} has {status.st_nlink} names (hard links), and where the others lie cannot "
            f"be told: copy the file into {root} (cp, not ln) and give the copy's path"
        )
    return status


def _copied(fd: int, status: os.stat_result, copy: Path, real: Path) -> int:
    """Copy the open file ``fd`` into ``copy`` (a new file in a private folder) and return
    the copy, opened for reading; a file written to meanwhile is refused."""
    target = os.open(copy, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o600)
    with os.fdopen(target, "wb") as out:
        offset = 0
        while block := os.pread(fd, _BLOCK, offset):
            out.write(block)
            offset += len(block)
    after = os.fstat(fd)
    if (after.st_size, after.st_mtime_ns) != (status.st_size, status.st_mtime_ns):
        raise InputError(
            f"{real} changed while it was being copied: run again once nothing writes to it"
        )
    return os.open(copy, os.O_RDONLY)
