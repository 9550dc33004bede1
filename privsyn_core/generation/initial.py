"""GUM's initial table (paper section 5.2), from the consistent noisy marginals alone.

The paper starts GUM from columns drawn independently from their 1-way marginals. On a wide
table with dense dependencies GUM does not get far from there: each update chases the noise
of its own marginal and disturbs every other marginal on the attributes it rewrites, so the
table settles where corrections and disturbances balance. On a 100,000 x 40 table whose
columns copy earlier ones (``benchmarks/scale.py --table dense``, epsilon 1) that balance
lies at a 2-way L1 of 0.26, worse than independent columns (0.22).

``"tree"`` (the default) draws the columns along a maximum spanning tree of the measured
pairs instead, as MST does (McKenna et al. 2021): each tree's root from its 1-way marginal,
then each attribute from its conditional given its parent, read off the consistent pair
marginal (sampled by :func:`~privsyn_core.generation.sampling.conditional_column`, so every
conditional is met to within a record per cell). Edges are weighted by the mutual information
of the noisy pair marginal, so the tree keeps the strongest measured dependencies. On the
table above the tree alone reaches 0.095. It reads only the consistent noisy marginals:
post-processing, free of privacy cost.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import combinations
from typing import Literal

import numpy as np

from privsyn_core.generation.independence import product_of_margins
from privsyn_core.generation.sampling import conditional_column, shuffled_column
from privsyn_core.marginals import MarginalTable
from privsyn_core.selection.forest import (
    adjacency,
    bfs_edges,
    connected_components,
    maximum_spanning_forest,
)

#: how GUM's initial columns are drawn: the paper's independent columns, or along a tree
Initial = Literal["tree", "independent"]
INITIALS: tuple[str, ...] = ("tree", "independent")


@dataclass(frozen=True)
class Link:
    """A measured pair: its mutual information and joint counts (rows indexed by ``first``)."""

    first: str
    second: str
    weight: float
    joint: np.ndarray


#: a forest as an adjacency mapping (:mod:`~privsyn_core.selection.forest`): each edge a link
Tree = dict[str, dict[str, Link]]


def initial_columns(
    names: Sequence[str],
    marginals: Sequence[MarginalTable],
    one_way: Mapping[str, np.ndarray],
    n: int,
    how: Initial,
    rng: np.random.Generator,
    dtype: np.dtype,
    independent: frozenset[tuple[str, ...]] = frozenset(),
) -> np.ndarray:
    """The initial columns (``len(names)`` x ``n``) of one GUM component: ``one_way[name]``
    its consistent 1-way counts, ``marginals`` its consistent multi-way marginals, the pairs
    in ``independent`` drawn as independent (see :func:`dependency_tree`)."""
    columns = np.empty((len(names), n), dtype=dtype)
    position = {name: row for row, name in enumerate(names)}
    tree = (
        dependency_tree(names, marginals, independent)
        if how == "tree"
        else {name: {} for name in names}
    )
    for component in connected_components(tree):
        root = min(component, key=position.__getitem__)
        columns[position[root]] = shuffled_column(one_way[root], n, rng)
        for parent, child in bfs_edges(tree, root, sorted):
            link = tree[parent][child]
            joint = link.joint if link.first == parent else link.joint.T
            anchor = columns[position[parent]].astype(np.int64)
            columns[position[child]] = conditional_column(anchor, np.clip(joint, 0, None), rng)
    return columns


def dependency_tree(
    names: Sequence[str],
    marginals: Sequence[MarginalTable],
    independent: frozenset[tuple[str, ...]] = frozenset(),
) -> Tree:
    """A maximum spanning forest over ``names`` whose edges are the measured pairs (every
    pair inside a marginal, its joint summed out of it), weighted by mutual information; a
    pair in several marginals keeps its strongest link. The links of the 2-way marginals in
    ``independent`` (:mod:`privsyn_core.generation.independence`) keep their place in the
    forest and carry the product of their margins."""
    links: dict[frozenset[str], Link] = {}
    for marginal in marginals:
        counts = marginal.values.reshape(marginal.shape)
        for i, j in combinations(range(len(marginal.attributes)), 2):
            others = tuple(k for k in range(counts.ndim) if k not in (i, j))
            joint = counts.sum(axis=others) if others else counts
            a, b = marginal.attributes[i], marginal.attributes[j]
            weight = mutual_information(joint)
            pair = frozenset((a, b))
            if pair not in links or links[pair].weight < weight:
                links[pair] = Link(a, b, weight, joint)  # a pair seen again keeps its place
    weights = adjacency(names, ((link.first, link.second, link.weight) for link in links.values()))
    forest = maximum_spanning_forest(weights)
    for attributes in independent:
        link = links.get(frozenset(attributes))
        if link is not None:
            links[frozenset(attributes)] = replace(link, joint=product_of_margins(link.joint))
    return adjacency(names, ((a, b, links[frozenset((a, b))]) for a, b in forest))


def mutual_information(joint: np.ndarray) -> float:
    """I(A; B) in nats of the distribution proportional to ``joint`` (negative cells as 0)."""
    p = np.clip(np.asarray(joint, dtype=float), 0, None)
    total = p.sum()
    if total <= 0:
        return 0.0
    p = p / total
    outer = p.sum(axis=1, keepdims=True) * p.sum(axis=0, keepdims=True)
    mask = p > 0
    return float((p[mask] * np.log(p[mask] / outer[mask])).sum())
