"""Tests for privsyn_core.copied_rows (the owner-only check for copied real rows).

Statistical tests draw their tables from fixed seeds: a synthesizer that copies rows (whole,
or with a small change) is warned about, fresh rows of the same population and an
independent-columns sampler are not, and false alarms stay near the documented rate.
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from scipy.stats import fisher_exact

from privsyn_core import copied_rows
from privsyn_core.copied_rows import CopiedRowsReport, copied_rows_report, gower_distances
from privsyn_core.errors import InputError

JOBS = np.array(["clerk", "nurse", "teacher", "driver", "cook", "farmer"])
TOWNS = np.array(["north", "south", "east", "west"])


def population(n: int, seed: int) -> pd.DataFrame:
    """People of one population: correlated numbers and categories, with missing values in
    two columns (as Adult's occupation and native country)."""
    rng = np.random.default_rng(seed)
    age = rng.integers(18, 80, n)
    job = JOBS[(age // 12 + rng.integers(0, 3, n)) % len(JOBS)]
    hours = np.clip(np.round(rng.normal(40, 8, n)), 1, 99)
    income = np.round(rng.lognormal(10 + (age - 18) / 80, 0.5, n), -1)
    town = TOWNS[rng.integers(0, len(TOWNS), n)].astype(object)
    town[rng.random(n) < 0.05] = None
    weight = rng.normal(75, 12, n).round(1)
    weight[rng.random(n) < 0.03] = np.nan
    return pd.DataFrame(
        {"age": age, "job": job, "hours": hours, "income": income, "town": town, "kg": weight}
    )


def resampled(real: pd.DataFrame, n: int, seed: int) -> pd.DataFrame:
    """A 'synthesizer' that memorised its input: real rows drawn with replacement."""
    return real.sample(n=n, replace=True, random_state=seed).reset_index(drop=True)


def independent_columns(real: pd.DataFrame, n: int, seed: int) -> pd.DataFrame:
    """Each column drawn on its own from the real column: no row survives as a whole."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {c: real[c].to_numpy()[rng.integers(0, len(real), n)] for c in real.columns}
    )


@pytest.fixture(scope="module")
def real() -> pd.DataFrame:
    return population(3000, seed=1)


# --------------------------------------------------------------------------------------------
# Verdicts
# --------------------------------------------------------------------------------------------


def test_a_synthesizer_that_copies_rows_is_warned_about(real):
    report = copied_rows_report(real, resampled(real, 3000, seed=2), seed=0)
    assert report.copies_of_real == 3000  # every row is one of the real rows
    # half of the real rows are the reference: about half the copies land there
    assert 0.45 < report.synthetic.copy_share < 0.55
    assert report.held_out.copy_share < 0.01  # continuous columns: fresh rows rarely repeat
    assert report.copies_flagged and report.suspicious
    assert report.verdict().startswith("Warning:") and "exact copies" in report.verdict()


def test_a_partly_copying_synthesizer_is_warned_about(real):
    """One row in ten a real row, the rest fresh: still far beyond chance."""
    fresh = population(2700, seed=3)
    mixed = pd.concat([fresh, resampled(real, 300, seed=4)], ignore_index=True)
    report = copied_rows_report(real, mixed, seed=0)
    assert 0.03 < report.synthetic.copy_share < 0.07
    assert report.copies_flagged


def test_rows_copied_with_a_small_change_are_caught_by_distance(real):
    """Every copied row's income nudged by 1 (incomes are whole tens): no exact copy, yet each
    sits next to a real row."""
    nudged = resampled(real, 3000, seed=5)
    nudged["income"] = nudged["income"] + 1
    report = copied_rows_report(real, nudged, seed=0)
    assert report.synthetic.copies == 0 and not report.copies_flagged
    assert report.near_flagged and report.suspicious
    assert report.synthetic.median < report.held_out.median
    assert "lie almost on a real row" in report.verdict()


def test_fresh_rows_of_the_same_population_are_not_warned_about(real):
    report = copied_rows_report(real, population(3000, seed=6), seed=0)
    assert not report.suspicious
    assert report.verdict().startswith("No sign of copied rows")
    # same population, same distances: the medians agree within sampling error
    assert report.synthetic.median == pytest.approx(report.held_out.median, rel=0.25)


def test_an_independent_columns_sampler_is_not_warned_about(real):
    report = copied_rows_report(real, independent_columns(real, 3000, seed=7), seed=0)
    assert not report.suspicious
    # broken rows lie farther from real rows than fresh real rows do
    assert report.synthetic.median > report.held_out.median


@pytest.mark.slow
def test_false_alarms_on_fresh_rows_stay_near_alpha():
    """30 checks of fresh rows against their own population (alpha 0.05 to see alarms at all):
    a valid test at 5% raises 3 or more alarms in 30 checks only 19% of the time, 6 or more
    in under 1%."""
    alarms = 0
    for seed in range(30):
        real = population(400, seed=100 + seed)
        fresh = population(400, seed=200 + seed)
        report = copied_rows_report(real, fresh, seed=seed, alpha=0.05)
        alarms += report.suspicious
    assert alarms <= 5


def test_a_table_with_many_natural_duplicates_is_judged_against_them():
    """Three binary columns: identical rows are everywhere. Fresh rows copy real ones as often
    as held-out real rows do, and that is no warning."""
    rng = np.random.default_rng(8)

    def coins(n: int) -> pd.DataFrame:
        return pd.DataFrame({c: rng.integers(0, 2, n) for c in "abc"})

    real = coins(2000)
    report = copied_rows_report(real, coins(2000), seed=0)
    assert report.synthetic.copy_share == 1.0 and report.held_out.copy_share == 1.0
    assert not report.suspicious


# --------------------------------------------------------------------------------------------
# A given holdout, sizes, seeds
# --------------------------------------------------------------------------------------------


def test_a_given_holdout_makes_the_whole_real_table_the_reference(real):
    holdout = population(1000, seed=9)
    report = copied_rows_report(real, resampled(real, 2000, seed=10), holdout=holdout, seed=0)
    assert report.holdout_given and report.reference_rows == len(real)
    assert report.synthetic.copy_share == 1.0  # the reference is every row it copied
    assert report.held_out.rows == 1000 and report.held_out.copy_share < 0.01
    assert report.copies_flagged
    assert "held-out real rows you gave" in report.format()


def test_samples_are_capped_and_drawn_with_the_seed(real):
    synthetic = population(2500, seed=11)
    small = copied_rows_report(real, synthetic, seed=3, max_reference=500, max_queries=200)
    assert small.distance_reference_rows == 500
    assert small.synthetic.sampled == small.held_out.sampled == 200
    assert small.synthetic.rows == 2500  # exact copies: every row
    again = copied_rows_report(real, synthetic, seed=3, max_reference=500, max_queries=200)
    assert again == small
    other = copied_rows_report(real, synthetic, seed=4, max_reference=500, max_queries=200)
    assert other.synthetic.median != small.synthetic.median


@pytest.mark.slow
def test_the_distances_do_not_depend_on_the_block_size(real, monkeypatch):
    synthetic = population(700, seed=12)
    whole = copied_rows_report(real, synthetic, seed=0)
    monkeypatch.setattr(copied_rows, "_BLOCK_CELLS", 997)  # blocks of a row or two
    assert copied_rows_report(real, synthetic, seed=0) == whole


def test_share_at_distance_zero_counts_identical_rows(real):
    report = copied_rows_report(real, resampled(real, 3000, seed=13), seed=0)
    syn = report.synthetic
    # every sampled row that is a copy of a distance-reference row is at distance 0
    assert 0 < syn.at_zero <= syn.sampled
    assert syn.zero_share == pytest.approx(syn.copy_share, abs=0.06)
    assert report.near_distance == 0.0  # more than 5% of the pooled rows are copies


def test_the_p_values_are_fishers_exact_test():
    for counts in [(5, 100, 1, 120), (0, 50, 3, 50), (40, 400, 22, 390), (7, 7, 0, 9)]:
        hits, rows, base, base_rows = counts
        table = [[hits, rows - hits], [base, base_rows - base]]
        expected = fisher_exact(table, alternative="greater").pvalue
        assert copied_rows._more_often(*counts) == pytest.approx(expected, rel=1e-9)


# --------------------------------------------------------------------------------------------
# Normalised values: missing, mixed types
# --------------------------------------------------------------------------------------------


def test_missing_equals_missing_and_differs_from_any_value():
    real = pd.DataFrame({"x": [1.0, np.nan, 3.0], "c": ["a", None, "b"]})
    synthetic = pd.DataFrame({"x": [np.nan, np.nan], "c": [None, "a"]})
    distances = gower_distances(synthetic, real, real=real)
    # row 0 (missing, missing) is real row 1; row 1 (missing, "a") differs from real row 0
    # only in x: missing against 1.0 is the full distance 1 of that column
    assert distances[0, 1] == 0.0
    assert distances[1, 0] == pytest.approx(0.5)
    assert distances[0, 0] == pytest.approx(1.0)
    report = copied_rows_report(real, synthetic, seed=0)
    assert report.copies_of_real == 1


def test_numbers_are_equal_however_they_are_written():
    """The dashboard reads a table as text ("40"); a synthetic table holds numbers (40, 40.0):
    the same values, and so the same row."""
    real = pd.DataFrame({"age": ["40", "51", "62"], "job": ["a", "b", "c"], "n": ["9", "x", "7"]})
    synthetic = pd.DataFrame({"age": [40, 51.0, 63], "job": ["a", "b", "c"], "n": [9, "x", 7.0]})
    distances = gower_distances(synthetic, real, real=real)
    assert distances[0, 0] == 0.0 and distances[1, 1] == 0.0
    # 63 against 62: a twenty-second of age's range (40..62), in one of three columns
    assert distances[2, 2] == pytest.approx((1 / 22) / 3)
    assert copied_rows_report(real, synthetic, seed=0).copies_of_real == 2


def test_dates_are_compared_as_times():
    real = pd.DataFrame({"day": pd.to_datetime(["2024-01-01", "2024-01-11", "2024-01-21"])})
    synthetic = pd.DataFrame({"day": ["2024-01-11", "2024-01-16"]})
    distances = gower_distances(synthetic, real, real=real)
    assert distances[0, 1] == 0.0
    assert distances[1, 1] == pytest.approx(0.25)  # 5 days of a 20-day range


def test_booleans_and_text_are_categories():
    real = pd.DataFrame({"flag": [True, False], "word": ["1", "one"]})
    synthetic = pd.DataFrame({"flag": [True, True], "word": ["1", "two"]})
    distances = gower_distances(synthetic, real, real=real)
    assert distances[0].tolist() == [0.0, 1.0]  # (True, "1") is real row 0
    assert distances[1].tolist() == [0.5, 1.0]


# --------------------------------------------------------------------------------------------
# The distance
# --------------------------------------------------------------------------------------------


def test_gower_distance_is_a_metric_bounded_by_one(real):
    rows = pd.concat([real.head(25), population(25, seed=14)], ignore_index=True)
    rows.loc[3, "age"] = 500  # beyond the real range: capped, still at most 1 per column
    d = gower_distances(rows, rows, real=real)
    assert d.shape == (50, 50)
    assert np.all(np.diag(d) == 0)
    assert np.allclose(d, d.T)
    assert d.min() >= 0 and d.max() <= 1
    for i, j, k in itertools.product(range(0, 50, 3), repeat=3):
        assert d[i, k] <= d[i, j] + d[j, k] + 1e-6


def test_numbers_are_scaled_by_the_real_range_and_capped():
    real = pd.DataFrame({"x": [0.0, 10.0, 20.0], "c": ["a", "a", "b"]})
    synthetic = pd.DataFrame({"x": [5.0, 50.0, 0.0], "c": ["a", "a", "b"]})
    d = gower_distances(synthetic, real, real=real)
    assert d[0, 0] == pytest.approx((5 / 20) / 2)
    assert d[1, 1] == pytest.approx((1.0 + 0.0) / 2)  # 40 apart, twice the range: capped
    assert d[2, 0] == pytest.approx((0 + 1) / 2)  # same number, other category


def test_a_constant_real_column_puts_any_other_value_at_full_distance():
    real = pd.DataFrame({"x": [7, 7, 7]})
    d = gower_distances(pd.DataFrame({"x": [7, 7.5, 9]}), real, real=real)
    assert d[:, 0].tolist() == [0.0, 0.5, 1.0]


# --------------------------------------------------------------------------------------------
# Refusals and text
# --------------------------------------------------------------------------------------------


def test_tables_with_other_columns_are_refused_by_name(real):
    with pytest.raises(InputError, match=r"missing from the synthetic table: 'kg'"):
        copied_rows_report(real, real.drop(columns="kg"))
    with pytest.raises(InputError, match=r"extra in the held-out table: 'id'"):
        copied_rows_report(real, real, holdout=real.assign(id=1))


def test_columns_in_another_order_are_matched_by_name(real):
    shuffled = real[list(reversed(real.columns))]
    assert copied_rows_report(real, shuffled, seed=0).copies_of_real == len(real)


@pytest.mark.parametrize(
    ("real_rows", "synthetic_rows", "holdout_rows", "words"),
    [
        (0, 5, None, "real table has no rows"),
        (5, 0, None, "synthetic table has no rows"),
        (1, 5, None, "at least 2 rows"),
        (5, 5, 0, "held-out table has no rows"),
    ],
)
def test_empty_tables_are_refused(real, real_rows, synthetic_rows, holdout_rows, words):
    holdout = None if holdout_rows is None else real.head(holdout_rows)
    with pytest.raises(InputError, match=words):
        copied_rows_report(real.head(real_rows), real.head(synthetic_rows), holdout=holdout)


def test_one_real_row_is_enough_with_a_holdout(real):
    report = copied_rows_report(real.head(1), real.head(3), holdout=real.tail(2), seed=0)
    assert report.reference_rows == 1 and report.copies_of_real == 1


def test_the_text_says_owner_only_and_gives_both_sides(real):
    report = copied_rows_report(real, resampled(real, 3000, seed=2), seed=0)
    text = report.format()
    assert text.splitlines()[0].startswith("Copied rows") and "owner-only" in text.splitlines()[0]
    assert "synthetic" in text and "held-out real" in text
    assert f"{report.synthetic.copy_share:.1%}" in text
    assert report.verdict() in text
    assert isinstance(report, CopiedRowsReport)
    as_dict = report.as_dict()
    assert as_dict["suspicious"] is True and as_dict["synthetic"]["rows"] == 3000
