"""Tests for privsyn_core.evaluation (fidelity measures of PrivSyn section 6.1).

Expected values are derived by hand (analytic cases) or by slow, obviously-correct
plain-Python reference implementations written here, never copied from a run of the code.
"""

from __future__ import annotations

import itertools
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privsyn_core.evaluation import (
    FidelityReport,
    draw_range_queries,
    encode_tables,
    fidelity_report,
    one_hot,
    range_query_error,
    split_rows,
    svm_misclassification,
    two_way_l1,
)

ADULT = Path(__file__).resolve().parents[1] / "assets" / "adult-coded.csv"


# --------------------------------------------------------------------------------------------
# Slow references
# --------------------------------------------------------------------------------------------


def slow_two_way_l1(real: np.ndarray, synthetic: np.ndarray) -> float:
    """Dictionary counts over rows, one pair at a time, cells taken from both tables."""
    d = real.shape[1]
    pairs = list(itertools.combinations(range(d), 2))
    if not pairs:
        return 0.0
    total = 0.0
    for i, j in pairs:
        p = Counter((int(row[i]), int(row[j])) for row in real)
        q = Counter((int(row[i]), int(row[j])) for row in synthetic)
        for cell in set(p) | set(q):
            total += abs(p[cell] / len(real) - q[cell] / len(synthetic))
    return total / len(pairs)


def slow_range_error(real, synthetic, attributes, lower, upper) -> float:
    """Row-by-row membership test for every query."""
    errors = []
    for attrs, los, his in zip(attributes, lower, upper, strict=True):

        def inside(row, attrs=attrs, los=los, his=his):
            return all(lo <= row[a] <= hi for a, lo, hi in zip(attrs, los, his, strict=True))

        fr = sum(inside(row) for row in real) / len(real)
        fs = sum(inside(row) for row in synthetic) / len(synthetic)
        errors.append(abs(fr - fs))
    return sum(errors) / len(errors)


def random_codes(rng: np.random.Generator, n: int, sizes) -> np.ndarray:
    return np.column_stack([rng.integers(0, s, size=n) for s in sizes]).astype(np.int64)


def correlated_table(rng: np.random.Generator, n: int) -> np.ndarray:
    """Four columns; column 1 copies column 0 with 10% noise (a planted correlation)."""
    x = rng.integers(0, 4, size=n)
    y = np.where(rng.random(n) < 0.9, x, rng.integers(0, 4, size=n))
    return np.column_stack([x, y, rng.integers(0, 3, size=n), rng.integers(0, 5, size=n)])


# --------------------------------------------------------------------------------------------
# 2-way marginal L1
# --------------------------------------------------------------------------------------------


def test_identical_and_row_shuffled_tables_score_zero():
    rng = np.random.default_rng(1)
    sizes = (3, 5, 2, 7)
    real = random_codes(rng, 500, sizes)
    shuffled = real[rng.permutation(len(real))]
    assert two_way_l1(real, real, sizes) == 0.0
    assert two_way_l1(real, shuffled, sizes) == 0.0
    assert range_query_error(real, real, sizes, n_queries=200) == 0.0
    assert range_query_error(real, shuffled, sizes, n_queries=200) == 0.0


@pytest.mark.parametrize("seed", range(5))
def test_two_way_l1_matches_slow_reference(seed):
    rng = np.random.default_rng(seed)
    d = int(rng.integers(2, 6))
    sizes = tuple(int(s) for s in rng.integers(1, 6, size=d))
    real = random_codes(rng, int(rng.integers(1, 80)), sizes)
    synthetic = random_codes(rng, int(rng.integers(1, 80)), sizes)
    assert two_way_l1(real, synthetic, sizes) == pytest.approx(slow_two_way_l1(real, synthetic))


@settings(max_examples=40, deadline=None)
@given(st.data())
@pytest.mark.slow
def test_two_way_l1_property_reference_bounds_symmetry(data):
    d = data.draw(st.integers(0, 4))
    sizes = data.draw(st.lists(st.integers(1, 4), min_size=d, max_size=d))
    rows = st.tuples(*[st.integers(0, s - 1) for s in sizes])
    real = np.array(data.draw(st.lists(rows, min_size=1, max_size=30)), dtype=np.int64)
    syn = np.array(data.draw(st.lists(rows, min_size=1, max_size=30)), dtype=np.int64)
    real, syn = real.reshape(len(real), d), syn.reshape(len(syn), d)
    value = two_way_l1(real, syn, sizes)
    assert value == pytest.approx(slow_two_way_l1(real, syn))
    assert value == pytest.approx(two_way_l1(syn, real, sizes))
    assert -1e-12 <= value <= 2 + 1e-12


