"""The dependency graph of the selected marginals as a self-contained pyvis page.

Readability choices, each because the previous force-directed page failed a reader:

* Positions are computed here, once, with networkx (one layout per connected component, the
  components packed on shelves) and the browser's physics is off, so the picture is the same
  on every visit and never wobbles.
* No two labels overlap: each dot and the label under it take a box, estimated generously
  from the label's length (:func:`~dashboard.charts.text_px`), and every layout keeps the
  boxes apart (circles just big enough, other shapes moved to the nearest free spot), within
  ``LAYOUT_WIDTH``. The script fits the drawing to the canvas, which is about as wide: the
  labels are drawn at about their size, as the layout assumed.
* A component too big for one circle (a wide table at a large budget selects hundreds of
  pairs, most of them between nearly independent attributes) is split into groups of
  attributes that depend strongly on each other (Louvain communities weighted by the pairs'
  noisy InDif, a fixed seed). Each group is a small circle of its own, and the edges between
  groups are drawn faint, so the structure reads before the tangle does.
* Labels have a fixed font size and vis-network's label draw threshold is lowered, and a small
  script raises the font if the fitted zoom would still draw a label under ``MIN_LABEL_PX``:
  every attribute name is legible at first view, also at 100 attributes.
* Edges are straight; width follows the noisy InDif of the pair (paper section 4.1), colour the
  origin of the marginal that holds it (Algorithm 1 pair, Algorithm 2 combined clique, or the
  link of an otherwise isolated attribute). The legend sits inside the page, above the canvas.
* A table with many selected pairs draws only some of them (:func:`pairs_in_view`): the
  backbone first (the tree that tree-first selection measured, or else the spanning tree of
  the strongest noisy InDif), then the strongest other pairs, up to a count the reader
  chooses. The layout is computed on what is drawn, so attributes joined by a drawn line sit
  near each other; the other pairs are in the page, hidden.
* Selecting (clicking) a node shows all its pairs, drawn or hidden, and dims everything that
  is not one of its marginals.

pyvis's "in_line" mode embeds vis-network, but its template still adds Bootstrap tags from a
CDN; they are stripped so the page makes no request outside the app. Every text from the
user's table is escaped before it reaches a tooltip; labels are drawn on the canvas as text and
reach the page through Jinja's ``tojson``, which escapes ``<``, ``>`` and ``&``.
"""

from __future__ import annotations

import html
import json
import math
import re
from dataclasses import dataclass

import networkx as nx
import numpy as np

from privsyn_core.generation.synthesis import SelectedMarginal

from ..charts import text_px

_CDN_TAG = re.compile(r"<(link|script)[^>]+(https?:)?//[^>]*>(\s*</script>)?", re.IGNORECASE)

FONT_PX = 16
#: the margin round the drawing when it is fitted to the canvas
FIT_MARGIN_PX = 20
MIN_LABEL_PX = 12
LAYOUT_WIDTH = 900.0
NODE_SIZE_RANGE = (8.0, 22.0)
CIRCLE_AT_MOST = 24
#: room around each dot-and-label box (two labels are at least twice this apart), more of it
#: between the members of a ring, the height of a label line in font sizes (with its white
#: outline), and the gaps between groups, between components and between attributes in a row
LABEL_PAD = 5.0
RING_AIR = 7.0
LABEL_LINE = 1.3
GROUP_GAP = 60.0
BLOCK_GAP = 56.0
FLOW_GAP = 28.0
CROWDED_EDGES = 150
#: at most this many lines at first view (past the backbone): 40 strong lines read, a hundred
#: crossing ones do not
DEFAULT_PAIRS_DRAWN = 40
BETWEEN_GROUPS_ALPHA = 0.07
EDGE_WIDTH_RANGE = (1.5, 9.0)

ORIGIN_COLOURS = {
    "combined": "#d95f02",
    "tree": "#7570b3",
    "selected": "#1f78b4",
    "isolated": "#33a02c",
}
ORIGIN_LEGEND = {
    "tree": "tree pair (a spanning tree of the noisy InDif, measured first)",
    "selected": "selected pair (Algorithm 1)",
    "combined": "combined clique (Algorithm 2)",
    "isolated": "isolated link (an attribute no selected pair covered)",
}
NODE_COLOUR = "#4d4d4d"
#: a line hidden until one of its attributes is clicked, then drawn in its origin's colour
HIDDEN_EDGE = {"hidden": True}
#: behind every label, so the lines that cross it do not run through its letters
LABEL_BACKGROUND = "rgba(255,255,255,0.8)"
LONE_NODE_COLOUR = "#bdbdbd"


