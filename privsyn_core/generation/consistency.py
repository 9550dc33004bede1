"""Making the noisy marginals agree with each other and with probability (paper section 4.3).

Two kinds of inconsistency are removed, alternately, for a bounded number of rounds:

* **Shared attributes.** For every attribute set ``A`` shared by several marginals (all
  intersections of marginal attribute sets, closed under intersection, including the empty
  set, so all totals agree too), the target on ``A`` is the weighted mean of the marginals'
  projections with ``w_i ~ rho_i / g_i``, where ``g_i`` is the number of cells of marginal ``i``
  that fold into one cell of ``A`` (the inverse variance of the projection). Each cell of
  marginal ``i`` is then corrected by ``(target - projection_i) / g_i``. Sets are visited from
  the smallest up, so enforcing a larger set keeps the smaller ones it contains consistent.
  The 1-way marginals take part with their own budget.
* **Non-negativity.** Each marginal is projected onto the non-negative tables with its total
  (the L2 projection onto a scaled simplex, the "shift and clip" of the research code).

The rounds stop when no shared projection differs by more than ``tolerance`` (relative to
the total) after the non-negativity step, or after ``max_rounds``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from privsyn_core.marginals import MarginalTable, NoisyMarginal


@dataclass(frozen=True)
class ConsistencyReport:
    """What the consistency step did: rounds run and the largest remaining disagreement."""

    rounds: int
    max_discrepancy: float
    total: float


def project_nonnegative(values: np.ndarray, total: float) -> np.ndarray:
    """Closest point (in L2) to ``values`` with non-negative cells summing to ``total``."""
    if total <= 0:
        return np.zeros_like(values)
    ordered = np.sort(values)[::-1]
    cumulative = np.cumsum(ordered) - total
    steps = np.arange(1, values.size + 1)
    positive = ordered - cumulative / steps > 0
    k = int(np.flatnonzero(positive)[-1]) + 1
    shift = cumulative[k - 1] / k
    return np.maximum(values - shift, 0.0)


def _shared_sets(attribute_sets: Sequence[frozenset[str]]) -> list[frozenset[str]]:
    found: set[frozenset[str]] = set()
    frontier = {a & b for i, a in enumerate(attribute_sets) for b in attribute_sets[i + 1 :]}
    while frontier:
        found |= frontier
        frontier = {a & b for a in frontier for b in found} - found
    found.add(frozenset())
    return sorted(found, key=lambda s: (len(s), sorted(s)))


def _fold_index(table: MarginalTable, subset: Sequence[str]) -> np.ndarray:
    """For each cell of ``table``, the flat index of the cell of ``subset`` it folds into."""
    grids = np.indices(table.shape).reshape(len(table.shape), -1)
    index = np.zeros(table.cells, dtype=np.int64)
    for name in subset:
        axis = table.attributes.index(name)
        index = index * table.shape[axis] + grids[axis]
    return index


@dataclass(frozen=True)
class _Constraint:
    members: tuple[int, ...]
    folds: tuple[np.ndarray, ...]
    cells: int
    weights: np.ndarray
    spread: np.ndarray  # g_i per member


def make_consistent(
    marginals: Sequence[NoisyMarginal],
    *,
    max_rounds: int = 30,
    tolerance: float = 1e-7,
) -> tuple[tuple[MarginalTable, ...], ConsistencyReport]:
    """Consistent, non-negative count tables with a common total, in the input order."""
    tables = [m.table for m in marginals]
    sets = [frozenset(t.attributes) for t in tables]
    constraints: list[_Constraint] = []
    for shared in _shared_sets(sets):
        members = tuple(i for i, s in enumerate(sets) if shared <= s)
        if len(members) < 2:
            continue
        subset = sorted(shared)
        cells = int(
            np.prod(
                [tables[members[0]].shape[tables[members[0]].attributes.index(a)] for a in subset]
            )
        )
        spread = np.array([tables[i].cells / cells for i in members])
        weights = np.array([marginals[i].rho for i in members]) / spread
        constraints.append(
            _Constraint(
                members,
                tuple(_fold_index(tables[i], subset) for i in members),
                cells,
                weights / weights.sum(),
                spread,
            )
        )

    values = [t.values.astype(float).copy() for t in tables]
    rounds, discrepancy, total = 0, 0.0, 0.0
    for rounds in range(1, max_rounds + 1):  # noqa: B007 - rounds is reported
        for c in constraints:
            projections = [
                np.bincount(fold, weights=values[i], minlength=c.cells)
                for i, fold in zip(c.members, c.folds, strict=True)
            ]
            target = np.sum([w * p for w, p in zip(c.weights, projections, strict=True)], axis=0)
            for i, fold, p, g in zip(c.members, c.folds, projections, c.spread, strict=True):
                values[i] += ((target - p) / g)[fold]
        total = max(1.0, float(np.mean([v.sum() for v in values])))
        values = [project_nonnegative(v, total) for v in values]
        discrepancy = _max_discrepancy(values, constraints) / total
        if discrepancy <= tolerance:
            break
    report = ConsistencyReport(rounds, discrepancy, total)
    return tuple(t.with_values(v) for t, v in zip(tables, values, strict=True)), report


def _max_discrepancy(values: list[np.ndarray], constraints: list[_Constraint]) -> float:
    worst = 0.0
    for c in constraints:
        projections = [
            np.bincount(fold, weights=values[i], minlength=c.cells)
            for i, fold in zip(c.members, c.folds, strict=True)
        ]
        stacked = np.vstack(projections)
        worst = max(worst, float((stacked.max(axis=0) - stacked.min(axis=0)).max()))
    return worst


def without_consistency(
    marginals: Sequence[NoisyMarginal],
) -> tuple[tuple[MarginalTable, ...], ConsistencyReport]:
    """The "consistency off" arm of the paper lab: no reconciliation of shared attributes.

    Generation still needs distributions, so each marginal is made one on its own, as
    PrivBayes does (paper section 3.2: negative estimates become zero): negative cells are
    set to zero and the table is scaled to the common total, the mean of the noisy totals
    (paper section 6.1's estimate of ``n``). Shared attributes are left to disagree;
    ``max_discrepancy`` reports by how much (relative to the total), ``rounds`` is 0.
    """
    tables = [m.table for m in marginals]
    total = max(1.0, float(np.mean([t.values.sum() for t in tables]))) if tables else 1.0
    values = []
    for t in tables:
        clipped = np.maximum(t.values.astype(float), 0.0)
        mass = clipped.sum()
        values.append(clipped * (total / mass) if mass > 0 else np.full(t.cells, total / t.cells))
    sets = [frozenset(t.attributes) for t in tables]
    constraints = []
    for shared in _shared_sets(sets):
        members = tuple(i for i, s in enumerate(sets) if shared <= s)
        if len(members) < 2:
            continue
        subset = sorted(shared)
        first = tables[members[0]]
        cells = int(np.prod([first.shape[first.attributes.index(a)] for a in subset]))
        folds = tuple(_fold_index(tables[i], subset) for i in members)
        ones = np.ones(len(members))
        constraints.append(_Constraint(members, folds, cells, ones, ones))
    discrepancy = _max_discrepancy(values, constraints) / total if constraints else 0.0
    report = ConsistencyReport(0, discrepancy, total)
    return tuple(t.with_values(v) for t, v in zip(tables, values, strict=True)), report
