import numpy as np
import pytest

from privsyn_core.domain import Domain
from privsyn_core.marginals import MarginalTable
from privsyn_core.measuring.counting import ArrayCounter
from privsyn_core.measuring.measurement import NoisyMarginal
from privsyn_core.measuring.one_way import (
    decode,
    group_low_counts,
    grouped_one_way,
    measure_one_way,
    recode,
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
