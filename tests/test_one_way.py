import numpy as np
import pytest

from privsyn_core.domain import Domain
from privsyn_core.generation.grouping import decode, member_shares
from privsyn_core.marginals import MarginalTable, NoisyMarginal
from privsyn_core.measuring.counters import ArrayCounter
from privsyn_core.measuring.one_way import (
    RowCount,
    group_low_counts,
    grouped_one_way,
    low_group_total,
    measure_one_way,
    recode,
    row_counts_without_each,
)


def noisy(values, sigma=1.0, rho=0.5):
    values = np.asarray(values, dtype=float)
    return NoisyMarginal(MarginalTable(("a",), (values.size,), values), rho, sigma)


def test_low_values_are_combined_when_their_total_passes_the_threshold():
    grouping = group_low_counts(noisy([100, 2, 50, 4, 3, 0]), threshold=6)
    assert grouping.size == 3  # 0, 2 kept, {1, 3, 4, 5} merged
    assert grouping.merged_code == 2
    assert grouping.members[2] == (1, 3, 4, 5)
    assert list(grouping.code_of) == [0, 2, 1, 2, 2, 2]
    assert grouping.dropped == ()


def test_low_values_are_dropped_when_their_total_stays_below_the_threshold():
    grouping = group_low_counts(noisy([100, 2, 50, -3]), threshold=6)
    assert grouping.size == 2 and grouping.merged_code is None
    assert grouping.dropped == (1, 3)
    # dropped values fold into the largest kept value for measuring
    assert list(grouping.code_of) == [0, 0, 1, 0]
    one_way = grouped_one_way(noisy([100, 2, 50, -3]), grouping)
    assert list(one_way.table.values) == [100, 50]  # dropped noise does not count
    # the largest kept value need not be the first one: fold into its *engine* code
    later = group_low_counts(noisy([1, 40, 2, 90, 0]), threshold=6)
    assert list(later.code_of) == [1, 0, 1, 1, 1]
    assert list(grouped_one_way(noisy([1, 40, 2, 90, 0]), later).table.values) == [40, 90]


def test_a_missing_code_below_the_threshold_is_dropped_never_combined():
    """Combined values are split back by noisy counts: a missing code inside the group would
    turn noise into missing values in a column that has none."""
    counts = [100, 4, 50, 3, 2]  # code 4 is the missing code
    plain = group_low_counts(noisy(counts), threshold=6)
    assert plain.members[-1] == (1, 3, 4)
    grouping = group_low_counts(noisy(counts), threshold=6, solitary=4)
    assert grouping.members == ((0,), (2,), (1, 3))
    assert grouping.dropped == (4,)
    assert grouping.code_of[4] == 0  # folded into the largest value for measuring
    kept = group_low_counts(noisy([100, 4, 50, 3, 20]), threshold=6, solitary=4)
    assert (4,) in kept.members  # frequent enough: a value of its own


def test_nothing_above_threshold_leaves_one_value_for_all():
    grouping = group_low_counts(noisy([1, 2, 1]), threshold=10)
    assert grouping.size == 1 and grouping.members == ((0, 1, 2),)


def test_grouped_marginal_sums_the_same_noisy_counts_and_reports_their_variance():
    source = noisy([100, 2, 50, 4, 3, 0], sigma=2.0, rho=0.125)
    grouping = group_low_counts(source, threshold=6)
    grouped = grouped_one_way(source, grouping)
    assert list(grouped.table.values) == [100, 50, 9]
    # 6 noisy counts over 3 cells: average variance 2 sigma^2, so rho halves
    assert grouped.rho == pytest.approx(0.0625)
    assert grouped.sigma == pytest.approx(2.0 * np.sqrt(2))


def test_decoding_splits_a_merged_value_by_projected_noisy_counts():
    grouping = group_low_counts(noisy([1000, 300, 100, -50]), threshold=350)
    assert grouping.members[grouping.merged_code] == (1, 2, 3)
    column = np.full(45_000, grouping.merged_code)
    column[:10_000] = 0
    # 35,000 rows x 0.01 = 350 records: projecting [300, 100, -50] onto total 350 gives
    # [275, 75, 0] (one shift of 25, the negative member clipped)
    out = decode(column, grouping, np.random.default_rng(0), records_per_row=0.01)
    counts = np.bincount(out, minlength=4)
    assert list(counts) == [10_000, 27_500, 7_500, 0]


def test_one_way_measurement_splits_rho_evenly_and_recode_maps_codes():
    rng = np.random.default_rng(0)
    domain = Domain(("a", "b"), (3, 4))
    records = np.vstack([rng.integers(0, 3, 500), rng.integers(0, 4, 500)]).astype(np.uint8)
    marginals, spends = measure_one_way(ArrayCounter(records, domain), 0.2, rng)
    assert [s.rho for s in spends] == [0.1, 0.1]
    assert [m.attributes for m in marginals] == [("a",), ("b",)]
    groupings = tuple(group_low_counts(m, 3 * m.sigma) for m in marginals)
    recoded, engine = recode(records, domain, groupings)
    assert engine.sizes == (3, 4)  # 500 rows: nothing is low
    assert np.array_equal(recoded, records)


