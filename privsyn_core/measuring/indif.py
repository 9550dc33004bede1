"""InDif dependency scores (paper section 4.1).

For attributes ``a, b``: ``InDif_ab = || M_ab - M_a x M_b / n ||_1`` in counts, the L1 distance
between the 2-way marginal and the one the 1-way marginals would give if ``a`` and ``b`` were
independent. Its range is ``[0, 2n]`` and its sensitivity under add/remove-one is 4
(Lemma 4.1), so publishing all ``m = d(d-1)/2`` scores with N(0, 8m / rho_2) noise is
rho_2-zCDP (Theorem 4.2): each score gets ``rho_2 / m`` and ``sigma^2 = 4^2 / (2 rho_2 / m)``.
"""

from __future__ import annotations

from itertools import combinations
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from privsyn_core.marginals import cell_index, indif_of_joint
from privsyn_core.privacy.ledger import INDIF_SENSITIVITY, ROW, Measurement, PrivacyUnit
from privsyn_core.privacy.noise import NoiseSource, as_noise

if TYPE_CHECKING:
    from privsyn_core.measuring.counters import Counter


def indif_pair(records: np.ndarray, rows: tuple[int, int], shape: tuple[int, int]) -> float:
    """Exact InDif of one attribute pair of a code array, in counts."""
    joint = np.bincount(cell_index(records, rows, shape), minlength=shape[0] * shape[1])
    return indif_of_joint(joint.reshape(shape).astype(float))


def indif_scores(counter: Counter) -> pd.DataFrame:
    """Exact InDif of every pair, as a symmetric attribute x attribute frame (zero diagonal),
    from the all-pairs 2-way counts (one batch).

    This is the private quantity; only :func:`measure_indif` may let it out.
    """
    domain = counter.domain
    d = len(domain)
    matrix = np.zeros((d, d))
    pairs = list(combinations(range(d), 2))
    tables = counter.count([(domain.attributes[i], domain.attributes[j]) for i, j in pairs])
    for (i, j), table in zip(pairs, tables, strict=True):
        matrix[i, j] = matrix[j, i] = indif_of_joint(table.values.reshape(table.shape))
    return pd.DataFrame(matrix, index=list(domain.attributes), columns=list(domain.attributes))


def indif_sigma(n_attributes: int, rho: float, unit: PrivacyUnit = ROW) -> float:
    """Noise standard deviation of every InDif score (Theorem 4.2): sqrt(8 m / rho) per row,
    K times that for a person of at most K rows (each score moves by at most 4K)."""
    m = n_attributes * (n_attributes - 1) // 2
    return unit.sigma(rho / m, INDIF_SENSITIVITY)


def measure_indif(
    counter: Counter, rho: float, rng: NoiseSource | np.random.Generator
) -> tuple[pd.DataFrame, Measurement | None]:
    """Noisy InDif for all pairs at total cost ``rho`` (None spent when there is no pair)."""
    domain = counter.domain
    d = len(domain)
    exact = indif_scores(counter)
    m = d * (d - 1) // 2
    if m == 0:
        return exact, None
    source = as_noise(rng)
    sigma = indif_sigma(d, rho, source.unit)
    upper = np.triu_indices(d, k=1)
    noisy = exact.to_numpy(copy=True)
    noisy[upper] = source.add(noisy[upper], sigma, integer=False)
    noisy.T[upper] = noisy[upper]
    measurement = Measurement(
        step="indif",
        attributes=domain.attributes,
        sensitivity=source.unit.sensitivity(INDIF_SENSITIVITY),
        rho=rho,
        sigma=sigma,
        n_queries=m,
        mechanism=source.mechanism(integer=False),
    )
    return pd.DataFrame(noisy, index=exact.index, columns=exact.columns), measurement
