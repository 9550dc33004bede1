"""Which of the measured pairs the Marginals page's graph draws, and which attributes it
groups together.

A wide table at a large budget selects hundreds of pairs; drawn all at once they are a
tangle. :func:`pairs_ranked` orders them for drawing: the backbone first (the tree that
tree-first selection measured, or else the spanning tree of the strongest noisy InDif), then
the strongest others; the reader chooses how many (:func:`pairs_in_view`). A component too
big for one circle is split into groups of attributes that depend strongly on each other
(:func:`dependency_groups`). Everything here reads the DP scores and the selection only.
"""

from __future__ import annotations

import math

import networkx as nx

from privsyn_core.generation.synthesis import SelectedMarginal

#: a component of more attributes is drawn as its dependency groups, not as one circle
CIRCLE_AT_MOST = 24
#: at most this many lines at first view (past the backbone): 40 strong lines read, a hundred
#: crossing ones do not
DEFAULT_PAIRS_DRAWN = 40


def edge_origin(a: str, b: str, marginals: tuple[SelectedMarginal, ...]) -> str:
    """The origin that explains the edge: a combined clique wins over a pair, a pair over a link."""
    origins = {m.origin for m in marginals if a in m.attributes and b in m.attributes}
    for origin in ("combined", "tree", "selected", "isolated"):
        if origin in origins:
            return origin
    return "selected"


def _strength(graph: nx.Graph, edge: tuple[str, str]) -> float:
    indif = float(graph.edges[edge].get("indif", 0.0))
    return indif if math.isfinite(indif) else -math.inf


def backbone(graph: nx.Graph, marginals: tuple[SelectedMarginal, ...]) -> list[tuple[str, str]]:
    """The pairs that hold the drawing together, strongest first.

    Where tree-first selection ran, the tree it measured first (its pairs' origin is
    ``tree``); otherwise the maximum spanning forest of the measured pairs weighted by their
    noisy InDif (Chow and Liu's tree, the structure PrivSyn's selection starts from in
    spirit, paper section 4.2). Either way every attribute in some pair is joined to the
    rest by its strongest dependency. Public: it reads only the DP scores and the selection.
    """
    tree = [
        (a, b)
        for a, b in graph.edges
        if any(m.origin == "tree" and {a, b} <= set(m.attributes) for m in marginals)
    ]
    if not tree:
        weighted = nx.Graph()
        weighted.add_nodes_from(graph.nodes)
        weighted.add_edges_from((a, b, {"w": _strength(graph, (a, b))}) for a, b in graph.edges)
        tree = list(nx.maximum_spanning_edges(weighted, weight="w", data=False))
    return sorted(tree, key=lambda e: (-_strength(graph, e), str(e)))


def pairs_ranked(graph: nx.Graph, marginals: tuple[SelectedMarginal, ...]) -> list[tuple[str, str]]:
    """Every measured pair in the order the drawing adds them: the backbone, then the
    others by noisy InDif, strongest first (ties in the table's column order)."""
    spine = backbone(graph, marginals)
    taken = {frozenset(e) for e in spine}
    order = {node: i for i, node in enumerate(graph.nodes)}
    rest = sorted(
        (e for e in graph.edges if frozenset(e) not in taken),
        key=lambda e: (-_strength(graph, e), sorted((order[e[0]], order[e[1]]))),
    )
    return spine + rest


def default_pairs_drawn(graph: nx.Graph, marginals: tuple[SelectedMarginal, ...]) -> int:
    """How many pairs the first view draws: ``DEFAULT_PAIRS_DRAWN``, or the whole backbone
    where it is longer (a tree over 100 attributes has 99 pairs), or all when fewer."""
    return min(graph.number_of_edges(), max(DEFAULT_PAIRS_DRAWN, len(backbone(graph, marginals))))


def pairs_in_view(
    graph: nx.Graph, marginals: tuple[SelectedMarginal, ...], count: int | None
) -> nx.Graph:
    """The graph as drawn: every attribute, and the first ``count`` pairs of
    :func:`pairs_ranked` (all of them when ``count`` is None)."""
    ranked = pairs_ranked(graph, marginals)
    shown = nx.Graph()
    shown.add_nodes_from(graph.nodes(data=True))
    shown.add_edges_from(
        (a, b, graph.edges[a, b]) for a, b in (ranked if count is None else ranked[:count])
    )
    return shown


def dependency_groups(graph: nx.Graph) -> dict[str, int]:
    """Each attribute's group: its connected component, split into communities when the
    component has more than ``CIRCLE_AT_MOST`` attributes.

    Communities maximise modularity with the pairs' noisy InDif as weights (clipped at 0: a
    negative score is noise), so attributes that depend on each other share a group and one
    that depends on nothing in particular stays alone. Deterministic (seed 0): the same
    graph always draws the same picture. Public: the InDif scores are DP measurements.
    """
    weighted = nx.Graph()
    weighted.add_nodes_from(graph.nodes)
    weighted.add_weighted_edges_from(
        (a, b, max(float(d.get("indif", 0.0)), 0.0) + 1e-9) for a, b, d in graph.edges(data=True)
    )
    order = {node: i for i, node in enumerate(graph.nodes)}

    def first(nodes: set[str]) -> int:
        """Where ``nodes`` start among the table's columns."""
        return min(order[node] for node in nodes)

    groups: dict[str, int] = {}
    next_group = 0
    for component in sorted(nx.connected_components(graph), key=first):
        if len(component) > CIRCLE_AT_MOST:
            parts = _loose_members_alone(
                weighted,
                nx.community.louvain_communities(
                    in_table_order(weighted, component), weight="weight", seed=0
                ),
            )
        else:
            parts = [component]
        for part in sorted(parts, key=first):
            groups.update(dict.fromkeys(part, next_group))
            next_group += 1
    return groups


def in_table_order(graph: nx.Graph, nodes: set[str]) -> nx.Graph:
    """The subgraph on ``nodes`` with its nodes and edges in ``graph``'s order (the table's
    columns). ``graph.subgraph(nodes)`` lists them in the set's order, which follows string
    hashing, so two server processes would lay out the same graph differently."""
    sub = nx.Graph()
    sub.add_nodes_from((n, graph.nodes[n]) for n in graph.nodes if n in nodes)
    sub.add_edges_from((a, b, d) for a, b, d in graph.edges(data=True) if a in nodes and b in nodes)
    return sub


def _loose_members_alone(weighted: nx.Graph, parts: list[set[str]]) -> list[set[str]]:
    """Take out of each community the attributes whose mean tie to the other members is under
    half the mean tie among those others, each to a group of its own.

    Louvain puts every attribute in some community, also one whose pairs are all noise: it
    lands wherever the noise happened to be highest, and a circle would claim a dependency
    that is not there. Comparing with the group's own ties (absent pairs count as 0) makes
    the rule independent of the table's width and of the budget's scale.
    """
    kept: list[set[str]] = []
    for part in parts:
        members = sorted(part, key=str)
        k = len(members)
        loose: set[str] = set()
        if k > 2:
            ties = nx.to_numpy_array(weighted, nodelist=members, weight="weight")
            own = ties.sum(axis=1)  # each member's ties to the others
            among = (ties.sum() / 2 - own) / ((k - 1) * (k - 2) / 2)  # mean tie of the others
            loose = {m for m, o, a in zip(members, own / (k - 1), among, strict=True) if o < a / 2}
        if part - loose:
            kept.append(part - loose)
        kept.extend({node} for node in sorted(loose, key=str))
    return kept
