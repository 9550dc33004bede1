"""The engine's graph algorithms (privsyn_core/selection/forest.py) give networkx's results,
in networkx's order, ties included: on random graphs with few distinct weights, duplicate
edges, self-loops, isolated nodes and nodes first named by an edge."""

from __future__ import annotations

import math
import random

import networkx as nx
import pytest
from networkx.algorithms.tree.mst import kruskal_mst_edges

from privsyn_core.selection.forest import (
    adjacency,
    bfs_edges,
    connected_components,
    edge_list,
    maximum_spanning_forest,
)

SEEDS = range(40)


def random_edges(seed: int) -> tuple[list[str], list[tuple[str, str, float]]]:
    """Nodes (some isolated) and weighted edges among them and a few more nodes, in random
    order; weights from a handful of values, so that many tie."""
    rng = random.Random(seed)
    names = [f"v{i:02d}" for i in range(rng.randint(1, 40))]
    rng.shuffle(names)
    listed = names[: rng.randint(0, len(names))]
    edges = []
    for _ in range(rng.randint(0, 3 * len(names))):
        a, b = rng.choice(names), rng.choice(names)
        if a == b and rng.random() < 0.8:
            continue  # a few self-loops only
        edges.append((a, b, float(rng.choice([0.5, 1.0, 1.0, 2.0, 3.5]))))
    return listed, edges


def networkx_graph(nodes: list[str], edges: list[tuple[str, str, float]]) -> nx.Graph:
    graph = nx.Graph()
    graph.add_nodes_from(nodes)
    for a, b, weight in edges:
        graph.add_edge(a, b, weight=weight)
    return graph


def layout(graph) -> list[tuple[str, list[tuple[str, float]]]]:
    """Nodes and each node's neighbours with their weights, in order."""
    return [(node, [(k, graph[node][k]) for k in graph[node]]) for node in graph]


@pytest.mark.parametrize("seed", SEEDS)
def test_the_graph_and_its_edges_are_in_networkx_order(seed):
    nodes, edges = random_edges(seed)
    graph, reference = adjacency(nodes, edges), networkx_graph(nodes, edges)
    assert layout(graph) == [
        (n, [(k, d["weight"]) for k, d in reference.adj[n].items()]) for n in reference
    ]
    assert edge_list(graph) == list(reference.edges)


@pytest.mark.parametrize("seed", SEEDS)
def test_the_spanning_forest_is_networkx_maximum_spanning_tree(seed):
    nodes, edges = random_edges(seed)
    graph, reference = adjacency(nodes, edges), networkx_graph(nodes, edges)
    forest = maximum_spanning_forest(graph)
    assert forest == list(kruskal_mst_edges(reference, minimum=False, data=False))
    tree = nx.maximum_spanning_tree(reference)  # the same tree, built the same way
    assert layout(adjacency(graph, ((a, b, graph[a][b]) for a, b in forest))) == [
        (n, [(k, d["weight"]) for k, d in tree.adj[n].items()]) for n in tree
    ]


@pytest.mark.parametrize("seed", SEEDS)
def test_components_are_networkx_connected_components(seed):
    nodes, edges = random_edges(seed)
    graph, reference = adjacency(nodes, edges), networkx_graph(nodes, edges)
    components = connected_components(graph)
    assert [set(c) for c in components] == list(nx.connected_components(reference))
    assert all(len(set(c)) == len(c) for c in components)


@pytest.mark.parametrize("seed", SEEDS)
def test_breadth_first_edges_are_networkx_bfs_edges(seed):
    nodes, edges = random_edges(seed)
    graph, reference = adjacency(nodes, edges), networkx_graph(nodes, edges)
    for root in graph:
        assert list(bfs_edges(graph, root)) == list(nx.bfs_edges(reference, root))
        assert list(bfs_edges(graph, root, sorted)) == list(
            nx.bfs_edges(reference, root, sort_neighbors=sorted)
        )


def test_ties_go_to_the_edge_networkx_lists_first():
    # every edge weighs the same: the forest is the first spanning edges in edge_list order
    graph = adjacency(["c", "a", "b"], [("b", "a", 1.0), ("a", "c", 1.0), ("c", "b", 1.0)])
    assert edge_list(graph) == [("c", "a"), ("c", "b"), ("a", "b")]
    assert maximum_spanning_forest(graph) == [("c", "a"), ("c", "b")]


def test_an_edge_given_again_keeps_its_place_and_takes_the_later_value():
    graph = adjacency([], [("a", "b", 1.0), ("b", "c", 2.0), ("b", "a", 3.0)])
    assert layout(graph) == [
        ("a", [("b", 3.0)]),
        ("b", [("a", 3.0), ("c", 2.0)]),
        ("c", [("b", 2.0)]),
    ]


def test_a_nan_weight_is_refused_as_networkx_refuses_it():
    graph = adjacency(["a", "b"], [("a", "b", math.nan)])
    with pytest.raises(ValueError, match="NaN"):
        maximum_spanning_forest(graph)
    with pytest.raises(ValueError, match="NaN"):
        nx.maximum_spanning_tree(networkx_graph(["a", "b"], [("a", "b", math.nan)]))


def test_an_empty_graph_has_no_forest_and_no_components():
    assert maximum_spanning_forest({}) == []
    assert connected_components({}) == []
