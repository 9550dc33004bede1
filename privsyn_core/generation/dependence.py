"""What the noisy InDif scores say about the pairs no marginal measured (paper section 4.1).

GUM fits the measured marginals and is blind to every other pair. On a wide table most pairs
are not measured, and GUM's duplications copy whole rows: each copy carries the attributes of
other marginals along, so rows grow alike and pairs nobody measured become dependent. On a
100,000 x 40 table whose columns form groups of five (``benchmarks/scale.py --table planted``,
epsilon 4) GUM brings the measured pairs from an L1 of 0.19 to 0.05 while the 680 unmeasured
ones go from 0.06 to 0.17: the table as a whole gets twice worse.

The run has already released a DP answer for those pairs: their noisy InDif, the L1 distance
of each pair's marginal from independence, in counts. A synthetic table's own InDif on a pair
can be counted for free, and ``|InDif_syn / N - InDif_real / n|`` is a lower bound of the
pair's L1 error (up to the 1-way errors). Since the released score carries Gaussian noise of
known scale ``s``, ``mean((InDif_syn / N - noisy / n)^2) - (s / n)^2`` is an unbiased estimate
of the squared gap, so tables can be ranked on the unmeasured pairs without spending anything.
Its standard error is at least ``sqrt(2 / P) (s / n)^2`` over ``P`` pairs, and the gap is
taken two standard errors below the estimate: on 5,822 rows at epsilon 4 (caravan, 86
columns) ``s / n`` is 0.19 while the gaps are a few hundredths, and the bare estimate picked a
table 30% worse than the one it replaced. Where the noise swamps the gaps the term is 0 and
the measured marginals decide alone. GUM uses it to keep its best table
(:class:`~privsyn_core.generation.gum_settings.GumSettings`'s ``keep_best``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np

from privsyn_core.marginals import indif_of_joint

#: most unmeasured pairs one GUM component is judged on (evenly spread over its pairs): each
#: costs a count of the table per judgement, and 256 pairs pin the mean gap down well
MAX_JUDGED_PAIRS = 256


@dataclass(frozen=True)
class NoisyDependence:
    """The released InDif scores: a symmetric matrix over the engine's attributes, in counts
    of the real table, and their noise standard deviation (Theorem 4.2)."""

    attributes: tuple[str, ...]
    scores: np.ndarray
    sigma: float

    def __post_init__(self) -> None:
        d = len(self.attributes)
        if self.scores.shape != (d, d) or not np.isfinite(self.scores).all():
            raise ValueError(f"InDif scores must be a finite {d} x {d} matrix")
        if not (math.isfinite(self.sigma) and self.sigma > 0):
            raise ValueError(f"the InDif noise scale must be a positive number, got {self.sigma}")

    def upper(self) -> list[float]:
        """The scores above the diagonal, row by row (how a release bundle stores them)."""
        return [float(v) for v in self.scores[np.triu_indices(len(self.attributes), k=1)]]

    @classmethod
    def from_upper(
        cls, attributes: Sequence[str], upper: Sequence[float], sigma: float
    ) -> NoisyDependence:
        d = len(attributes)
        if len(upper) != d * (d - 1) // 2:
            raise ValueError(f"{len(upper)} InDif scores for {d} attributes")
        scores = np.zeros((d, d))
        rows, cols = np.triu_indices(d, k=1)
        scores[rows, cols] = np.asarray(upper, dtype=float)
        scores[cols, rows] = scores[rows, cols]
        return cls(tuple(attributes), scores, float(sigma))


@dataclass(frozen=True)
class UnmeasuredPairs:
    """The pairs of one GUM component that no target covers, as GUM judges them: rows of the
    component's array, their shapes, and their noisy InDif and its noise as shares of the
    real table's (noisy) row count. ``count`` is how many such pairs the component has; at most
    :data:`MAX_JUDGED_PAIRS` of them are judged."""

    rows: tuple[tuple[int, int], ...]
    shapes: tuple[tuple[int, int], ...]
    indif: np.ndarray
    noise: float
    count: int

    def gap(self, counts: Sequence[np.ndarray]) -> float:
        """Estimated root mean squared gap between the table's InDif and the real one, as a
        share of the rows, from the table's ``counts`` of each judged pair (module docstring),
        at its lower confidence bound: 0 when the scores are too noisy to tell."""
        own = np.array(
            [
                indif_of_joint(c.reshape(shape)) / max(c.sum(), 1)
                for c, shape in zip(counts, self.shapes, strict=True)
            ]
        )
        squared = float(np.mean((own - self.indif) ** 2)) - self.noise**2
        # two standard errors below the estimate (each term's variance is at least
        # 2 noise^4): where the noise swamps the gaps the term is 0 and cannot decide
        uncertain = 2 * math.sqrt(2.0 / len(own)) * self.noise**2
        return math.sqrt(max(squared - uncertain, 0.0))


def unmeasured_pairs(
    names: Sequence[str],
    sizes: Mapping[str, int],
    measured: Sequence[Sequence[str]],
    dependence: NoisyDependence,
    total: float,
) -> UnmeasuredPairs | None:
    """The pairs of ``names`` (one GUM component, in its array's row order) that no attribute
    set in ``measured`` covers, None when there is none. ``total`` is the noisy row count."""
    covered = {frozenset(p) for m in measured for p in combinations(m, 2)}
    pairs = [
        (i, j)
        for i, j in combinations(range(len(names)), 2)
        if frozenset((names[i], names[j])) not in covered
        and sizes[names[i]] > 1
        and sizes[names[j]] > 1
    ]
    if not pairs or total <= 0:
        return None
    if len(pairs) > MAX_JUDGED_PAIRS:
        picks = np.unique(np.linspace(0, len(pairs) - 1, MAX_JUDGED_PAIRS).round().astype(int))
        judged = [pairs[k] for k in picks]
    else:
        judged = pairs
    index = {a: k for k, a in enumerate(dependence.attributes)}
    scores = np.array([dependence.scores[index[names[i]], index[names[j]]] for i, j in judged])
    return UnmeasuredPairs(
        rows=tuple(judged),
        shapes=tuple((sizes[names[i]], sizes[names[j]]) for i, j in judged),
        indif=scores / total,
        noise=dependence.sigma / total,
        count=len(pairs),
    )