def test_two_way_l1_analytic_correlated_vs_independent_is_one():
    # Real: x == y, 50/50.  Synthetic: x, y independent 50/50 (all four cells 1/4).
    # L1 = 2 * |1/2 - 1/4| + 2 * |0 - 1/4| = 1.
    real = np.array([[0, 0], [1, 1]] * 50)
    synthetic = np.array([[0, 0], [0, 1], [1, 0], [1, 1]] * 25)
    assert two_way_l1(real, synthetic, (2, 2)) == pytest.approx(1.0)


def test_two_way_l1_disjoint_supports_is_two_and_averages_over_pairs():
    real = np.array([[0, 0, 0]] * 10)
    synthetic = np.array([[1, 1, 0]] * 4)
    # Every pair (0,1), (0,2), (1,2) puts all mass on a cell the other table never uses -> 2.
    assert two_way_l1(real, synthetic, (2, 2, 1)) == pytest.approx(2.0)
    # Only column 0 moves: pairs (0,1), (0,2) are disjoint (2 each), (1,2) identical (0).
    synthetic2 = np.array([[1, 0, 0]] * 4)
    assert two_way_l1(real, synthetic2, (2, 2, 1)) == pytest.approx(4.0 / 3.0)


def test_breaking_a_planted_correlation_raises_two_way_l1():
    rng = np.random.default_rng(7)
    real = correlated_table(rng, 4000)
    fresh = correlated_table(rng, 4000)  # same distribution: only sampling noise
    permuted = real.copy()
    permuted[:, 1] = rng.permutation(permuted[:, 1])  # same 1-way marginals, no correlation
    sizes = (4, 4, 3, 5)
    baseline = two_way_l1(real, real, sizes)
    noise = two_way_l1(real, fresh, sizes)
    broken = two_way_l1(real, permuted, sizes)
    assert baseline == 0.0
    assert broken > 3 * noise
    # The broken pair alone contributes ~ 2 * 0.9 * (1 - 1/4) = 1.35 over 6 pairs.
    assert broken == pytest.approx(1.35 / 6, abs=0.05)


def test_two_way_l1_large_sizes_use_sparse_path_with_same_value():
    rng = np.random.default_rng(3)
    sizes = (4, 3, 5)
    real = random_codes(rng, 300, sizes)
    synthetic = random_codes(rng, 200, sizes)
    huge = (10**9, 3, 10**9)  # product far above any dense histogram
    assert two_way_l1(real, synthetic, huge) == pytest.approx(two_way_l1(real, synthetic, sizes))


def test_two_way_l1_fewer_than_two_columns_is_zero():
    real = np.array([[0], [1], [1]])
    synthetic = np.array([[0], [0]])
    assert two_way_l1(real, synthetic, (2,)) == 0.0


def test_metrics_reject_out_of_range_codes_and_shape_mismatch():
    real = np.array([[0, 1], [1, 0]])
    with pytest.raises(ValueError, match="outside"):
        two_way_l1(real, np.array([[0, 2]]), (2, 2))
    with pytest.raises(ValueError, match="columns"):
        two_way_l1(real, np.array([[0, 1, 0]]), (2, 2))
    with pytest.raises(ValueError, match="no rows"):
        range_query_error(real, np.empty((0, 2), dtype=np.int64), (2, 2))


# --------------------------------------------------------------------------------------------
# Range queries
# --------------------------------------------------------------------------------------------


def test_range_queries_are_well_formed():
    sizes = (2, 6, 3, 9, 4)
    q = draw_range_queries(sizes, n_queries=4000, n_attributes=3, seed=11)
    assert q.attributes.shape == q.lower.shape == q.upper.shape == (4000, 3)
    assert all(len(set(row)) == 3 for row in q.attributes.tolist())
    size_of = np.asarray(sizes)[q.attributes]
    assert (q.lower >= 0).all() and (q.lower <= q.upper).all() and (q.upper < size_of).all()
    # Attributes chosen uniformly: each appears in 3/5 of the queries.
    share = np.bincount(q.attributes.ravel(), minlength=5) / 4000
    np.testing.assert_allclose(share, 0.6, atol=0.04)
    # Sorted pair of two uniform draws on {0, 1}: [0,0] 1/4, [0,1] 1/2, [1,1] 1/4.
    on_binary = q.attributes == 0
    lo, hi = q.lower[on_binary], q.upper[on_binary]
    assert np.mean((lo == 0) & (hi == 0)) == pytest.approx(0.25, abs=0.04)
    assert np.mean((lo == 0) & (hi == 1)) == pytest.approx(0.50, abs=0.04)
    assert np.mean((lo == 1) & (hi == 1)) == pytest.approx(0.25, abs=0.04)


