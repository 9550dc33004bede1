"""The candidates of PrivBayes-style selection (the paper's "PrivBayes-InDif", section 6.3).

PrivBayes (Zhang et al. 2017, reviewed in paper section 3.2) builds a Bayesian network one
attribute at a time: the first attribute is drawn at random, then each step picks, with the
exponential mechanism, a pair (attribute ``X`` not yet in the network, parent set ``P`` of
``min(k, |network|)`` attributes already in it) and adds ``X`` with parents ``P``. The marginals
it then measures are the sets ``{X} + P``. The paper's competitor scores each candidate with
InDif between ``X`` and ``P`` taken as one compound attribute (sensitivity 4, Lemma 4.1 holds
for any two attributes) instead of PrivBayes' own slow score.

This module holds the pure, public part: which candidates a step may choose from and which
marginals a finished network asks for. The data-dependent scores and the exponential
mechanism live in :mod:`privsyn_core.measuring.privbayes`.

Like PrivBayes' theta-usefulness, a cap keeps the measured marginals small: a candidate's
marginal may have at most ``max_cells`` cells (the combine step's gamma, 5000 by default).
When no parent set of the full degree fits under the cap, the step falls back to single
parents (each ``{X, v}``, whatever its size), so every attribute still gets a parent.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations


@dataclass(frozen=True)
class NetworkNode:
    """One attribute of the Bayesian network and the parents the mechanism gave it."""

    attribute: str
    parents: tuple[str, ...]


def candidates(
    network: Sequence[str],
    remaining: Sequence[str],
    sizes: Mapping[str, int],
    degree: int,
    max_cells: int,
) -> list[NetworkNode]:
    """Every (attribute, parent set) the next step may choose from.

    Parent sets have ``min(degree, len(network))`` attributes of ``network`` and the marginal
    of the attribute with them at most ``max_cells`` cells; if no candidate of any remaining
    attribute fits, every single parent is offered instead. Depends on public sizes only.
    """
    if degree < 1:
        raise ValueError(f"degree must be >= 1, got {degree}")
    width = min(degree, len(network))
    found = [
        NetworkNode(x, parents)
        for x in remaining
        for parents in combinations(network, width)
        if sizes[x] * math.prod(sizes[p] for p in parents) <= max_cells
    ]
    if found or width == 0:
        return found if width else [NetworkNode(x, ()) for x in remaining]
    return [NetworkNode(x, (p,)) for x in remaining for p in network]


def network_marginals(
    nodes: Sequence[NetworkNode], attributes: Sequence[str]
) -> tuple[tuple[str, ...], ...]:
    """The marginals a network asks for: each node with its parents, in table order, leaving
    out sets contained in another (measuring them would spend budget on nothing new)."""
    position = {a: i for i, a in enumerate(attributes)}
    sets = {
        tuple(sorted({n.attribute, *n.parents}, key=position.__getitem__))
        for n in nodes
        if n.parents
    }
    kept = [s for s in sets if not any(set(s) < set(other) for other in sets)]
    return tuple(sorted(kept, key=lambda s: [position[a] for a in s]))
