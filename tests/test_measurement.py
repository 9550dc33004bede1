import numpy as np
import pytest

from privsyn_core.domain import Domain
from privsyn_core.measuring.counters import ArrayCounter
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


def test_laplace_marginals_have_the_scale_their_rho_buys_and_say_so_in_the_ledger():
    from privsyn_core.measuring.measurement import measure_marginals

    rng = np.random.default_rng(8)
    domain = Domain(("a", "b"), (100, 100))
    records = rng.integers(0, 100, size=(2, 5000)).astype(np.uint8)
    exact = np.bincount(records[0].astype(int) * 100 + records[1], minlength=10_000)
    rho = 0.002
    ((noisy, spend),) = measure_marginals(
        ArrayCounter(records, domain), [("a", "b")], [rho], rng, "marginal", mechanism="laplace"
    )
    noise = noisy.table.values - exact
    scale = 1 / np.sqrt(2 * rho)  # epsilon = sqrt(2 rho), L1 sensitivity 1
    assert spend.rho == rho and "laplace" in spend.mechanism
    assert spend.sigma == pytest.approx(np.sqrt(2) * scale)
    # 10,000 draws: the std is within 3% of sqrt(2) b; a scale off by 2 is off by 100%
    assert np.std(noise) == pytest.approx(np.sqrt(2) * scale, rel=0.03)
    # Laplace, not Gaussian: mean |noise| is b = std / sqrt(2) (a Gaussian gives 0.80 std)
    assert np.mean(np.abs(noise)) == pytest.approx(scale, rel=0.03)
    # consistency weighs by inverse variance: a Laplace marginal counts as Gaussian rho / 2
    assert noisy.rho == pytest.approx(rho / 2)
    assert 1 / (2 * noisy.rho) == pytest.approx(2 * scale**2)


def test_an_unknown_mechanism_is_refused():
    from privsyn_core.measuring.measurement import measure_marginals

    domain = Domain(("a",), (3,))
    counter = ArrayCounter(np.zeros((1, 5), dtype=np.uint8), domain)
    with pytest.raises(ValueError, match="mechanism"):
        measure_marginals(counter, [("a",)], [0.1], np.random.default_rng(0), "m", "cauchy")
