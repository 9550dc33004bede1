"""The Marginals page's dependency graph: the HTML it sends (no browser; JavaScript is not run).

The browser test (test_dashboard_browser.py) checks what is drawn: scale times font size.
"""

from __future__ import annotations

import json
import re

import networkx as nx
import numpy as np
import pytest

from dashboard.views.marginals_graph import EDGE_WIDTH_RANGE, ORIGIN_COLOURS, graph_page
from dashboard.views.marginals_graph_layout import (
    LAYOUT_WIDTH,
    NODE_SIZE_RANGE,
    label_boxes,
    layout,
    node_radii,
    overlapping,
)
from dashboard.views.marginals_graph_pairs import (
    CIRCLE_AT_MOST,
    DEFAULT_PAIRS_DRAWN,
    backbone,
    default_pairs_drawn,
    dependency_groups,
    pairs_in_view,
    pairs_ranked,
)
from privsyn_core.generation.synthesis import SelectedMarginal

HOSTILE = "<img src=x onerror=alert(1)>"


def described(n: int, edges: list[tuple[int, int, float, str]], names=None):
    """A graph shaped like the pipeline's described graph, with its marginals."""
    names = names or [f"col_{i:03d}" for i in range(n)]
    graph = nx.Graph()
    graph.add_nodes_from(names)
    for i, name in enumerate(names):
        graph.nodes[name]["size"] = 2 + 7 * i
    marginals = []
    for a, b, indif, origin in edges:
        graph.add_edge(names[a], names[b], indif=indif)
        marginals.append(SelectedMarginal((names[a], names[b]), 4, 0.01, 3.0, origin))
    return graph, tuple(marginals)


def data_sets(page: str) -> tuple[list[dict], list[dict], dict]:
    nodes = json.loads(re.search(r"nodes = new vis\.DataSet\((\[.*?\])\);", page).group(1))
    edges = json.loads(re.search(r"edges = new vis\.DataSet\((\[.*?\])\);", page).group(1))
    options = json.loads(re.search(r"var options = (\{.*?\});\n", page, re.S).group(1))
    return nodes, edges, options


def hundred_attributes(seed: int = 3):
    rng = np.random.default_rng(seed)
    edges = [
        (i, j, float(rng.exponential(3000)), ["selected", "isolated"][int(rng.random() < 0.2)])
        for i in range(100)
        for j in range(i + 1, 100)
        if rng.random() < 0.015
    ]
    return described(100, edges)


def test_positions_are_fixed_physics_off_edges_straight():
    graph, marginals = described(5, [(0, 1, 10.0, "selected"), (1, 2, 900.0, "combined")])
    page = graph_page(graph, marginals)
    nodes, edges, options = data_sets(page.html)
    assert options["physics"]["enabled"] is False
    assert options["edges"]["smooth"] is False and len(edges) == 2
    assert options["nodes"]["scaling"]["label"]["drawThreshold"] <= 1
    assert all(n["physics"] is False and "x" in n and "y" in n for n in nodes)
    # computed once: the same graph gives the same page
    assert graph_page(graph, marginals).html == page.html


@pytest.mark.slow
def test_layout_keeps_nodes_apart_and_groups_components():
    graph, _ = hundred_attributes()
    positions = layout(graph)
    assert set(positions) == set(graph.nodes)
    points = np.array(list(positions.values()))
    gaps = np.linalg.norm(points[:, None] - points[None], axis=-1) + np.eye(len(points)) * 1e9
    assert gaps.min() > 45, "no two dots on top of each other"
    # components do not overlap: every component's box is disjoint from the others'
    boxes = []
    for component in nx.connected_components(graph):
        xy = np.array([positions[n] for n in component])
        boxes.append((*xy.min(axis=0), *xy.max(axis=0)))
    for i, (ax0, ay0, ax1, ay1) in enumerate(boxes):
        for bx0, by0, bx1, by1 in boxes[i + 1 :]:
            assert ax1 < bx0 or bx1 < ax0 or ay1 < by0 or by1 < ay0


