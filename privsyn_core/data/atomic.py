"""Files that appear whole or not at all.

Every output (the synthetic table, a bundle, a ledger, a schema) is written to a temporary
file beside its target and moved into place when complete: a failure part-way, a full disk
or a kill leaves nothing behind and an older file untouched. A folder of outputs
(``privsyn marginals``) is written the same way, as a new folder renamed into place. One
rule for all writers, so that each gets the same permissions: ``mkstemp`` creates its file
readable by its owner only (0600), which would make a bundle meant for sharing unreadable
to others; the file gets what a plain ``open`` would give it under this process's umask.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path


def _umask() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return umask


def temporary_beside(target: Path) -> str:
    """A new empty file in ``target``'s folder (hidden, ending ``.part``), with the
    permissions a plain ``open`` would give ``target``; the caller moves or removes it."""
    handle, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    os.close(handle)
    os.chmod(tmp, 0o666 & ~_umask())
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


def write_folder_atomically(files: Mapping[str, bytes], target: str | Path) -> None:
    """Write ``files`` (plain file names, no folders, to their bytes) as the folder
    ``target``: into a new hidden folder beside it (ending ``.part``), renamed into place when
    complete, so a failure leaves no partial folder. ``target`` must not exist or be an empty
    folder, which the rename replaces; a folder with anything in it makes the rename fail
    (``OSError``) and is left as it was. Folder and files get the permissions a plain
    ``mkdir`` and ``open`` would give them under this process's umask."""
    target = Path(target)
    tmp = tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    try:
        os.chmod(tmp, 0o777 & ~_umask())
        for name, data in files.items():
            if name in ("", ".", "..") or Path(name).name != name:
                raise ValueError(f"{name!r} is not a plain file name")
            with open(os.path.join(tmp, name), "xb") as out:
                out.write(data)
        os.rename(tmp, target)  # an empty folder is replaced; a non-empty one, never
    finally:
        if os.path.exists(tmp):
            shutil.rmtree(tmp, ignore_errors=True)
