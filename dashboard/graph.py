"""The dependency graph of the selected marginals as a self-contained pyvis page.

pyvis's "in_line" mode embeds vis-network, but its template still adds Bootstrap tags from a
CDN; they are stripped so the page makes no request outside the app. Every text from the
user's table is escaped before it reaches a tooltip (tooltips are HTML).
"""

from __future__ import annotations

import html
import re

import networkx as nx

from privsyn_core.pipeline import SelectedMarginal

_CDN_TAG = re.compile(r"<(link|script)[^>]+(https?:)?//[^>]*>(\s*</script>)?", re.IGNORECASE)


def graph_html(graph: nx.Graph, marginals: tuple[SelectedMarginal, ...]) -> str:
    from pyvis.network import Network  # imports IPython: load only when drawing

    network = Network(height="560px", width="100%", cdn_resources="in_line", notebook=False)
    network.barnes_hut(spring_length=160)
    combined = {a for m in marginals if len(m.attributes) > 2 for a in m.attributes}
    for node, data in graph.nodes(data=True):
        label = html.escape(str(node))
        network.add_node(
            label,
            label=label,
            title=f"{label}: {data.get('size', '?')} values",
            value=float(data.get("size", 1)),
            color="#d95f02" if node in combined else "#1b9e77",
        )
    for a, b, data in graph.edges(data=True):
        holders = [m for m in marginals if a in m.attributes and b in m.attributes]
        lines = [
            f"{html.escape(' x '.join(m.attributes))}: rho {m.rho:.3g}, sigma {m.sigma:.3g}, "
            f"{m.cells} cells"
            for m in holders
        ]
        network.add_edge(
            html.escape(str(a)),
            html.escape(str(b)),
            value=max(1.0, float(data.get("indif", 1.0))),
            title="noisy InDif {:.0f}\n{}".format(data.get("indif", 0.0), "\n".join(lines)),
            color="#d95f02" if data.get("combined") else "#7570b3",
        )
    page = network.generate_html(notebook=False)
    return _CDN_TAG.sub("", page)
