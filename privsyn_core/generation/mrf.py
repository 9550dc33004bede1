"""A Markov random field fitted to the consistent noisy marginals, its Gibbs chains the records.

GUM (paper section 5.2) moves the records towards one marginal at a time. On a wide table
whose marginal graph is dense, a move towards one marginal disturbs the others its
attributes sit in, and the table GUM keeps is often its tree start (README, "Wide tables";
``benchmarks/evidence/tree-first-2026-11-26.txt``, K.5 and M). The distribution of greatest
entropy whose marginals are the measured ones is a Markov random field with one potential
table per marginal, ``P(x) ~ exp(sum_a u_a(x_a) + sum_m theta_m(x_m))``: Private-PGM's
estimator (McKenna et al. 2019), which adds no dependency the measurements do not show.

The fit here is persistent contrastive divergence (Tieleman 2008), whose chains are the
component's records themselves: each sweep resamples every attribute of every record from
its conditional given the rest of the record (a Gibbs step), then moves each potential by
``step`` times the log ratio between its target and the records' marginal. The part of each
cell's gap that lies within ``shrink`` noise sigmas of the target (the public noise scale)
is left out of that ratio, so the fit stops where the measurement noise begins. The draws
are stratified within the groups of a tree neighbour's values (:func:`_stratified`), as the
tree start's quotas are, so they add less of a sample's own deviations to the marginals.

It starts from GUM's tree start exactly: the records are the tree's sample
(:mod:`~privsyn_core.generation.initial`), the potentials the tree's, ``log p_ab / (p_a p_b)``
on each tree edge and ``log p_a`` on each attribute, the field whose distribution that tree
is. As GUM's kept table, the table returned is the one closest to the measurements and to
the unmeasured pairs' noisy InDif (:func:`~privsyn_core.generation.target_scores.table_score`) among
the start and every ``judge_every`` sweeps, each candidate given exact 1-way counts first
(:func:`_with_quotas`). All of it reads the consistent noisy marginals only:
post-processing, free of privacy cost. The Gibbs step runs compiled where numba is
installed (:mod:`~privsyn_core.generation.mrf_kernel`); on wide tables the engine runs this
after GUM and keeps the closer table (:func:`~privsyn_core.generation.planned.resolve_synthesis`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass
from types import ModuleType
from typing import Literal

import numpy as np

from privsyn_core.cores import threads
from privsyn_core.generation.dependence import UnmeasuredPairs
from privsyn_core.generation.gum import GumIterationRecord, ProgressHook
from privsyn_core.generation.initial import Tree
from privsyn_core.generation.records import columns_of, fill_record_major
from privsyn_core.generation.sampling import quota_counts
from privsyn_core.generation.target_scores import GumTarget, table_score

#: a Gibbs step draws at most this many record-by-value cells at once (memory, not result)
_CHUNK_CELLS = 1 << 22
#: records per thread below which a compiled Gibbs step is not split (a hand-off costs more)
_RECORDS_PER_PART = 20_000


@dataclass(frozen=True)
class MrfSettings:
    """The fit's schedule. Chosen on the wide tables at epsilon 0.5, 1 and 4 (evidence M):
    a larger ``step`` diverges (0.5 drives the measured marginals' L1 from 0.07 to 1.16 on
    happiness), ``shrink`` 2 fits less than 1 and gains nothing."""

    sweeps: int = 40
    step: float = 0.1
    #: noise sigmas of each cell's gap left unfitted
    shrink: float = 1.0
    #: the table is judged at the start, every this many sweeps, and after the last
    judge_every: int = 5
    #: "compiled" (numba, :mod:`~privsyn_core.generation.mrf_kernel`), "reference" (NumPy)
    #: or "auto": compiled when numba is installed. Both draw the same values from the same
    #: uniforms; the compiled step is about ten times faster.
    kernel: Literal["auto", "compiled", "reference"] = "auto"


@dataclass
class _Field:
    """One component's potentials and records (attribute-major codes)."""

    codes: np.ndarray
    sizes: dict[int, int]
    targets: list[GumTarget]
    potentials: list[np.ndarray]
    unary: dict[int, np.ndarray]
    #: per attribute row: (target index, axis) of the targets it is in
    member: dict[int, list[tuple[int, int]]]
    floor: float
    #: per attribute row: a tree neighbour's row, whose values group the draws
    anchor: dict[int, int]


