"""Measured pairs whose dependence is no larger than their noise are drawn as independent.

PrivSyn measures a pair because its noisy InDif score said the pair is dependent (paper
4.1), but on a wide table at a small budget that score is mostly noise, and so is the pair's
marginal: caravan (5,822 x 86) at epsilon 0.5 measures about 120 pairs of two or more
values each, with noise of a few rows per cell on cells that hold a few rows. Fitting such a
marginal copies its noise into the synthetic table, and the table ends up farther from the
real one than independent columns drawn from the same 1-way marginals.

Each measured pair's consistent marginal ``T`` (counts, ``a x b`` cells) is compared with the
product of its own margins ``Q = r c^T / N``. The interaction ``T - Q`` lives in ``(a-1)(b-1)``
dimensions, and Gaussian noise of standard deviation ``sigma`` per cell puts about
``(a-1)(b-1) sigma^2`` of squared norm there on its own (consistency moves only the margins,
not the interaction). Keeping the measured table brings that noise into the synthetic one;
replacing it by ``Q`` brings the real interaction's squared norm instead, whose unbiased
estimate is ``||T - Q||^2 - (a-1)(b-1) sigma^2``. The pair is replaced where the estimate is
the smaller, that is where ``||T - Q||^2 <= 2 (a-1)(b-1) sigma^2`` (Mallows' Cp; ``threshold``
is the 2). Everything here reads the consistent marginals and their public noise scales:
it is post-processing and costs no budget.

Evidence (``benchmarks/evidence/tree-first-2026-11-26.txt``, section O): caravan at 0.5
goes from over its own independent columns to under them on 6 seeds; tables with strong
dependence (the planted and dense generators) replace no pair or one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from privsyn_core.errors import InputError
from privsyn_core.marginals import MarginalTable

#: the default ``threshold``: replace a pair where its interaction is at most twice what its
#: noise alone would give (see the module docstring)
DEFAULT_THRESHOLD = 2.0


def check_threshold(threshold: object, name: str = "independence_threshold") -> None:
    """Refuse a ``threshold`` that is neither None (the rule off) nor a finite number >= 0;
    ``name`` is the setting's, for the message (the quasi-independence penalty is checked by
    the same rule)."""
    if threshold is None:
        return
    if isinstance(threshold, bool) or not isinstance(threshold, int | float):
        raise InputError(f"{name} must be a number or None, got {threshold!r}")
    if not (math.isfinite(threshold) and threshold >= 0):
        raise InputError(f"{name} must be a finite number >= 0, got {threshold}")


def noise_pairs_message(count: int) -> str:
    """What the replacement did, for the GUM stage's summary."""
    return (
        f"{count} measured pair{'s' if count != 1 else ''} drawn as independent: "
        "no more dependence than their noise"
    )


def within_noise(table: MarginalTable, sigma: float, threshold: float) -> bool:
    """Whether the 2-way ``table`` (counts) shows no more dependence than noise of standard
    deviation ``sigma`` per cell would, by ``threshold`` times its expected squared norm."""
    if len(table.shape) != 2:
        return False
    a, b = table.shape
    freedom = (a - 1) * (b - 1)
    if freedom == 0:
        return False  # a one-value side: the table is its own product already
    counts = table.values.reshape(table.shape)
    if counts.sum() <= 0:
        return False
    return float(((counts - product_of_margins(counts)) ** 2).sum()) <= (
        threshold * freedom * sigma**2
    )


def product_of_margins(joint: np.ndarray) -> np.ndarray:
    """The 2-way counts ``joint`` made independent: the outer product of its margins over
    its total (same margins, same total; zeros where the total is not positive)."""
    total = joint.sum()
    if total <= 0:
        return np.zeros_like(joint, dtype=float)
    return np.outer(joint.sum(axis=1), joint.sum(axis=0)) / total


def independent_product(table: MarginalTable) -> MarginalTable:
    """The 2-way ``table`` with its cells replaced by the product of its margins."""
    return table.with_values(product_of_margins(table.values.reshape(table.shape)).ravel())


def noise_pairs(
    marginals: Sequence[MarginalTable],
    sigmas: Mapping[tuple[str, ...], float],
    threshold: float | None,
) -> frozenset[tuple[str, ...]]:
    """The attributes of every 2-way table of ``marginals`` that is :func:`within_noise`.
    ``sigmas`` are the measurements' noise scales by attributes (a table with none is never
    in); ``threshold`` None: none is.

    Where such a pair is drawn as independent, only its table changes: the tree GUM starts
    from (:func:`~privsyn_core.generation.initial.dependency_tree`) keeps the shape the
    measured tables give it. Rebuilt without the pair, the tree routes its chain elsewhere:
    loans at epsilon 4, seed 1, went from 0.1035 to 0.1066 in 2-way L1 that way, and to
    0.1036 with the shape kept."""
    if threshold is None:
        return frozenset()
    return frozenset(
        table.attributes
        for table in marginals
        if (sigma := sigmas.get(table.attributes)) is not None
        and within_noise(table, sigma, threshold)
    )