@dataclass(frozen=True)
class GraphPage:
    """The page, and the iframe height that shows it without a cramped fit."""

    html: str
    height: int


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
    groups: dict[str, int] = {}
    next_group = 0
    for component in sorted(nx.connected_components(graph), key=lambda c: min(map(order.get, c))):
        if len(component) > CIRCLE_AT_MOST:
            parts = _loose_members_alone(
                weighted,
                nx.community.louvain_communities(
                    weighted.subgraph(component), weight="weight", seed=0
                ),
            )
        else:
            parts = [component]
        for part in sorted(parts, key=lambda p: min(map(order.get, p))):
            groups.update(dict.fromkeys(part, next_group))
            next_group += 1
    return groups


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


Box = tuple[float, float, float, float]  # x0, y0, x1, y1: a dot and the label under it


def node_radii(graph: nx.Graph) -> dict[str, float]:
    """Each dot's radius as drawn: log2 of the attribute's number of values, scaled."""
    sizes = {n: math.log2(max(2, int(d.get("size", 2)))) for n, d in graph.nodes(data=True)}
    low, high = min(sizes.values(), default=1.0), max(sizes.values(), default=1.0)
    return {n: _scale(v, low, high, *NODE_SIZE_RANGE) for n, v in sizes.items()}


def _extent(name: str, radius: float) -> Box:
    """The box a dot and its label take, around the dot's centre: vis-network draws a dot's
    label centred under it, from the dot's bottom down one line (``FONT_PX``, plus the
    white outline). Widths are a generous estimate (:func:`~dashboard.charts.text_px`)."""
    half = max(radius, text_px(name, FONT_PX) / 2) + LABEL_PAD
    return (-half, -radius - LABEL_PAD, half, radius + LABEL_LINE * FONT_PX + LABEL_PAD)


def label_boxes(
    graph: nx.Graph,
    positions: dict[str, tuple[float, float]],
    radii: dict[str, float] | None = None,
) -> dict[str, Box]:
    """Where each dot and its label are drawn, at the layout's scale (1:1 on the page when
    the canvas is as wide as the layout)."""
    radii = radii if radii is not None else node_radii(graph)
    boxes = {}
    for node, (x, y) in positions.items():
        x0, y0, x1, y1 = _extent(str(node), radii[node])
        boxes[node] = (x + x0, y + y0, x + x1, y + y1)
    return boxes


def overlapping(boxes: dict[str, Box]) -> list[tuple[str, str]]:
    """The pairs of boxes that overlap (touching is not overlapping)."""
    names = list(boxes)
    if len(names) < 2:
        return []
    b = np.array([boxes[n] for n in names])
    apart = (
        (b[:, None, 2] <= b[None, :, 0])
        | (b[None, :, 2] <= b[:, None, 0])
        | (b[:, None, 3] <= b[None, :, 1])
        | (b[None, :, 3] <= b[:, None, 1])
    )
    i, j = np.nonzero(np.triu(~apart, k=1))
    return [(names[a], names[c]) for a, c in zip(i, j, strict=True)]


def _separate(
    positions: dict[str, tuple[float, float]], extents: dict[str, Box]
) -> dict[str, tuple[float, float]]:
    """Move dots as little as possible until no two boxes overlap, deterministically.

    Dots are placed top to bottom; each stays where it is if its box is free, otherwise it
    takes the nearest free spot on a grid of moves (sideways costs more than down, so rows
    stay rows). No overlap by construction: a box is only placed where it overlaps nothing
    placed before it."""
    order = sorted(positions, key=lambda n: (positions[n][1], positions[n][0], str(n)))
    placed = np.empty((0, 4))
    out: dict[str, tuple[float, float]] = {}
    for node in order:
        x, y = positions[node]
        box = np.add(extents[node], (x, y, x, y))
        dx, dy = _free_move(box, placed)
        out[node] = (x + dx, y + dy)
        placed = np.vstack([placed, np.add(box, (dx, dy, dx, dy))])
    return {node: out[node] for node in positions}