def test_sizes_widths_and_colours_carry_the_dp_quantities():
    graph, marginals = described(
        4, [(0, 1, 10.0, "selected"), (1, 2, 5000.0, "isolated"), (2, 3, 800.0, "combined")]
    )
    nodes, edges, _ = data_sets(graph_page(graph, marginals).html)
    sizes = [n["size"] for n in nodes]
    assert min(sizes) == pytest.approx(NODE_SIZE_RANGE[0])
    assert max(sizes) == pytest.approx(NODE_SIZE_RANGE[1])
    by_origin = {e["origin"]: e for e in edges}
    assert by_origin["isolated"]["width"] == pytest.approx(EDGE_WIDTH_RANGE[1])
    assert by_origin["selected"]["width"] == pytest.approx(EDGE_WIDTH_RANGE[0])
    assert by_origin["combined"]["color"] == ORIGIN_COLOURS["combined"]
    assert by_origin["isolated"]["color"] == ORIGIN_COLOURS["isolated"]
    assert "noisy InDif 5000" in by_origin["isolated"]["title"]


def test_legend_explains_every_colour_and_the_page_stays_offline():
    graph, marginals = described(
        5,
        [
            (0, 1, 10.0, "selected"),
            (1, 2, 5000.0, "isolated"),
            (2, 3, 800.0, "combined"),
            (3, 4, 900.0, "tree"),
        ],
    )
    page = graph_page(graph, marginals).html
    legend = re.search(r'<div id="legend".*?</div>', page, re.S).group(0)
    for colour in ORIGIN_COLOURS.values():
        assert colour in legend
    _, edges, _ = data_sets(page)
    assert {e["origin"]: e["color"] for e in edges}["tree"] == ORIGIN_COLOURS["tree"]
    for words in ("tree pair", "selected pair", "combined clique", "isolated link", "noisy InDif"):
        assert words in legend
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)


def test_the_legend_names_only_the_colours_the_drawing_uses():
    """Pairs alone (the default: no cliques, no isolated links) get one swatch, not three."""
    graph, marginals = described(3, [(0, 1, 1.0, "selected"), (1, 2, 2.0, "selected")])
    legend = re.search(r'<div id="legend".*?</div>', graph_page(graph, marginals).html, re.S)
    assert ORIGIN_COLOURS["selected"] in legend.group(0)
    for origin in ("combined", "isolated"):
        assert ORIGIN_COLOURS[origin] not in legend.group(0)
    assert "combined clique" not in legend.group(0) and "noisy InDif" in legend.group(0)


def test_hostile_names_are_escaped_in_tooltips_and_inert_in_labels():
    graph, marginals = described(
        2, [(0, 1, 50.0, "selected")], names=[HOSTILE, "b</script><script>alert(2)"]
    )
    page = graph_page(graph, marginals).html
    assert HOSTILE not in page and "</script><script>alert(2)" not in page
    nodes, edges, _ = data_sets(page)
    assert {n["label"] for n in nodes} == {HOSTILE, "b</script><script>alert(2)"}  # canvas text
    assert all("<" not in n["title"] for n in nodes)
    assert "&lt;img src=x onerror=alert(1)&gt;" in edges[0]["title"]
    assert "<" not in edges[0]["title"]


@pytest.mark.slow
def test_a_hundred_attributes_get_a_tall_page_not_tiny_labels():
    graph, marginals = hundred_attributes()
    page = graph_page(graph, marginals)
    ys = [y for _, y in layout(graph).values()]
    assert page.height >= max(ys) - min(ys)  # fitted at about 1:1, the page scrolls
    nodes, edges, _ = data_sets(page.html)
    assert len(nodes) == 100
    assert all(e["color"].startswith("#") for e in edges), "a sparse graph keeps opaque edges"
    crowded = described(30, [(i, j, 1.0, "selected") for i in range(30) for j in range(i)])
    _, edges, _ = data_sets(graph_page(*crowded).html)
    assert all(e["color"].startswith("rgba(") and e["color"].endswith(",0.3)") for e in edges)