def test_range_queries_use_all_attributes_when_fewer_than_requested():
    q = draw_range_queries((3, 4), n_queries=50, n_attributes=3, seed=0)
    assert q.attributes.shape == (50, 2)
    assert all(sorted(row) == [0, 1] for row in q.attributes.tolist())


@pytest.mark.parametrize("seed", [0, 5])
def test_range_query_error_matches_slow_reference(seed):
    rng = np.random.default_rng(100 + seed)
    sizes = (3, 5, 2, 6)
    real = random_codes(rng, 120, sizes)
    synthetic = random_codes(rng, 90, sizes)
    q = draw_range_queries(sizes, n_queries=150, n_attributes=3, seed=seed)
    expected = slow_range_error(
        real.tolist(), synthetic.tolist(), q.attributes.tolist(), q.lower.tolist(), q.upper.tolist()
    )
    got = range_query_error(real, synthetic, sizes, n_queries=150, n_attributes=3, seed=seed)
    assert got == pytest.approx(expected)


def test_range_query_error_analytic_single_binary_attribute():
    # Real all 0, synthetic all 1: a query [lo, hi] disagrees iff it holds exactly one of the
    # two codes, i.e. lo == hi, which has probability 1/2 under the sorted-uniform-pair rule.
    real = np.zeros((10, 1), dtype=np.int64)
    synthetic = np.ones((7, 1), dtype=np.int64)
    err = range_query_error(real, synthetic, (2,), n_queries=4000, seed=2)
    assert err == pytest.approx(0.5, abs=0.03)


def test_range_query_error_deterministic_per_seed_and_varies_across_seeds():
    rng = np.random.default_rng(9)
    sizes = (4, 6, 3, 5)
    real = random_codes(rng, 400, sizes)
    synthetic = random_codes(rng, 400, sizes)
    a = range_query_error(real, synthetic, sizes, n_queries=100, seed=1)
    b = range_query_error(real, synthetic, sizes, n_queries=100, seed=1)
    c = range_query_error(real, synthetic, sizes, n_queries=100, seed=2)
    assert a == b
    assert a != c
    q1 = draw_range_queries(sizes, n_queries=100, seed=1)
    q2 = draw_range_queries(sizes, n_queries=100, seed=2)
    assert not np.array_equal(q1.attributes, q2.attributes)
    # Queries depend on the sizes and the seed only, never on the data.
    q1_again = draw_range_queries(sizes, n_queries=100, seed=1)
    for x, y in zip(q1, q1_again, strict=True):
        np.testing.assert_array_equal(x, y)


# --------------------------------------------------------------------------------------------
# Encoding
# --------------------------------------------------------------------------------------------


def test_encode_tables_strings_reordering_and_integer_codes():
    real = pd.DataFrame(
        {
            "city": ["paris", "oslo", "rome", "oslo"],
            "age": [0, 3, 5, 3],
            "temp": [1.5, np.nan, -2.0, 1.5],
            "delta": [-1, 0, 2, 0],
        }
    )
    synthetic = pd.DataFrame(
        {  # columns in another order, a value real never had
            "delta": [5, -1],
            "temp": [np.nan, 7.0],
            "age": [7, 0],
            "city": ["athens", "rome"],
        }
    )
    r, s, sizes = encode_tables(real, synthetic)
    assert r.dtype == np.int64 and s.dtype == np.int64
    assert r.shape == (4, 4) and s.shape == (2, 4)
    # city: sorted union athens, oslo, paris, rome.
    assert r[:, 0].tolist() == [2, 1, 3, 1] and s[:, 0].tolist() == [0, 3]
    # age: non-negative integers keep their values; size = max over both + 1 = 8.
    assert r[:, 1].tolist() == [0, 3, 5, 3] and s[:, 1].tolist() == [7, 0]
    # temp: sorted union -2.0, 1.5, 7.0, then NaN as one extra value.
    assert r[:, 2].tolist() == [1, 3, 0, 1] and s[:, 2].tolist() == [3, 2]
    # delta: negative integers -> factorised on -1, 0, 2, 5.
    assert r[:, 3].tolist() == [0, 1, 2, 1] and s[:, 3].tolist() == [3, 0]
    assert sizes == (4, 8, 4, 4)