def _free_move(box: np.ndarray, placed: np.ndarray) -> tuple[float, float]:
    """The cheapest move in ``_MOVES`` that takes ``box`` clear of every ``placed`` box."""
    if not len(placed):
        return 0.0, 0.0
    for start in range(0, len(_MOVES), 2048):
        moves = _MOVES[start : start + 2048]
        candidates = box[None, :] + moves[:, [0, 1, 0, 1]]
        hit = (
            (candidates[:, None, 0] < placed[None, :, 2])
            & (placed[None, :, 0] < candidates[:, None, 2])
            & (candidates[:, None, 1] < placed[None, :, 3])
            & (placed[None, :, 1] < candidates[:, None, 3])
        ).any(axis=1)
        if not hit.all():
            dx, dy = moves[int(np.argmin(hit))]
            return float(dx), float(dy)
    return 0.0, float(placed[:, 3].max() - box[1])  # nowhere near: below everything


def _moves() -> np.ndarray:
    steps = [(dx, dy) for dx in range(-240, 241, 8) for dy in range(-80, 1601, 8)]
    # cost: moving sideways or up disturbs a row more than moving down
    cost = [(abs(dx) * 1.5) ** 2 + (dy * (2.0 if dy < 0 else 1.0)) ** 2 for dx, dy in steps]
    return np.array([steps[i] for i in np.argsort(cost, kind="stable")], dtype=float)


_MOVES = _moves()


def _widths() -> tuple[float, ...]:
    """The widths a ring may take: the page's, three quarters (room for a few attributes
    beside it), half or a third (long labels make a wide ring flat but alone on its row;
    narrower, two or three sit side by side)."""
    return tuple((LAYOUT_WIDTH - (k - 1) * GROUP_GAP) / k for k in (1, 4 / 3, 2, 3))


def _lowest(candidates: list[dict[str, tuple[float, float]]], extents: dict[str, Box]) -> dict:
    """The first of ``candidates`` (the widest) unless a later one is at least 15% less tall:
    a narrower drawing must earn its place by saving scrolling."""
    heights = [_bounds(c, extents)[3] - _bounds(c, extents)[1] if c else 0.0 for c in candidates]
    best = 0
    for i, height in enumerate(heights):
        if height < 0.85 * heights[best]:
            best = i
    return candidates[best]


def _bounds(positions: dict[str, tuple[float, float]], extents: dict[str, Box]) -> Box:
    boxes = np.array(list(_boxes_of(positions, extents).values()))
    return (
        float(boxes[:, 0].min()),
        float(boxes[:, 1].min()),
        float(boxes[:, 2].max()),
        float(boxes[:, 3].max()),
    )


def _ring(
    nodes: list[str], extents: dict[str, Box], turn: float = 0.0, width: float = LAYOUT_WIDTH
) -> dict:
    """Nodes on an ellipse, in the given order from the top, as small as their labels allow.

    Equal steps round the smallest ellipse on which no two labels meet, unless unequal steps
    fit on one much smaller (by 1.4): walking round from the top, each node goes to the first
    angle where its box clears its neighbours' (a wide label needs a long step at the top
    and bottom, a short one at the sides), and the smallest ellipse round which the walk
    closes is kept. Up to 1.5 times wider than tall (labels are wide), no wider than ``width``."""
    k = len(nodes)
    if k == 1:
        return {nodes[0]: (0.0, 0.0)}
    if k == 2:
        a, b = nodes
        return {a: (0.0, 0.0), b: (extents[a][2] - extents[b][0] + GROUP_GAP, 0.0)}
    # a little air around each box on a ring, or a small group's dots would touch
    air = (-RING_AIR, -RING_AIR, RING_AIR, RING_AIR)
    roomy = {n: tuple(np.add(extents[n], air)) for n in nodes}
    boxes = np.array([roomy[n] for n in nodes])
    widest = float((boxes[:, 2] - boxes[:, 0]).max())
    # at least half the widest label: the two sides' labels clear each other, a ring never
    # folds into one column; at most the page's width
    most_x = min(max((width - widest) / 2, widest / 2), max(20.0, (LAYOUT_WIDTH - widest) / 2))
    start = -math.pi / 2 + turn
    equal = [start + 2 * math.pi * i / k for i in range(k)]

    def placed(ry: float, angles: list[float]) -> dict[str, tuple[float, float]] | None:
        rx = min(most_x, 1.5 * ry)
        positions = {
            n: (rx * math.cos(t), ry * math.sin(t)) for n, t in zip(nodes, angles, strict=True)
        }
        return None if overlapping(_boxes_of(positions, roomy)) else positions

    ry = 30.0
    walked: tuple[float, dict[str, tuple[float, float]]] | None = None
    while ry < 4000:  # labels narrower than the page always fit well before
        evenly = placed(ry, equal)
        if evenly:  # equal steps read best, if the ellipse need not be much bigger for them
            return evenly
        if walked is None:
            walked = _walked(placed, ry, _walk(boxes, min(most_x, 1.5 * ry), ry, start), start)
        elif ry > 1.4 * walked[0]:
            return walked[1]
        ry *= 1.05
    return walked[1] if walked else _separate(_placed_anyway(nodes, equal, ry), extents)


