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
"""

from __future__ import annotations

from collections.abc import Iterable

import networkx as nx
import pandas as pd


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

    for node in sorted(graph.nodes, key=order.get):
        higher = sorted((n for n in graph.neighbors(node) if order[n] > order[node]), key=order.get)
        if sizes[node] <= gamma:
            grow((node,), sizes[node], 0.0, higher)
    return found


def combine_marginals(
    pairs: Iterable[tuple[str, str]],
    sizes: dict[str, int],
    noisy_indif: pd.DataFrame,
    gamma: int = 5000,
) -> tuple[tuple[str, ...], ...]:
    """Algorithm 2: the marginals to measure, as attribute tuples (cliques first, then pairs)."""
    pairs = [tuple(p) for p in pairs]
    graph = nx.Graph()
    graph.add_edges_from(pairs)
    cliques = _small_cliques(graph, sizes, gamma, noisy_indif)
    cliques.sort(key=lambda item: (-len(item[0]), -item[1], item[0]))
    accepted: list[tuple[str, ...]] = []
    seen: set[str] = set()
    for clique, _ in cliques:
        if len(seen.intersection(clique)) <= 2:
            accepted.append(clique)
            seen.update(clique)
    covered = {frozenset(p) for c in accepted for p in _pairs_of(c)}
    rest = [p for p in pairs if frozenset(p) not in covered]
    return (*accepted, *rest)


def _pairs_of(clique: tuple[str, ...]) -> Iterable[tuple[str, str]]:
    for i, a in enumerate(clique):
        for b in clique[i + 1 :]:
            yield (a, b)
