"""Input files, checked before they are read: tables, schemas and domain files.

One rule for every file a command reads: it is a regular file this user may read. A folder,
a named pipe or a device (``/dev/zero``: a read that never ends) is refused from what the
open file is, not from its name, and an open that would wait (a FIFO with no writer) does not
wait (``O_NONBLOCK``). A file that cannot be read ends in one line saying so, never in the
reader's own error.

Schemas and domain files are JSON the data owner writes, often by hand or with a script, and
sometimes shared: :func:`read_declaration` reads one within :data:`MAX_DECLARATION_BYTES`, as
strict UTF-8, at most :data:`MAX_DEPTH` levels deep (measured on the bytes before parsing:
Python's parser recurses, and 100,000 brackets end in a RecursionError) and with no key named
twice in one object (Python keeps the last value, other readers the first).
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import Any

import numpy as np

from privsyn_core.errors import InputError

#: the largest schema or domain file read: a schema of 1,000 columns of 100,000 categories of
#: 16 characters is about 2 GB, but a hand-written declaration is kilobytes, and a draft from
#: 'privsyn schema infer' of a wide table a few megabytes
MAX_DECLARATION_BYTES = 64 * 2**20
#: the deepest a schema or domain file nests (a schema is 4 levels deep: object, columns list,
#: column object, categories list)
MAX_DEPTH = 32

_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
#: a JSON string, escapes and all: its brackets are text, not nesting
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)


def readable_file(path: str | Path, what: str = "") -> Path:
    """``path`` if it names a regular file this process may read; else an
    :class:`InputError` naming it (``what``: "schema file", ...; empty for a table) and what
    to give instead. Nothing is read but the file's status."""
    named = f"{what} {path}".strip()
    example = f"a {what}" if what else "a table file (CSV or Parquet)"
    try:
        fd = _open(path)
    except FileNotFoundError:
        raise InputError(f"cannot read {named}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"cannot read {named}: it is a folder, not {example}") from None
    except PermissionError:
        raise InputError(
            f"cannot read {named}: no permission to read it; make it readable to this user "
            "(chmod u+r) or give a copy"
        ) from None
    except OSError as exc:
        raise InputError(f"cannot read {named}: {exc.strerror or exc}") from None
    try:
        mode = os.fstat(fd).st_mode
    finally:
        os.close(fd)
    if stat.S_ISDIR(mode):
        raise InputError(f"cannot read {named}: it is a folder, not {example}")
    if not stat.S_ISREG(mode):
        kind = "a named pipe" if stat.S_ISFIFO(mode) else "a device or a socket"
        raise InputError(
            f"cannot read {named}: it is {kind}, not a regular file; save it to a file and "
            "give that file"
        )
    return Path(path)


def _open(path: str | Path) -> int:
    """Open ``path`` for reading without waiting (a FIFO with no writer opens at once)."""
    return os.open(path, _FLAGS)


def read_declaration(path: str | Path, what: str) -> Any:
    """The parsed JSON of a schema or domain file (``what``: "schema file", "domain file"),
    within the limits in the module's docstring; every failure is one :class:`InputError`
    line that names the file."""
    named = f"{what} {path}"
    file = readable_file(path, what)
    size = file.stat().st_size
    if size > MAX_DECLARATION_BYTES:
        raise InputError(
            f"{named} is {size / 2**20:.0f} MB, more than the {MAX_DECLARATION_BYTES // 2**20} "
            "MB a schema or domain file may be; declare fewer categories (merge rare ones), "
            "or leave them undeclared to be estimated privately"
        )
    try:
        data = file.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read {named}: {exc.strerror or exc}") from None
    return parse_declaration(data, named)


def parse_declaration(data: bytes, named: str) -> Any:
    """The parsed JSON of a schema or domain file's bytes (``named`` says which, in the
    message), within the limits of :func:`read_declaration`: strict UTF-8, no deeper than
    :data:`MAX_DEPTH`, no key named twice. For bytes that never were a file (an upload)."""
    from privsyn_core.release.bundle_limits import unique_keys

    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputError(
            f"{named} is not UTF-8 text (byte {exc.start + 1}, line {line}, is not UTF-8); "
            "save it as UTF-8"
        ) from None
    depth = nesting(data)
    if depth > MAX_DEPTH:
        raise InputError(
            f"{named} nests {depth:,} levels deep, more than the {MAX_DEPTH} a schema or domain "
            "file needs (a schema nests 4); give a plain JSON object"
        )
    try:
        return json.loads(text, object_pairs_hook=unique_keys)
    except json.JSONDecodeError as exc:
        raise InputError(f"{named} is not valid JSON ({exc.msg}, line {exc.lineno})") from None
    except InputError as exc:  # a key named twice
        raise InputError(
            f"{named} {exc}; state each key once (JSON readers disagree on which one counts)"
        ) from None


def nesting(data: bytes) -> int:
    """How deep the JSON in ``data`` nests, from its brackets outside strings (linear, no
    parsing; unbalanced brackets are the parser's to report)."""
    raw = np.frombuffer(data, dtype=np.uint8)
    if np.count_nonzero((raw == ord("[")) | (raw == ord("{"))) <= MAX_DEPTH:
        return 0  # too few brackets to nest too deep, wherever they are
    bare = np.frombuffer(_STRING.sub(b'""', data), dtype=np.uint8)
    opens = (bare == ord("[")) | (bare == ord("{"))
    brackets = np.flatnonzero(opens | (bare == ord("]")) | (bare == ord("}")))
    steps = np.where(opens[brackets], 1, -1).astype(np.int32)
    return int(np.cumsum(steps).max()) if len(steps) else 0
