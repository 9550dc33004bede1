"""Combining selected pairs into larger marginals (paper appendix G, Algorithm 2).

The selected pairs form a graph. Cliques of three or more attributes are merged into one
multi-way marginal when the clique's domain has at most ``gamma`` cells and it shares at most
two attributes with cliques already accepted; the pairs a merged clique covers are dropped.
Cliques are visited from the largest size down (Algorithm 2); among cliques of one size the
paper gives no order, and we take those with the largest summed noisy InDif first, so the
most dependent groups are captured when choices conflict.

Enumerating all cliques of a dense graph is exponential, but a clique can only be accepted
if its domain fits in ``gamma`` cells, and adding an attribute never shrinks the domain, so
the enumeration prunes every branch whose domain already exceeds ``gamma``.

**Which cliques are worth it** (``rule``). The paper accepts any clique under ``gamma`` cells
("paper"). But Algorithm 1 chose the pairs by weighing their dependency error against the
noise error ``(sum_j c_j^(2/3))^(3/2) / sqrt(pi rho)`` of the set it measures, and a merged
clique changes that set: a 5-way clique of Adult (2,016 cells) replaces pairs of ~100 cells
each, and with the budget split by ``c^(2/3)`` it takes the budget of several of them and still
gets far more noise per cell. "no_added_noise" therefore accepts a clique only when it does
not raise Algorithm 1's noise error: ``(w_C c_C)^(2/3)`` may not exceed the summed
``(w_p c_p)^(2/3)`` of the selected pairs it replaces (``w`` is a prediction target's weight,
:mod:`privsyn_core.selection.target`; 1 without one). Binary and other small attributes still
merge, which is what the paper's appendix G combines for; large cliques of large attributes
no longer do. "off" measures the selected pairs as they are, and is the engine's default: on
four tables and three epsilons it beats both others on 2-way L1 and range queries (the
evidence is in :class:`~privsyn_core.config.PrivSynConfig`). Our reading: at these budgets a
clique's higher-order cells are mostly noise, so what it adds is worth less than the precision
its pairs lose. The paper's rule stays for the paper lab and for comparison.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Literal

import pandas as pd

from privsyn_core.selection.target import TargetEmphasis

if TYPE_CHECKING:
    import networkx as nx

CombineRule = Literal["paper", "no_added_noise", "off"]
COMBINE_RULES: tuple[str, ...] = ("paper", "no_added_noise", "off")


def _small_cliques(
    graph: nx.Graph, sizes: dict[str, int], gamma: int, noisy_indif: pd.DataFrame
) -> list[tuple[tuple[str, ...], float]]:
    """All cliques of >= 3 nodes whose domain has at most ``gamma`` cells, each with its summed
    noisy InDif. The sums grow with the cliques (one addition per new edge): a dense graph has
    tens of thousands of small cliques (NLTCS at epsilon 1: 64,702), and summing each through
    pandas afterwards took half a minute."""
    order = {node: i for i, node in enumerate(sorted(graph.nodes))}
    position = {name: i for i, name in enumerate(noisy_indif.columns)}
    scores = noisy_indif.to_numpy(dtype=float)
    found: list[tuple[tuple[str, ...], float]] = []

    def grow(clique: tuple[str, ...], cells: int, strength: float, candidates: list[str]) -> None:
        if len(clique) >= 3:
            found.append((clique, strength))
        for k, node in enumerate(candidates):
            grown = cells * sizes[node]
            if grown > gamma:
                continue
            row = scores[position[node]]
            added = strength + sum(float(row[position[member]]) for member in clique)
            rest = [c for c in candidates[k + 1 :] if graph.has_edge(node, c)]
            grow((*clique, node), grown, added, rest)

    for node in sorted(graph.nodes, key=order.__getitem__):
        higher = sorted(
            (n for n in graph.neighbors(node) if order[n] > order[node]), key=order.__getitem__
        )
        if sizes[node] <= gamma:
            grow((node,), sizes[node], 0.0, higher)
    return found


def combine_marginals(
    pairs: Iterable[tuple[str, str]],
    sizes: dict[str, int],
    noisy_indif: pd.DataFrame,
    gamma: int = 5000,
    *,
    rule: CombineRule = "paper",
    emphasis: TargetEmphasis | None = None,
) -> tuple[tuple[str, ...], ...]:
    """Algorithm 2: the marginals to measure, as attribute tuples (cliques first, then pairs).

    ``rule`` (module docstring): "paper" accepts every clique under ``gamma`` cells that
    shares at most two attributes with those accepted before it; "no_added_noise" also asks
    that it not raise the weighted noise error (``emphasis`` gives the weights); "off" keeps
    the pairs."""
    listed = [tuple(p) for p in pairs]
    if rule == "off":
        return tuple(listed)
    import networkx as nx  # here: the default rule is "off", and networkx is slow to import

    graph = nx.Graph()
    graph.add_edges_from(listed)
    cliques = _small_cliques(graph, sizes, gamma, noisy_indif)
    cliques.sort(key=lambda item: (-len(item[0]), -item[1], item[0]))

    def noise_cost(attributes: Sequence[str]) -> float:
        weight = 1.0 if emphasis is None else emphasis.weight_of(attributes)
        return (weight * math.prod(sizes[a] for a in attributes)) ** (2 / 3)

    accepted: list[tuple[str, ...]] = []
    seen: set[str] = set()
    covered: set[frozenset[str]] = set()
    for clique, _ in cliques:
        if len(seen.intersection(clique)) > 2:
            continue
        replaced = [p for p in _pairs_of(clique) if frozenset(p) not in covered]
        if rule == "no_added_noise" and noise_cost(clique) > sum(map(noise_cost, replaced)):
            continue
        accepted.append(clique)
        seen.update(clique)
        covered.update(frozenset(p) for p in _pairs_of(clique))
    rest = [p for p in listed if frozenset(p) not in covered]
    return (*accepted, *rest)


def _pairs_of(clique: tuple[str, ...]) -> Iterable[tuple[str, str]]:
    for i, a in enumerate(clique):
        for b in clique[i + 1 :]:
            yield (a, b)