def _walked(placed, ry: float, walk: tuple[list[float], float] | None, start: float):
    """The walk's angles with its slack shared out, placed on the ellipse of ``ry``: an equal
    extra step after every node (the crowded sides gain most), else steps stretched in
    proportion, else none (a box moving round a bend can come closer to another across
    it); None when none of them is clear."""
    if walk is None:
        return None
    angles, closing = walk
    slack = start + 2 * math.pi - closing
    stretch = 2 * math.pi / (closing - start)
    for turned in (
        [a + i * slack / len(angles) for i, a in enumerate(angles)],
        [start + (a - start) * stretch for a in angles],
        angles,
    ):
        positions = placed(ry, turned)
        if positions:
            return ry, positions
    return None


def _placed_anyway(
    nodes: list[str], angles: list[float], radius: float
) -> dict[str, tuple[float, float]]:
    return {
        n: (radius * math.cos(t), radius * math.sin(t)) for n, t in zip(nodes, angles, strict=True)
    }


def _walk(
    boxes: np.ndarray, rx: float, ry: float, start: float
) -> tuple[list[float], float] | None:
    """Angles round an ellipse at which consecutive boxes just clear each other (and the
    three before), and the angle at which the first would come round again; None if they
    do not fit round it."""
    steps = start + np.linspace(0.0, 2 * math.pi, 1441)[1:]
    xy = np.stack([rx * np.cos(steps), ry * np.sin(steps)], axis=1)
    angles = [start]
    centres = [np.array([rx * math.cos(start), ry * math.sin(start)])]
    k = len(boxes)
    for i in [*range(1, k), 0]:  # then the first again: does the walk close?
        later = steps > angles[-1]
        spots = xy[later]
        candidates = boxes[i][None, :] + spots[:, [0, 1, 0, 1]]
        recent = [
            boxes[j] + np.tile(c, 2)
            for j, c in zip(
                [(i - 1 - m) % k for m in range(min(3, len(angles)))],
                centres[::-1][:3],
                strict=True,
            )
        ]
        clear = np.ones(len(candidates), dtype=bool)
        for other in recent:
            clear &= (
                (candidates[:, 2] <= other[0])
                | (other[2] <= candidates[:, 0])
                | (candidates[:, 3] <= other[1])
                | (other[3] <= candidates[:, 1])
            )
        if not clear.any():
            return None
        first = int(np.argmax(clear))
        angles.append(float(steps[later][first]))
        centres.append(spots[first])
    closing = angles.pop()  # where the first node would come round again
    return None if closing > start + 2 * math.pi else (angles, closing)


def _boxes_of(positions: dict[str, tuple[float, float]], extents: dict[str, Box]) -> dict[str, Box]:
    return {n: tuple(np.add(extents[n], (x, y, x, y))) for n, (x, y) in positions.items()}


