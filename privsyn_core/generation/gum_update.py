"""One GUM update towards one marginal (paper 5.2): plan which records move, then move them.

The rules are the paper's; where it is silent the choices are made for speed (see
:mod:`privsyn_core.generation.gum`). Two kernels run the same rules: fused numba loops
(:func:`compiled_update`) and NumPy passes (:func:`reference_update`).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import pairwise

import numpy as np

from privsyn_core.cores import threads
from privsyn_core.errors import InputError
from privsyn_core.generation.gum_settings import GumKernel, resolve_kernel
from privsyn_core.generation.records import record_words
from privsyn_core.generation.sampling import quota_counts
from privsyn_core.generation.target_scores import GumTarget
from privsyn_core.marginals import cell_index

#: the compiled update gives each thread at least this many records or additions
_ITEMS_PER_PART = 2**14

#: below this many records the 65,536-entry tables of pair codes cost more than they save
_PAIR_CODES_FROM = 2**18


def _uniform_u32(rng: np.random.Generator, n: int) -> np.ndarray:
    """``n`` uniform 32-bit integers straight from the bit generator (twice as fast as
    ``rng.random``; GUM draws one per record per update)."""
    raw = rng.bit_generator.random_raw((n + 1) // 2)
    return raw.view(np.uint32)[:n]


def _thresholds_u32(probability: np.ndarray) -> np.ndarray:
    """Thresholds t with P(uniform u32 < t) = probability, to within 2^-32."""
    return np.minimum(np.round(probability * 2.0**32), 2.0**32 - 1).astype(np.uint32)


def _removal_rate(s: np.ndarray, excess: np.ndarray, wanted: float) -> float:
    """beta such that sum(min(excess, beta s)) == wanted, for over-filled cells (s > 0).

    The sum is piecewise linear in beta with a breakpoint at each cell's ``excess / s``: below
    it the cell gives ``beta s``, above it its whole excess. Sorting the breakpoints gives the
    sum at each of them, and the segment holding ``wanted`` gives beta exactly, in one sort
    instead of a bisection's dozens of passes (GUM solves this once per marginal per
    iteration). ``wanted`` is at most ``excess.sum()``, the sum at the last breakpoint.
    """
    ratio = excess / s
    order = np.argsort(ratio, kind="stable")
    ratio, excess, s = ratio[order], excess[order], s[order]
    capped_before = np.cumsum(excess) - excess
    uncapped_from = np.cumsum(s[::-1])[::-1]
    at_breakpoints = capped_before + ratio * uncapped_from
    k = min(int(np.searchsorted(at_breakpoints, wanted)), ratio.size - 1)
    beta = (wanted - capped_before[k]) / uncapped_from[k]
    return float(min(max(beta, 0.0), 1.0))


def _fine_index(records: np.ndarray, target: GumTarget) -> tuple[np.ndarray, np.ndarray | None]:
    """A per-record code and the map from code to the target's cell.

    For a pair of byte-sized attributes in record-major storage, the two bytes gathered side
    by side already form a 16-bit code, so GUM works on that code and a 65,536-entry map
    instead of computing a cell index per record (one pass over the table fewer). Otherwise
    the code is the cell index and the map is None (identity).
    """
    if (
        len(target.rows) == 2
        and records.shape[1] >= _PAIR_CODES_FROM
        and records.dtype == np.uint8
        and records.T.flags.c_contiguous
        and np.little_endian
    ):
        pair = np.take(records.T, list(target.rows), axis=1)
        code = pair.view(np.uint16)[:, 0]
        return code, target.pair_code_cells
    return cell_index(records, target.rows, target.shape), None


@dataclass(frozen=True)
class CellPlan:
    """What one update does to each cell of a marginal, from the current counts alone.

    ``add`` are the frequencies each under-filled cell gains (alpha rule), ``over`` marks the
    over-filled cells and ``thresholds`` give each cell's per-record selection rate as a
    32-bit threshold: the removal rate ``min(s - a, beta s) / s`` in over-filled cells, twice
    the wanted duplication rate (capped at 1) in the others, so the Bernoulli sample of
    duplication sources is rarely short.
    """

    add: np.ndarray
    over: np.ndarray
    occupied: np.ndarray
    thresholds: np.ndarray


def plan_update(
    counts: np.ndarray, target: np.ndarray, alpha: float, duplicate_share: float
) -> tuple[float, CellPlan | None]:
    """The L1 error of ``counts`` against ``target`` and the per-cell plan of the update, or
    None when the update would move less than half a record or nothing is over-filled.

    Shared by the reference and the compiled update so both follow the same rules.
    """
    n = counts.sum()
    s = counts / n
    a = target
    error = float(np.abs(s - a).sum())

    add = np.where(s > 0, np.minimum(a - s, alpha * s), alpha * a)
    add = np.where(a > s, add, 0.0)
    over = s > a
    wanted = float(add.sum())
    if wanted * n < 0.5 or not over.any():
        return error, None
    excess = np.where(over, s - a, 0.0)
    wanted = min(wanted, float(excess.sum()))
    beta = _removal_rate(s[over], excess[over], wanted)
    removal = np.minimum(excess, beta * s)

    # one uniform draw per record decides removals (over cells) and duplication sources
    # (under cells); the two sets of cells are disjoint
    duplicate_wanted = np.where(s > 0, add * duplicate_share, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = np.where(over, removal / s, np.minimum(1.0, 2.0 * duplicate_wanted / s))
    rate = np.nan_to_num(rate)
    return error, CellPlan(add, over, s > 0, _thresholds_u32(rate))


def update_towards(
    records: np.ndarray,
    target: GumTarget,
    alpha: float,
    duplicate_share: float,
    rng: np.random.Generator,
    pool: ThreadPoolExecutor | None = None,
    kernel: GumKernel = "reference",
    scratch: UpdateScratch | None = None,
) -> float:
    """One GUM step for one marginal, in place on ``records``; returns the L1 before it.

    ``kernel="compiled"`` runs the fused numba loops of :mod:`privsyn_core.generation.gum_kernel`
    ("auto" decides by the table's size alone, see :func:`resolve_kernel`);
    ``"reference"`` the NumPy passes. Both draw every random number from ``rng`` and agree in
    distribution, not record for record (they turn the Generator's bits into draws
    differently).
    """
    if resolve_kernel(kernel, records.shape[1], 1) == "compiled":
        return compiled_update(records, target, alpha, duplicate_share, rng, pool, scratch)
    return reference_update(records, target, alpha, duplicate_share, rng, pool)


@dataclass(frozen=True, eq=False)
class UpdateScratch:
    """Record-sized work arrays of the compiled update, made once per table and reused by
    every update of a run: the cell of each record and the rows selected. Allocating them
    afresh per update (7 MB at 600,000 records, hundreds of updates per iteration) costs a
    page fault per 4 kB touched, about a millisecond per update."""

    cells: np.ndarray
    selected: np.ndarray

    @classmethod
    def for_records(cls, n: int) -> UpdateScratch:
        return cls(np.empty(n, dtype=np.int32), np.empty(n, dtype=np.int64))


def compiled_update(
    records: np.ndarray,
    target: GumTarget,
    alpha: float,
    duplicate_share: float,
    rng: np.random.Generator,
    pool: ThreadPoolExecutor | None = None,
    scratch: UpdateScratch | None = None,
) -> float:
    """:func:`reference_update` with its per-record passes fused into compiled loops, each
    split over the threads of ``pool`` (the kernels release the GIL).

    ``scratch`` (see :class:`UpdateScratch`) lends the record-sized work arrays; without it
    they are allocated for this update. The removed rows keep their record order and the new
    cells are shuffled instead (the pairing of rows to cells is uniformly random either way),
    so the rewrite sweeps the table in one direction.
    """
    try:  # numba: an optional extra, imported only by those who ask for the compiled kernel
        from privsyn_core.generation import gum_kernel
    except ImportError:
        raise InputError(
            "the compiled GUM kernel needs numba: pip install 'privsyn-studio[compiled]', "
            "or use kernel='reference'"
        ) from None

    n = records.shape[1]
    n_cells = target.frequencies.size
    rows = np.asarray(target.rows, dtype=np.int64)
    shape = np.asarray(target.shape, dtype=np.int64)
    strides = np.cumprod(np.r_[1, shape[:0:-1]])[::-1].copy()
    bounds = _part_bounds(n, pool)
    scratch = scratch if scratch is not None else UpdateScratch.for_records(n)
    cells = scratch.cells if n_cells < 2**31 else np.empty(n, dtype=np.int64)
    counts = np.zeros((bounds.size - 1, n_cells), dtype=np.int64)

    def count(part: int, lo: int, hi: int) -> None:
        gum_kernel.count_cells(records, rows, strides, cells, counts[part], lo, hi)

    _in_parts(count, bounds, pool)
    error, plan = plan_update(counts.sum(axis=0), target.frequencies, alpha, duplicate_share)
    if plan is None:
        return error

    selection_seed, addition_seed, pairing_seed = rng.bit_generator.random_raw(3)
    thresholds = plan.thresholds.astype(np.uint64)
    buffer = scratch.selected

    def select(part: int, lo: int, hi: int) -> tuple[int, int]:
        return gum_kernel.select_rows(cells, thresholds, plan.over, selection_seed, buffer, lo, hi)

    found = np.array(_in_parts(select, bounds, pool), dtype=np.int64).reshape(-1, 2)
    removed, sources, start, available = gum_kernel.gather_selection(
        cells, buffer, bounds, found, n_cells
    )
    if removed.size == 0:
        return error
    new_cells = gum_kernel.shuffled_cells(quota_counts(plan.add, removed.size), pairing_seed)
    words = record_words(records)
    flat_words = words.reshape(-1)
    copied = np.asarray(target.copied, dtype=np.int64)

    def rewrite(part: int, lo: int, hi: int) -> None:
        gum_kernel.apply_additions(
            records,
            words,
            flat_words,
            removed,
            new_cells,
            plan.occupied,
            float(duplicate_share),
            addition_seed,
            sources,
            start,
            available,
            rows,
            shape,
            copied,
            lo,
            hi,
        )

    # removed rows are distinct and never sources, so parts cannot write the same record
    _in_parts(rewrite, _part_bounds(removed.size, pool), pool)
    return error


def _part_bounds(size: int, pool: ThreadPoolExecutor | None) -> np.ndarray:
    """Boundaries splitting ``size`` items into one part per worker of ``pool`` (a single
    part without a pool or when parts would be too small to repay a thread hand-off)."""
    parts = 1 if pool is None else max(1, min(threads(), size // _ITEMS_PER_PART))
    if parts == 1:  # a block worker's single thread: no linspace per update
        return np.array([0, size], dtype=np.int64)
    return np.linspace(0, size, parts + 1).astype(np.int64)


def _in_parts(
    work: Callable[[int, int, int], object],
    bounds: np.ndarray,
    pool: ThreadPoolExecutor | None,
) -> list:
    """``work(part, lo, hi)`` for every part, on the pool's threads when there are several."""
    spans = [(p, int(bounds[p]), int(bounds[p + 1])) for p in range(bounds.size - 1)]
    if pool is None or len(spans) == 1:
        return [work(*span) for span in spans]
    return list(pool.map(lambda span: work(*span), spans))


def reference_update(
    records: np.ndarray,
    target: GumTarget,
    alpha: float,
    duplicate_share: float,
    rng: np.random.Generator,
    pool: ThreadPoolExecutor | None = None,
) -> float:
    """One GUM step in NumPy passes over the records (the reference implementation)."""
    n = records.shape[1]
    cells = target.frequencies.size
    fine, cell_of = _fine_index(records, target)
    counts = np.bincount(fine, minlength=cells if cell_of is None else cell_of.size)
    if cell_of is not None:
        counts = np.bincount(cell_of, weights=counts, minlength=cells)
    error, plan = plan_update(counts, target.frequencies, alpha, duplicate_share)
    if plan is None:
        return error
    over = plan.over
    thresholds = plan.thresholds
    if cell_of is not None:
        thresholds = thresholds[cell_of]
    chosen = np.flatnonzero(_uniform_u32(rng, n) < thresholds[fine])
    chosen_cells = fine[chosen] if cell_of is None else cell_of[fine[chosen]]
    is_removed = over[chosen_cells]
    removed = chosen[is_removed]
    if removed.size == 0:
        return error
    rng.shuffle(removed)
    additions = quota_counts(plan.add, removed.size)
    new_cells = np.repeat(np.arange(cells), additions)

    duplicate = plan.occupied[new_cells] & (rng.random(new_cells.size) < duplicate_share)
    if duplicate.any():
        sources = chosen[~is_removed]
        source_cells = chosen_cells[~is_removed]
        # 16-bit keys take numpy's radix sort, several times faster than a comparison sort
        keys = source_cells.astype(np.int16) if cells <= 2**15 else source_cells
        order = np.argsort(keys, kind="stable")
        sources, source_cells = sources[order], source_cells[order]
        available = np.bincount(source_cells, minlength=cells)
        start = np.cumsum(available) - available
        wanted_cells = new_cells[duplicate]
        has_source = available[wanted_cells] > 0
        picks = start[wanted_cells] + (
            rng.random(wanted_cells.size) * available[wanted_cells]
        ).astype(np.int64)
        dup_rows = removed[duplicate][has_source]
        if target.copied:
            for row in target.copied:
                records[row, dup_rows] = records[row, sources[picks[has_source]]]
        else:
            _copy_records(records, dup_rows, sources[picks[has_source]], pool)
        duplicate[np.flatnonzero(duplicate)[~has_source]] = False

    replace = ~duplicate
    if replace.any():
        values = np.unravel_index(new_cells[replace], target.shape)
        rows = removed[replace]
        for row, column in zip(target.rows, values, strict=True):
            records[row, rows] = column
    return error


def _copy_records(
    records: np.ndarray, rows: np.ndarray, sources: np.ndarray, pool: ThreadPoolExecutor | None
) -> None:
    """``records[:, rows] = records[:, sources]``: duplicate whole records (the bulk of GUM's
    time on wide tables).

    When ``records`` is the transposed view of a record-major array whose records are a whole
    number of 8-byte words (as :func:`record_major` builds), a record is copied as a few
    machine words; otherwise attribute by attribute, with 1-D gathers (several times faster
    than numpy's 2-D fancy indexing) split over threads for large copies.
    """
    by_record = records.T
    if by_record.flags.c_contiguous and (by_record.shape[1] * by_record.itemsize) % 8 == 0:
        # each record as one opaque block of bytes: numpy copies it with a single memcpy
        blocks = by_record.view(np.dtype((np.void, by_record.shape[1] * by_record.itemsize)))[:, 0]

        def copy_words(part: slice) -> None:
            blocks[rows[part]] = blocks[sources[part]]

        if pool is None or rows.size < 20_000:
            copy_words(slice(None))
        else:  # rows are distinct and never among the sources, so parts cannot collide
            bounds = np.linspace(0, rows.size, threads() + 1).astype(np.int64)
            list(pool.map(copy_words, [slice(lo, hi) for lo, hi in pairwise(bounds)]))
        return

    def copy(block: np.ndarray) -> None:
        for attribute in block:
            attribute[rows] = attribute[sources]

    if pool is None or records.shape[0] < 8 or rows.size * records.shape[0] < 2_000_000:
        copy(records)
        return
    parts = np.array_split(np.arange(records.shape[0]), min(threads(), records.shape[0]))
    list(pool.map(copy, [records[p[0] : p[-1] + 1] for p in parts if p.size]))
