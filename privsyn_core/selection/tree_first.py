"""Tree first, then what the tree does not explain: a two-round selection.

Algorithm 1 scores each pair by its own noisy InDif. On a table whose columns form a chain
(``a`` copies ``b``, ``b`` copies ``c``) the pairs two or three hops apart score nearly as high
as the links, so Algorithm 1 takes them too and spreads rho_3 over marginals that add nothing
once the links are measured; a maximum spanning tree (MST's model) is then better. On a table
whose columns share hidden factors a tree is not enough: the siblings of a factor stay
dependent given any tree through them. What tells the two apart is not a pair's score but how
much of it the tree already explains, which needs the tree measured.

* Round 1 (:func:`first_round`): the maximum spanning tree of the margin-adjusted noisy InDif
  (:func:`~privsyn_core.selection.greedy.select_marginals`' lower confidence bound), its edges
  kept while Algorithm 1 finds them worth their noise, measured with the share of rho_3 that
  Equation 1 would give them among Algorithm 1's own selection.
* Round 2 (:func:`second_round`, post-processing of round 1 and the InDif scores): every pair
  the tree connects has a tree-implied joint (the product of the noisy tree conditionals along
  its path) and so an implied InDif. Algorithm 1 runs again on what is left, the noisy InDif
  minus the implied one, with the same margin, on the rest of rho_3.
* Nothing is wasted: the rest of rho_3 is split so that every final marginal gets its
  Equation 1 share of the whole rho_3 where it can; a tree marginal measured again is pooled
  with its first measurement by inverse-variance weighting (:func:`pooled`), whose zCDP costs
  add, so it ends as if measured once with both budgets.

It reads only DP outputs (the noisy InDif, its public noise scale, the noisy round-1
marginals) and public sizes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from privsyn_core.marginals import NoisyMarginal
from privsyn_core.selection.forest import adjacency, bfs_edges, maximum_spanning_forest
from privsyn_core.selection.greedy import (
    Candidates,
    SelectionStep,
    budget_weights,
    candidates,
    greedy_order,
    null_share,
)
from privsyn_core.selection.target import TargetEmphasis

Pair = tuple[str, str]


@dataclass(frozen=True)
class Scoring:
    """What both rounds read besides the InDif scores: public sizes, the noisy 1-way
    marginals, the InDif noise scale, the margin (in sigmas, see
    :mod:`~privsyn_core.selection.greedy`), a prediction target's emphasis, and whether rho_3
    is split equally rather than by Equation 1."""

    sizes: dict[str, int]
    one_way: Sequence[NoisyMarginal]
    indif_sigma: float
    margin: float
    emphasis: TargetEmphasis | None = None
    equal: bool = False

    def candidates(self, noisy_indif: pd.DataFrame, floor: np.ndarray | None) -> Candidates:
        return candidates(
            noisy_indif, self.sizes, self.emphasis, self.indif_sigma, self.margin, floor
        )

    def weights(self, marginals: Sequence[tuple[str, ...]]) -> np.ndarray:
        return budget_weights(marginals, self.sizes, self.emphasis, self.equal)


@dataclass(frozen=True)
class Round:
    """Marginals to measure, each with its own rho, and the Algorithm 1 steps behind them."""

    marginals: tuple[tuple[str, ...], ...]
    budgets: tuple[float, ...]
    steps: tuple[SelectionStep, ...]


def _spanning_tree(found: Candidates) -> np.ndarray:
    """Candidate indices of a maximum spanning forest of the pairs with dependency left."""
    pairs = {int(k): (int(found.iu[k]), int(found.ju[k])) for k in np.flatnonzero(found.phi > 0)}
    graph = adjacency((), ((a, b, float(found.phi[k])) for k, (a, b) in pairs.items()))
    index = {frozenset(pair): k for k, pair in pairs.items()}
    edges = maximum_spanning_forest(graph)
    return np.array(sorted(index[frozenset(edge)] for edge in edges), dtype=int)


def first_round(noisy_indif: pd.DataFrame, rho: float, scoring: Scoring) -> Round:
    """The tree to measure first, and its budgets. The scores less the InDif that independent
    columns show in a sample (:func:`implied_indif` of no tree) are margin-adjusted; the
    maximum spanning forest of the pairs left dependent is kept as far as Algorithm 1 takes
    its edges with ``rho`` (rho_3); each edge gets ``rho w_i / W``, ``W`` summing the
    allocation weights (:func:`budget_weights`) over these edges, Algorithm 1's own selection
    and the attributes neither covers (measured alone in round 2)."""
    floor = implied_indif((), list(noisy_indif.columns), scoring.sizes, scoring.one_way)
    found = scoring.candidates(noisy_indif, floor)
    tree = _spanning_tree(found)
    if not tree.size:
        return Round((), (), ())
    taken = greedy_order(found.phi[tree], found.power[tree], rho)
    if not taken:
        return Round((), (), ())
    kept = [int(tree[i]) for i, _ in taken]
    usual = {k for k, _ in greedy_order(found.phi, found.power, rho)}
    pairs: list[tuple[str, ...]] = [found.pair(k) for k in sorted(usual | set(kept))]
    covered = {a for p in pairs for a in p}
    pairs += [(a,) for a in found.names if a not in covered]  # measured alone in round 2
    weights = dict(zip(pairs, scoring.weights(pairs), strict=True))
    total = sum(weights.values())
    chosen = [found.pair(k) for k in kept]
    steps = tuple(SelectionStep(p, e) for p, (_, e) in zip(chosen, taken, strict=True))
    return Round(tuple(chosen), tuple(rho * weights[p] / total for p in chosen), steps)


def sampled_indif(joint: np.ndarray, rows: float) -> float:
    """The expected InDif (in counts) of ``rows`` rows drawn from ``joint`` (frequencies).

    Not ``rows * ||joint - independent||_1``: a sample's own deviations add to it, about
    ``sqrt(2 / pi) sqrt(rows p (1 - p))`` per cell where the joint is independent, which on
    100,000 rows and 40 x 40 cells is some 10,000 counts, far above the InDif noise at large
    epsilon. Each cell is a folded normal: deviation ``d`` from independence, sampling
    deviation ``s`` (shrunk by the ``(ka - 1)(kb - 1) / (ka kb)`` cells left free once the
    sample's own margins are fitted)."""
    from scipy.special import erf  # here: scipy costs every command a fifth of a second

    ka, kb = joint.shape
    free = (ka - 1) * (kb - 1) / (ka * kb)
    d = rows * (joint - np.outer(joint.sum(axis=1), joint.sum(axis=0)))
    s = np.sqrt(rows * joint * np.maximum(1 - joint, 0.0) * free)  # joint <= 1 but for rounding
    z = np.divide(d, s, out=np.zeros_like(d), where=s > 0)
    folded = s * math.sqrt(2 / math.pi) * np.exp(-(z**2) / 2) + d * erf(z / math.sqrt(2))
    return float(np.where(s > 0, folded, np.abs(d)).sum())


def implied_indif(
    tree: Sequence[NoisyMarginal],
    names: Sequence[str],
    sizes: dict[str, int],
    one_way: Sequence[NoisyMarginal] = (),
) -> np.ndarray:
    """The InDif (in counts) each pair would show if the table were a sample from the tree of
    ``tree``'s noisy 2-way marginals (:func:`sampled_indif`): the joint of ``a`` and ``c`` is
    ``P(a, b) P(.|b) ... P(c|.)`` along the tree path, the product of their noisy 1-way
    marginals (``one_way``, else the tree's, else uniform) where no path joins them: with no
    tree, the InDif of independence, which a sample shows too. The row count is the median
    noisy total of ``tree``, else of ``one_way``."""
    index = {name: i for i, name in enumerate(names)}
    joints: dict[tuple[int, int], np.ndarray] = {}
    ones = {i: np.full(sizes[n], 1.0 / sizes[n]) for i, n in enumerate(names)}
    totals = []
    for marginal in one_way:
        counts = np.maximum(marginal.table.values, 0.0)
        totals.append(counts.sum())
        ones[index[marginal.attributes[0]]] = counts / max(counts.sum(), 1e-12)
    rows_alone = float(np.median(totals)) if totals else 0.0
    graph: dict[int, dict[int, None]] = {i: {} for i in range(len(names))}
    totals = []
    for marginal in tree:
        a, b = (index[x] for x in marginal.attributes)
        counts = np.maximum(marginal.table.values.reshape(marginal.table.shape), 0.0)
        totals.append(counts.sum())
        joint = counts / max(counts.sum(), 1e-12)
        joints[(a, b)], joints[(b, a)] = joint, joint.T
        if not one_way:
            ones[a], ones[b] = joint.sum(axis=1), joint.sum(axis=0)
        graph[a][b] = graph[b][a] = None
    rows = float(np.median(totals)) if totals else rows_alone
    out = np.zeros((len(names), len(names)))
    for source in range(len(names)):
        reach: dict[int, np.ndarray] = {}
        for parent, child in bfs_edges(graph, source):
            link = joints[(parent, child)]
            if parent == source:
                reach[child] = link
                continue
            mass = link.sum(axis=1, keepdims=True)
            fallback = np.broadcast_to(link.sum(axis=0), link.shape)
            given = np.divide(link, mass, out=fallback.copy(), where=mass > 0)
            reach[child] = reach[parent] @ given
        for other in range(source + 1, len(names)):
            joint = reach.get(other, np.outer(ones[source], ones[other]))
            out[source, other] = out[other, source] = sampled_indif(joint, rows)
    return out


def second_round(
    noisy_indif: pd.DataFrame,
    rho: float,
    first: Round,
    measured: Sequence[NoisyMarginal],
    scoring: Scoring,
) -> Round:
    """The final marginals and the budgets still to spend on each (``rho`` is the whole
    rho_3, ``first`` what round 1 spent): the pairs whose noisy InDif exceeds its tree-implied
    InDif beyond the margin (Algorithm 1 on that excess, with what round 1 left), the tree's
    top-ups, and every attribute no pair covers, alone."""
    names = list(noisy_indif.columns)
    found = scoring.candidates(noisy_indif, None)
    tree = {frozenset(p) for p in first.marginals}
    rest = np.array([k for k in range(found.phi.size) if frozenset(found.pair(k)) not in tree])
    left = rho - math.fsum(first.budgets)
    steps: list[SelectionStep] = []
    if rest.size and left > 0:
        implied = implied_indif(measured, names, scoring.sizes, scoring.one_way)
        implied = implied[found.iu[rest], found.ju[rest]]
        excess = found.scores[rest] - implied
        phi = found.weight[rest] * np.maximum(
            excess - scoring.margin * null_share(excess) * scoring.indif_sigma, 0.0
        )
        taken = greedy_order(phi, found.power[rest], left)
        steps = [SelectionStep(found.pair(int(rest[i])), e) for i, e in taken]
    added: list[tuple[str, ...]] = [s.pair for s in steps]
    covered = {a for m in (*first.marginals, *added) for a in m}
    alone = [(a,) for a in names if a not in covered]
    final = [*first.marginals, *added, *alone]
    weights = scoring.weights(final)
    share = rho / float(weights.sum())  # Equation 1 over the final set
    spent = len(first.marginals)
    ratio = first.budgets[0] / weights[0] if spent else 0.0  # round 1 gave rho_i = ratio w_i
    if share >= ratio:
        budgets = [share * w - (ratio * w if i < spent else 0.0) for i, w in enumerate(weights)]
    else:  # the tree already holds more than its share: the rest goes to the others
        others = float(weights[spent:].sum())
        budgets = [0.0] * spent + [left * w / others for w in weights[spent:]]
    keep = [i for i, b in enumerate(budgets) if b > 0]
    return Round(
        tuple(final[i] for i in keep),
        tuple(budgets[i] for i in keep),
        (*first.steps, *steps),
    )


def pooled(first: NoisyMarginal, again: NoisyMarginal) -> NoisyMarginal:
    """Two measurements of one marginal as one: inverse-variance weighted counts, whose
    variance is ``1 / (1 / s1^2 + 1 / s2^2)`` and whose zCDP cost is the sum of the two (a
    Gaussian measurement with both budgets at once would have the same noise)."""
    w1, w2 = first.sigma**-2, again.sigma**-2
    values = (w1 * first.table.values + w2 * again.table.values) / (w1 + w2)
    return NoisyMarginal(first.table.with_values(values), first.rho + again.rho, (w1 + w2) ** -0.5)