def _flow(nodes: list[str], extents: dict[str, Box]) -> dict[str, tuple[float, float]]:
    """Nodes in rows, left to right, each as wide as its label, wrapped at the page's width."""
    positions: dict[str, tuple[float, float]] = {}
    x = y = row_height = 0.0
    for node in nodes:
        x0, y0, x1, y1 = extents[node]
        if x > 0 and x + (x1 - x0) > LAYOUT_WIDTH:
            x, y, row_height = 0.0, y + row_height + FLOW_GAP / 2, 0.0
        positions[node] = (x - x0, y - y0)
        x += x1 - x0 + FLOW_GAP
        row_height = max(row_height, y1 - y0)
    return positions


def _pack(
    blocks: list[dict[str, tuple[float, float]]], extents: dict[str, Box], gap: float
) -> dict[str, tuple[float, float]]:
    """Blocks of positions on shelves, in the given order, by the boxes of their labels."""
    positions: dict[str, tuple[float, float]] = {}
    x = y = row_height = 0.0
    for block in blocks:
        x0, y0, x1, y1 = _bounds(block, extents)
        if x > 0 and x + (x1 - x0) > LAYOUT_WIDTH:
            x, y, row_height = 0.0, y + row_height + gap, 0.0
        for node, (px, py) in block.items():
            positions[node] = (x + px - x0, y + py - y0)
        x += x1 - x0 + gap
        row_height = max(row_height, y1 - y0)
    return positions


def _grouped_layout(
    graph: nx.Graph, groups: dict[str, int], extents: dict[str, Box]
) -> dict[str, tuple[float, float]]:
    """A big component as its dependency groups: each group a small circle (members in the
    table's column order), the groups packed on shelves biggest first, attributes that are a
    group of their own in rows after them."""
    members: dict[int, list[str]] = {}
    for node in graph.nodes:
        members.setdefault(groups[node], []).append(node)
    circles = sorted((m for m in members.values() if len(m) > 1), key=lambda m: -len(m))
    alone = [m[0] for m in members.values() if len(m) == 1]
    flow = [_flow(alone, extents)] if alone else []
    # each circle turned a little more: equal circles in a column would line their dots up,
    # and a faint line between two groups would seem to run through a third
    return _lowest(
        [
            _pack(
                [_ring(g, extents, 0.45 * number, width) for number, g in enumerate(circles)]
                + flow,
                extents,
                GROUP_GAP,
            )
            for width in _widths()
        ],
        extents,
    )


def _component_layout(
    graph: nx.Graph, extents: dict[str, Box], width: float = LAYOUT_WIDTH
) -> dict[str, tuple[float, float]]:
    """Positions of one component in pixels, labels clear of each other.

    Dense components (Adult's is) read best on a circle, where no edge hides a node; sparse
    ones as a Kamada-Kawai layout, which keeps edge lengths even and spreads the labels over
    an area (bigger components go to :func:`_grouped_layout`). Deterministic: no random seed
    reaches these layouts, so the same graph draws the same picture. ``width``: at most this
    wide, for a circle.
    """
    nodes = list(graph.nodes)  # the table's column order, which the reader knows
    n = len(nodes)
    if (nx.density(graph) > 0.3 and n <= CIRCLE_AT_MOST) or n <= 4:
        return _ring(nodes, extents, width=width)
    ordered = nx.Graph()
    ordered.add_nodes_from(nodes)
    ordered.add_edges_from(graph.edges)
    raw = nx.kamada_kawai_layout(ordered)
    radius = max(110.0, 75.0 * math.sqrt(n))  # ~150 x 150 px per node
    # no wider than the page: a big component grows downwards (same area), the page scrolls
    widest = max(extents[v][2] - extents[v][0] for v in nodes)
    rx = min(radius, max(60.0, (LAYOUT_WIDTH - widest) / 2))
    ry = radius * radius / rx
    return _separate({k: (float(x) * rx, float(y) * ry) for k, (x, y) in raw.items()}, extents)


