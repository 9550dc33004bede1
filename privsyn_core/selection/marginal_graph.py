"""The graph of selected marginals, and what it says about how to synthesise them.

Nodes are attributes, edges join attributes that share a measured marginal (a combined
clique contributes all its pairs). From it we read two shortcuts of paper section 5.3:

* **Attribute appending**: an attribute of degree 1 appears in exactly one marginal, a pair
  with its *anchor*; it can be drawn after GUM from that pair's conditional distribution
  instead of being iterated over. For an isolated edge both ends have degree 1; the second
  attribute is appended to the first.
* **Separate and join**: the remaining marginals split into connected components, each
  synthesised by GUM on its own array, then joined column-wise.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from privsyn_core.selection.forest import adjacency, connected_components


@dataclass(frozen=True)
class AppendPlan:
    """Which attributes are appended, to which anchor, through which pair marginal."""

    leaf: str
    anchor: str
    marginal: tuple[str, str]


def marginal_pairs(marginals: Sequence[tuple[str, ...]]) -> Iterator[tuple[str, str]]:
    """Every pair of attributes inside a marginal, marginal by marginal."""
    for marginal in marginals:
        for i, a in enumerate(marginal):
            for b in marginal[i + 1 :]:
                yield a, b


def marginal_graph(
    attributes: Sequence[str], marginals: Sequence[tuple[str, ...]]
) -> dict[str, dict[str, None]]:
    """The graph as an adjacency mapping (:mod:`~privsyn_core.selection.forest`)."""
    return adjacency(attributes, ((a, b, None) for a, b in marginal_pairs(marginals)))


def plan_appending(
    attributes: Sequence[str], marginals: Sequence[tuple[str, ...]]
) -> tuple[AppendPlan, ...]:
    """Degree-1 attributes whose only marginal is a pair, each with its anchor."""
    graph = marginal_graph(attributes, marginals)
    plans: list[AppendPlan] = []
    appended: set[str] = set()
    for marginal in marginals:
        if len(marginal) != 2:
            continue
        a, b = marginal
        if len(graph[b]) == 1 and a not in appended:
            leaf, anchor = b, a
        elif len(graph[a]) == 1 and b not in appended:
            leaf, anchor = a, b
        else:
            continue
        plans.append(AppendPlan(leaf, anchor, marginal))
        appended.add(leaf)
    return tuple(plans)


def gum_components(
    attributes: Sequence[str], marginals: Sequence[tuple[str, ...]], *, separate: bool
) -> list[list[str]]:
    """Attribute groups GUM synthesises independently (one group if ``separate`` is off)."""
    if not separate:
        return [list(attributes)] if attributes else []
    graph = marginal_graph(attributes, marginals)
    position = {a: i for i, a in enumerate(attributes)}
    components = [sorted(c, key=position.__getitem__) for c in connected_components(graph)]
    return sorted(components, key=lambda c: position[c[0]])
