"""Greedy selection of 2-way marginals (paper section 4.2, Algorithm 1).

Selecting pair ``i`` removes its dependency error ``phi_i`` (its noisy InDif, in counts) and
adds noise error. With the optimal allocation rho_j ~ c_j^(2/3) (Equation 1) the total noise
error of a set X of marginals is ``(sum_{j in X} c_j^(2/3))^(3/2) / sqrt(pi rho_3)`` in
expected L1 counts, the same unit as InDif. Each round therefore scores every candidate in one
vectorised expression and adds the best one; the loop stops as soon as the best total error
is not lower than the current one, without adding the candidate that failed.

With a prediction target (:mod:`privsyn_core.selection.target`) the same loop minimises the
weighted error: ``phi_i`` becomes ``w_i phi_i`` and ``c_i`` becomes ``w_i c_i``.

**The winner's curse.** The paper feeds the noisy scores to Algorithm 1 as if they were the
dependencies. Each carries Gaussian noise of scale ``sigma`` (Theorem 4.2), and a wide table has
thousands of candidates: the pairs whose noise came out high look dependent and are taken, so
the marginal budget is spread over pairs that hold nothing. On a 10,000 x 55 table at epsilon
0.5 (1,485 candidates, sigma about 6,000 counts on 10,000 rows) Algorithm 1 takes 265 pairs,
most of them noise. ``margin`` counts each pair's dependency as ``max(phi_i - margin * p0 *
sigma, 0)``, a lower confidence bound: a pair is only worth measuring if it is dependent beyond
its noise. ``p0`` (:func:`null_share`) is the estimated share of pairs with no dependency, so
the margin bites where most candidates are noise (that table: 0.9) and fades where nearly
every pair is dependent (Adult at epsilon 1: 0.04). It reads only the noisy scores and their
public noise scale.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from privsyn_core.selection.target import TargetEmphasis, marginal_weights


@dataclass(frozen=True)
class SelectionStep:
    """One accepted pair and the total error after accepting it."""

    pair: tuple[str, str]
    total_error: float


@dataclass(frozen=True)
class Selection:
    """Selected pairs in the order Algorithm 1 took them, plus the isolated-attribute links."""

    steps: tuple[SelectionStep, ...]
    initial_error: float
    isolated_links: tuple[tuple[str, str], ...]

    @property
    def pairs(self) -> tuple[tuple[str, str], ...]:
        return tuple(s.pair for s in self.steps) + self.isolated_links


#: a marginal is measured well when its expected L1 noise is at most this share of the rows
WELL_MEASURED_L1 = 0.1


def measurable_pairs(
    cells: Sequence[int], rho: float, rows: float, within: float = WELL_MEASURED_L1
) -> int:
    """How many pairs of the median size in ``cells`` the marginal budget ``rho`` can measure
    each with expected L1 noise at most ``within`` of ``rows``, splitting ``rho`` equally.

    ``k`` marginals of ``c`` cells get ``rho / k`` each, noise ``sigma = sqrt(k / (2 rho))``
    per cell and expected L1 ``sqrt(2 / pi) sigma c``; so ``k <= pi rho (within rows / c)^2``.
    Public sizes and DP outputs (the noisy row count) only."""
    if not len(cells) or rho <= 0 or rows <= 0:
        return 0
    c = float(np.median(cells))
    return min(len(cells), int(math.pi * rho * (within * rows / c) ** 2))


def null_share(scores: np.ndarray) -> float:
    """The share of candidate pairs whose noisy score is noise around no dependency,
    estimated from the scores alone: an independent pair's score is Gaussian noise around
    (nearly) zero, so it falls below zero half the time and a dependent pair's almost never;
    twice the share of negative scores estimates it (Storey's estimator at lambda = 0)."""
    if not scores.size:
        return 0.0
    return min(1.0, 2.0 * float(np.mean(scores < 0)))


def noise_error(cell_power_sum: float, rho: float) -> float:
    """Expected L1 noise of marginals with sum of c^(2/3) equal to ``cell_power_sum``."""
    return cell_power_sum**1.5 / math.sqrt(math.pi * rho)


@dataclass(frozen=True)
class Candidates:
    """Every pair of the InDif matrix (upper triangle ``iu < ju``) as Algorithm 1 sees it:
    noisy score, emphasis weight ``w``, dependency ``phi`` (weighted, margin-adjusted) and
    noise weight ``power = (w c)^(2/3)``."""

    names: tuple[str, ...]
    iu: np.ndarray
    ju: np.ndarray
    scores: np.ndarray
    weight: np.ndarray
    phi: np.ndarray
    power: np.ndarray

    def pair(self, k: int) -> tuple[str, str]:
        return (self.names[self.iu[k]], self.names[self.ju[k]])


def candidates(
    noisy_indif: pd.DataFrame,
    sizes: dict[str, int],
    emphasis: TargetEmphasis | None,
    indif_sigma: float,
    margin: float,
    floor: np.ndarray | None = None,
) -> Candidates:
    """The candidate pairs of ``noisy_indif`` with the margin of the module docstring, each
    score less ``floor`` (the InDif a pair shows without dependency, as a matrix) if given."""
    names = tuple(str(n) for n in noisy_indif.columns)
    iu, ju = np.triu_indices(len(names), k=1)
    pairs = [(names[i], names[j]) for i, j in zip(iu, ju, strict=True)]
    weight = np.array(marginal_weights(pairs, emphasis), dtype=float)
    scores = noisy_indif.to_numpy()[iu, ju] - (0.0 if floor is None else floor[iu, ju])
    phi = weight * np.maximum(scores - margin * null_share(scores) * indif_sigma, 0.0)
    power = np.array(
        [float(w * sizes[a] * sizes[b]) ** (2 / 3) for w, (a, b) in zip(weight, pairs, strict=True)]
    )
    return Candidates(names, iu, ju, scores, weight, phi, power)


def budget_weights(
    marginals: Sequence[tuple[str, ...]],
    sizes: dict[str, int],
    emphasis: TargetEmphasis | None,
    equal: bool = False,
) -> np.ndarray:
    """Each marginal's share of rho_3, unnormalised (paper section 4.2, Equation 1):
    ``(w_i c_i)^(2/3)``, ``w_i`` the prediction target's weight (1 without one); all equal
    for the equal splits of section 6.4 (``equal``)."""
    if equal:
        return np.ones(len(marginals))
    weights = marginal_weights(marginals, emphasis)
    return np.array(
        [
            (w * math.prod(sizes[a] for a in m)) ** (2 / 3)
            for w, m in zip(weights, marginals, strict=True)
        ],
        dtype=float,
    )


def greedy_order(phi: np.ndarray, power: np.ndarray, rho: float) -> list[tuple[int, float]]:
    """Algorithm 1's loop on arrays: candidates of dependency ``phi`` and noise weight
    ``power`` (c^(2/3)), taken while the total error falls; (index, total error) in order."""
    available = np.ones(phi.size, dtype=bool)
    remaining_phi = float(phi.sum())
    power_sum = 0.0
    current = remaining_phi
    taken: list[tuple[int, float]] = []
    root = math.sqrt(math.pi * rho)
    while available.any():
        candidate = (power_sum + power) ** 1.5 / root + (remaining_phi - phi)
        candidate[~available] = np.inf
        best = int(np.argmin(candidate))
        if not candidate[best] < current:
            break
        available[best] = False
        power_sum += power[best]
        remaining_phi -= phi[best]
        current = float(candidate[best])
        taken.append((best, current))
    return taken


def select_marginals(
    noisy_indif: pd.DataFrame,
    sizes: dict[str, int],
    rho: float,
    *,
    connect_isolated: bool = True,
    emphasis: TargetEmphasis | None = None,
    indif_sigma: float = 0.0,
    margin: float = 0.0,
) -> Selection:
    """Algorithm 1 on the noisy InDif matrix, for a marginal budget ``rho`` (rho_3).

    ``indif_sigma`` is the scores' noise standard deviation and ``margin`` how many of them a
    score must clear before it counts as dependency (see the module docstring; 0 is the
    paper's rule).

    ``connect_isolated``: an attribute left out of every selected pair (and with more than one
    value) is joined to its partner of highest noisy InDif, so that no attribute is synthesised
    independently of all others; the paper leaves such attributes to their 1-way marginals.
    """
    found = candidates(noisy_indif, sizes, emphasis, indif_sigma, margin)
    names, d = found.names, len(found.names)
    steps = tuple(
        SelectionStep(found.pair(k), error)
        for k, error in greedy_order(found.phi, found.power, rho)
    )

    links: list[tuple[str, str]] = []
    if connect_isolated and d > 1:
        covered = {a for step in steps for a in step.pair}
        scores = noisy_indif.to_numpy().copy()
        np.fill_diagonal(scores, -np.inf)
        for i, name in enumerate(names):
            if name in covered or sizes[name] < 2:
                continue
            partners = np.where([sizes[n] > 1 for n in names], scores[i], -np.inf)
            if not np.isfinite(partners).any():
                continue
            j = int(np.argmax(partners))
            pair = (names[min(i, j)], names[max(i, j)])
            if pair not in links:
                links.append(pair)
            covered.update(pair)
    return Selection(steps, float(found.phi.sum()), tuple(links))
