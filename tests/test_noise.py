import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm

from privsyn_core import synthesize
from privsyn_core.privacy.noise import DEBUG, RELEASE, SecureNoise, SeededNoise, as_noise


@pytest.fixture(scope="module")
def secure():
    return SecureNoise()


@pytest.mark.parametrize("sigma", [0.7, 3.0, 25.0])
def test_discrete_gaussian_matches_theory(secure, sigma):
    draws = secure.add(np.zeros(40_000), sigma, integer=True)
    assert np.all(draws == np.rint(draws))  # integers: the discrete Gaussian
    # discrete Gaussian variance is at most sigma^2 and within a hair of it for sigma >= 0.7
    assert abs(draws.mean()) < 4 * sigma / np.sqrt(draws.size)
    assert draws.var() == pytest.approx(sigma**2, rel=0.05)
    tail = np.mean(np.abs(draws) > 2 * sigma)
    assert tail < 2 * norm.sf(2) * 1.25 + 0.01  # sub-Gaussian tails


@pytest.mark.slow
def test_real_valued_noise_has_the_calibrated_scale(secure):
    draws = secure.add(np.full(20_000, 0.5), 10.0, integer=False)
    assert draws.std() == pytest.approx(10.0, rel=0.05)
    assert not np.all(draws == np.rint(draws))


def test_release_mode_never_repeats_and_debug_mode_always_does(secure):
    counts = np.arange(50, dtype=float)
    assert not np.array_equal(
        secure.add(counts, 5.0, integer=True), secure.add(counts, 5.0, integer=True)
    )
    first = SeededNoise(np.random.default_rng(7)).add(counts, 5.0, integer=True)
    again = SeededNoise(np.random.default_rng(7)).add(counts, 5.0, integer=True)
    assert np.array_equal(first, again)
    assert as_noise(np.random.default_rng(1)).mode == DEBUG and secure.mode == RELEASE


def test_the_tail_bound_used_for_thresholds_covers_the_discrete_gaussian(secure):
    delta = 0.01
    z = secure.tail_quantile(delta)
    draws = secure.add(np.zeros(100_000), 2.0, integer=True)
    assert np.mean(draws >= z * 2.0) <= delta


def test_a_run_without_a_generator_is_a_release_and_says_so():
    table = pd.DataFrame({"a": np.arange(3000) % 4, "b": (np.arange(3000) // 3) % 3})
    release = synthesize(table, 2.0, 1e-9, domain={"a": 4, "b": 3})
    debug = synthesize(table, 2.0, 1e-9, domain={"a": 4, "b": 3}, rng=np.random.default_rng(0))
    assert release.ledger.randomness == RELEASE
    assert all(
        "discrete gaussian" in e.mechanism for e in release.ledger.entries if e.step != "indif"
    )
    assert debug.ledger.randomness == DEBUG
    assert all("not for release" in e.mechanism for e in debug.ledger.entries)
    assert release.ledger.to_json()["randomness"] == RELEASE


@pytest.mark.parametrize("mode", ["secure", "seeded"])
@pytest.mark.parametrize("scale", [2.0, 6.0])
@pytest.mark.slow
def test_laplace_noise_has_the_requested_scale_and_laplace_tails(secure, mode, scale):
    source = secure if mode == "secure" else SeededNoise(np.random.default_rng(3))
    draws = source.add_laplace(np.zeros(40_000), scale, integer=True)
    # release mode adds integers (the discrete Laplace), debug mode NumPy's continuous one
    assert np.all(draws == np.rint(draws)) == (mode == "secure")
    # Laplace(b): variance 2 b^2 (the discrete one's is within 2% of it for b >= 2); a
    # factor-of-2 slip in the scale would move the std by 100%
    assert draws.std() == pytest.approx(np.sqrt(2) * scale, rel=0.04)
    # mean absolute deviation is b for the Laplace, 0.8 sigma for a Gaussian of equal std
    assert np.mean(np.abs(draws)) / draws.std() == pytest.approx(1 / np.sqrt(2), rel=0.05)
    assert "laplace" in source.laplace_mechanism(integer=True)


@pytest.mark.parametrize("mode", ["secure", "seeded"])
@pytest.mark.slow
def test_the_exponential_mechanism_picks_in_proportion_to_exp_score_over_scale(secure, mode):
    source = secure if mode == "secure" else SeededNoise(np.random.default_rng(4))
    scores = np.array([0.0, 1.0, 2.0])
    picks = np.bincount([source.choose(scores, 1.0) for _ in range(3000)], minlength=3)
    expected = np.exp(scores) / np.exp(scores).sum()
    # 3,000 draws: each frequency within 4 standard errors of its probability
    tolerance = 4 * np.sqrt(expected * (1 - expected) / 3000)
    assert np.all(np.abs(picks / 3000 - expected) < tolerance)
    assert "exponential" in source.choice_mechanism()
