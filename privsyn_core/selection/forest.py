"""The three graph algorithms the engine runs: a maximum spanning forest, connected
components and breadth-first tree edges, in pure Python.

They used to come from networkx, whose import (its backends scan the installed entry points)
cost every ``privsyn synthesize`` about a tenth of a second of a 1.5 s start, for
graphs of a few hundred nodes at most. networkx stays a dependency (the dashboard lays out
graphs with it; the tests compare against it), but the engine's run no longer imports it.

A graph is an adjacency mapping, networkx's own layout: every node a key (in insertion
order), mapped to its neighbours (in the order their edges were added), each to the edge's
value. Every function here visits nodes and edges in networkx's order, so their results
are the same as networkx's, ties included (``tests/test_forest.py`` checks this on random
graphs): a run's output stays bit-identical.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from typing import TypeVar

N = TypeVar("N", bound=Hashable)
V = TypeVar("V")


def adjacency(nodes: Iterable[N], edges: Iterable[tuple[N, N, V]]) -> dict[N, dict[N, V]]:
    """The graph of ``nodes`` and the edges ``(a, b, value)``, as networkx's ``add_nodes_from``
    then ``add_edge`` calls build it: an endpoint not among ``nodes`` is added after them, and
    an edge given again keeps its place and takes the later value."""
    graph: dict[N, dict[N, V]] = {node: {} for node in nodes}
    for a, b, value in edges:
        graph.setdefault(a, {})[b] = value
        graph.setdefault(b, {})[a] = value
    return graph


def edge_list(graph: Mapping[N, Iterable[N]]) -> list[tuple[N, N]]:
    """Each edge once, in networkx's ``Graph.edges`` order: node by node, each node's
    neighbours in order, skipping the nodes already passed."""
    passed: set[N] = set()
    found = []
    for node, neighbours in graph.items():
        found += [(node, other) for other in neighbours if other not in passed]
        passed.add(node)
    return found


def maximum_spanning_forest(graph: Mapping[N, Mapping[N, float]]) -> list[tuple[N, N]]:
    """The edges of a maximum spanning forest of ``graph`` (values are weights), in the order
    Kruskal's algorithm takes them: networkx's ``maximum_spanning_tree`` (the edges sorted by
    weight, heaviest first, ties in :func:`edge_list` order). A NaN weight is refused, as
    networkx refuses it."""
    weighted = []
    for a, b in edge_list(graph):
        weight = graph[a][b]
        if math.isnan(weight):
            raise ValueError(f"NaN found as an edge weight. Edge {(a, b)}")
        weighted.append((weight, a, b))
    weighted.sort(key=lambda edge: edge[0], reverse=True)  # stable: ties keep their order
    parent = {node: node for node in graph}
    taken = []
    for _, a, b in weighted:
        root_a, root_b = _root(parent, a), _root(parent, b)
        if root_a != root_b:
            parent[root_b] = root_a
            taken.append((a, b))
    return taken


def _root(parent: dict[N, N], node: N) -> N:
    """The representative of ``node``'s set, halving the path on the way."""
    while parent[node] != node:
        parent[node] = parent[parent[node]]
        node = parent[node]
    return node


def connected_components(graph: Mapping[N, Iterable[N]]) -> list[list[N]]:
    """The components of ``graph``, ordered by their first node in ``graph``'s order (as
    networkx's ``connected_components``), each listed in breadth-first order from it."""
    seen: set[N] = set()
    components = []
    for node in graph:
        if node not in seen:
            component = [node, *(child for _, child in bfs_edges(graph, node))]
            seen.update(component)
            components.append(component)
    return components


def bfs_edges(
    graph: Mapping[N, Iterable[N]],
    root: N,
    order: Callable[[Iterable[N]], Iterable[N]] | None = None,
) -> Iterator[tuple[N, N]]:
    """The ``(parent, child)`` edges of a breadth-first search from ``root``, as networkx's
    ``bfs_edges``: each node's neighbours in ``graph``'s order, or in ``order(neighbours)``
    (``sorted`` for networkx's ``sort_neighbors=sorted``)."""
    seen = {root}
    queue = [root]
    for parent in queue:  # the queue grows while it is read
        neighbours = graph[parent] if order is None else order(graph[parent])
        for child in neighbours:
            if child not in seen:
                seen.add(child)
                queue.append(child)
                yield parent, child
