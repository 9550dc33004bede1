"""DP domains: thresholded noisy counts for categories, two noisy histograms for bounds."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm

from privsyn_core.measuring.private_domain import private_categories, private_range


def expected_threshold(rho: float, delta: float) -> float:
    sigma = 1.0 / math.sqrt(2.0 * rho)
    # Phi^-1(1 - delta), computed without the round-off of 1 - delta for tiny delta
    return 1.0 + sigma * float(norm.isf(delta))


@pytest.mark.parametrize(("rho", "delta"), [(0.5, 0.05), (0.01, 1e-6), (3.0, 1e-9)])
def test_threshold_formula(rho, delta):
    column = pd.Series(["a"] * 10, name="c")
    result = private_categories(column, rho, delta, np.random.default_rng(0))
    assert result.threshold == pytest.approx(expected_threshold(rho, delta), rel=1e-12)
    sigma = 1.0 / math.sqrt(2.0 * rho)
    assert result.threshold == pytest.approx(1.0 + sigma * norm.ppf(1.0 - delta), rel=1e-6)


def release_rates(rho: float, delta: float, draws: int, seeds: int) -> tuple[float, float]:
    """Release rates of values held by one and by two records, over ``draws * seeds`` values
    of each (each value's count gets independent noise, so one call gives many draws)."""
    values = [f"one{i}" for i in range(draws)]
    values += [f"two{i}" for i in range(draws) for _ in range(2)]
    column = pd.Series(values, name="c")
    ones = twos = 0
    for seed in range(seeds):
        kept = private_categories(column, rho, delta, np.random.default_rng(seed)).categories
        ones += sum(v.startswith("one") for v in kept)
        twos += sum(v.startswith("two") for v in kept)
    n = draws * seeds
    return ones / n, twos / n


@pytest.mark.parametrize("rho", [0.5, 0.02])
def test_a_value_held_by_one_record_is_released_with_probability_delta(rho):
    delta = 0.05
    single, double = release_rates(rho, delta, draws=2000, seeds=10)
    n = 20_000
    sigma = 1.0 / math.sqrt(2.0 * rho)
    tau = expected_threshold(rho, delta)
    # theory: P(1 + N(0, sigma^2) >= tau) = delta
    p_one = float(norm.sf((tau - 1.0) / sigma))
    assert p_one == pytest.approx(delta)
    tolerance = 4 * math.sqrt(p_one * (1 - p_one) / n)
    assert abs(single - p_one) < tolerance
    assert single <= delta + tolerance
    # a count of two is released at the rate the noise scale implies (checks sigma)
    p_two = float(norm.sf((tau - 2.0) / sigma))
    assert abs(double - p_two) < 4 * math.sqrt(p_two * (1 - p_two) / n)


def test_frequent_values_are_always_released():
    rng = np.random.default_rng(0)
    column = pd.Series(rng.choice(["x", "y", "z"], 3000), name="c")
    for seed in range(200):
        result = private_categories(column, 0.05, 1e-6, np.random.default_rng(seed))
        assert result.categories == ("x", "y", "z")


def test_rare_values_are_dropped_and_order_is_stable():
    column = pd.Series(["b"] * 500 + ["a"] * 400 + ["secret"] + [None] * 30, name="c")
    for seed in range(20):
        result = private_categories(column, 0.1, 1e-6, np.random.default_rng(seed))
        assert result.categories == ("a", "b")


def test_mixed_types_are_sorted_by_type_then_value():
    column = pd.Series([3] * 200 + ["b"] * 200 + [1] * 200 + ["a"] * 200, name="c", dtype=object)
    result = private_categories(column, 1.0, 1e-6, np.random.default_rng(0))
    assert result.categories == (1, 3, "a", "b")


def test_category_measurement_fields():
    column = pd.Series(["a"] * 50 + ["b"] * 50 + ["c"] * 5, name="island")
    rho, delta = 0.08, 1e-7
    m = private_categories(column, rho, delta, np.random.default_rng(0)).measurement
    assert m.step == "domain"
    assert m.attributes == ("island",)
    assert m.rho == rho
    assert m.sigma == pytest.approx(1.0 / math.sqrt(2.0 * rho))
    assert m.delta == delta
    assert m.sensitivity == 1.0


def test_category_ledger_entry_does_not_reveal_the_number_of_distinct_values():
    """The ledger is shown to anyone; an entry must not depend on the private values. Two
    neighbouring columns (one record changed to a unique value) must give the same entry."""
    base = ["a"] * 100 + ["b"] * 100
    first = pd.Series(base, name="c")
    second = pd.Series([*base[:-1], "only-one-person-has-this"], name="c")
    m1 = private_categories(first, 0.5, 1e-6, np.random.default_rng(0)).measurement
    m2 = private_categories(second, 0.5, 1e-6, np.random.default_rng(0)).measurement
    assert m1 == m2


# ------------------------------------------------------------------ ranges


@pytest.mark.parametrize("loc", [0.0, 1000.0, -300.0])
def test_range_contains_the_bulk_of_the_data(loc):
    values = np.random.default_rng(1).normal(loc, 10.0, 50_000)
    p1, p99 = np.percentile(values, [1, 99])
    for seed in range(5):
        r = private_range(values, 0.5, np.random.default_rng(seed), integer=False)
        assert r.lower is not None and r.upper is not None
        assert r.lower <= p1 and r.upper >= p99
        # tight: no wider than twice the data's own range around its centre
        assert r.lower >= loc - 100 and r.upper <= loc + 100


def test_integer_range_gives_whole_bounds_containing_the_data():
    values = np.random.default_rng(2).integers(1990, 2021, 50_000).astype(float)
    for seed in range(5):
        r = private_range(values, 0.5, np.random.default_rng(seed), integer=True)
        assert float(r.lower).is_integer() and float(r.upper).is_integer()
        assert 1980 <= r.lower <= 1990
        assert 2020 <= r.upper <= 2030


def test_integer_range_of_small_counts():
    values = np.random.default_rng(3).integers(0, 6, 5000).astype(float)
    r = private_range(values, 1.0, np.random.default_rng(0), integer=True)
    assert (r.lower, r.upper) == (0.0, 5.0)


def test_a_lone_extreme_outlier_never_sets_the_upper_bound():
    bulk = np.random.default_rng(4).normal(50.0, 10.0, 5000)
    values = np.append(bulk, 1e12)
    uppers = [
        private_range(values, 1.0, np.random.default_rng(seed), integer=False).upper
        for seed in range(50)
    ]
    assert all(u is not None and u < 1000 for u in uppers), max(uppers)
    lowers = [
        private_range(np.append(bulk, -1e12), 1.0, np.random.default_rng(seed), integer=False).lower
        for seed in range(50)
    ]
    assert all(lo is not None and lo > -1000 for lo in lowers), min(lowers)


@pytest.mark.parametrize(
    "values", [np.array([]), np.full(100, np.nan), np.array([np.inf, -np.inf, np.nan])]
)
def test_empty_or_all_missing_input_gives_no_bounds(values):
    r = private_range(values, 1.0, np.random.default_rng(0), integer=False)
    assert r.lower is None and r.upper is None
    assert r.measurement.rho == 1.0


def test_range_measurement_fields_do_not_depend_on_the_data():
    rho = 0.3
    small = private_range(np.arange(10.0), rho, np.random.default_rng(0), integer=True)
    big = private_range(np.arange(1e5), rho, np.random.default_rng(0), integer=True)
    m = small.measurement
    assert m == big.measurement
    assert m.step == "domain"
    assert m.rho == rho
    # two histograms at rho / 2 each, sensitivity one
    assert m.sigma == pytest.approx(1.0 / math.sqrt(2.0 * rho / 2))
    assert m.sensitivity == 1.0
    assert m.delta == 0.0


def test_a_lone_outlier_cannot_set_a_bound_even_at_a_large_budget():
    values = np.concatenate([np.random.default_rng(1).normal(50, 5, 5000), [1e12]])
    uppers = [
        private_range(values, 100.0, np.random.default_rng(seed), integer=False).upper
        for seed in range(50)
    ]
    assert max(uppers) < 1000


def test_quantile_edges_split_skewed_data_into_roughly_equal_mass_bins():
    values = np.random.default_rng(2).exponential(1000.0, 50_000)
    estimate = private_range(values, 1.0, np.random.default_rng(3), integer=False)
    edges = estimate.quantile_edges(16, integer=False)
    assert edges is not None and len(edges) == 17
    assert edges[0] == estimate.lower and edges[-1] == estimate.upper
    inside = values[(values >= edges[0]) & (values < edges[-1])]
    shares = np.histogram(inside, bins=edges)[0] / inside.size
    # equal-width bins would put over half the mass in the first bin
    assert shares.max() < 2.5 / 16 and shares.min() > 0.3 / 16
    whole = private_range(np.round(values), 1.0, np.random.default_rng(3), integer=True)
    integer_edges = whole.quantile_edges(16, integer=True)
    assert all(float(e).is_integer() for e in integer_edges)


def test_quantile_edges_need_a_fine_enough_histogram():
    values = np.random.default_rng(4).normal(0, 1, 300)
    estimate = private_range(values, 1e-3, np.random.default_rng(5), integer=False)
    assert estimate.quantile_edges(32, integer=False) is None
