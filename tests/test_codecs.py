"""Column codecs: categories with "other"/"missing" codes, bins for numbers and datetimes."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privsyn_core.data.codecs import (
    MAX_HALVINGS,
    OTHER_LABEL,
    TAIL_HALVINGS,
    BinnedCodec,
    CategoryCodec,
    equal_width_edges,
    with_fitted_tails,
)
from privsyn_core.errors import InputError, TableError

# ---------------------------------------------------------------- categories


def test_category_round_trip_keeps_values():
    column = pd.Series(["b", "a", "c", "a", "b"], name="letter")
    codec = CategoryCodec("letter", ("a", "b", "c"))
    codes = codec.encode(column)
    assert codes.tolist() == [1, 0, 2, 0, 1]
    assert codec.size == 3 and codec.other_code is None and codec.missing_code is None
    out = codec.decode(codes, np.random.default_rng(0))
    assert out.name == "letter"
    assert out.tolist() == column.tolist()
    assert out.dtype == object


def test_integer_categories_match_text_ints_and_floats_and_decode_as_integers():
    """The output's type follows the declared categories, not the input's dtype (which pandas
    infers from the values: one blank makes a column of years floats)."""
    codec = CategoryCodec("year", (2007, 2008, 2009))
    for column in (
        pd.Series([2008, 2007, 2009, 2007], name="year"),
        pd.Series(["2008", "2007", "2009", "2007"], name="year"),
        pd.Series([2008.0, 2007.0, 2009.0, 2007.0], name="year"),
    ):
        out = codec.decode(codec.encode(column), np.random.default_rng(0))
        assert out.tolist() == [2008, 2007, 2009, 2007]
        assert out.dtype == np.int64


def test_other_and_missing_codes():
    column = pd.Series(["a", "zebra", None, "b", np.nan, "yak"], name="c")
    codec = CategoryCodec("c", ("a", "b"), other=True, missing=True)
    assert codec.size == 4
    assert codec.other_code == 2 and codec.missing_code == 3
    codes = codec.encode(column)
    assert codes.tolist() == [0, 2, 3, 1, 3, 2]
    out = codec.decode(codes, np.random.default_rng(0))
    assert out.iloc[1] == OTHER_LABEL and out.iloc[5] == OTHER_LABEL
    assert out.isna().tolist() == [False, False, True, False, True, False]
    assert out.iloc[0] == "a" and out.iloc[3] == "b"


def test_missing_code_without_other_is_the_last_code():
    codec = CategoryCodec("c", ("a", "b", "c"), missing=True)
    assert codec.missing_code == 3 and codec.other_code is None
    codes = codec.encode(pd.Series(["c", None]))
    assert codes.tolist() == [2, 3]


def test_integer_categories_with_missing_decode_to_nullable_integers():
    codec = CategoryCodec("year", (2007, 2008), missing=True)
    out = codec.decode(np.array([0, 2, 1]), np.random.default_rng(0))
    assert out.dtype == "Int64"
    assert out.isna().tolist() == [False, True, False]
    assert out.dropna().tolist() == [2007, 2008]


def test_unknown_category_without_other_raises_naming_the_value():
    codec = CategoryCodec("island", ("Biscoe", "Dream"))
    with pytest.raises(InputError) as info:
        codec.encode(pd.Series(["Biscoe", "Atlantis", "Dream"]))
    message = str(info.value)
    assert "island" in message and "Atlantis" in message


def test_missing_value_in_a_column_declared_without_missing_raises():
    codec = CategoryCodec("sex", ("female", "male"))
    with pytest.raises(InputError) as info:
        codec.encode(pd.Series(["male", "female", None]))
    message = str(info.value)
    assert "sex" in message and "row 2" in message and '"missing": true' in message


def test_pandas_categorical_input_encodes_by_its_values():
    column = pd.Series(pd.Categorical(["lo", "hi", "lo"], categories=["lo", "hi"]), name="c")
    codec = CategoryCodec("c", ("lo", "hi"))
    out = codec.decode(codec.encode(column), np.random.default_rng(0))
    assert out.tolist() == ["lo", "hi", "lo"]


# ---------------------------------------------------------------- bins


def test_binned_encode_puts_values_in_their_bins_and_ends_in_end_bins():
    codec = BinnedCodec("x", (0.0, 10.0, 20.0, 30.0))
    column = pd.Series([0.0, 9.99, 10.0, 25.0, 30.0, -5.0, 1e9])
    assert codec.encode(column).tolist() == [0, 0, 1, 2, 2, 0, 2]
    assert codec.bins == 3 and codec.size == 3


def test_binned_missing_code():
    codec = BinnedCodec("x", (0.0, 1.0, 2.0), missing=True)
    assert codec.size == 3
    codes = codec.encode(pd.Series([0.5, np.nan, 1.5]))
    assert codes.tolist() == [0, 2, 1]
    out = codec.decode(codes, np.random.default_rng(0))
    assert out.isna().tolist() == [False, True, False]


def test_float_decode_stays_within_the_bin_of_its_code():
    edges = (-3.0, -1.0, 0.5, 2.0, 100.0)
    codec = BinnedCodec("x", edges)
    codes = np.repeat(np.arange(4), 2000)
    out = codec.decode(codes, np.random.default_rng(0))
    assert out.dtype == np.float64
    values = out.to_numpy()
    low, high = np.asarray(edges)[codes], np.asarray(edges)[codes + 1]
    assert np.all((values >= low) & (values < high))
    assert np.array_equal(codec.encode(out), codes)
    # uniform within the bin: mean near the middle of each bin
    for k in range(4):
        inside = values[codes == k]
        width = edges[k + 1] - edges[k]
        assert abs(inside.mean() - (edges[k] + edges[k + 1]) / 2) < 0.05 * width


def test_integer_decode_gives_whole_numbers_within_bounds():
    edges = equal_width_edges(17, 90, 10, integer=True)
    codec = BinnedCodec("age", edges, integer=True)
    codes = np.repeat(np.arange(codec.bins), 500)
    out = codec.decode(codes, np.random.default_rng(0))
    assert out.dtype == np.int64
    values = out.to_numpy()
    assert values.min() >= edges[0] and values.max() < edges[-1]
    assert values.min() == 17 and values.max() == 90  # every whole number is reachable
    assert np.array_equal(codec.encode(out), codes)


def test_integer_decode_with_missing_uses_nullable_integers():
    codec = BinnedCodec("n", (0.0, 5.0, 10.0), integer=True, missing=True)
    out = codec.decode(np.array([0, 2, 1, 1]), np.random.default_rng(0))
    assert out.dtype == "Int64"
    assert out.isna().tolist() == [False, True, False, False]
    present = out.dropna().to_numpy(dtype=float)
    assert np.all(present == np.floor(present)) and present.min() >= 0 and present.max() <= 9


def test_text_numbers_are_parsed_and_text_raises_naming_the_value():
    codec = BinnedCodec("mass", (0.0, 100.0, 200.0))
    assert codec.encode(pd.Series(["50", "150.5"])).tolist() == [0, 1]
    with pytest.raises(InputError) as info:
        codec.encode(pd.Series(["50", "heavy"]))
    assert "mass" in str(info.value) and "heavy" in str(info.value)


def test_nan_in_binned_column_declared_without_missing_raises():
    codec = BinnedCodec("mass", (0.0, 100.0))
    with pytest.raises(InputError, match="mass"):
        codec.encode(pd.Series([1.0, np.nan]))


def test_binned_codec_needs_a_bin():
    with pytest.raises(InputError, match="lonely"):
        BinnedCodec("lonely", (1.0,))


# ---------------------------------------------------------------- datetimes

DAY = 86_400.0
START = pd.Timestamp("2020-01-01").timestamp()


def daily_codec(days: int, **kwargs) -> BinnedCodec:
    edges = tuple(START + DAY * np.arange(days + 1))
    return BinnedCodec("visit", edges, integer=True, datetime=True, **kwargs)


def test_datetime64_column_round_trips_to_datetime64_in_the_same_day():
    days = pd.Series(pd.Timestamp("2020-01-01") + pd.to_timedelta([0, 45, 100, 200, 365], "D"))
    codec = daily_codec(366)
    codes = codec.encode(days)
    assert codes.tolist() == [0, 45, 100, 200, 365]
    out = codec.decode(codes, np.random.default_rng(0))
    assert pd.api.types.is_datetime64_any_dtype(out.dtype)
    assert out.dt.normalize().tolist() == days.tolist()


def test_text_dates_round_trip_to_text_in_the_declared_format():
    text = pd.Series(["2020-01-01", "2020-02-15", None, "2020-12-31"], name="visit")
    codec = daily_codec(366, missing=True, datetime_format="%Y-%m-%d")
    codes = codec.encode(text)
    assert codes.tolist() == [0, 45, 366, 365]
    out = codec.decode(codes, np.random.default_rng(0))
    assert out.dtype == object
    assert out.isna().tolist() == [False, False, True, False]
    assert out.dropna().tolist() == ["2020-01-01", "2020-02-15", "2020-12-31"]


def test_datetime_numbers_are_seconds_since_1970_at_any_resolution():
    stamp = pd.Timestamp("2020-06-01")
    codec = daily_codec(1)
    for unit in ("s", "ms", "us", "ns"):
        series = pd.Series([stamp]).astype(f"datetime64[{unit}]")
        assert codec.numbers(series)[0] == stamp.timestamp(), unit
    assert codec.numbers(pd.Series(["2020-06-01"]))[0] == stamp.timestamp()


def test_non_date_in_datetime_column_raises_naming_the_value():
    codec = daily_codec(10)
    with pytest.raises(InputError) as info:
        codec.encode(pd.Series(["2020-01-02", "next tuesday"]))
    assert "visit" in str(info.value) and "next tuesday" in str(info.value)


# ---------------------------------------------------------------- equal_width_edges


@settings(max_examples=300, derandomize=True, deadline=None)
@given(
    lower=st.integers(-(10**6), 10**6),
    width=st.integers(0, 10**6),
    bins=st.integers(1, 200),
)
@pytest.mark.slow
def test_integer_edges_are_whole_cover_the_range_and_respect_bins(lower, width, bins):
    upper = lower + width
    edges = np.asarray(equal_width_edges(lower, upper, bins, integer=True))
    assert np.all(edges == np.floor(edges))
    assert np.all(np.diff(edges) > 0)
    assert edges[0] == lower and edges[-1] == upper + 1
    assert 1 <= len(edges) - 1 <= min(bins, width + 1)
    if width + 1 <= bins:  # short range: one bin per value
        assert len(edges) - 1 == width + 1


@settings(max_examples=300, derandomize=True, deadline=None)
@given(
    lower=st.floats(-1e6, 1e6),
    width=st.floats(1e-3, 1e6),
    bins=st.integers(1, 200),
)
@pytest.mark.slow
def test_float_edges_cover_the_range_with_exactly_bins_bins(lower, width, bins):
    upper = lower + width
    edges = equal_width_edges(lower, upper, bins, integer=False)
    assert len(edges) == bins + 1
    assert edges[0] == lower and edges[-1] == pytest.approx(upper)
    assert np.all(np.diff(edges) > 0)


def test_degenerate_and_reversed_edges():
    assert equal_width_edges(3.0, 3.0, 10, integer=False) == (3.0, 4.0)
    assert equal_width_edges(3, 3, 10, integer=True) == (3.0, 4.0)
    assert equal_width_edges(0, 10, 3, integer=True) == (0.0, 4.0, 7.0, 11.0)
    with pytest.raises(InputError):
        equal_width_edges(5, 1, 4, integer=False)


@settings(max_examples=100, derandomize=True, deadline=None)
@given(
    lower=st.integers(-1000, 1000),
    width=st.integers(0, 5000),
    bins=st.integers(1, 100),
    seed=st.integers(0, 2**32 - 1),
)
@pytest.mark.slow
def test_integer_codec_round_trip_property(lower, width, bins, seed):
    edges = equal_width_edges(lower, lower + width, bins, integer=True)
    codec = BinnedCodec("n", edges, integer=True)
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, codec.bins, 200)
    out = codec.decode(codes, rng)
    values = out.to_numpy()
    assert np.all(values >= lower) and np.all(values <= lower + width)
    assert np.array_equal(codec.encode(out), codes)


def test_other_label_never_collides_with_a_real_category():
    codec = CategoryCodec("c", ("other", "Other", "x"), other=True)
    out = codec.decode(np.array([0, 1, 2, 3]), np.random.default_rng(0))
    # "other" and "Other" are real values; the merged one is bracketed, unlike any of them
    assert out.tolist() == ["other", "Other", "x", "(other)"]
    for taken in ("(other)", " (Other) ", "(OTHER)"):
        codec = CategoryCodec("c", (taken, "x"), other=True)
        assert codec.labels()[-1] == "(other)_"


def test_text_categories_match_a_column_read_as_floats():
    codec = CategoryCodec("c", ("1", "2"), missing=True)
    codes = codec.encode(pd.Series([1.0, 2.0, np.nan]))
    assert codes.tolist() == [0, 1, 2]


def test_a_kind_decided_privately_reads_values_that_do_not_fit_as_missing():
    codec = BinnedCodec("age", (0.0, 50.0, 100.0), missing=True, unparsed="missing")
    codes = codec.encode(pd.Series(["20", "unknown", "70", "inf", None]))
    assert codes.tolist() == [0, 2, 1, 2, 2]
    declared = BinnedCodec("age", (0.0, 50.0, 100.0), missing=True)
    with pytest.raises(InputError, match="holds inf, not a finite number"):
        declared.encode(pd.Series([20.0, np.inf]))


def test_slashed_dates_read_in_the_columns_day_order_and_unambiguous_ones_either_way():
    day_first = daily_codec(400, datetime_format="%d/%m/%Y")
    month_first = daily_codec(400, datetime_format="%m/%d/%Y")
    text = pd.Series(["02/01/2020", "13/01/2020", "01/13/2020", "2020-01-05"])
    assert day_first.encode(text).tolist() == [1, 12, 12, 4]
    assert month_first.encode(text).tolist() == [31, 12, 12, 4]


def test_datetime_decode_of_a_range_past_pandas_limits_clips_instead_of_failing():
    """A DP upper bound of 2^50 s (a noisy coarse cell clearing its threshold by chance) must
    decode to dates pandas can hold, not raise OutOfBoundsDatetime."""
    edges = (1.5e9, 1.6e9, 2.0**50)
    codec = BinnedCodec("joined", edges, integer=True, datetime=True, datetime_format="%Y-%m-%d")
    codes = np.array([0, 1, 1, 1, 0])
    decoded = codec.decode(codes, np.random.default_rng(0))
    stamps = pd.to_datetime(decoded, format="%Y-%m-%d")
    assert stamps.notna().all()
    assert (stamps[decoded.index[codes == 1]] >= pd.Timestamp("2020-09-13")).all()
    assert stamps.max() <= pd.Timestamp.max


def test_a_single_value_bin_decodes_to_its_value_exactly():
    codec = BinnedCodec("gain", (0.0, 0.01, 10.0, 500.0), points=(0,), decimals=2)
    out = codec.decode(np.array([0] * 50 + [1] * 50), np.random.default_rng(0))
    assert (out[:50] == 0.0).all() and (out[50:] >= 0.01).all()
    # the precision comes from the bins that hold a range, not the single value's width
    assert BinnedCodec("g", (0.0, 1e-6, 10.0, 20.0), points=(0,)).precision == 1
    assert codec.labels()[0] == "0"
    with pytest.raises(TableError, match="not one of its bins"):
        BinnedCodec("g", (0.0, 1.0), points=(1,))


def test_log_bins_decode_evenly_over_doublings():
    codec = BinnedCodec("amount", (1000.0, 64000.0), integer=True, log=True)
    values = codec.decode(np.zeros(60_000, dtype=np.int64), np.random.default_rng(0))
    doublings = np.floor(np.log2(values.to_numpy() / 1000.0))
    shares = np.bincount(doublings.astype(int), minlength=6) / values.size
    # six doublings, a sixth of the values each (a linear draw puts half in the last one)
    assert np.allclose(shares, 1 / 6, atol=0.01)
    negative = BinnedCodec("loss", (-64.0, -1.0), log=True, decimals=3)
    drawn = negative.decode(np.zeros(60_000, dtype=np.int64), np.random.default_rng(1))
    assert drawn.between(-64.0, -1.0).all()
    assert np.mean(drawn > -8.0) == pytest.approx(0.5, abs=0.01)  # 3 of 6 doublings


def test_tail_bins_thin_outward():
    codec = BinnedCodec("age", (16.0, 76.0, 106.0), integer=True, fall=(1,), rise=(0,))
    upper = codec.decode(np.ones(60_000, dtype=np.int64), np.random.default_rng(0)).to_numpy()
    lower = codec.decode(np.zeros(60_000, dtype=np.int64), np.random.default_rng(1)).to_numpy()
    assert upper.min() >= 76 and upper.max() <= 105 and lower.max() <= 75
    # the density halves every quarter of the bin: 5/6 of the mass in its inner half
    # (a uniform draw would put half there)
    assert np.mean(upper < 91) == pytest.approx(0.8, abs=0.02)
    assert np.mean(lower >= 46) == pytest.approx(0.8, abs=0.02)


def test_a_thin_tail_beside_dense_bins_stays_near_its_bound_and_a_heavy_one_spreads():
    """lfam: bins up to 2 hold most rows, the tail [2, 8] a few: drawn at the default
    thinning (4 halvings) they reach far past 2; fitted to the density beside the bound,
    they stay near it. A tail as heavy as the bins beside it keeps the default."""
    codec = BinnedCodec("lfam", (0.0, 1.0, 2.0, 8.0), decimals=3, fall=(2,))
    thin = with_fitted_tails(codec, np.array([0.5, 0.47, 0.03]))
    # beside the bound 0.47 per unit; the tail holds 0.03 over 6 units: it starts at 94
    # times its mean density, about 94 / ln 2 halvings across the bin (at most 64)
    ((bin_, halvings),) = thin.halvings
    assert bin_ == 2 and 60 <= halvings <= MAX_HALVINGS
    rng = np.random.default_rng(0)
    drawn = thin.decode(np.full(20_000, 2, dtype=np.int64), rng).to_numpy()
    fixed = codec.decode(np.full(20_000, 2, dtype=np.int64), rng).to_numpy()
    assert np.mean(drawn > 3.0) < 0.01 < 0.5 < np.mean(fixed > 3.0)
    heavy = with_fitted_tails(codec, np.array([0.3, 0.1, 0.6]))
    assert dict(heavy.halvings) == {2: TAIL_HALVINGS}
    # nothing beside it measured, or no tail: unchanged
    assert with_fitted_tails(codec, np.array([0.0, 0.0, 0.5])).halvings == ()
    plain = BinnedCodec("x", (0.0, 1.0, 2.0))
    assert with_fitted_tails(plain, np.array([0.5, 0.5])) is plain
    # on the log scale the tails keep the default (see with_fitted_tails)
    logged = BinnedCodec("amount", (0.0, 1.0, 2.0, 8.0), decimals=3, fall=(2,), log=True)
    assert with_fitted_tails(logged, np.array([0.5, 0.47, 0.03])) is logged