def test_each_attribute_gets_the_row_count_of_the_others_by_inverse_variance():
    one_way = [
        noisy([60, 40], sigma=1.0),
        noisy([30, 30, 30, 20], sigma=1.0),
        noisy([95], sigma=2.0),
    ]
    rows = row_counts_without_each(one_way)
    # precisions 1/(c sigma^2): 1/2, 1/4, 1/4
    assert rows[0].value == pytest.approx((110 / 4 + 95 / 4) / 0.5)
    assert rows[0].variance == pytest.approx(2.0)
    assert rows[1].value == pytest.approx((100 / 2 + 95 / 4) / 0.75)
    assert rows[2].variance == pytest.approx(1 / 0.75)
    assert row_counts_without_each([noisy([5, 5])]) == (None,)


def test_the_low_group_total_combines_its_sum_with_the_row_count_minus_the_rest():
    source = noisy([1000, 3, -2, 4, 1], sigma=1.0)
    group = np.array([False, True, True, True, True])
    alone = low_group_total(source, group)
    assert (alone.value, alone.variance) == (6.0, 4.0)  # the paper's: 4 noisy counts
    both = low_group_total(source, group, RowCount(1012.0, 1.0))
    # second estimate 1012 - 1000 = 12 with variance 1 + 1 = 2; weights 1/4 and 1/2
    assert both.value == pytest.approx((6 / 4 + 12 / 2) / 0.75)
    assert both.variance == pytest.approx(1 / 0.75)


@pytest.mark.slow
def test_a_long_tail_is_kept_far_more_often_and_estimated_with_less_noise():
    """The adult-coded case: one common value, a long tail of rare ones worth 400 rows in all.
    The members' summed noise (90 terms) hides the tail; the row count of other attributes
    does not, and neither estimate is biased."""
    rng = np.random.default_rng(7)
    sigma, theta = 40.0, 120.0
    tail = np.zeros(90)
    tail[:10] = 40.0
    truth = np.concatenate([[9000.0, 600.0], tail])
    group = np.concatenate([[False, False], np.ones(90, dtype=bool)])
    others = [np.array([5000.0, 5000.0]), np.array([2000.0, 3000.0, 5000.0])]
    paper, ours, kept_paper, kept_ours = [], [], [], []
    for _ in range(2000):
        source = noisy(truth + rng.normal(0, sigma, truth.size), sigma=sigma)
        measured = [noisy(t + rng.normal(0, sigma, t.size), sigma=sigma) for t in others]
        rows = row_counts_without_each([source, *measured])[0]
        paper.append(low_group_total(source, group).value)
        ours.append(low_group_total(source, group, rows).value)
        kept_paper.append(group_low_counts(source, theta).merged_code is not None)
        kept_ours.append(group_low_counts(source, theta, rows=rows).merged_code is not None)
    paper, ours = np.array(paper), np.array(ours)
    assert abs(paper.mean() - 400) < 3 * 380 / np.sqrt(2000)
    assert abs(ours.mean() - 400) < 3 * 150 / np.sqrt(2000)
    # sqrt(1 / (1/90 + 1/(2 + 2.4))) / sqrt(90) ~ 0.22
    assert ours.std() < 0.3 * paper.std()
    # the tail's rare members that noise lifts over theta leave the group, so it is kept
    # less often than its 400 rows alone would say, but far more often than by the sum
    assert np.mean(kept_paper) < 0.8
    assert np.mean(kept_ours) > 0.9


def test_the_grouped_marginal_holds_the_better_total_and_its_smaller_variance():
    source = noisy([1000, 3, -2, 4, 1, 500], sigma=1.0, rho=0.5)
    rows = RowCount(1520.0, 1.0)
    grouping = group_low_counts(source, threshold=5, rows=rows)
    assert grouping.members[grouping.merged_code] == (1, 2, 3, 4)
    grouped = grouped_one_way(source, grouping, rows)
    merged = low_group_total(source, np.array([0, 1, 1, 1, 1, 0], dtype=bool), rows)
    assert grouped.table.values[grouping.merged_code] == pytest.approx(merged.value)
    # cell variances 1, 1 and merged.variance (< 4) instead of 1, 1 and 4
    average = (2 + merged.variance) / 3
    assert grouped.sigma == pytest.approx(np.sqrt(average))
    assert grouped.rho == pytest.approx(0.5 / average)


def test_a_merged_value_larger_than_its_positive_counts_scales_them_up():
    """The group's estimated total (here 600 records) exceeds what its members' positive
    noisy counts hold (400): the L2 projection would lift every member by 100, the empty
    one too (a value beyond a column's bounds, widened to keep its tails); the positive
    counts are scaled instead and the member the noise made negative gets nothing."""
    grouping = group_low_counts(noisy([1000, 300, 100, -50]), threshold=350)
    column = np.full(60_000, grouping.merged_code)
    out = decode(column, grouping, np.random.default_rng(0), records_per_row=0.01)
    counts = np.bincount(out, minlength=4)
    assert list(counts) == [0, 45_000, 15_000, 0]
    assert list(member_shares(np.array([300.0, 100.0, -50.0]), 350.0)) == [275.0, 75.0, 0.0]
