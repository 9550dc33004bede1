"""Compiled loops of one Gibbs step of the Markov random field (numba); the semantics live in
:mod:`privsyn_core.generation.mrf`.

The reference step builds, per attribute, a records x values array of logits: one gathered
copy of every potential table the attribute sits in, then ``max``, ``exp``, ``cumsum`` and a
comparison, each a pass over that array in float64. On planted's 100,000 x 40 table those
passes were all of a 120 s fit (evidence M of ``benchmarks/evidence/tree-first-2026-11-26.txt``).
Here each record's conditional lives in a buffer of one value count, its weights are
products of factors exponentiated once per table cell, and its draw is made as they are
summed. Given the same uniforms both draw the same values but where a uniform falls within
rounding of a boundary between two values; the stratified uniforms themselves come from a
counter-based hash here (no sort, no NumPy temporaries), from the Generator in the reference.

Parallelism as in :mod:`~privsyn_core.generation.gum_kernel`: each call works on a range of
records and releases the GIL, and the caller runs the ranges on plain threads. A record's
draw reads its other attributes and writes only its own code of the attribute drawn, so
ranges never share a write.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from privsyn_core.generation.gum_kernel import _unit


@nb.njit(cache=True, nogil=True)
def draw_attribute(
    codes: np.ndarray,
    row: int,
    unary: np.ndarray,
    tables: np.ndarray,
    table_start: np.ndarray,
    other_rows: np.ndarray,
    other_strides: np.ndarray,
    other_start: np.ndarray,
    uniforms: np.ndarray,
    lo: int,
    hi: int,
) -> None:
    """Draw attribute ``row`` of records ``lo`` to ``hi`` from its conditional.

    ``codes`` is the field's ``(d, n)`` array. Potential table ``m`` of the attribute is
    ``tables[table_start[m]:table_start[m + 1]]``, laid out as (cells of its other attributes)
    x (the attribute's values); those attributes are ``other_rows[other_start[m]:
    other_start[m + 1]]`` with C-order strides ``other_strides``. The draw is the smallest
    value whose cumulative weight reaches ``uniforms[i]`` times the total.

    The weights are products of ``exp`` of the potentials, taken once per table cell rather
    than once per record and value; each table's rows are shifted to a maximum of 0 first
    (a factor per record, which the draw ignores). Where a product underflows (total 0), that
    record is drawn again from summed logs."""
    size = unary.size
    factors = np.empty(tables.size)
    for m in range(table_start.size - 1):
        for base in range(table_start[m], table_start[m + 1], size):
            top = tables[base]
            for v in range(1, size):
                top = max(top, tables[base + v])
            for v in range(size):
                factors[base + v] = math.exp(tables[base + v] - top)
    top = unary[0]
    for v in range(1, size):
        top = max(top, unary[v])
    prior = np.empty(size)
    for v in range(size):
        prior[v] = math.exp(unary[v] - top)
    weights = np.empty(size)
    cells = np.empty(table_start.size - 1, dtype=np.int64)
    for i in range(lo, hi):
        for m in range(cells.size):
            cell = 0
            for j in range(other_start[m], other_start[m + 1]):
                cell += np.int64(codes[other_rows[j], i]) * other_strides[j]
            cells[m] = table_start[m] + cell * size
        for v in range(size):
            weights[v] = prior[v]
        for m in range(cells.size):
            base = cells[m]
            for v in range(size):
                weights[v] *= factors[base + v]
        total = 0.0
        for v in range(size):
            total += weights[v]
            weights[v] = total
        if not total > 1e-280:
            total = _logs(unary, tables, cells, weights)
        wanted = uniforms[i] * total
        value = size - 1
        for v in range(size):
            if weights[v] >= wanted:
                value = v
                break
        codes[row, i] = value


@nb.njit(cache=True, nogil=True)
def _logs(unary: np.ndarray, tables: np.ndarray, cells: np.ndarray, weights: np.ndarray) -> float:
    """One record's cumulative weights (into ``weights``) and their total, from summed log
    potentials: the path for records whose product of factors underflows."""
    size = unary.size
    for v in range(size):
        weights[v] = unary[v]
        for m in range(cells.size):
            weights[v] += tables[cells[m] + v]
    top = weights[0]
    for v in range(1, size):
        top = max(top, weights[v])
    total = 0.0
    for v in range(size):
        total += math.exp(weights[v] - top)
        weights[v] = total
    return total


@nb.njit(cache=True, nogil=True)
def stratify(groups: np.ndarray, seed: np.uint64, out: np.ndarray) -> None:
    """:func:`privsyn_core.generation.mrf._stratified`'s rule without its sort and from
    counter-based random numbers (:func:`~privsyn_core.generation.gum_kernel._unit` of
    ``seed``): the records are visited in a random order (Fisher-Yates), and the ``r``-th
    record of a group of ``s`` gets ``(r + u) / s``, ``u`` uniform in [0, 1)."""
    n = groups.size
    order = np.arange(n)
    for j in range(n - 1, 0, -1):
        k = np.int64(_unit(seed, j) * (j + 1))
        order[j], order[k] = order[k], order[j]
    sizes = np.zeros(np.int64(groups.max()) + 1 if n else 1, dtype=np.int64)
    for i in range(n):
        sizes[groups[i]] += 1
    seen = np.zeros(sizes.size, dtype=np.int64)
    for j in range(n):
        i = order[j]
        g = groups[i]
        out[i] = (seen[g] + _unit(seed, n + j)) / sizes[g]
        seen[g] += 1
