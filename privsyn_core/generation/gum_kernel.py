"""Compiled loops of one GUM update (numba); the semantics live in
:mod:`privsyn_core.generation.gum`.

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

Parallelism: every kernel works on a range (records ``lo`` to ``hi``, or additions) and
releases the GIL, and :func:`privsyn_core.generation.gum_update.compiled_update` runs the ranges on
GUM's worker threads (:func:`privsyn_core.cores.threads`: the cores this process may use,
shared out among block workers). Counting is bound by memory traffic (record-major storage puts
each record on its own cache line and the loop gathers two or three bytes from each), which a
second core's loads roughly halve on an idle machine; selection and rewriting split just as
evenly, and each part keeps its own histogram and stretch of the output buffer, so threads
never share a write. Plain threads rather than numba's ``parallel=True``: numba's OpenMP layer
busy-waits between parallel regions, and on a shared two-core machine that made updates 2-3
times *slower* than one thread (measured 60-87 ms against 30 ms per update on the 600k x 100
table while other processes ran); its workqueue layer aborts when two threads launch kernels at
once (two dashboard sessions). Threads waiting on a future cost nothing, and without parfor
lowering each kernel compiles in a fraction of the time.

Compilation is cached on disk (``cache=True``): the first call in a fresh environment
compiles each kernel once per array type, later processes load them from the cache.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

import numba as nb
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

if TYPE_CHECKING:
    from collections.abc import Callable

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_TO_UNIT = 2.0**-53


#: records ahead of the current one whose memory the rewrite loop asks for in advance
_PREFETCH_AHEAD = 12


@intrinsic
def _prefetch_intrinsic(typingctx, array, index):
    """Hint the CPU to load the cache line holding element ``index`` of C-contiguous
    ``array`` (LLVM's ``llvm.prefetch``: read, keep in all cache levels). A hint only: it
    never faults and never changes a result.

    Why: a duplication copies a random source record onto a removed row, tens of thousands
    per update; each copy is two cache misses on a 60 MB table, and the loop body is too long
    for the CPU to run far enough ahead on its own. Asking a dozen records ahead keeps many
    misses in flight and made the rewrite 3-7 times faster at 600,000 x 100.
    """

    def codegen(context, builder, signature, args):
        data = context.make_array(signature.args[0])(context, builder, args[0]).data
        pointer = builder.bitcast(builder.gep(data, [args[1]]), ir.IntType(8).as_pointer())
        prefetch = builder.module.declare_intrinsic(
            "llvm.prefetch",
            fnty=ir.FunctionType(
                ir.VoidType(),
                [ir.IntType(8).as_pointer(), ir.IntType(32), ir.IntType(32), ir.IntType(32)],
            ),
        )
        i32 = ir.IntType(32)
        builder.call(prefetch, [pointer, i32(0), i32(3), i32(1)])
        return context.get_dummy_value()

    return types.void(array, index), codegen


#: the intrinsic as the kernels call it, ``_prefetch(array, index)``: numba supplies the
#: typing context itself, which its type stubs do not say
_prefetch = cast("Callable[[np.ndarray, int], None]", _prefetch_intrinsic)


@nb.njit(cache=True)
def _hash(seed: np.uint64, position: int) -> np.uint64:
    """splitmix64 of the ``position``-th counter after ``seed``: 64 uniform bits."""
    z = seed + np.uint64(position + 1) * _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


@nb.njit(cache=True)
def _unit(seed: np.uint64, position: int) -> float:
    """A uniform double in [0, 1) (53 bits)."""
    return float(_hash(seed, position) >> np.uint64(11)) * _TO_UNIT


@nb.njit(cache=True, nogil=True)
def count_cells(
    records: np.ndarray,
    rows: np.ndarray,
    strides: np.ndarray,
    cells: np.ndarray,
    counts: np.ndarray,
    lo: int,
    hi: int,
) -> None:
    """For records ``lo`` to ``hi``: write each one's flat cell index into ``cells`` and add
    it to ``counts``.

    ``rows`` are the marginal's attribute rows of ``records`` (attributes x records) and
    ``strides`` the C-order strides of its shape.
    """
    for i in range(lo, hi):
        cell = 0
        for j in range(rows.size):
            cell += np.int64(records[rows[j], i]) * strides[j]
        cells[i] = cell
        counts[cell] += 1


@nb.njit(cache=True, nogil=True)
def select_rows(
    cells: np.ndarray,
    thresholds: np.ndarray,
    over: np.ndarray,
    seed: np.uint64,
    buffer: np.ndarray,
    lo: int,
    hi: int,
) -> tuple[int, int]:
    """One Bernoulli trial for each record ``lo`` to ``hi``: selected when the top 32 bits of
    its hash fall below its cell's threshold (P = threshold / 2^32).

    Selected rows of over-filled cells (removals) are written to ``buffer`` upwards from
    ``lo``, the others (duplication sources) downwards from ``hi - 1``; returns both numbers.
    """
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
    return low - lo, hi - 1 - high


@nb.njit(cache=True, nogil=True)
def gather_selection(
    cells: np.ndarray, buffer: np.ndarray, bounds: np.ndarray, found: np.ndarray, n_cells: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Join the parts :func:`select_rows` filled (``bounds[p]`` to ``bounds[p + 1]``, with
    ``found[p]`` = (removals, sources)): the removals in record order, and the sources
    grouped by cell (counting sort) with each cell's first position and number of sources.
    """
    # plain loops only: slicing and array expressions cost seconds of compile time
    n_removed, n_sources = 0, 0
    for p in range(found.shape[0]):
        n_removed += found[p, 0]
        n_sources += found[p, 1]
    removed = np.empty(n_removed, dtype=np.int64)
    available = np.zeros(n_cells, dtype=np.int64)
    k = 0
    for p in range(found.shape[0]):
        lo, hi = bounds[p], bounds[p + 1]
        for q in range(lo, lo + found[p, 0]):
            removed[k] = buffer[q]
            k += 1
        for q in range(hi - found[p, 1], hi):
            available[cells[buffer[q]]] += 1
    start = np.empty(n_cells, dtype=np.int64)
    filled = np.empty(n_cells, dtype=np.int64)
    total = 0
    for cell in range(n_cells):
        start[cell] = total
        filled[cell] = total
        total += available[cell]
    sources = np.empty(n_sources, dtype=np.int64)
    for p in range(found.shape[0]):  # parts in order, each part's sources in record order
        hi = bounds[p + 1]
        for q in range(hi - 1, hi - 1 - found[p, 1], -1):
            cell = cells[buffer[q]]
            sources[filled[cell]] = buffer[q]
            filled[cell] += 1
    return removed, sources, start, available


@nb.njit(cache=True, nogil=True)
def shuffled_cells(quota: np.ndarray, seed: np.uint64) -> np.ndarray:
    """``quota[c]`` copies of each cell ``c``, in uniformly random order (Fisher-Yates on
    the counter-based hash): the new cell of each removed row. Three times faster than
    ``np.repeat`` plus ``Generator.shuffle`` on the hundreds of thousands of additions of
    an early update on a wide table."""
    total = 0
    for c in range(quota.size):
        total += quota[c]
    out = np.empty(total, dtype=np.int64)
    k = 0
    for c in range(quota.size):
        for _ in range(quota[c]):
            out[k] = c
            k += 1
    for i in range(total - 1, 0, -1):
        j = np.int64(_unit(seed, i) * (i + 1))  # uniform on 0..i (bias below 2^-53 i)
        swap = out[i]
        out[i] = out[j]
        out[j] = swap
    return out


@nb.njit(cache=True, nogil=True)
def apply_additions(
    records: np.ndarray,
    words: np.ndarray,
    flat_words: np.ndarray,
    removed: np.ndarray,
    new_cells: np.ndarray,
    duplicable: np.ndarray,
    duplicate_share: float,
    seed: np.uint64,
    sources: np.ndarray,
    start: np.ndarray,
    available: np.ndarray,
    rows: np.ndarray,
    shape: np.ndarray,
    copied: np.ndarray,
    lo: int,
    hi: int,
) -> None:
    """Rewrite removed rows ``lo`` to ``hi``: ``removed[j]`` goes to cell ``new_cells[j]``.

    A row going to a ``duplicable`` cell (one holding records) is, with probability
    ``duplicate_share``, a copy of a source row of that cell drawn uniformly; otherwise, or
    when the cell has no sources, only the marginal's attributes are set to the cell's values.
    ``words`` is the same memory as records of 64-bit words, one row per record (a copy is
    then a dozen word moves instead of a hundred byte moves), and ``flat_words`` its flat
    view (for prefetching); both are empty when the layout does not allow it. ``removed``
    ascends, so the rows written sweep the table in one direction. A copy carries the
    attributes ``copied`` when it is not empty (a marginal's blanket), else the whole record.
    """
    width = records.shape[0]
    by_words = words.shape[0] > 0
    n_words = words.shape[1]
    for j in range(lo, hi):
        ahead = j + _PREFETCH_AHEAD
        if by_words and ahead < hi:
            _prefetch(flat_words, removed[ahead] * n_words)
            _prefetch(flat_words, removed[ahead] * n_words + n_words - 1)
            cell = new_cells[ahead]
            if available[cell] > 0:  # the source it would copy from, if it duplicates
                pick = start[cell] + np.int64(_unit(seed, 2 * ahead + 1) * available[cell])
                _prefetch(flat_words, sources[pick] * n_words)
                _prefetch(flat_words, sources[pick] * n_words + n_words - 1)
        cell = new_cells[j]
        row = removed[j]
        if duplicable[cell] and available[cell] > 0 and _unit(seed, 2 * j) < duplicate_share:
            pick = start[cell] + np.int64(_unit(seed, 2 * j + 1) * available[cell])
            source = sources[pick]
            if copied.size > 0:
                for a in copied:
                    records[a, row] = records[a, source]
            elif by_words:
                for w in range(n_words):
                    words[row, w] = words[source, w]
            else:
                for a in range(width):
                    records[a, row] = records[a, source]
        else:
            rest = cell
            for t in range(rows.size - 1, -1, -1):
                records[rows[t], row] = rest % shape[t]
                rest //= shape[t]