def planted_groups(seed: int = 5):
    """Ten groups of four that depend strongly within (InDif ~ 8,000), ten independent
    attributes, and every other pair selected with noise-sized InDif (~ 0 +- 1,000): the
    shape of a wide table at a large budget."""
    rng = np.random.default_rng(seed)
    names = [f"g{g}_{m}" for g in range(10) for m in "abcd"] + [f"free_{i}" for i in range(10)]
    edges = []
    for i in range(len(names)):
        for j in range(i + 1, len(names)):
            same = names[i][:2] == names[j][:2] and names[i].startswith("g")
            if same:
                edges.append((i, j, float(rng.normal(8000, 800)), "selected"))
            elif rng.random() < 0.5:
                edges.append((i, j, float(rng.normal(0, 1000)), "selected"))
    return described(len(names), edges, names=names)


@pytest.mark.slow
def test_a_big_component_is_drawn_as_its_dependency_groups():
    graph, marginals = planted_groups()
    groups = dependency_groups(graph)
    planted = {name[:2] for name in graph.nodes if name.startswith("g")}
    for prefix in planted:  # each planted group is one drawn group, and nothing else is in it
        members = {groups[n] for n in graph.nodes if n.startswith(prefix)}
        assert len(members) == 1, prefix
        (number,) = members
        assert {n for n, g in groups.items() if g == number} == {
            n for n in graph.nodes if n.startswith(prefix)
        }
    lone = [n for n in graph.nodes if n.startswith("free")]
    assert len({groups[n] for n in lone}) == len(lone), "independent attributes stand alone"

    positions = layout(graph, groups)
    xy = {n: np.array(p) for n, p in positions.items()}
    within = [np.linalg.norm(xy[a] - xy[b]) for a, b in graph.edges if groups[a] == groups[b]]
    between = [np.linalg.norm(xy[a] - xy[b]) for a, b in graph.edges if groups[a] != groups[b]]
    assert max(within) < np.median(between) / 2

    page = graph_page(graph, marginals).html
    _, edges, _ = data_sets(page)
    ids = {n: f"n{i}" for i, n in enumerate(graph.nodes)}
    group_of = {ids[n]: g for n, g in groups.items()}
    for edge in edges:
        alpha = float(edge["color"].rsplit(",", 1)[1].rstrip(")"))
        assert alpha == (0.3 if group_of[edge["from"]] == group_of[edge["to"]] else 0.07)
    assert "group of attributes that depend strongly" in page


def test_components_small_enough_for_a_circle_stay_one_group():
    graph, _ = hundred_attributes()
    groups = dependency_groups(graph)
    components = list(nx.connected_components(graph))
    assert any(len(c) > CIRCLE_AT_MOST for c in components)
    for component in components:
        if len(component) <= CIRCLE_AT_MOST:
            assert len({groups[n] for n in component}) == 1


LONG_WORDS = ("num", "accounts", "months", "since", "last", "credit", "total", "delinq", "income")


def long_names(n: int, seed: int = 0) -> list[str]:
    """Column names as long as a real wide table's (``months_since_last_credit_inquiry``)."""
    rng = np.random.default_rng(seed)
    return [
        "_".join(rng.choice(LONG_WORDS, size=int(rng.integers(2, 5)))) + f"_{i:02d}"
        for i in range(n)
    ]


def renamed(described_graph, names: list[str]):
    graph, marginals = described_graph
    return nx.relabel_nodes(graph, dict(zip(graph.nodes, names, strict=True))), marginals


def dense_wide(n: int = 80, seed: int = 1):
    """One component of ``n`` attributes, a third of all pairs selected, InDif mostly noise
    with a few strong chains: what a wide table at epsilon 1 selects today."""
    rng = np.random.default_rng(seed)
    edges = []
    for i in range(n):
        for j in range(i + 1, n):
            strong = j - i == 1 and i % 5 != 4
            if strong or rng.random() < 0.3:
                edges.append((i, j, float(rng.normal(9000 if strong else 0, 2600)), "selected"))
    return described(n, edges, names=long_names(n, seed))


