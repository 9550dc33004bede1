from itertools import combinations

import numpy as np
import pandas as pd
import pytest

from privsyn_core.domain import Domain
from privsyn_core.measuring.counters import ArrayCounter
from privsyn_core.measuring.indif import indif_pair, indif_scores, indif_sigma, measure_indif


def slow_indif(a: np.ndarray, b: np.ndarray, ka: int, kb: int) -> float:
    n = a.size
    total = 0.0
    for i in range(ka):
        for j in range(kb):
            joint = np.sum((a == i) & (b == j))
            total += abs(joint - np.sum(a == i) * np.sum(b == j) / n)
    return total


def test_papers_gender_age_example_gives_0_08_n():
    # Figure 2: actual 2-way marginal of gender x age; InDif = 0.08 n.
    cells = {(0, 0): 0.10, (0, 1): 0.10, (0, 2): 0.20, (1, 0): 0.10, (1, 1): 0.20, (1, 2): 0.30}
    n = 1000
    rows = [cell for cell, share in cells.items() for _ in range(round(share * n))]
    records = np.array(rows, dtype=np.uint8).T
    assert indif_pair(records, (0, 1), (2, 3)) == pytest.approx(0.08 * n)


def test_scores_match_a_slow_reference():
    rng = np.random.default_rng(3)
    records = rng.integers(0, 5, size=(4, 300)).astype(np.uint8)
    records[1] = np.where(rng.random(300) < 0.5, records[0], records[1])
    domain = Domain(("w", "x", "y", "z"), (5, 5, 5, 5))
    scores = indif_scores(ArrayCounter(records, domain))
    for i, j in combinations(range(4), 2):
        expected = slow_indif(records[i], records[j], 5, 5)
        assert scores.iat[i, j] == pytest.approx(expected)
        assert scores.iat[j, i] == pytest.approx(expected)
    assert scores.iat[0, 1] > 3 * scores.iat[2, 3]


@pytest.mark.slow
def test_sensitivity_is_at_most_four_over_random_neighbours():
    """Lemma 4.1 by brute force: add one record to many random small tables."""
    rng = np.random.default_rng(11)
    worst = 0.0
    for _ in range(3000):
        n = int(rng.integers(1, 12))
        ka, kb = int(rng.integers(1, 5)), int(rng.integers(1, 5))
        # skewed tables reach the largest changes
        a = np.minimum(rng.geometric(0.6, n) - 1, ka - 1)
        b = np.minimum(rng.geometric(0.6, n) - 1, kb - 1)
        before = indif_pair(np.vstack([a, b]), (0, 1), (ka, kb))
        x, y = rng.integers(0, ka), rng.integers(0, kb)
        after = indif_pair(np.vstack([np.append(a, x), np.append(b, y)]), (0, 1), (ka, kb))
        worst = max(worst, abs(after - before))
    assert worst <= 4.0 + 1e-9
    # the bound is not vacuous: some neighbours move InDif by more than 2
    assert worst > 2.0


def test_noisy_scores_have_the_calibrated_noise():
    rng = np.random.default_rng(5)
    d = 60
    domain = Domain(tuple(f"c{i}" for i in range(d)), (2,) * d)
    records = rng.integers(0, 2, size=(d, 200)).astype(np.uint8)
    exact = indif_scores(ArrayCounter(records, domain)).to_numpy()
    rho = 0.05
    noisy, spend = measure_indif(ArrayCounter(records, domain), rho, rng)
    m = d * (d - 1) // 2
    assert spend.n_queries == m and spend.sensitivity == 4.0 and spend.rho == rho
    assert spend.sigma == pytest.approx(np.sqrt(8 * m / rho))
    assert spend.sigma == pytest.approx(indif_sigma(d, rho))
    upper = np.triu_indices(d, 1)
    noise = noisy.to_numpy()[upper] - exact[upper]
    assert np.std(noise) == pytest.approx(spend.sigma, rel=0.05)  # 1,770 draws
    assert isinstance(noisy, pd.DataFrame)
    assert np.allclose(noisy.to_numpy(), noisy.to_numpy().T)
    assert list(noisy.columns) == list(domain.attributes)
