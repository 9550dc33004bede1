"""The dependency graph of the selected marginals as a self-contained pyvis page.

Readability choices, each because the previous force-directed page failed a reader:

* Positions are computed here, once, with networkx (one layout per connected component, the
  components packed on shelves) and the browser's physics is off, so the picture is the same
  on every visit and never wobbles.
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
* Selecting (clicking) a node dims everything that is not one of its marginals.

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

from privsyn_core.pipeline import SelectedMarginal

_CDN_TAG = re.compile(r"<(link|script)[^>]+(https?:)?//[^>]*>(\s*</script>)?", re.IGNORECASE)

FONT_PX = 16
MIN_LABEL_PX = 12
LAYOUT_WIDTH = 900.0
NODE_SIZE_RANGE = (8.0, 22.0)
CIRCLE_AT_MOST = 24
MIN_GAP_PX = 60.0
CROWDED_EDGES = 150
BETWEEN_GROUPS_ALPHA = 0.07
EDGE_WIDTH_RANGE = (1.5, 9.0)

ORIGIN_COLOURS = {
    "combined": "#d95f02",
    "selected": "#1f78b4",
    "isolated": "#33a02c",
}
ORIGIN_LEGEND = {
    "selected": "selected pair (Algorithm 1)",
    "combined": "combined clique (Algorithm 2)",
    "isolated": "isolated link (an attribute no selected pair covered)",
}
NODE_COLOUR = "#4d4d4d"
LONE_NODE_COLOUR = "#bdbdbd"


@dataclass(frozen=True)
class GraphPage:
    """The page, and the iframe height that shows it without a cramped fit."""

    html: str
    height: int


def edge_origin(a: str, b: str, marginals: tuple[SelectedMarginal, ...]) -> str:
    """The origin that explains the edge: a combined clique wins over a pair, a pair over a link."""
    origins = {m.origin for m in marginals if a in m.attributes and b in m.attributes}
    for origin in ("combined", "selected", "isolated"):
        if origin in origins:
            return origin
    return "selected"


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


def _grouped_layout(graph: nx.Graph, groups: dict[str, int]) -> dict[str, tuple[float, float]]:
    """A big component as its dependency groups: each group a small circle (members in the
    table's column order), the groups packed on shelves biggest first, attributes that are a
    group of their own in a grid after them."""
    members: dict[int, list[str]] = {}
    for node in graph.nodes:
        members.setdefault(groups[node], []).append(node)
    circles = sorted((m for m in members.values() if len(m) > 1), key=lambda m: -len(m))
    alone = [m[0] for m in members.values() if len(m) == 1]
    positions: dict[str, tuple[float, float]] = {}
    gap = 130.0  # a label hangs below its dot and reaches past it sideways
    x = y = row_height = 0.0
    for number, group in enumerate(circles):
        radius = max(55.0, 110.0 * len(group) / (2 * math.pi))
        # turned a little more each circle: equal circles in a column would line their dots
        # up, and a faint line between two groups would seem to run through a third
        turn = 0.45 * number
        if x > 0 and x + 2 * radius > LAYOUT_WIDTH:
            x, y, row_height = 0.0, y + row_height + gap, 0.0
        for i, node in enumerate(group):
            angle = 2 * math.pi * i / len(group) - math.pi / 2 + turn
            positions[node] = (
                x + radius * (1 + math.cos(angle)),
                y + radius * (1 + math.sin(angle)),
            )
        x += 2 * radius + gap
        row_height = max(row_height, 2 * radius)
    if alone:
        y = y + row_height + gap if circles else 0.0
        per_row = max(1, int(LAYOUT_WIDTH // 150) + 1)
        for i, node in enumerate(alone):
            positions[node] = ((i % per_row) * 150.0, y + (i // per_row) * 90.0)
    return positions


def _component_layout(graph: nx.Graph) -> dict[str, tuple[float, float]]:
    """Positions of one component in pixels, centred on 0, with room for labels.

    Dense components (Adult's is) read best on a circle, where no edge hides a node; sparse
    ones as a Kamada-Kawai layout, which keeps edge lengths even and spreads the labels over
    an area (bigger components go to :func:`_grouped_layout`). Deterministic: no random seed
    reaches these layouts, so the same graph draws the same picture.
    """
    nodes = list(graph.nodes)  # the table's column order, which the reader knows
    n = len(nodes)
    if n == 1:
        return {nodes[0]: (0.0, 0.0)}
    if n == 2:
        return {nodes[0]: (-70.0, 0.0), nodes[1]: (70.0, 0.0)}
    radius = max(90.0, 120.0 * n / (2 * math.pi))  # ~120 px of arc per label
    ordered = nx.Graph()
    ordered.add_nodes_from(nodes)
    ordered.add_edges_from(graph.edges)
    if (nx.density(graph) > 0.3 and n <= CIRCLE_AT_MOST) or n <= 4:
        raw = nx.circular_layout(ordered)
    else:
        raw = nx.kamada_kawai_layout(ordered)
        radius = max(110.0, 75.0 * math.sqrt(n))  # ~150 x 150 px per node
    # no wider than the page: a big component grows downwards (same area), the page scrolls
    rx = min(radius, LAYOUT_WIDTH / 2)
    ry = radius * radius / rx
    keys = list(raw)
    points = _spread(np.array([raw[k] for k in keys], dtype=float) * (rx, ry), MIN_GAP_PX)
    return {k: (float(x), float(y)) for k, (x, y) in zip(keys, points, strict=True)}


def _spread(points: np.ndarray, gap: float, rounds: int = 50) -> np.ndarray:
    """Push apart dots closer than ``gap`` (a label's height plus a dot), deterministically."""
    points = points.copy()
    for _ in range(rounds):
        delta = points[:, None, :] - points[None, :, :]
        dist = np.linalg.norm(delta, axis=-1)
        close = dist < gap
        np.fill_diagonal(close, False)
        if not close.any():
            break
        np.fill_diagonal(dist, gap)
        safe = np.where(dist == 0, 1.0, dist)
        push = np.where(close, (gap - dist) / 2 / safe, 0.0)[..., None] * delta
        points += push.sum(axis=1)
    return points


def layout(graph: nx.Graph, groups: dict[str, int] | None = None) -> dict[str, tuple[float, float]]:
    """Fixed positions: components laid out alone, then packed in rows, biggest first.

    A component of more than ``CIRCLE_AT_MOST`` attributes is drawn as its dependency groups
    (``groups``, from :func:`dependency_groups` when not given). Attributes with no edge
    (measured alone) go last, in a compact grid of their own.
    """
    groups = groups if groups is not None else dependency_groups(graph)
    components = sorted(
        (graph.subgraph(c) for c in nx.connected_components(graph) if len(c) > 1),
        key=lambda g: (-len(g), sorted(map(str, g.nodes))),
    )
    lone = sorted((n for n in graph.nodes if graph.degree[n] == 0), key=str)
    boxes = []
    for component in components:
        pos = (
            _grouped_layout(component, groups)
            if len(component) > CIRCLE_AT_MOST
            else _component_layout(component)
        )
        xs, ys = [p[0] for p in pos.values()], [p[1] for p in pos.values()]
        boxes.append((pos, min(xs), max(xs), min(ys), max(ys)))
    positions: dict[str, tuple[float, float]] = {}
    gap_x, gap_y = 170.0, 110.0  # labels hang below and past the dots
    x = y = row_height = 0.0
    for pos, x0, x1, y0, y1 in boxes:
        width, height = x1 - x0, y1 - y0
        if x > 0 and x + width > LAYOUT_WIDTH:
            x, y, row_height = 0.0, y + row_height + gap_y, 0.0
        for node, (px, py) in pos.items():
            positions[node] = (x + px - x0, y + py - y0)
        x += width + gap_x
        row_height = max(row_height, height)
    if lone:
        y = (y + row_height + gap_y) if boxes else 0.0
        per_row = max(1, int(LAYOUT_WIDTH // 160) + 1)
        for i, node in enumerate(lone):
            positions[node] = ((i % per_row) * 160.0, y + (i // per_row) * 80.0)
    return positions


def _scale(value: float, low: float, high: float, lo: float, hi: float) -> float:
    if high <= low:
        return (lo + hi) / 2
    return lo + (hi - lo) * (value - low) / (high - low)


def graph_page(graph: nx.Graph, marginals: tuple[SelectedMarginal, ...]) -> GraphPage:
    from pyvis.network import Network  # imports IPython: load only when drawing

    groups = dependency_groups(graph)
    positions = layout(graph, groups)
    ys = [p[1] for p in positions.values()] or [0.0]
    # tall enough that the fit is about 1:1; the page scrolls instead of the labels shrinking
    canvas = int(min(3200, max(420, (max(ys) - min(ys)) + 160)))
    network = Network(height=f"{canvas}px", width="100%", cdn_resources="in_line", notebook=False)
    sizes = {n: math.log2(max(2, int(d.get("size", 2)))) for n, d in graph.nodes(data=True)}
    low, high = min(sizes.values(), default=1.0), max(sizes.values(), default=1.0)
    ids = {node: f"n{i}" for i, node in enumerate(graph.nodes)}
    for node, data in graph.nodes(data=True):
        x, y = positions[node]
        name = str(node)
        network.add_node(
            ids[node],
            label=name,
            title=f"{html.escape(name)}: {html.escape(str(data.get('size', '?')))} values",
            size=_scale(sizes[node], low, high, *NODE_SIZE_RANGE),
            x=x,
            y=y,
            physics=False,
            color=NODE_COLOUR if graph.degree[node] else LONE_NODE_COLOUR,
        )
    indifs = [float(d.get("indif", 0.0)) for _, _, d in graph.edges(data=True)]
    lo_i, hi_i = min(indifs, default=0.0), max(indifs, default=0.0)
    crowded = graph.number_of_edges() > CROWDED_EDGES  # let labels and heavy edges show through
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
        )
    network.set_options(json.dumps(_OPTIONS))
    page = _CDN_TAG.sub("", network.generate_html(notebook=False))
    origins = {edge_origin(a, b, marginals) for a, b in graph.edges}
    grouped = any(len(c) > CIRCLE_AT_MOST for c in nx.connected_components(graph))
    page = page.replace("<body>", "<body>" + _legend(origins, grouped), 1)
    page = page.replace("</body>", _SCRIPT + "</body>", 1)
    return GraphPage(html=page, height=canvas + 90)


def _translucent(colour: str, crowded: bool, *, between: bool = False) -> str:
    """Opaque in a sparse drawing; in a crowded one translucent, and faint between groups."""
    if not crowded:
        return colour
    r, g, b = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{BETWEEN_GROUPS_ALPHA if between else 0.3})"


def graph_html(graph: nx.Graph, marginals: tuple[SelectedMarginal, ...]) -> str:
    return graph_page(graph, marginals).html


def _legend(origins: set[str], grouped: bool = False) -> str:
    """The key to the edge colours the drawing uses (a colour it does not use would send
    people looking for it), then what widths, dots and (in a big drawing) circles mean."""
    swatches = "".join(
        f'<span style="margin-right:18px;white-space:nowrap">'
        f'<span style="display:inline-block;width:26px;height:5px;background:{ORIGIN_COLOURS[o]};'
        f'vertical-align:middle;margin-right:6px"></span>{text}</span>'
        for o, text in ORIGIN_LEGEND.items()
        if o in origins
    )
    key = f"{swatches}<br>" if swatches else ""
    groups = (
        "Each small circle is a group of attributes that depend strongly on each other; "
        "faint lines join groups, and the attributes in the rows below the circles belong "
        "to none. "
        if grouped
        else ""
    )
    return (
        '<div id="legend" style="font:14px sans-serif;color:#333;padding:4px 2px 6px">'
        f"{key}{groups}Edge width: noisy InDif of the pair. Dot size: number of values. "
        "Grey dots: measured alone. Click an attribute to see only its marginals; "
        "click the background to reset.</div>"
    )


_OPTIONS = {
    "physics": {"enabled": False},
    "layout": {"randomSeed": 0, "improvedLayout": False},
    "interaction": {"hover": True, "tooltipDelay": 150, "navigationButtons": False},
    "nodes": {
        "shape": "dot",
        "font": {"size": FONT_PX, "face": "sans-serif", "color": "#111",
                 "strokeWidth": 4, "strokeColor": "#ffffff"},
        "scaling": {"label": {"enabled": False, "drawThreshold": 1}},
        "borderWidth": 1,
    },
    "edges": {"smooth": False, "selectionWidth": 2, "hoverWidth": 1},
}  # fmt: skip

# Runs after pyvis's drawGraph() (network, nodes, edges are globals of its template).
_SCRIPT = f"""<script>
(function () {{
  var MIN_PX = {MIN_LABEL_PX}, FONT = {FONT_PX};
  function keepLabelsLegible() {{
    var scale = network.getScale();
    var size = Math.max(FONT, Math.ceil(MIN_PX / scale));
    network.setOptions({{nodes: {{font: {{size: size}}}}}});
    window.labelFontSize = size;
  }}
  network.fit();
  if (network.getScale() > 1.5) {{ network.moveTo({{scale: 1.5}}); }}
  keepLabelsLegible();  // at first view only: zooming out afterwards is the reader's choice
  var nodeColour = {{}}, edgeColour = {{}};
  nodes.forEach(function (n) {{ nodeColour[n.id] = n.color; }});
  edges.forEach(function (e) {{ edgeColour[e.id] = e.color; }});
  function focus(params) {{
    if (!params.nodes.length) {{
      nodes.update(nodes.map(function (n) {{
        return {{id: n.id, color: nodeColour[n.id], font: {{color: "#111"}}}};
      }}));
      edges.update(edges.map(function (e) {{
        return {{id: e.id, color: edgeColour[e.id], hidden: false}};
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
      return {{id: e.id, color: mine ? edgeColour[e.id] : "rgba(0,0,0,0.05)"}};
    }}));
  }}
  network.on("click", focus);
}})();
</script>
"""