def layout(
    graph: nx.Graph,
    groups: dict[str, int] | None = None,
    radii: dict[str, float] | None = None,
) -> dict[str, tuple[float, float]]:
    """Fixed positions, no two labels overlapping: components laid out alone, then packed in
    rows, biggest first, within ``LAYOUT_WIDTH`` pixels where they fit.

    A component of more than ``CIRCLE_AT_MOST`` attributes is drawn as its dependency groups
    (``groups``, from :func:`dependency_groups` when not given). Attributes with no edge
    (measured alone) go last, in rows of their own. ``radii``: the dots' radii (by default
    as :func:`graph_page` draws them); the room each label takes comes from its length.
    """
    groups = groups if groups is not None else dependency_groups(graph)
    radii = radii if radii is not None else node_radii(graph)
    extents = {node: _extent(str(node), radii[node]) for node in graph.nodes}
    components = sorted(
        (graph.subgraph(c) for c in nx.connected_components(graph) if len(c) > 1),
        key=lambda g: (-len(g), sorted(map(str, g.nodes))),
    )
    lone = sorted((n for n in graph.nodes if graph.degree[n] == 0), key=str)
    flow = [_flow(lone, extents)] if lone else []
    cache: dict[tuple[int, float], dict[str, tuple[float, float]]] = {}

    def drawn(number: int, component: nx.Graph, width: float) -> dict:
        """A component's block; only circles depend on the width (the rest are cached)."""
        circle = len(component) <= CIRCLE_AT_MOST and (
            nx.density(component) > 0.3 or len(component) <= 4
        )
        key = (number, width if circle else 0.0)
        if key not in cache:
            cache[key] = (
                _grouped_layout(component, groups, extents)
                if len(component) > CIRCLE_AT_MOST
                else _component_layout(component, extents, width)
            )
        return cache[key]

    # every block is free of overlaps and the blocks' boxes are disjoint: no label overlaps
    positions = _lowest(
        [
            _pack([drawn(i, c, width) for i, c in enumerate(components)] + flow, extents, BLOCK_GAP)
            for width in _widths()
        ],
        extents,
    )
    return {node: positions[node] for node in graph.nodes if node in positions}


def _scale(value: float, low: float, high: float, lo: float, hi: float) -> float:
    if high <= low:
        return (lo + hi) / 2
    return lo + (hi - lo) * (value - low) / (high - low)


def graph_page(
    graph: nx.Graph, marginals: tuple[SelectedMarginal, ...], count: int | None = None
) -> GraphPage:
    """The page that draws ``graph``: the first ``count`` pairs of :func:`pairs_ranked` as
    lines (all when None), the others hidden until one of their attributes is clicked."""
    from pyvis.network import Network  # imports IPython: load only when drawing

    shown = pairs_in_view(graph, marginals, count)
    groups = dependency_groups(shown)
    radii = node_radii(shown)
    positions = layout(shown, groups, radii)
    boxes = list(label_boxes(shown, positions, radii).values()) or [(0.0, 0.0, 0.0, 0.0)]
    tall = max(b[3] for b in boxes) - min(b[1] for b in boxes)
    # as tall as the drawing, so the fit (the script's, to the dots and labels) is near 1:1 on
    # a page as wide as the layout: the page scrolls, the labels keep their size
    canvas = int(min(6000, max(420, tall + 2 * FIT_MARGIN_PX)))
    network = Network(height=f"{canvas}px", width="100%", cdn_resources="in_line", notebook=False)
    ids = {node: f"n{i}" for i, node in enumerate(graph.nodes)}
    for node, data in graph.nodes(data=True):
        x, y = positions[node]
        name = str(node)
        network.add_node(
            ids[node],
            label=name,
            title=f"{html.escape(name)}: {html.escape(str(data.get('size', '?')))} values",
            size=radii[node],
            x=x,
            y=y,
            physics=False,
            color=NODE_COLOUR if graph.degree[node] else LONE_NODE_COLOUR,
        )
    indifs = [float(d.get("indif", 0.0)) for _, _, d in graph.edges(data=True)]
    lo_i, hi_i = min(indifs, default=0.0), max(indifs, default=0.0)
    crowded = shown.number_of_edges() > CROWDED_EDGES  # let labels and heavy edges show through
    for a, b, data in graph.edges(data=True):
        holders = [m for m in marginals if a in m.attributes and b in m.attributes]
        origin = edge_origin(a, b, marginals)
        lines = [
            f"{html.escape(' x '.join(m.attributes))} ({html.escape(m.origin)}): "
            f"rho {m.rho:.3g}, sigma {m.sigma:.3g}, {m.cells} cells"
            for m in holders
        ]
        indif = float(data.get("indif", 0.0))
        network.add_edge(
            ids[a],
            ids[b],
            width=_scale(indif, lo_i, hi_i, *EDGE_WIDTH_RANGE),
            title="{} - {}: noisy InDif {:.0f}\n{}".format(
                html.escape(str(a)), html.escape(str(b)), indif, "\n".join(lines)
            ),
            color=_translucent(ORIGIN_COLOURS[origin], crowded, between=groups[a] != groups[b]),
            origin=origin,
            **({} if shown.has_edge(a, b) else HIDDEN_EDGE),
        )
    network.set_options(json.dumps(_OPTIONS))
    page = _CDN_TAG.sub("", network.generate_html(notebook=False))
    grouped = any(len(c) > CIRCLE_AT_MOST for c in nx.connected_components(shown))
    key = Legend(
        origins=frozenset(edge_origin(a, b, marginals) for a, b in shown.edges),
        grouped=grouped,
        drawn=shown.number_of_edges(),
        measured=graph.number_of_edges(),
        tree=any(m.origin == "tree" for m in marginals),
        alone=any(graph.degree[n] == 0 for n in graph.nodes),
    )
    page = page.replace("<body>", "<body>" + key.html(), 1)
    page = page.replace("</body>", _SCRIPT + "</body>", 1)
    return GraphPage(html=page, height=canvas + 90 + (22 if key.drawn < key.measured else 0))