@pytest.mark.parametrize(
    "make",
    [
        hundred_attributes,
        planted_groups,
        lambda: dense_wide(80),
        lambda: dense_wide(100, seed=2),
        lambda: renamed(hundred_attributes(), long_names(100, 3)),
    ],
    ids=["hundred", "planted", "dense-80-long-names", "dense-100-long-names", "sparse-100-long"],
)
@pytest.mark.slow
def test_no_two_labels_overlap_and_the_drawing_fits_the_page_width(make):
    graph, _ = make()
    positions = layout(graph)
    boxes = label_boxes(graph, positions)
    assert set(boxes) == set(graph.nodes)
    assert overlapping(boxes) == []
    left = min(b[0] for b in boxes.values())
    right = max(b[2] for b in boxes.values())
    assert right - left <= LAYOUT_WIDTH + 1, "as wide as the canvas: fitted near 1:1"


def test_a_label_box_covers_its_dot_and_the_text_under_it():
    graph, _ = described(2, [(0, 1, 5.0, "selected")], names=["months_since_last_delinq", "x"])
    radii = node_radii(graph)
    boxes = label_boxes(graph, {"months_since_last_delinq": (0.0, 0.0), "x": (500.0, 0.0)}, radii)
    x0, y0, x1, y1 = boxes["months_since_last_delinq"]
    # 24 characters at 16 px: a browser draws it about 190 px wide; the box is wider
    assert x1 - x0 >= 200 and x0 < 0 < x1
    r = radii["months_since_last_delinq"]
    assert y0 <= -r and y1 >= r + 16, "from the dot's top to the label line under it"
    x0, _, x1, _ = boxes["x"]
    assert x1 - x0 >= 2 * radii["x"], "a short label: the dot sets the width"
    assert overlapping({"a": (0, 0, 10, 10), "b": (10, 0, 20, 10)}) == [], "touching is apart"
    assert overlapping({"a": (0, 0, 10, 10), "b": (9, 9, 20, 20)}) == [("a", "b")]


def many_pairs(n: int = 21, seed: int = 4, tree: bool = False):
    """``n`` attributes with most pairs selected (130 of 210 at 21): a chain of strong
    dependencies, the rest noise-sized; with ``tree``, the chain is what tree-first measured."""
    rng = np.random.default_rng(seed)
    edges = []
    for i in range(n):
        for j in range(i + 1, n):
            chain = j == i + 1
            if chain or rng.random() < 0.6:
                strength = float(rng.normal(6000, 500)) if chain else float(rng.normal(0, 1500))
                edges.append((i, j, strength, "tree" if chain and tree else "selected"))
    return described(n, edges, names=long_names(n, seed))


def drawn_edges(page: str) -> list[dict]:
    return [e for e in data_sets(page)[1] if not e.get("hidden")]


def test_the_backbone_joins_every_attribute_by_its_strongest_pairs():
    graph, marginals = many_pairs()
    spine = backbone(graph, marginals)
    assert len(spine) == graph.number_of_nodes() - 1
    assert nx.is_tree(nx.Graph(spine))
    names = list(graph.nodes)
    chain = {frozenset((names[i], names[i + 1])) for i in range(len(names) - 1)}
    assert {frozenset(e) for e in spine} == chain, "the strong chain is the maximum tree"
    ranked = pairs_ranked(graph, marginals)
    assert len(ranked) == graph.number_of_edges() == len({frozenset(e) for e in ranked})
    rest = [graph.edges[e]["indif"] for e in ranked[len(spine) :]]
    assert rest == sorted(rest, reverse=True), "after the backbone, strongest first"


