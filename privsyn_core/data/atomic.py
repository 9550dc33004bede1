"""Files that appear whole or not at all.

Every output (the synthetic table, a bundle, a ledger, a schema) is written to a temporary
file beside its target and moved into place when complete: a failure part-way, a full disk
or a kill leaves nothing behind and an older file untouched. One rule for all writers, so
that each gets the same permissions: ``mkstemp`` creates its file readable by its owner
only (0600), which would make a bundle meant for sharing unreadable to others; the file
gets what a plain ``open`` would give it under this process's umask.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def temporary_beside(target: Path) -> str:
    """A new empty file in ``target``'s folder (hidden, ending ``.part``), with the
    permissions a plain ``open`` would give ``target``; the caller moves or removes it."""
    handle, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    os.close(handle)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)
    return tmp


def write_atomically(data: bytes, target: str | Path) -> None:
    """Write ``data`` to ``target`` through :func:`temporary_beside`, moved into place when
    complete."""
    target = Path(target)
    tmp = temporary_beside(target)
    try:
        with open(tmp, "wb") as out:
            out.write(data)
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
