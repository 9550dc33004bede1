"""Where the Marginals page's graph puts each attribute: fixed positions, no two labels
overlapping, within ``LAYOUT_WIDTH`` pixels where they fit.

Each dot and the label under it take a box, estimated generously from the label's length
(:func:`~dashboard.text_width.text_px`). Components are laid out alone (a circle when dense
or small, else Kamada-Kawai with the boxes moved apart), a big component as its dependency
groups (:func:`~dashboard.views.marginals_graph_pairs.dependency_groups`), and the blocks are
packed on shelves. Deterministic: no random seed reaches these layouts, so the same graph
draws the same picture on every visit.
"""

from __future__ import annotations

import math

import networkx as nx
import numpy as np

from ..text_width import text_px
from .marginals_graph_pairs import CIRCLE_AT_MOST, dependency_groups, in_table_order

#: the labels' font size, in pixels, which the drawing uses as is
FONT_PX = 16
LAYOUT_WIDTH = 900.0
NODE_SIZE_RANGE = (8.0, 22.0)
#: room around each dot-and-label box (two labels are at least twice this apart), more of it
#: between the members of a ring, the height of a label line in font sizes (with its white
#: outline), and the gaps between groups, between components and between attributes in a row
LABEL_PAD = 5.0
RING_AIR = 7.0
LABEL_LINE = 1.3
GROUP_GAP = 60.0
BLOCK_GAP = 56.0
FLOW_GAP = 28.0


Box = tuple[float, float, float, float]  # x0, y0, x1, y1: a dot and the label under it


def node_radii(graph: nx.Graph) -> dict[str, float]:
    """Each dot's radius as drawn: log2 of the attribute's number of values, scaled."""
    sizes = {n: math.log2(max(2, int(d.get("size", 2)))) for n, d in graph.nodes(data=True)}
    low, high = min(sizes.values(), default=1.0), max(sizes.values(), default=1.0)
    return {n: scaled(v, low, high, *NODE_SIZE_RANGE) for n, v in sizes.items()}


def _extent(name: str, radius: float) -> Box:
    """The box a dot and its label take, around the dot's centre: vis-network draws a dot's
    label centred under it, from the dot's bottom down one line (``FONT_PX``, plus the
    white outline). Widths are a generous estimate (:func:`~dashboard.text_width.text_px`)."""
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
        (in_table_order(graph, c) for c in nx.connected_components(graph) if len(c) > 1),
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


def scaled(value: float, low: float, high: float, lo: float, hi: float) -> float:
    """``value`` mapped linearly from ``low``-``high`` onto ``lo``-``hi`` (the middle when
    every value is the same)."""
    if high <= low:
        return (lo + hi) / 2
    return lo + (hi - lo) * (value - low) / (high - low)
