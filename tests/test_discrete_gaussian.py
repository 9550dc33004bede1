"""The exact discrete Gaussian sampler against its exact distribution.

Draws use seeded bits so every test is reproducible; the sampler's algorithm is the same
with ``os.urandom`` bits (``tests/test_noise.py`` checks that path).
"""

from fractions import Fraction

import numpy as np
import pytest
from scipy.stats import chisquare

from privsyn_core.privacy.discrete_gaussian import (
    MAX_VARIANCE_ROUNDING,
    _accept_wide,
    _uniform_below,
    bernoulli_exp,
    exact_plan,
    os_bits,
    sample_discrete_gaussian,
)


def seeded_bits(seed: int):
    rng = np.random.default_rng(seed)
    return lambda n: rng.integers(0, 2**64, size=n, dtype=np.uint64)


def exact_pmf(variance: Fraction, support: np.ndarray) -> np.ndarray:
    weights = np.exp(-(support.astype(float) ** 2) / (2 * float(variance)))
    return weights / weights.sum()


@pytest.mark.parametrize("sigma", [0.3, 1.0, 3.0, 25.0, 400.0])
@pytest.mark.slow
def test_draws_follow_the_discrete_gaussian_pmf(sigma):
    plan = exact_plan(sigma)
    draws = sample_discrete_gaussian(plan, 120_000, bits=seeded_bits(int(sigma * 10)))
    assert draws.dtype == np.int64
    # bins: every integer within 2 sigma (at most 41 of them), then two tails and the rest
    edges = np.unique(np.linspace(-2 * sigma, 2 * sigma, 42).round().astype(int))
    support = np.arange(-int(40 * sigma) - 2, int(40 * sigma) + 3)
    pmf = exact_pmf(plan.variance_parameter, support)
    bins = np.concatenate([[support[0] - 1], edges[:-1] + 0.5, [support[-1] + 1]])
    expected = np.histogram(support, bins=bins, weights=pmf)[0] * draws.size
    observed = np.histogram(draws, bins=bins)[0]
    keep = expected > 5
    observed, expected = observed[keep], expected[keep]
    assert observed.sum() == pytest.approx(draws.size, abs=draws.size * 1e-3)
    expected *= observed.sum() / expected.sum()
    assert chisquare(observed, expected).pvalue > 1e-3
    # below sigma = 1 the discrete Gaussian's variance falls well short of sigma^2
    assert draws.var() == pytest.approx(pmf @ support.astype(float) ** 2, rel=0.05)


@pytest.mark.slow
def test_a_wrong_scale_fails_the_same_goodness_of_fit():
    """The chi-square test above has the power to see a 5% error in sigma."""
    plan, wrong = exact_plan(3.0), exact_plan(3.15)
    draws = sample_discrete_gaussian(wrong, 120_000, bits=seeded_bits(30))
    support = np.arange(-140, 141)
    expected = exact_pmf(plan.variance_parameter, support) * draws.size
    observed = np.bincount(draws + 140, minlength=support.size)
    keep = expected > 5
    expected = expected[keep] * observed[keep].sum() / expected[keep].sum()
    assert chisquare(observed[keep], expected).pvalue < 1e-6


@pytest.mark.parametrize("gamma", [Fraction(0), Fraction(3, 10), Fraction(1), Fraction(5, 2), 7])
def test_bernoulli_exp_has_probability_exp_minus_gamma(gamma):
    gamma = Fraction(gamma)
    n = 200_000
    outcome = bernoulli_exp(
        np.full(n, gamma.numerator, np.uint64),
        np.full(n, gamma.denominator, np.uint64),
        seeded_bits(gamma.numerator + 11),
    )
    p = np.exp(-float(gamma))
    assert abs(outcome.mean() - p) < 5 * np.sqrt(p * (1 - p) / n) + 1e-9


def test_the_wide_acceptance_path_agrees_with_the_64_bit_one():
    # gamma = offset^2 / denominator = 25 / 11: two whole rounds, then 3/11
    n = 100_000
    accepted = _accept_wide(np.full(n, 5, dtype=object), 11, seeded_bits(5))
    p = np.exp(-25 / 11)
    assert abs(accepted.mean() - p) < 5 * np.sqrt(p * (1 - p) / n)


def test_uniform_below_is_uniform_and_redraws_the_biased_range():
    draws = _uniform_below(np.full(70_000, 7, np.uint64), seeded_bits(1))
    assert chisquare(np.bincount(draws.astype(int), minlength=7)).pvalue > 1e-3
    # bound 3 * 2^62: words below 2^64 mod bound = 2^62 must be redrawn, never folded in
    words = iter([np.array([5], np.uint64), np.array([2**62 + 9], np.uint64)])
    drawn = _uniform_below(np.array([3 * 2**62], np.uint64), lambda n: next(words))
    assert int(drawn[0]) == (2**62 + 9) % (3 * 2**62)


def test_the_plan_rounds_the_variance_up_by_less_than_a_millionth():
    for sigma in [0.3, 1.0, np.pi, 25.0, 1000.0, 5000.0]:
        plan = exact_plan(sigma)
        exact = Fraction(sigma) ** 2
        assert exact <= plan.variance_parameter <= exact * (1 + Fraction(1, 10**6))
        assert plan.variance_parameter <= exact * Fraction(MAX_VARIANCE_ROUNDING)
        assert plan.t == int(np.floor(np.sqrt(float(plan.variance_parameter)))) + 1
    assert exact_plan(0.01) is None and exact_plan(50_000.0) is None
    with pytest.raises(ValueError):
        exact_plan(0.0)


def test_secure_bits_are_fresh_every_call():
    assert not np.array_equal(os_bits(4), os_bits(4))
    draws = sample_discrete_gaussian(exact_plan(2.0), 20_000)  # os.urandom bits
    assert draws.var() == pytest.approx(4.0, rel=0.05)
