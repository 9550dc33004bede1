"""Memory a synthesis will need, checked before the work that would need it.

GUM and decoding hold the synthetic table several times over: the codes GUM updates (one
record per row, padded to whole 8-byte words), the synthetic codes per column, the declared
codes after decoding, and the output DataFrame (8 bytes a cell: numbers, or pointers to
shared strings), plus per-row temporaries of a marginal update. None of it depends on the
input's size: only on the synthetic rows (a public choice, or the noisy total) and columns.
A run that would not fit is refused with the size it needs, never left to die half-way.

The input itself is checked before it is loaded (:func:`check_load_fits`), from what the file
says of its size without reading its rows: a Parquet file's metadata (row count, columns) or
a CSV file's size. A few megabytes of Parquet can hold hundreds of millions of rows, and the
numpy engine needs tens of bytes for each cell it loads. The width is checked too
(:func:`check_width`): PrivSyn measures every pair of columns.
"""

from __future__ import annotations

import math
from pathlib import Path

from privsyn_core.errors import InputError, TooBigToLoad

#: per-row temporaries of one GUM update (cell index, uniform draws, thresholds, masks)
_UPDATE_BYTES_PER_ROW = 32
#: Peak bytes per input cell when the numpy engine loads and prepares a table, measured with
#: the CLI on 2 million rows x 2 columns (small integers and three colours, iterations 0, so
#: GUM's own table is negligible): about 76 for Parquet and 45 for CSV, over the
#: interpreter's baseline. The estimates use a little less, so that a refusal means the
#: table surely does not fit.
LOAD_BYTES_PER_CELL = {"parquet": 64, "csv": 40}
#: The widest table a synthesis takes. InDif (paper section 4.1) measures every pair of
#: columns, m(m-1)/2 of them, each with a share of the budget: at 10,000 columns that is
#: about 50 million pairs, whose noise drowns every dependency, and the run takes hours
#: (1,000 columns of five rows took about 10 s, 10,000 took over 7 minutes).
MAX_COLUMNS = 1_000
#: share of the free memory a run may plan to use (the rest: Python, pandas, the input)
USABLE_SHARE = 0.8


def synthesis_bytes(
    rows: int,
    columns: int,
    itemsize: int,
    synthesis: str = "gum",
    block_rows: int | None = None,
) -> int:
    """Peak bytes of GUM plus decoding for ``rows`` synthetic rows of ``columns`` codes of
    ``itemsize`` bytes each, plus what the ``synthesis`` method holds beside GUM's table for
    the rows of one block (``block_rows``; default all ``rows``): the MRF's chains, its
    kept table and a candidate's copy (:mod:`~privsyn_core.generation.mrf`), and for
    "gum+mrf" also the start the MRF begins from while GUM moves the records."""
    padded = math.ceil(columns * itemsize / 8) * 8
    per_row = padded + 2 * columns * itemsize + 8 * columns + 8 + _UPDATE_BYTES_PER_ROW
    beside = {"mrf": 3 * columns * itemsize, "gum+mrf": padded + 3 * columns * itemsize}
    working = rows if block_rows is None else min(rows, block_rows)
    return rows * per_row + working * beside.get(synthesis, 0)


def available_bytes() -> int | None:
    """Memory the system can give this process now (Linux ``MemAvailable``), or None."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def check_fits(
    rows: int,
    columns: int,
    itemsize: int,
    available: int | None = None,
    synthesis: str = "gum",
    block_rows: int | None = None,
) -> None:
    """Refuse a synthesis whose table would not fit in memory, saying how many rows would
    (``synthesis`` and ``block_rows``: see :func:`synthesis_bytes`)."""
    free = available_bytes() if available is None else available
    if free is None:
        return
    needed = synthesis_bytes(rows, columns, itemsize, synthesis, block_rows)
    usable = USABLE_SHARE * free
    if needed <= usable:
        return
    beside = needed - synthesis_bytes(rows, columns, itemsize)  # the method's, one block
    fitting = int(max(0.0, usable - beside) // max(1, synthesis_bytes(1, columns, itemsize)))
    raise InputError(
        f"a synthetic table of {rows:,} rows x {columns} columns needs about "
        f"{needed / 2**30:.1f} GB of memory, but about {free / 2**30:.1f} GB is free; ask for "
        f"fewer rows (--rows, at most about {fitting:,} fit now) or free memory"
    )


def check_blocks_fit(
    block_rows: int,
    blocks: int,
    columns: int,
    itemsize: int,
    available: int | None = None,
    synthesis: str = "gum",
) -> None:
    """Refuse a streamed synthesis whose ``blocks`` blocks in flight, of ``block_rows`` rows
    each, would not fit in memory (:mod:`privsyn_core.generation.blocks`: one per worker is
    made at a time, and its rows are written before more are made, so the total row count
    does not matter)."""
    free = available_bytes() if available is None else available
    if free is None:
        return
    needed = blocks * synthesis_bytes(block_rows, columns, itemsize, synthesis)
    usable = USABLE_SHARE * free
    if needed <= usable:
        return
    raise InputError(
        f"{blocks} blocks of {block_rows:,} rows x {columns} columns made at once need about "
        f"{needed / 2**30:.1f} GB of memory, but about {free / 2**30:.1f} GB is free; use "
        "fewer workers (--workers) or smaller blocks (--block-rows), or free memory"
    )


def check_load_fits(
    what: str,
    rows: int,
    columns: int,
    file_format: str,
    file_bytes: int = 0,
    available: int | None = None,
) -> None:
    """Refuse to load a table of about ``rows`` x ``columns`` cells that would not fit in the
    free memory, before a single row is read. ``file_bytes`` counts text held on top of the
    per-cell cost (a CSV file's values). The refusal, :class:`~privsyn_core.errors.TooBigToLoad`,
    carries the numbers for front ends that offer another way out than the CLI's."""
    free = available_bytes() if available is None else available
    if free is None:
        return
    needed = rows * columns * LOAD_BYTES_PER_CELL[file_format] + file_bytes
    usable = USABLE_SHARE * free
    if needed <= usable:
        return
    raise TooBigToLoad(
        f"{what} holds about {rows:,} rows x {columns:,} column{'s' * (columns != 1)}, which "
        f"need about {size_text(needed)} of memory to load, but only about "
        f"{size_text(usable)} of the {size_text(free)} free may be used; "
        "count it where it lies with the DuckDB engine (privsyn synthesize --engine duckdb), "
        "or synthesise from a sample of its rows",
        rows=rows,
        columns=columns,
        needed=needed,
        usable=usable,
        free=free,
    )


def size_text(size: float) -> str:
    return f"{size / 2**30:.1f} GB" if size >= 2**30 else f"{size / 2**20:.0f} MB"


def check_width(columns: int) -> None:
    """Refuse a table wider than :data:`MAX_COLUMNS` before anything is measured."""
    if columns > MAX_COLUMNS:
        pairs = columns * (columns - 1) // 2
        raise InputError(
            f"the table has {columns:,} columns: PrivSyn measures every pair of columns "
            f"({pairs:,} pairs here), which drowns each in noise and takes hours; keep at most "
            f"{MAX_COLUMNS:,} columns (drop the ones you do not need from the file)"
        )