def test_encode_tables_none_bool_and_categorical():
    real = pd.DataFrame(
        {
            "flag": [True, False, True],
            "cat": pd.Categorical(["b", "a", "b"], categories=["b", "a"]),
            "note": ["x", None, "y"],
        }
    )
    synthetic = pd.DataFrame(
        {
            "flag": [False, False],
            "cat": pd.Categorical(["c", "a"]),
            "note": [np.nan, "x"],
        }
    )
    r, s, sizes = encode_tables(real, synthetic)
    assert r[:, 0].tolist() == [1, 0, 1] and s[:, 0].tolist() == [0, 0]
    assert r[:, 1].tolist() == [1, 0, 1] and s[:, 1].tolist() == [2, 0]  # a, b, c by value
    assert r[:, 2].tolist() == [0, 2, 1] and s[:, 2].tolist() == [2, 0]  # None == NaN, last
    assert sizes == (2, 3, 3)


def test_encode_tables_codes_feed_the_metrics_consistently():
    # The same value must get the same code in both tables, whatever their row contents.
    real = pd.DataFrame({"a": ["u", "v"] * 10, "b": ["p", "q"] * 10})
    synthetic = pd.DataFrame({"b": ["q", "p"] * 5, "a": ["v", "u"] * 5})
    r, s, sizes = encode_tables(real, synthetic)
    assert two_way_l1(r, s, sizes) == 0.0


def test_encode_tables_rejects_mismatched_columns_naming_them():
    real = pd.DataFrame({"a": [1], "b": [2], "c": [3]})
    with pytest.raises(ValueError, match="'c'") as excinfo:
        encode_tables(real, pd.DataFrame({"a": [1], "b": [2], "zz": [0]}))
    assert "'zz'" in str(excinfo.value)
    assert "missing" in str(excinfo.value) and "extra" in str(excinfo.value)
    with pytest.raises(ValueError, match="'b'"):
        encode_tables(real, pd.DataFrame({"a": [1], "c": [3]}))


# --------------------------------------------------------------------------------------------
# SVM
# --------------------------------------------------------------------------------------------


def test_one_hot_places_each_attribute_at_its_offset():
    x = one_hot(np.array([[0, 2], [1, 0]]), (2, 3)).toarray()
    np.testing.assert_array_equal(x, [[1, 0, 0, 0, 1], [0, 1, 1, 0, 0]])


def planted_rule(rng, n):
    sizes = (6, 4, 5)
    x = random_codes(rng, n, sizes)
    y = (x[:, 0] >= 3).astype(np.int64)  # linear in the one-hot features
    return x, y, sizes


@pytest.mark.slow
def test_svm_learns_a_linearly_separable_rule():
    rng = np.random.default_rng(21)
    x, y, sizes = planted_rule(rng, 2000)
    xt, yt, _ = planted_rule(rng, 1000)
    assert svm_misclassification(x, y, xt, yt, sizes) <= 0.01


def test_svm_learns_a_multiclass_rule():
    rng = np.random.default_rng(22)
    sizes = (3, 4)
    x = random_codes(rng, 1500, sizes)
    xt = random_codes(rng, 500, sizes)
    assert svm_misclassification(x, x[:, 0], xt, xt[:, 0], sizes) <= 0.01


def test_svm_on_random_labels_is_near_chance():
    rng = np.random.default_rng(23)
    x, _, sizes = planted_rule(rng, 2000)
    xt, _, _ = planted_rule(rng, 2000)
    err = svm_misclassification(x, rng.integers(0, 2, 2000), xt, rng.integers(0, 2, 2000), sizes)
    assert 0.45 <= err <= 0.55


def test_svm_single_training_class_predicts_it():
    x = np.array([[0, 1], [1, 0], [1, 1]])
    xt = np.array([[0, 0], [1, 1], [0, 1], [1, 0]])
    assert svm_misclassification(x, [1, 1, 1], xt, [1, 0, 1, 0], (2, 2)) == pytest.approx(0.5)
    assert svm_misclassification(x, [0, 0, 0], xt, [1, 1, 1, 0], (2, 2)) == pytest.approx(0.75)


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------


def planted_frame(rng, n):
    x, y, _ = planted_rule(rng, n)
    return pd.DataFrame({"f0": x[:, 0], "f1": x[:, 1], "f2": x[:, 2], "y": y})


