"""Compiled batch counting of many marginals over an attribute-major code array (numba).

InDif needs the exact 2-way counts of all ``d (d - 1) / 2`` pairs (paper 4.1): 4,950 pairs on a
100-column table. Counted one pair at a time in NumPy, each pair costs an ``n``-sized int32
cell index (three passes with their temporaries) and a ``bincount``: about 2 ms per pair at
600,000 rows, 10-20 s for the all-pairs batch, a third of the end-to-end budget of a wide
table. Here each set is one compiled pass that reads its two or three byte columns (contiguous
rows of the ``(d, n)`` array) and increments its histogram, with no temporary, and the sets
are split over the process's threads (:func:`privsyn_core.cores.threads`; the kernel
releases the GIL), about ten times faster.

numba is the optional 'compiled' extra: :func:`privsyn_core.marginals.count_marginals` only
imports this module for batches large enough to repay the import (about half a second) and
falls back to NumPy when numba is missing, so the counts are the same either way.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from math import prod

import numba as nb
import numpy as np

from privsyn_core.cores import threads


@nb.njit(cache=True, nogil=True)
def _count_sets(
    records: np.ndarray,
    rows: np.ndarray,
    strides: np.ndarray,
    set_start: np.ndarray,
    offsets: np.ndarray,
    counts: np.ndarray,
    first: int,
    last: int,
) -> None:
    """Histogram sets ``first`` to ``last``: set ``s`` uses attribute rows
    ``rows[set_start[s]:set_start[s + 1]]`` with C-order ``strides`` and adds into
    ``counts[offsets[s]:]``."""
    n = records.shape[1]
    for s in range(first, last):
        lo, hi = set_start[s], set_start[s + 1]
        base = offsets[s]
        if hi - lo == 2:  # the InDif pairs: the common case, kept free of the inner loop
            x = records[rows[lo]]
            y = records[rows[lo + 1]]
            stride = strides[lo]
            for i in range(n):
                counts[base + np.int64(x[i]) * stride + np.int64(y[i])] += 1
        else:
            for i in range(n):
                cell = base
                for j in range(lo, hi):
                    cell += np.int64(records[rows[j], i]) * strides[j]
                counts[cell] += 1


def _c_strides(shape: Sequence[int]) -> list[int]:
    """C-order strides of a flat cell index (the last attribute varies fastest)."""
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= int(size)
    return strides[::-1]


def count_sets(
    records: np.ndarray, rows: Sequence[Sequence[int]], shapes: Sequence[Sequence[int]]
) -> list[np.ndarray]:
    """Exact int64 counts of each attribute set (``rows`` of ``records``, sizes ``shapes``),
    flat in C order; ``records`` is a C-contiguous ``(d, n)`` code array."""
    sizes = [prod(shape) for shape in shapes]
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    set_start = np.concatenate([[0], np.cumsum([len(r) for r in rows])]).astype(np.int64)
    flat_rows = np.array([r for set_rows in rows for r in set_rows], dtype=np.int64)
    strides = np.array([s for shape in shapes for s in _c_strides(shape)], dtype=np.int64)
    counts = np.zeros(int(offsets[-1]), dtype=np.int64)
    # each thread fills a disjoint range of sets, hence of ``counts``: no shared writes
    bounds = np.linspace(0, len(rows), min(threads(), len(rows)) + 1).astype(np.int64)

    def run(part: int) -> None:
        _count_sets(
            records,
            flat_rows,
            strides,
            set_start,
            offsets,
            counts,
            int(bounds[part]),
            int(bounds[part + 1]),
        )

    if bounds.size > 2:
        with ThreadPoolExecutor(max_workers=bounds.size - 1) as pool:
            list(pool.map(run, range(bounds.size - 1)))
    elif len(rows):
        run(0)
    return [counts[offsets[s] : offsets[s + 1]] for s in range(len(rows))]
