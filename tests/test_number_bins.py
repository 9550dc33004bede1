"""The bins of a numeric column laid out from its DP range estimate (data/number_bins.py)."""

from __future__ import annotations

import numpy as np
import pytest

from privsyn_core.data.codecs import BinnedCodec
from privsyn_core.data.number_bins import (
    MAX_INTEGER_BINS,
    MAX_TAIL_VALUES,
    TAIL_DOUBLINGS,
    declared_amount_bins,
    estimated_bins,
)
from privsyn_core.measuring.private_domain import PrivateRange, private_range
from privsyn_core.privacy.ledger import Measurement

PAID = Measurement("domain", ("x",), 1.0, 0.1, 5.0)


def found(lower, upper, edges=(), counts=(), **kwargs) -> PrivateRange:
    return PrivateRange(lower, upper, PAID, tuple(edges), tuple(counts), **kwargs)


def test_whole_numbers_over_a_short_range_get_a_bin_each_and_widened_tails():
    laid = estimated_bins(found(16.0, 75.0), integer=True, one_way_sigma=40.0)
    edges = np.asarray(laid.edges)
    inner = edges[(edges >= 16) & (edges <= 76)]
    assert np.array_equal(inner, np.arange(16, 77))  # every whole number its own bin
    # the tails: two doublings out, at most half the range; the first values past a bound a
    # bin each (the value just past an estimated bound is often real), then one bin
    # thinning outward
    assert edges[0] == 4.0 and edges[-1] == 76 + 30
    assert list(edges[1:6]) == [12, 13, 14, 15, 16] and list(edges[-6:-1]) == [76, 77, 78, 79, 80]
    assert laid.rise == (0,) and laid.fall == (len(edges) - 2,)
    assert laid.bounds == (16.0, 75.0)


def test_a_short_tail_of_whole_numbers_gets_a_bin_per_value():
    laid = estimated_bins(found(4.0, 15.0), integer=True)
    # below 4: 1, 2 and 3, each a value of its own (at most MAX_TAIL_VALUES of them)
    assert laid.edges[:4] == (1.0, 2.0, 3.0, 4.0) and not laid.rise
    assert MAX_TAIL_VALUES >= 4 - 1


def test_the_tails_never_cross_zero_and_a_linear_range_widens_by_its_own_width():
    laid = estimated_bins(found(0.0, 100.0), integer=False, step=0.1)
    assert laid.edges[0] == 0.0  # no value below a lower bound at zero
    years = estimated_bins(found(1990.0, 2019.0), integer=True)
    # a doubling of 2,000 is not a tail of 1990-2019: at most half the range each way
    assert years.edges[0] >= 1990 - 15 and years.edges[-1] <= 2020 + 15


def test_a_zero_spike_is_a_value_of_its_own_and_the_spread_keeps_its_scale():
    doublings = 2.0 ** np.arange(11, 17)  # 2048 .. 65536
    estimate = found(
        0.0, 65535.0, doublings, (700.0, 1000.0, 600.0, 90.0, 10.0),
        zeros=29000.0, spread=(2048.0, 65535.0), log_cells=True,
    )  # fmt: skip
    laid = estimated_bins(estimate, integer=True, one_way_sigma=44.5)
    assert laid.edges[:2] == (0.0, 1.0) and laid.points == (0,)
    assert laid.log  # the spread's bins were cut on the log scale: decoded there
    # about 2,400 rows at 5 sigmas of 44.5 each: about 10 bins of the spread, not 32
    spread = [e for e in laid.edges if 2048 <= e <= 65536]
    assert 8 <= len(spread) - 1 <= 14
    # on the log scale the tail widens by whole doublings, whatever the range's width
    assert laid.edges[-1] == pytest.approx(65536 * 2**TAIL_DOUBLINGS)
    # the gap between zero and the spread thins toward zero, the tails outward
    assert 1 in laid.rise and laid.fall == (len(laid.edges) - 2,)


def test_a_log_scale_spread_on_one_side_of_zero_still_offers_zero_to_the_one_way():
    """A zero the range estimate could not see (9% of 5,574 rows, under its threshold) is
    a value of its own for the 1-way marginal to measure; a linear range gets none."""
    doublings = 2.0 ** np.arange(-1, 2)  # 0.5 .. 2
    estimate = found(0.5, 2.0, doublings, (2000.0, 3000.0), log_cells=True)
    laid = estimated_bins(estimate, integer=False, step=0.001, one_way_sigma=40.0)
    assert laid.edges[:2] == (0.0, 0.001) and laid.points == (0,)
    # between zero and the tail below the bound (0.125 .. 0.5), a gap thinning toward zero
    assert laid.edges[2] == pytest.approx(0.5 / 2**TAIL_DOUBLINGS) and 1 in laid.rise
    negative = found(-2.0, -0.5, -doublings[::-1], (3000.0, 2000.0), log_cells=True)
    assert 0.0 in estimated_bins(negative, integer=False, step=0.001).edges
    assert 0.0 not in estimated_bins(found(16.0, 75.0), integer=True).edges
    assert 0.0 not in estimated_bins(estimate, integer=False, step=0.001, tails=False).edges


def test_only_zeros_found_is_one_value():
    laid = estimated_bins(found(0.0, 0.0, zeros=5000.0), integer=True)
    assert laid.edges == (0.0, 1.0) and laid.points == (0,)


