"""Compiled loops of one GUM update (numba); the semantics live in :mod:`privsyn_core.gum`.

The reference update makes about ten NumPy passes over all ``N`` records per marginal (cell
index, bincount, uniform draws, threshold gather, compare, flatnonzero, ...), each allocating
an ``N``-sized temporary; on a 600,000 x 100 table that is ~20 ms per marginal and GUM visits
hundreds of marginals per iteration. Here the per-record work is two compiled passes and the
per-addition work one more:

1. :func:`count_cells`: the cell of every record from its attribute codes, stored once, and
   the cell counts (one read of the table).
2. :func:`select_rows`: one Bernoulli trial per record against its cell's rate; rows of
   over-filled cells are removed, rows of under-filled cells become duplication sources
   (grouped by cell with a counting sort).
3. :func:`apply_additions`: each removed row becomes a duplicate of a random source row of its
   new cell, or gets the new cell's values written in.

Randomness: the uniform numbers come from a counter-based hash (splitmix64) of a 64-bit seed
and the record's (or the addition's) position. The seeds are drawn from the caller's NumPy
Generator, so a run is reproducible from its seed, and because each draw depends only on the
position, the result is the same whatever the number of threads or how the work is split.

Parallelism: passes 1 and 2 run over the records in one contiguous part per thread (``prange``).
Pass 1 is bound by memory traffic (record-major storage puts every record on its own cache
line, and the loop gathers two or three bytes from each), which a second core's load units
help with; pass 2 is pure arithmetic on the stored cells. Each part keeps its own histogram
and its own stretch of the output buffer, so threads never share a write. Pass 3 copies rows
in parallel: the removed rows are distinct and never sources (sources lie in under-filled
cells, removals in over-filled ones), so no two threads touch the same record.

Compilation is cached on disk (``cache=True``); the first call in a fresh environment compiles
each kernel once per array type (about a second each), later processes load them in
milliseconds.
"""

from __future__ import annotations

import numba as nb
import numpy as np

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_TO_UNIT = 2.0**-53


@nb.njit(cache=True, inline="always")
def _hash(seed: np.uint64, position: int) -> np.uint64:
    """splitmix64 of the ``position``-th counter after ``seed``: 64 uniform bits."""
    z = seed + np.uint64(position + 1) * _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


@nb.njit(cache=True, inline="always")
def _unit(seed: np.uint64, position: int) -> float:
    """A uniform double in [0, 1) (53 bits)."""
    return float(_hash(seed, position) >> np.uint64(11)) * _TO_UNIT


@nb.njit(cache=True, parallel=True)
def count_cells(
    records: np.ndarray,
    rows: np.ndarray,
    strides: np.ndarray,
    cells: np.ndarray,
    n_cells: int,
    parts: int,
) -> np.ndarray:
    """Write each record's flat cell index into ``cells``; return the count of every cell.

    ``rows`` are the marginal's attribute rows of ``records`` (attributes x records) and
    ``strides`` the C-order strides of its shape.
    """
    n = records.shape[1]
    step = (n + parts - 1) // parts
    partial = np.zeros((parts, n_cells), dtype=np.int64)
    for p in nb.prange(parts):
        for i in range(p * step, min(n, (p + 1) * step)):
            cell = 0
            for j in range(rows.size):
                cell += np.int64(records[rows[j], i]) * strides[j]
            cells[i] = cell
            partial[p, cell] += 1
    counts = np.zeros(n_cells, dtype=np.int64)
    for p in range(parts):
        counts += partial[p]
    return counts


@nb.njit(cache=True, parallel=True)
def select_rows(
    cells: np.ndarray, thresholds: np.ndarray, over: np.ndarray, seed: np.uint64, parts: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One Bernoulli trial per record: selected when the top 32 bits of its hash fall below
    its cell's threshold (P = threshold / 2^32).

    Returns the selected rows of over-filled cells (the removals, in record order) and the
    selected rows of the other cells (duplication sources) grouped by cell, with each cell's
    first position and number of sources.
    """
    n = cells.size
    step = (n + parts - 1) // parts
    # part p writes removals upwards from p * step and sources downwards from its end
    buffer = np.empty(n, dtype=np.int64)
    n_removed = np.zeros(parts, dtype=np.int64)
    n_sources = np.zeros(parts, dtype=np.int64)
    for p in nb.prange(parts):
        lo, hi = p * step, min(n, (p + 1) * step)
        low, high = lo, hi - 1
        for i in range(lo, hi):
            cell = cells[i]
            if (_hash(seed, i) >> np.uint64(32)) < thresholds[cell]:
                if over[cell]:
                    buffer[low] = i
                    low += 1
                else:
                    buffer[high] = i
                    high -= 1
        n_removed[p] = low - lo
        n_sources[p] = hi - 1 - high

    removed = np.empty(n_removed.sum(), dtype=np.int64)
    available = np.zeros(thresholds.size, dtype=np.int64)
    k = 0
    for p in range(parts):
        lo = p * step
        removed[k : k + n_removed[p]] = buffer[lo : lo + n_removed[p]]
        k += n_removed[p]
        end = min(n, (p + 1) * step)
        for q in range(end - n_sources[p], end):
            available[cells[buffer[q]]] += 1
    start = np.cumsum(available) - available
    sources = np.empty(available.sum(), dtype=np.int64)
    filled = start.copy()
    for p in range(parts):  # parts in order, each part's sources in record order
        end = min(n, (p + 1) * step)
        for q in range(end - 1, end - 1 - n_sources[p], -1):
            cell = cells[buffer[q]]
            sources[filled[cell]] = buffer[q]
            filled[cell] += 1
    return removed, sources, start, available


@nb.njit(cache=True, parallel=True)
def apply_additions(
    records: np.ndarray,
    removed: np.ndarray,
    additions: np.ndarray,
    duplicable: np.ndarray,
    duplicate_share: float,
    seed: np.uint64,
    sources: np.ndarray,
    start: np.ndarray,
    available: np.ndarray,
    rows: np.ndarray,
    shape: np.ndarray,
) -> int:
    """Rewrite the removed rows: the first ``additions[0]`` go to cell 0, and so on.

    A row going to a ``duplicable`` cell (one holding records) is, with probability
    ``duplicate_share``, a copy of a source row of that cell drawn uniformly; otherwise, or
    when the cell has no sources, only the marginal's attributes are set to the cell's values.
    Returns the number of rows duplicated.
    """
    m = removed.size
    new_cells = np.empty(m, dtype=np.int64)
    k = 0
    for cell in range(additions.size):
        for _ in range(additions[cell]):
            new_cells[k] = cell
            k += 1
    copied = np.zeros(m, dtype=np.int8)
    width = records.shape[0]
    for j in nb.prange(m):
        cell = new_cells[j]
        row = removed[j]
        if duplicable[cell] and available[cell] > 0 and _unit(seed, 2 * j) < duplicate_share:
            pick = start[cell] + np.int64(_unit(seed, 2 * j + 1) * available[cell])
            source = sources[pick]
            for a in range(width):
                records[a, row] = records[a, source]
            copied[j] = 1
        else:
            rest = cell
            for t in range(rows.size - 1, -1, -1):
                records[rows[t], row] = rest % shape[t]
                rest //= shape[t]
    return int(copied.sum())


def threads() -> int:
    """Threads numba runs ``prange`` loops on (``NUMBA_NUM_THREADS``, default all cores)."""
    return nb.get_num_threads()