def test_where_tree_first_ran_its_tree_is_the_backbone_even_when_weaker():
    graph, marginals = many_pairs(tree=True)
    names = list(graph.nodes)
    weak = (names[0], names[1])
    graph.edges[weak]["indif"] = -50.0  # a tree pair whose noisy score came out low
    spine = {frozenset(e) for e in backbone(graph, marginals)}
    assert frozenset(weak) in spine
    assert spine == {frozenset(m.attributes) for m in marginals if m.origin == "tree"}


@pytest.mark.slow
def test_the_first_view_draws_at_most_forty_pairs_and_hides_the_rest():
    graph, marginals = many_pairs()
    assert graph.number_of_edges() >= 120
    count = default_pairs_drawn(graph, marginals)
    assert count == DEFAULT_PAIRS_DRAWN
    page = graph_page(graph, marginals, count).html
    _, edges, _ = data_sets(page)
    assert len(edges) == graph.number_of_edges(), "every pair is in the page, for clicks"
    assert len(drawn_edges(page)) == count
    legend = re.search(r'<div id="legend".*?</div>', page, re.S).group(0)
    assert f"Showing {count} of the {graph.number_of_edges()} measured pairs" in legend
    assert "Grey dots" not in legend and "in no measured pair" not in legend, "no lone dot"
    positions = layout(pairs_in_view(graph, marginals, count))
    assert overlapping(label_boxes(graph, positions)) == []
    # the layout follows what is drawn: a drawn pair sits closer than a hidden one
    shown = pairs_in_view(graph, marginals, count)
    xy = {n: np.array(p) for n, p in positions.items()}
    near = np.median([np.linalg.norm(xy[a] - xy[b]) for a, b in shown.edges])
    hidden = [e for e in graph.edges if not shown.has_edge(*e)]
    far = np.median([np.linalg.norm(xy[a] - xy[b]) for a, b in hidden])
    assert near < 0.8 * far, (near, far)


def test_a_small_selection_is_drawn_whole_and_a_long_tree_is_never_cut():
    graph, marginals = described(4, [(0, 1, 5.0, "selected"), (2, 3, 9.0, "selected")])
    assert default_pairs_drawn(graph, marginals) == 2
    legend = re.search(r'<div id="legend".*?</div>', graph_page(graph, marginals, 2).html, re.S)
    assert "Showing" not in legend.group(0)
    graph, marginals = many_pairs(n=60, tree=True)
    assert default_pairs_drawn(graph, marginals) == 59, "the whole tree, past forty"


def test_the_key_shows_the_light_dot_only_for_attributes_in_no_pair():
    graph, marginals = described(3, [(0, 1, 5.0, "selected")])
    nodes, _, _ = data_sets(graph_page(graph, marginals).html)
    colours = {n["label"]: n["color"] for n in nodes}
    assert colours["col_002"] != colours["col_000"] == colours["col_001"]
    page = graph_page(graph, marginals).html
    legend = re.search(r'<div id="legend".*?</div>', page, re.S).group(0)
    assert "in no measured pair" in legend and colours["col_002"] in legend
    assert colours["col_000"] in legend


_LAYOUT_IN_A_NEW_PROCESS = """
import json, sys
sys.path.insert(0, {root!r})
from tests.test_dashboard_graph import hundred_attributes, planted_groups
from dashboard.views.marginals_graph_layout import layout
out = {{}}
for name, (graph, _) in (("sparse", hundred_attributes()), ("groups", planted_groups())):
    out[name] = {{node: [round(x, 6), round(y, 6)] for node, (x, y) in layout(graph).items()}}
print(json.dumps(out, sort_keys=True))
"""


@pytest.mark.slow
def test_the_same_graph_draws_the_same_picture_in_every_server_process():
    """Layouts must not follow string hashing, which differs between processes: a user who
    reloads the page on another worker sees the graph they saw."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[1])
    code = _LAYOUT_IN_A_NEW_PROCESS.format(root=root)
    pictures = {
        subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONHASHSEED": str(seed)},
            capture_output=True,
            text=True,
            check=True,
            cwd=root,
        ).stdout
        for seed in (1, 2, 3)
    }
    assert len(pictures) == 1