def run_mrf(
    components: Sequence[tuple[np.ndarray, Sequence[GumTarget]]],
    trees: Sequence[Tree],
    rows: Sequence[Mapping[str, int]],
    rng: np.random.Generator,
    settings: MrfSettings = MrfSettings(),
    on_iteration: ProgressHook | None = None,
    unmeasured: Sequence[UnmeasuredPairs | None] = (),
) -> tuple[list[GumIterationRecord], bool]:
    """Fit and sample every component in lockstep, one sweep each per history record.

    ``components`` are GUM's problems (record-major arrays holding the tree start, their
    targets), ``trees`` the trees those starts were drawn along, ``rows`` each component's
    attribute -> array row. The kept records are written back into the arrays. Returns the
    history and whether the run ended normally rather than by ``on_iteration`` returning
    ``False`` (the arrays then hold the last sweep's records)."""
    judged = list(unmeasured) or [None] * len(components)
    kernel = _kernel(settings.kernel)
    parts = threads() if kernel is not None else 1
    with ThreadPoolExecutor(max_workers=parts) if parts > 1 else nullcontext() as pool:
        step = _Step(kernel, pool, parts)
        return _run(components, trees, rows, rng, settings, on_iteration, judged, step)


def _run(
    components: Sequence[tuple[np.ndarray, Sequence[GumTarget]]],
    trees: Sequence[Tree],
    rows: Sequence[Mapping[str, int]],
    rng: np.random.Generator,
    settings: MrfSettings,
    on_iteration: ProgressHook | None,
    judged: Sequence[UnmeasuredPairs | None],
    step: _Step,
) -> tuple[list[GumIterationRecord], bool]:
    fields = [
        _start(records, targets, tree, position)
        for (records, targets), tree, position in zip(components, trees, rows, strict=True)
    ]
    kept = [
        _judged(records, field, pairs, rng)
        for (records, _), field, pairs in zip(components, fields, judged, strict=True)
    ]
    made = [0] * len(components)  # the sweep (from 1) of each kept table; 0: the start
    judged_parts = [bool(targets) for _, targets in components]
    history: list[GumIterationRecord] = []
    for sweep in range(settings.sweeps):
        began = time.perf_counter()
        errors: dict[tuple[str, ...], float] = {}
        for field in fields:
            _gibbs_sweep(field, rng, step)
            errors.update(_fit(field, settings, step.kernel is not None))
        table_error = None
        if (sweep + 1) % settings.judge_every == 0 or sweep + 1 == settings.sweeps:
            scores = []
            for k, ((records, _), field, pairs) in enumerate(
                zip(components, fields, judged, strict=True)
            ):
                score, codes = _judged(records, field, pairs, rng)
                scores.append(score)
                if score < kept[k][0]:
                    kept[k] = (score, codes)
                    made[k] = sweep + 1
            table_error = float(np.mean(scores)) if scores else None
        history.append(
            GumIterationRecord(  # counted from 0, as GUM's iterations
                sweep,
                settings.step,
                errors,
                time.perf_counter() - began,
                table_error,
                "mrf",
                tuple(m for m, j in zip(made, judged_parts, strict=True) if j),
            )
        )
        if on_iteration is not None and on_iteration(history[-1]) is False:
            for (records, _), field in zip(components, fields, strict=True):
                _write(records, field.codes)
            return history, False
    for (records, _), (_, codes) in zip(components, kept, strict=True):
        _write(records, codes)
    return history, True


def _start(
    records: np.ndarray, targets: Sequence[GumTarget], tree: Tree, position: Mapping[str, int]
) -> _Field:
    """The tree's field: its records, and potentials that make its distribution the tree's."""
    n = records.shape[1]
    floor = 1.0 / n
    codes = columns_of(records, len(position))  # the records' own (smallest) integer type
    member: dict[int, list[tuple[int, int]]] = {}
    sizes: dict[int, int] = {}
    for k, target in enumerate(targets):
        for axis, row in enumerate(target.rows):
            member.setdefault(row, []).append((k, axis))
            sizes[row] = target.shape[axis]
    frequencies = [_distribution(t) for t in targets]
    unary = {
        row: np.log(_one_way(frequencies[k], axis) + floor)
        for row, ((k, axis), *_) in member.items()
    }
    potentials = [np.zeros(t.shape) for t in targets]
    for first, links in tree.items():
        for second, link in links.items():
            if first > second:
                continue  # each edge once
            a, b = position[link.first], position[link.second]
            k = next(k for k, t in enumerate(targets) if a in t.rows and b in t.rows)
            pair = _pair(frequencies[k], targets[k].rows.index(a), targets[k].rows.index(b))
            pmi = (
                np.log(pair + floor)
                - np.log(pair.sum(axis=1, keepdims=True) + floor)
                - np.log(pair.sum(axis=0, keepdims=True) + floor)
            )
            potentials[k] += _broadcast(
                pmi, targets[k].rows.index(a), targets[k].rows.index(b), targets[k].shape
            )
    anchor = {position[name]: position[next(iter(links))] for name, links in tree.items() if links}
    return _Field(codes, sizes, list(targets), potentials, unary, member, floor, anchor)


