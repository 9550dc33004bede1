"""The dependency graph of the selected marginals as a self-contained pyvis page.

Readability choices, each because the previous force-directed page failed a reader:

* Positions are computed here, once, with networkx (one layout per connected component, the
  components packed on shelves) and the browser's physics is off, so the picture is the same
  on every visit and never wobbles.
* No two labels overlap: each dot and the label under it take a box, estimated generously
  from the label's length (:func:`~dashboard.text_width.text_px`), and every layout keeps the
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
* A table with many selected pairs draws only some of them
  (:func:`~dashboard.views.marginals_graph_pairs.pairs_in_view`): the
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
import re
from dataclasses import dataclass
from typing import Any

import networkx as nx

from privsyn_core.generation.synthesis import SelectedMarginal

from .marginals_graph_layout import FONT_PX, label_boxes, layout, node_radii, scaled
from .marginals_graph_pairs import CIRCLE_AT_MOST, dependency_groups, edge_origin, pairs_in_view

_CDN_TAG = re.compile(r"<(link|script)[^>]+(https?:)?//[^>]*>(\s*</script>)?", re.IGNORECASE)

#: the margin round the drawing when it is fitted to the canvas
FIT_MARGIN_PX = 20
MIN_LABEL_PX = 12
CROWDED_EDGES = 150
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


def graph_page(
    graph: nx.Graph, marginals: tuple[SelectedMarginal, ...], count: int | None = None
) -> GraphPage:
    """The page that draws ``graph``: the first ``count`` pairs of
    :func:`~dashboard.views.marginals_graph_pairs.pairs_ranked` as lines (all when None), the
    others hidden until one of their attributes is clicked."""
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
    _add_attributes(network, graph, ids, positions, radii)
    _add_pairs(network, graph, ids, shown, marginals, groups)
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


def _add_attributes(
    network: Any,
    graph: nx.Graph,
    ids: dict[str, str],
    positions: dict[str, tuple[float, float]],
    radii: dict[str, float],
) -> None:
    """A dot per attribute at its fixed position, sized by its number of values, its name
    under it and (escaped) in its tooltip; grey when it is in no measured pair."""
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


def _add_pairs(
    network: Any,
    graph: nx.Graph,
    ids: dict[str, str],
    shown: nx.Graph,
    marginals: tuple[SelectedMarginal, ...],
    groups: dict[str, int],
) -> None:
    """A line per measured pair, as wide as its noisy InDif and coloured by its origin, its
    marginals in its tooltip; hidden unless ``shown`` draws it."""
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
            width=scaled(indif, lo_i, hi_i, *EDGE_WIDTH_RANGE),
            title="{} - {}: noisy InDif {:.0f}\n{}".format(
                html.escape(str(a)), html.escape(str(b)), indif, "\n".join(lines)
            ),
            color=_translucent(ORIGIN_COLOURS[origin], crowded, between=groups[a] != groups[b]),
            origin=origin,
            **({} if shown.has_edge(a, b) else HIDDEN_EDGE),
        )


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
