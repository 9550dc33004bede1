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
the unmeasured pairs' noisy InDif (:func:`~privsyn_core.generation.gum.table_score`) among
the start and every ``judge_every`` sweeps. All of it reads the consistent noisy marginals
only: post-processing, free of privacy cost.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from privsyn_core.generation.dependence import UnmeasuredPairs
from privsyn_core.generation.gum import (
    GumIterationRecord,
    GumTarget,
    ProgressHook,
    columns_of,
    fill_record_major,
    table_score,
)
from privsyn_core.generation.initial import Tree

#: a Gibbs step draws at most this many record-by-value cells at once (memory, not result)
_CHUNK_CELLS = 1 << 22


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
    fields = [
        _start(records, targets, tree, position)
        for (records, targets), tree, position in zip(components, trees, rows, strict=True)
    ]
    kept = [
        (_score(records, field, pairs), field.codes.copy())
        for (records, _), field, pairs in zip(components, fields, judged, strict=True)
    ]
    history: list[GumIterationRecord] = []
    for sweep in range(settings.sweeps):
        began = time.perf_counter()
        errors: dict[tuple[str, ...], float] = {}
        for field in fields:
            _gibbs_sweep(field, rng)
            errors.update(_fit(field, settings))
        table_error = None
        if (sweep + 1) % settings.judge_every == 0 or sweep + 1 == settings.sweeps:
            scores = []
            for k, ((records, _), field, pairs) in enumerate(
                zip(components, fields, judged, strict=True)
            ):
                score = _score(records, field, pairs)
                scores.append(score)
                if score < kept[k][0]:
                    kept[k] = (score, field.codes.copy())
            table_error = float(np.mean(scores)) if scores else None
        history.append(
            GumIterationRecord(
                sweep + 1, settings.step, errors, time.perf_counter() - began, table_error
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


def _gibbs_sweep(field: _Field, rng: np.random.Generator) -> None:
    """Resample every attribute of every record from its conditional, in a random order."""
    n = field.codes.shape[1]
    for row in rng.permutation(sorted(field.member)):
        size = field.sizes[row]
        chunk = max(1, _CHUNK_CELLS // size)
        anchor = field.anchor.get(row)
        uniforms = _stratified(None if anchor is None else field.codes[anchor], n, rng)
        for lo in range(0, n, chunk):
            hi = min(n, lo + chunk)
            logits = np.broadcast_to(field.unary[row], (hi - lo, size)).copy()
            for k, axis in field.member[row]:
                logits += _conditional(field, k, axis, lo, hi)
            logits -= logits.max(axis=1, keepdims=True)
            weights = np.exp(logits).cumsum(axis=1)
            draws = uniforms[lo:hi] * weights[:, -1]
            field.codes[row, lo:hi] = np.minimum((weights < draws[:, None]).sum(axis=1), size - 1)


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


def _conditional(field: _Field, k: int, axis: int, lo: int, hi: int) -> np.ndarray:
    """Target ``k``'s potential as a function of its ``axis`` attribute, for records
    ``lo:hi`` (their other attributes fixed): a (records x values) array."""
    target = field.targets[k]
    table = np.moveaxis(field.potentials[k], axis, -1)
    others = [r for i, r in enumerate(target.rows) if i != axis]
    if not others:
        return np.broadcast_to(table, (hi - lo, table.shape[-1]))
    shape = tuple(s for i, s in enumerate(target.shape) if i != axis)
    flat = np.ravel_multi_index(tuple(field.codes[r, lo:hi] for r in others), shape)
    return table.reshape(-1, table.shape[-1])[flat]


def _fit(field: _Field, settings: MrfSettings) -> dict[tuple[str, ...], float]:
    """Move every potential towards its target (the gap beyond the noise); each target's L1
    before the move."""
    n = field.codes.shape[1]
    errors = {}
    for k, target in enumerate(field.targets):
        counts = _counts(field, k) / n
        wanted = _distribution(target)
        errors[target.attributes] = float(np.abs(counts - wanted).sum())
        gap = wanted - counts
        sigma = _cell_sigma(target)
        reachable = counts + np.sign(gap) * np.maximum(np.abs(gap) - settings.shrink * sigma, 0)
        field.potentials[k] += settings.step * (
            np.log(reachable + field.floor) - np.log(counts + field.floor)
        )
    for row, ((k, axis), *_) in field.member.items():
        counts = _one_way(_counts(field, k) / n, axis)
        wanted = _one_way(_distribution(field.targets[k]), axis)
        field.unary[row] += settings.step * (
            np.log(wanted + field.floor) - np.log(counts + field.floor)
        )
    return errors


def _distribution(target: GumTarget) -> np.ndarray:
    """The target as a distribution over its cells (negative frequencies as 0)."""
    wanted = np.clip(target.frequencies, 0, None).reshape(target.shape)
    return wanted / max(float(wanted.sum()), 1e-300)


def _counts(field: _Field, k: int) -> np.ndarray:
    target = field.targets[k]
    cells = np.ravel_multi_index(tuple(field.codes[r] for r in target.rows), target.shape)
    return np.bincount(cells, minlength=math.prod(target.shape)).reshape(target.shape)


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


def _score(records: np.ndarray, field: _Field, pairs: UnmeasuredPairs | None) -> float:
    _write(records, field.codes)
    return table_score(records, field.targets, pairs)


def _write(records: np.ndarray, codes: np.ndarray) -> None:
    fill_record_major(records, codes)
