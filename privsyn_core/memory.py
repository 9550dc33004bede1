"""Memory a synthesis will need, checked before the work that would need it.

GUM and decoding hold the synthetic table several times over: the codes GUM updates (one
record per row, padded to whole 8-byte words), the synthetic codes per column, the declared
codes after decoding, and the output DataFrame (8 bytes a cell: numbers, or pointers to
shared strings), plus per-row temporaries of a marginal update. None of it depends on the
input's size: only on the synthetic rows (a public choice, or the noisy total) and columns.
A run that would not fit is refused with the size it needs, never left to die half-way.
"""

from __future__ import annotations

import math
from pathlib import Path

from privsyn_core.errors import InputError

#: per-row temporaries of one GUM update (cell index, uniform draws, thresholds, masks)
_UPDATE_BYTES_PER_ROW = 32
#: share of the free memory a run may plan to use (the rest: Python, pandas, the input)
USABLE_SHARE = 0.8


def synthesis_bytes(rows: int, columns: int, itemsize: int) -> int:
    """Peak bytes of GUM plus decoding for ``rows`` synthetic rows of ``columns`` codes of
    ``itemsize`` bytes each."""
    padded = math.ceil(columns * itemsize / 8) * 8
    per_row = padded + 2 * columns * itemsize + 8 * columns + 8 + _UPDATE_BYTES_PER_ROW
    return rows * per_row


def available_bytes() -> int | None:
    """Memory the system can give this process now (Linux ``MemAvailable``), or None."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def check_fits(rows: int, columns: int, itemsize: int, available: int | None = None) -> None:
    """Refuse a synthesis whose table would not fit in memory, saying how many rows would."""
    free = available_bytes() if available is None else available
    if free is None:
        return
    needed = synthesis_bytes(rows, columns, itemsize)
    usable = USABLE_SHARE * free
    if needed <= usable:
        return
    fitting = int(usable // max(1, synthesis_bytes(1, columns, itemsize)))
    raise InputError(
        f"a synthetic table of {rows:,} rows x {columns} columns needs about "
        f"{needed / 2**30:.1f} GB of memory, but about {free / 2**30:.1f} GB is free; ask for "
        f"fewer rows (--rows, at most about {fitting:,} fit now) or free memory"
    )