def test_split_rows_is_a_seeded_partition():
    train, test = split_rows(101, 0.2, seed=4)
    assert len(test) == 20 and len(train) == 81
    assert sorted(np.concatenate([train, test]).tolist()) == list(range(101))
    again = split_rows(101, 0.2, seed=4)
    np.testing.assert_array_equal(train, again[0])
    assert not np.array_equal(test, split_rows(101, 0.2, seed=5)[1])
    with pytest.raises(ValueError, match="test_fraction"):
        split_rows(10, 1.0, seed=0)


def test_fidelity_report_trains_on_synthetic_and_tests_on_real():
    rng = np.random.default_rng(31)
    real = planted_frame(rng, 1500)
    flipped = planted_frame(rng, 1500)
    flipped["y"] = 1 - flipped["y"]  # synthetic that learned the opposite rule
    report = fidelity_report(real, flipped[["y", "f2", "f1", "f0"]], label="y", seed=3)
    assert report.label == "y"
    assert report.nonprivate_svm_misclassification <= 0.01
    assert report.svm_misclassification >= 0.99  # trained on flipped labels, tested on real
    # Pair (f0, y) has disjoint supports (y = [f0 >= 3] vs y = [f0 < 3]) -> exactly 2, and
    # the 5 other pairs are >= 0, so the mean over 6 pairs is at least 1/3.
    assert report.two_way_l1 >= 2 / 6 - 1e-12
    assert report.range_query_error > 0


def test_fidelity_report_self_on_small_table_majority_is_test_minority_share():
    rng = np.random.default_rng(32)
    real = planted_frame(rng, 1000)
    real["y"] = (rng.random(1000) < 0.3).astype(int)  # a 30/70 label unrelated to features
    report = fidelity_report(real, real, label="y", test_fraction=0.25, seed=8)
    _, test = split_rows(1000, 0.25, seed=8)
    assert report.majority_misclassification == pytest.approx(real["y"].to_numpy()[test].mean())
    assert report.two_way_l1 == 0.0 and report.range_query_error == 0.0


def test_fidelity_report_majority_baseline_comes_from_training_rows():
    # Labels planted per split side: class 1 is the majority among training rows (60%) but
    # only 30% of the test rows, so the baseline must predict 1 and miss 70% of the test.
    rng = np.random.default_rng(34)
    real = planted_frame(rng, 1000)
    train, test = split_rows(1000, 0.2, seed=6)
    y = np.zeros(1000, dtype=int)
    y[train[: round(0.6 * len(train))]] = 1
    y[test[: round(0.3 * len(test))]] = 1
    real["y"] = y
    report = fidelity_report(real, real, label="y", seed=6)
    assert report.majority_misclassification == pytest.approx(0.7)


def test_fidelity_report_without_label_and_formatting():
    rng = np.random.default_rng(33)
    real = planted_frame(rng, 300)
    report = fidelity_report(real, real.sample(frac=1.0, random_state=0))
    assert report == FidelityReport(0.0, 0.0, None, None, None, None)
    text = report.format()
    assert "owner-only" in text and "n/a" in text
    assert len(text.splitlines()) == 4
    labelled = FidelityReport(0.1234, 0.0456, 0.2, 0.25, 0.15, "y")
    assert labelled.as_dict() == {
        "two_way_l1": 0.1234,
        "range_query_error": 0.0456,
        "svm_misclassification": 0.2,
        "majority_misclassification": 0.25,
        "nonprivate_svm_misclassification": 0.15,
        "label": "y",
    }
    svm_line = [line for line in labelled.format().splitlines() if "SVM" in line]
    assert len(svm_line) == 1 and all(v in svm_line[0] for v in ("0.2000", "0.2500", "0.1500"))


def test_fidelity_report_unknown_label_raises_naming_it():
    real = pd.DataFrame({"a": [0, 1, 0, 1], "b": [1, 1, 0, 0]})
    with pytest.raises(ValueError, match="'income'"):
        fidelity_report(real, real, label="income")


@pytest.mark.slow
def test_fidelity_report_adult_vs_itself():
    adult = pd.read_csv(ADULT)
    label = "income>50K"
    report = fidelity_report(adult, adult, label=label, seed=0)
    assert report.two_way_l1 == 0.0 and report.range_query_error == 0.0
    # Trained on all real rows vs only the training rows: nearly the same error.
    assert abs(report.svm_misclassification - report.nonprivate_svm_misclassification) <= 0.02
    assert report.nonprivate_svm_misclassification < report.majority_misclassification - 0.05
    _, test = split_rows(len(adult), 0.2, seed=0)
    y_test = adult[label].to_numpy()[test]
    minority = min(np.mean(y_test == 0), np.mean(y_test == 1))
    assert report.majority_misclassification == pytest.approx(minority)