@dataclass(frozen=True)
class _Step:
    """How a Gibbs step runs: the compiled kernel module (None: NumPy) and the threads its
    record ranges are split over."""

    kernel: ModuleType | None = None
    pool: ThreadPoolExecutor | None = None
    parts: int = 1


def _kernel(choice: str) -> ModuleType | None:
    """The compiled kernel module the setting asks for, None for NumPy."""
    if choice == "reference":
        return None
    try:
        from privsyn_core.generation import mrf_kernel
    except ImportError:
        if choice == "compiled":
            raise ImportError(
                "the compiled MRF step needs numba: pip install 'privsyn-studio[compiled]', "
                "or use kernel='reference'"
            ) from None
        return None
    return mrf_kernel


def _gibbs_sweep(field: _Field, rng: np.random.Generator, step: _Step = _Step()) -> None:
    """Resample every attribute of every record from its conditional, in a random order."""
    n = field.codes.shape[1]
    for row in rng.permutation(sorted(field.member)):
        anchor = field.anchor.get(row)
        groups = None if anchor is None else field.codes[anchor]
        if step.kernel is None:
            _draw(field, row, _stratified(groups, n, rng))
        else:
            _draw_compiled(field, row, _stratified_compiled(groups, n, rng, step.kernel), step)


def _draw(field: _Field, row: int, uniforms: np.ndarray) -> None:
    """Attribute ``row`` of every record drawn from its conditional: the smallest value whose
    cumulative weight reaches the record's uniform times the total (NumPy)."""
    n = field.codes.shape[1]
    size = field.sizes[row]
    chunk = max(1, _CHUNK_CELLS // size)
    for lo in range(0, n, chunk):
        hi = min(n, lo + chunk)
        logits = np.broadcast_to(field.unary[row], (hi - lo, size)).copy()
        for k, axis in field.member[row]:
            logits += _conditional(field, k, axis, slice(lo, hi))
        logits -= logits.max(axis=1, keepdims=True)
        weights = np.exp(logits).cumsum(axis=1)
        draws = uniforms[lo:hi] * weights[:, -1]
        field.codes[row, lo:hi] = np.minimum((weights < draws[:, None]).sum(axis=1), size - 1)


def _draw_compiled(field: _Field, row: int, uniforms: np.ndarray, step: _Step) -> None:
    """:func:`_draw` in the compiled kernel, its record ranges split over the step's threads."""
    kernel = step.kernel
    assert kernel is not None
    tables, other_rows, other_strides = [], [], []
    table_start, other_start = [0], [0]
    for k, axis in field.member[row]:
        target = field.targets[k]
        table = np.moveaxis(field.potentials[k], axis, -1)
        tables.append(np.ascontiguousarray(table, dtype=np.float64).ravel())
        table_start.append(table_start[-1] + tables[-1].size)
        others = [
            (r, s)
            for i, (r, s) in enumerate(zip(target.rows, target.shape, strict=True))
            if i != axis
        ]
        stride = 1
        for r, s in reversed(others):
            other_rows.append(r)
            other_strides.append(stride)
            stride *= s
        other_start.append(len(other_rows))
    arguments = (
        field.codes,
        int(row),
        np.ascontiguousarray(field.unary[row], dtype=np.float64),
        np.concatenate(tables) if tables else np.zeros(0),
        np.asarray(table_start, dtype=np.int64),
        np.asarray(other_rows, dtype=np.int64),
        np.asarray(other_strides, dtype=np.int64),
        np.asarray(other_start, dtype=np.int64),
        uniforms,
    )
    n = field.codes.shape[1]
    parts = max(1, min(step.parts, n // _RECORDS_PER_PART))
    bounds = np.linspace(0, n, parts + 1).astype(np.int64)
    spans = [(int(bounds[p]), int(bounds[p + 1])) for p in range(parts)]

    def draw(span: tuple[int, int]) -> None:
        kernel.draw_attribute(*arguments, *span)

    if step.pool is None or parts == 1:
        for span in spans:
            draw(span)
    else:
        list(step.pool.map(draw, spans))


def _stratified(groups: np.ndarray | None, n: int, rng: np.random.Generator) -> np.ndarray:
    """Uniforms for ``n`` draws, stratified within each group (all records one group when
    ``groups`` is None): the group's records in random order take one uniform from each of
    ``size`` equal strata. Where records share a conditional the draws then meet it to
    within a record per value, as the tree start's quotas do; an i.i.d. draw would add a
    sample's own deviations to every marginal (on 10,000 rows of loans, a bootstrap of the
    real table alone is 0.061 from it in 2-way L1)."""
    order = rng.permutation(n)
    if groups is not None:
        order = order[np.argsort(groups[order], kind="stable")]
        sizes = np.bincount(groups)
        sizes = sizes[sizes > 0]
    else:
        sizes = np.array([n])
    starts = np.repeat(np.cumsum(sizes) - sizes, sizes)
    rank = np.arange(n) - starts
    out = np.empty(n)
    out[order] = (rank + rng.random(n)) / np.repeat(sizes, sizes)
    return out


def _stratified_compiled(
    groups: np.ndarray | None, n: int, rng: np.random.Generator, kernel: ModuleType
) -> np.ndarray:
    """:func:`_stratified`'s rule in the compiled kernel, from one seed of ``rng``."""
    out = np.empty(n)
    everyone = np.zeros(n, dtype=np.uint8) if groups is None else groups
    kernel.stratify(everyone, np.uint64(rng.bit_generator.random_raw()), out)
    return out


def _conditional(
    field: _Field, k: int, axis: int, which: slice | np.ndarray, codes: np.ndarray | None = None
) -> np.ndarray:
    """Target ``k``'s potential as a function of its ``axis`` attribute, for the records
    ``which`` of ``codes`` (default the chains; their other attributes fixed): a (records x
    values) array."""
    codes = field.codes if codes is None else codes
    target = field.targets[k]
    table = np.moveaxis(field.potentials[k], axis, -1)
    others = [r for i, r in enumerate(target.rows) if i != axis]
    if not others:
        count = len(range(codes.shape[1])[which]) if isinstance(which, slice) else which.size
        return np.broadcast_to(table, (count, table.shape[-1]))
    shape = tuple(s for i, s in enumerate(target.shape) if i != axis)
    flat = np.ravel_multi_index(tuple(codes[r, which] for r in others), shape)
    return table.reshape(-1, table.shape[-1])[flat]


def _with_quotas(field: _Field, rng: np.random.Generator) -> np.ndarray:
    """A copy of the chains whose every attribute has exactly its target's 1-way counts
    (largest-remainder quotas), as the tree start and GUM's tables have.

    Gibbs draws meet each 1-way marginal only to within sampling noise, and that noise
    reaches every pair the attribute is in: on loans (10,000 x 55, epsilon 4) the MRF's 1-way
    L1 to the real table was 0.020 against GUM's 0.014, which cost it its lead on the pairs.
    So each over-filled value gives up randomly chosen records, and those are drawn again
    from their conditional restricted to the under-filled values, until every count is met.
    """
    codes = field.codes.copy()
    n = codes.shape[1]
    for row, ((k, axis), *_) in field.member.items():
        quota = quota_counts(_one_way(_distribution(field.targets[k]), axis), n)
        excess = np.bincount(codes[row], minlength=quota.size) - quota
        if not (excess > 0).any():
            continue
        order = rng.permutation(n)
        order = order[np.argsort(codes[row, order], kind="stable")]  # by value, random within
        first = np.cumsum(excess + quota) - (excess + quota)
        moved = np.concatenate(
            [order[first[v] : first[v] + excess[v]] for v in np.flatnonzero(excess > 0)]
        )
        logits = np.broadcast_to(field.unary[row], (moved.size, quota.size)).copy()
        for target, along in field.member[row]:
            logits += _conditional(field, target, along, moved, codes)
        weights = np.exp(logits - logits.max(axis=1, keepdims=True))
        need = np.maximum(-excess, 0)
        while moved.size:
            open_weights = weights * (need > 0)
            empty = open_weights.sum(axis=1) <= 0  # the conditional puts nothing where needed
            open_weights[empty] = need > 0
            cumulative = open_weights.cumsum(axis=1)
            draws = rng.random(moved.size) * cumulative[:, -1]
            values = np.minimum((cumulative < draws[:, None]).sum(axis=1), quota.size - 1)
            # each value takes at most what it still needs, the first comers in random order
            shuffled = rng.permutation(moved.size)
            by_value = shuffled[np.argsort(values[shuffled], kind="stable")]
            counts = np.bincount(values, minlength=quota.size)
            rank = np.arange(moved.size) - np.repeat(np.cumsum(counts) - counts, counts)
            taken = np.zeros(moved.size, dtype=bool)
            taken[by_value] = rank < need[values[by_value]]
            codes[row, moved[taken]] = values[taken]
            need -= np.bincount(values[taken], minlength=quota.size)
            moved, weights = moved[~taken], weights[~taken]
    return codes


def _fit(
    field: _Field, settings: MrfSettings, compiled: bool = False
) -> dict[tuple[str, ...], float]:
    """Move every potential towards its target (the gap beyond the noise); each target's L1
    before the move. ``compiled``: count the records' marginals in one compiled batch."""
    n = field.codes.shape[1]
    errors = {}
    frequencies = [c / n for c in _marginal_counts(field, compiled)]
    for k, target in enumerate(field.targets):
        counts = frequencies[k]
        wanted = _distribution(target)
        errors[target.attributes] = float(np.abs(counts - wanted).sum())
        gap = wanted - counts
        sigma = _cell_sigma(target)
        reachable = counts + np.sign(gap) * np.maximum(np.abs(gap) - settings.shrink * sigma, 0)
        field.potentials[k] += settings.step * (
            np.log(reachable + field.floor) - np.log(counts + field.floor)
        )
    for row, ((k, axis), *_) in field.member.items():
        counts = _one_way(frequencies[k], axis)
        wanted = _one_way(_distribution(field.targets[k]), axis)
        field.unary[row] += settings.step * (
            np.log(wanted + field.floor) - np.log(counts + field.floor)
        )
    return errors


def _distribution(target: GumTarget) -> np.ndarray:
    """The target as a distribution over its cells (negative frequencies as 0)."""
    wanted = np.clip(target.frequencies, 0, None).reshape(target.shape)
    return wanted / max(float(wanted.sum()), 1e-300)


def _marginal_counts(field: _Field, compiled: bool) -> list[np.ndarray]:
    """The records' counts of every target's attributes, each in the target's shape."""
    if compiled:
        from privsyn_core.count_kernel import count_sets

        rows = [t.rows for t in field.targets]
        flat = count_sets(field.codes, rows, [t.shape for t in field.targets])
        return [c.reshape(t.shape) for c, t in zip(flat, field.targets, strict=True)]
    counts = []
    for target in field.targets:
        cells = np.ravel_multi_index(tuple(field.codes[r] for r in target.rows), target.shape)
        counts.append(np.bincount(cells, minlength=math.prod(target.shape)).reshape(target.shape))
    return counts


def _cell_sigma(target: GumTarget) -> float:
    """The measurement noise of one cell, in frequencies, from the target's expected L1
    (``cells * sigma * sqrt(2 / pi) / total``); 0 when unknown."""
    if target.noise_l1 is None:
        return 0.0
    return target.noise_l1 / (target.frequencies.size * math.sqrt(2 / math.pi))


def _one_way(frequencies: np.ndarray, axis: int) -> np.ndarray:
    return frequencies.sum(axis=tuple(i for i in range(frequencies.ndim) if i != axis))


def _pair(frequencies: np.ndarray, i: int, j: int) -> np.ndarray:
    """The (i, j) pair summed out of a marginal, rows indexed by axis ``i``."""
    joint = frequencies.sum(axis=tuple(x for x in range(frequencies.ndim) if x not in (i, j)))
    return joint if i < j else joint.T


def _broadcast(pair: np.ndarray, i: int, j: int, shape: tuple[int, ...]) -> np.ndarray:
    """A pair's table (rows axis ``i``) spread over a marginal of ``shape``."""
    full = pair if i < j else pair.T
    view = [1] * len(shape)
    view[min(i, j)], view[max(i, j)] = full.shape
    return np.broadcast_to(full.reshape(view), shape)


def _judged(
    records: np.ndarray, field: _Field, pairs: UnmeasuredPairs | None, rng: np.random.Generator
) -> tuple[float, np.ndarray]:
    """The chains as a candidate table (their 1-way counts made exact, :func:`_with_quotas`)
    and its :func:`~privsyn_core.generation.target_scores.table_score`; the chains go on
    unchanged."""
    codes = _with_quotas(field, rng)
    _write(records, codes)
    return table_score(records, field.targets, pairs), codes


def _write(records: np.ndarray, codes: np.ndarray) -> None:
    fill_record_major(records, codes)