def _translucent(colour: str, crowded: bool, *, between: bool = False) -> str:
    """Opaque in a sparse drawing; in a crowded one translucent, and faint between groups."""
    if not crowded:
        return colour
    r, g, b = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{BETWEEN_GROUPS_ALPHA if between else 0.3})"


def _dot(colour: str) -> str:
    return (
        f'<span style="display:inline-block;width:11px;height:11px;border-radius:50%;'
        f'background:{colour};vertical-align:middle;margin-right:5px"></span>'
    )


@dataclass(frozen=True)
class Legend:
    """The key above the drawing: only what the drawing shows (a colour it does not use would
    send people looking for it)."""

    origins: frozenset[str]
    grouped: bool
    drawn: int
    measured: int
    tree: bool
    alone: bool

    def html(self) -> str:
        swatches = "".join(
            f'<span style="margin-right:18px;white-space:nowrap">'
            f'<span style="display:inline-block;width:26px;height:5px;'
            f'background:{ORIGIN_COLOURS[o]};vertical-align:middle;margin-right:6px"></span>'
            f"{text}</span>"
            for o, text in ORIGIN_LEGEND.items()
            if o in self.origins
        )
        dots = (
            f'<span style="margin-right:18px;white-space:nowrap">{_dot(NODE_COLOUR)}an attribute '
            "(size: its number of values)</span>"
        )
        if self.alone:
            dots += (
                f'<span style="white-space:nowrap">{_dot(LONE_NODE_COLOUR)}an attribute in no '
                "measured pair (drawn from its own counts)</span>"
            )
        shown = ""
        if self.drawn < self.measured:
            spine = "the tree measured first" if self.tree else "a tree of the strongest pairs"
            shown = (
                f"<b>Showing {self.drawn} of the {self.measured} measured pairs</b>: {spine}, "
                "then the strongest others (the control above the graph sets how many). "
            )
        groups = (
            "Each small circle is a group of attributes that depend strongly on each other; "
            "faint lines join groups, and the attributes in the rows below the circles belong "
            "to none. "
            if self.grouped
            else ""
        )
        colours = f"{swatches}<br>" if swatches else ""
        return (
            '<div id="legend" style="font:14px sans-serif;color:#333;padding:4px 2px 6px">'
            f"{colours}{dots}<br>{shown}{groups}Line width: how strongly the pair depends "
            "(its noisy InDif). Click an attribute to see all its pairs; click the background "
            "to reset.</div>"
        )


