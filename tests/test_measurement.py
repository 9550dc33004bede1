import numpy as np
import pytest

from privsyn_core.domain import Domain
from privsyn_core.measuring.counting import ArrayCounter
from privsyn_core.measuring.measurement import measure_marginal
from privsyn_core.privacy.ledger import gaussian_sigma


def test_marginal_noise_has_the_calibrated_standard_deviation():
    rng = np.random.default_rng(7)
    domain = Domain(("a", "b"), (100, 100))
    records = rng.integers(0, 100, size=(2, 5000)).astype(np.uint8)
    exact = np.bincount(records[0].astype(int) * 100 + records[1], minlength=10_000)
    rho = 0.002
    noisy, spend = measure_marginal(
        ArrayCounter(records, domain), ("a", "b"), rho, rng, step="marginal"
    )
    noise = noisy.table.values - exact
    sigma = gaussian_sigma(rho)
    assert spend.sigma == pytest.approx(sigma)
    assert spend.rho == rho and spend.n_queries == 10_000 and spend.sensitivity == 1.0
    # 10,000 independent draws: the sample std is within 3% of sigma with overwhelming odds
    assert np.std(noise) == pytest.approx(sigma, rel=0.03)
    assert abs(np.mean(noise)) < 4 * sigma / 100


def test_noise_is_fresh_per_call_and_reproducible_per_seed():
    domain = Domain(("a",), (50,))
    records = np.zeros((1, 10), dtype=np.uint8)
    first, _ = measure_marginal(
        ArrayCounter(records, domain), ("a",), 1.0, np.random.default_rng(1), "x"
    )
    again, _ = measure_marginal(
        ArrayCounter(records, domain), ("a",), 1.0, np.random.default_rng(1), "x"
    )
    other, _ = measure_marginal(
        ArrayCounter(records, domain), ("a",), 1.0, np.random.default_rng(2), "x"
    )
    assert np.array_equal(first.table.values, again.table.values)
    assert not np.array_equal(first.table.values, other.table.values)