def test_a_zero_spike_inside_a_spread_that_crosses_zero():
    estimate = found(
        -50.0, 300.0, (-50.0, 0.0, 100.0, 200.0, 300.0), (100.0, 500.0, 200.0, 50.0),
        zeros=1000.0, spread=(-50.0, 300.0),
    )  # fmt: skip
    laid = estimated_bins(estimate, integer=False, step=0.01, one_way_sigma=10.0)
    zero = laid.points[0]
    assert laid.edges[zero] == 0.0 and laid.edges[zero + 1] == 0.01
    assert not laid.log


def test_bins_follow_the_noise_of_the_one_way_marginal():
    edges = np.linspace(0.0, 1000.0, 101)
    counts = np.full(100, 100.0)  # 10,000 rows
    few = estimated_bins(found(0.0, 1000.0, edges, counts), integer=False, one_way_sigma=200.0)
    many = estimated_bins(found(0.0, 1000.0, edges, counts), integer=False, one_way_sigma=10.0)
    # 10,000 rows at 5 sigmas a bin: 10 bins at sigma 200, the most (32) at sigma 10
    assert len(few.edges) < len(many.edges) <= 32 + 5
    assert estimated_bins(found(0.0, 1000.0, edges, counts), integer=False).edges == many.edges


def test_declared_bins_keep_equal_widths():
    laid = estimated_bins(found(0.0, 10.0), integer=False, bins=5, tails=False)
    assert np.allclose(np.diff(laid.edges), 2.0)


def test_a_money_column_keeps_its_zeros_and_its_spread_end_to_end():
    """92% zeros and a lognormal rest: the DP range splits the spike off, the layout gives
    it a bin of its own, and decoding gives exact zeros and amounts spread like the real
    ones (the issue's capital-gain, which came out all zero)."""
    rng = np.random.default_rng(0)
    n = 30_000
    amounts = np.where(rng.random(n) < 0.92, 0.0, np.round(np.exp(rng.normal(8.5, 0.6, n))))
    estimate = private_range(amounts, 0.002, np.random.default_rng(1), integer=True)
    assert estimate.zeros is not None and estimate.spread is not None
    laid = estimated_bins(estimate, integer=True, one_way_sigma=40.0)
    codec = BinnedCodec("gain", laid.edges, integer=True, points=laid.points, log=laid.log,
                        fall=laid.fall, rise=laid.rise)  # fmt: skip
    codes = codec.encode(__import__("pandas").Series(amounts))
    decoded = codec.decode(codes, np.random.default_rng(2)).to_numpy(dtype=float)
    assert np.mean(decoded == 0) == pytest.approx(np.mean(amounts == 0), abs=1e-9)
    positive, real = decoded[decoded > 0], amounts[amounts > 0]
    assert np.quantile(positive, 0.5) == pytest.approx(np.quantile(real, 0.5), rel=0.2)
    assert positive.max() >= np.quantile(real, 0.99)
    assert decoded.min() >= 0
    assert len(laid.edges) - 1 <= MAX_INTEGER_BINS


def test_a_flag_gets_no_tail():
    # a 0/1 column: zero split off as a spike, the spread the single value 1
    flag = found(0.0, 1.0, (1.0, 2.0), (3000.0,), zeros=7000.0, spread=(1.0, 1.0), log_cells=True)
    laid = estimated_bins(flag, integer=True, one_way_sigma=40.0)
    assert laid.edges == (0.0, 1.0, 2.0) and not laid.fall and not laid.rise
    # a count of three values widens by whole numbers, at most half its range each way
    small = estimated_bins(found(1.0, 3.0), integer=True)
    assert small.edges == (1.0, 2.0, 3.0, 4.0, 5.0)  # [1, 3] and one value above: 4


def test_released_values_that_hold_most_rows_are_the_column():
    rng = np.random.default_rng(0)
    edges = np.linspace(0.0, 2.0, 9)
    counts = np.full(8, 500.0)  # 4,000 rows in the range
    score = found(0.0, 2.0, edges, counts)
    values = ((0.0, 1000.0), (0.693, 1200.0), (1.099, 900.0), (1.386, 500.0))
    laid = estimated_bins(score, integer=False, values=values)
    assert laid.edges == (0.0, 0.693, 1.099, 1.386, 1.386 + 2**-20)
    assert laid.points == (0, 1, 2, 3)
    codec = BinnedCodec("lfam", laid.edges, points=laid.points)
    drawn = codec.decode(rng.integers(0, 4, 1000), rng)
    assert set(drawn) == {0.0, 0.693, 1.099, 1.386}  # only values the evidence shows
    # a few spikes among a spread: each a value of its own among the spread's bins
    spikes = estimated_bins(score, integer=False, values=((1.0, 800.0),), one_way_sigma=20.0)
    at = spikes.edges.index(1.0)
    assert spikes.points == (at,) and spikes.edges[at + 1] == pytest.approx(1.0 + 2**-20)
    assert len(spikes.edges) > 10


def test_declared_amounts_keep_zero_alone_and_the_rest_on_the_log_scale():
    laid = declared_amount_bins(0.0, 99999.0, integer=True)
    assert laid is not None and laid.edges[:2] == (0.0, 1.0) and laid.points == (0,)
    assert laid.log and laid.edges[-1] == 100000.0
    widths = np.diff(laid.edges[1:])
    assert widths[-1] > 100 * widths[0]  # geometric, not equal widths
    # a score from zero to 100, or bounds not from zero, keep equal widths
    assert declared_amount_bins(0.0, 100.0, integer=True) is None
    assert declared_amount_bins(10.0, 99999.0, integer=True) is None