_OPTIONS = {
    "physics": {"enabled": False},
    "layout": {"randomSeed": 0, "improvedLayout": False},
    "interaction": {"hover": True, "tooltipDelay": 150, "navigationButtons": False},
    "nodes": {
        "shape": "dot",
        "font": {"size": FONT_PX, "face": "sans-serif", "color": "#111",
                 "strokeWidth": 4, "strokeColor": "#ffffff",
                 "background": LABEL_BACKGROUND},
        "scaling": {"label": {"enabled": False, "drawThreshold": 1}},
        "borderWidth": 1,
    },
    "edges": {"smooth": False, "selectionWidth": 2, "hoverWidth": 1},
}  # fmt: skip

# Runs after pyvis's drawGraph() (network, nodes, edges are globals of its template).
_SCRIPT = f"""<script>
(function () {{
  var MIN_PX = {MIN_LABEL_PX}, FONT = {FONT_PX}, FIT_MARGIN = {FIT_MARGIN_PX};
  function keepLabelsLegible() {{
    var scale = network.getScale();
    var size = Math.max(FONT, Math.ceil(MIN_PX / scale));
    network.setOptions({{nodes: {{font: {{size: size}}}}}});
    window.labelFontSize = size;
  }}
  function fitTightly() {{
    // vis-network's fit() leaves 10% around the drawing; the layout is already as wide as
    // the canvas, so fit the dots and labels themselves, with a small margin
    var ids = nodes.getIds(), box = null;
    ids.forEach(function (id) {{
      var b = network.getBoundingBox(id);
      box = box ? {{left: Math.min(box.left, b.left), right: Math.max(box.right, b.right),
                   top: Math.min(box.top, b.top), bottom: Math.max(box.bottom, b.bottom)}} : b;
    }});
    if (!box) {{ return; }}
    var canvas = document.querySelector("#mynetwork canvas");
    var scale = Math.min(canvas.clientWidth / (box.right - box.left + 2 * FIT_MARGIN),
                         canvas.clientHeight / (box.bottom - box.top + 2 * FIT_MARGIN), 1.5);
    network.moveTo({{position: {{x: (box.left + box.right) / 2, y: (box.top + box.bottom) / 2}},
                    scale: scale}});
  }}
  fitTightly();
  keepLabelsLegible();  // at first view only: zooming out afterwards is the reader's choice
  // a resized window resizes the canvas, and vis-network then scales its old view to the new
  // width (after the "resize" event, and only once it draws, which an iframe out of sight
  // puts off): fit again after that drawing, unless the reader has zoomed
  var zoomed = false, refit = false;
  network.on("zoom", function () {{ zoomed = true; }});
  network.on("resize", function () {{ refit = !zoomed; }});
  network.on("afterDrawing", function () {{
    if (refit) {{ refit = false; fitTightly(); keepLabelsLegible(); }}
  }});
  var nodeColour = {{}}, edgeColour = {{}}, edgeHidden = {{}};
  nodes.forEach(function (n) {{ nodeColour[n.id] = n.color; }});
  edges.forEach(function (e) {{ edgeColour[e.id] = e.color; edgeHidden[e.id] = !!e.hidden; }});
  function focus(params) {{
    if (!params.nodes.length) {{
      nodes.update(nodes.map(function (n) {{
        return {{id: n.id, color: nodeColour[n.id], font: {{color: "#111"}}}};
      }}));
      edges.update(edges.map(function (e) {{
        return {{id: e.id, color: edgeColour[e.id], hidden: edgeHidden[e.id]}};
      }}));
      return;
    }}
    var chosen = params.nodes[0];
    var near = {{}};
    near[chosen] = true;
    network.getConnectedNodes(chosen).forEach(function (id) {{ near[id] = true; }});
    nodes.update(nodes.map(function (n) {{
      return {{id: n.id, color: near[n.id] ? nodeColour[n.id] : "#e6e6e6",
              font: {{color: near[n.id] ? "#111" : "#c8c8c8"}}}};
    }}));
    edges.update(edges.map(function (e) {{
      var mine = e.from === chosen || e.to === chosen;
      return {{id: e.id, color: mine ? edgeColour[e.id] : "rgba(0,0,0,0.05)",
              hidden: mine ? false : edgeHidden[e.id]}};
    }}));
  }}
  network.on("click", focus);
}})();
</script>
"""
