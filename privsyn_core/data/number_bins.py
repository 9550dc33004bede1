"""The bins of a numeric column, laid out from its DP range estimate (post-processing).

A raw numeric column reaches PrivSyn as bins: each bin is one code of the column's 1-way
marginal, and a synthetic value is drawn inside its bin. Where the bins lie decides what the
analyst sees in the download, so they follow what the noisy evidence
(:class:`~privsyn_core.measuring.private_domain.PrivateRange`) shows, by four rules:

* **A spike stays a value.** When zero is a spike of its own (amounts: zero for most rows),
  it gets a bin that holds zero alone, and the other values (the spread) get bins of their
  own on their scale; a column that is 92% zeros no longer comes out all zero, nor with
  values invented between zero and its smallest amounts.
* **The tails stay.** The DP bounds are where the evidence is strong enough to set a bound;
  the values beyond them are thinner, not absent. Each bound is widened by
  :data:`TAIL_DOUBLINGS` doublings, at most :data:`TAIL_SHARE` of the range, never across
  zero; the widened part is measured by the column's own 1-way marginal, four times more
  precise per cell than the range estimate, whose filter (paper 5.3) sends it to zero where
  it holds nothing. It is one bin decoded with a density that thins outward
  (:attr:`~privsyn_core.data.codecs.BinnedCodec.fall`), or, when it holds at most
  :data:`MAX_TAIL_VALUES` whole numbers, a bin for each. The outermost bins inside the bounds
  hold about 1% of the mass each, so a bound the noise set too wide adds little outside.
  A spread on the log scale that lies on one side of zero with no spike found still gets
  zero as a value of its own, and the gap to its tail a bin thinning toward zero: the
  range estimate cannot see a spike under its threshold (a count's or a logarithm's zeros,
  9% of medexp's 5,574 rows, under a threshold of 641), the 1-way marginal, about five
  times more precise, measures it, and its filter drops it where there is none.
* **Whole numbers over a short range are values.** A column of whole numbers whose bounds
  hold at most :data:`MAX_INTEGER_BINS` of them gets one bin per number: no value is drawn
  between real ones, and the 1-way marginal decides which occur.
* **Other bins hold about equal mass**, at quantiles of the noisy histogram (on the log
  scale where the histogram is the log grid), as many as keep each bin at about
  :data:`BIN_SIGMAS` standard deviations of the 1-way marginal's noise, at most
  :data:`~privsyn_core.data.schema.DEFAULT_BINS`: a bin holding less would be filtered as
  noise. Such bins are decoded on the scale they were cut on.

Everything here reads DP outputs and public constants only: it costs nothing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from privsyn_core.data.codecs import equal_width_edges
from privsyn_core.data.schema import DEFAULT_BINS
from privsyn_core.measuring.private_domain import (
    ZERO_CELL,
    PrivateRange,
    interpolated_quantiles,
)

#: numeric columns of whole numbers get one bin per value up to this many values
MAX_INTEGER_BINS = 100
#: the fewest bins of a spread (a column with a range has at least a low and a high half)
MIN_BINS = 2
#: a bin of a spread is meant to hold this many standard deviations of the 1-way noise
BIN_SIGMAS = 5.0
#: doublings by which each DP bound is widened
TAIL_DOUBLINGS = 2
#: ... and at most this share of the range
TAIL_SHARE = 0.5
#: a widened tail of at most this many whole numbers gets a bin for each
MAX_TAIL_VALUES = 4
#: the shares of the spread's mass held below its lowest inner cut and above its highest
OUTER_SHARE = 0.01
#: released values holding at least this share of a column's noisy count are the column
#: (its other values come out as the released value just below them): a column of few
#: values draws only values the evidence shows; below it they are bins among the others
DISCRETE_SHARE = 0.75


@dataclass(frozen=True)
class NumberBins:
    """A column's bin edges; the bins that hold one value (decoded as their lower edge), the
    tails (decoded thinning outward, see :class:`~privsyn_core.data.codecs.BinnedCodec`);
    whether bins are decoded on the log scale; and the DP bounds before their tails were
    widened (what the release report states)."""

    edges: tuple[float, ...]
    points: tuple[int, ...] = ()
    log: bool = False
    bounds: tuple[float, float] | None = None
    fall: tuple[int, ...] = ()
    rise: tuple[int, ...] = ()


def estimated_bins(
    found: PrivateRange,
    *,
    integer: bool,
    step: float | None = None,
    bins: int | None = None,
    one_way_sigma: float | None = None,
    tails: bool = True,
    values: Sequence[tuple[float, float]] = (),
) -> NumberBins:
    """The bins of a column whose range was estimated privately (see the module docstring).

    ``step`` is the spacing of the column's values (1 for whole numbers, ``10**-decimals``),
    the width of the bin that holds zero alone; ``bins`` a declared number of bins (equal
    width, as declared); ``one_way_sigma`` the noise the column's 1-way marginal will have
    (public: it follows from the budget), which sets how many bins a spread gets; ``tails``
    False keeps the bounds as estimated (dates). ``values`` are the column's values released
    by a thresholded estimate, each with its noisy count: see :func:`with_values`."""
    assert found.lower is not None and found.upper is not None
    width = step or (1.0 if integer else ZERO_CELL)
    if values:
        return with_values(found, values, integer=integer, width=width, one_way_sigma=one_way_sigma)
    bounds = (found.lower, found.upper)
    if found.zeros is not None and found.spread is None:
        return NumberBins((0.0, width), (0,), False, bounds)
    low, high = found.spread if found.spread is not None else bounds
    # bounds as edges: a whole-number upper bound is the last value, its edge one above
    top = high + 1.0 if integer else high
    log = False
    if integer and top - low <= (bins or MAX_INTEGER_BINS):
        inner = np.arange(low, top + 1.0)
    elif bins is not None:
        inner = np.asarray(equal_width_edges(low, top - integer, bins, integer=integer))
    else:
        inner, log = _quantile_edges(found, low, top, _bin_count(found, one_way_sigma), integer)
    edges = list(inner)
    below: list[float] = []
    above: list[float] = []
    if tails and not (integer and top - low < 2):  # a range of one whole number: a flag
        # on the log scale the widening is in doublings alone; on a linear one at most a
        # share of the range (years: a doubling of 2,000 is not a tail of 1990-2020)
        span = math.inf if found.log_cells else top - low
        if integer and not found.log_cells:  # whole numbers widen by whole numbers
            span = math.floor(TAIL_SHARE * span) / TAIL_SHARE
        below = _tail(low, _widened(low, span, below=True), integer)
        above = _tail(top, _widened(top, span), integer)
    edges = [float(e) for e in (*below, *edges, *above)]
    # the outermost bin of each tail thins outward, unless it holds one whole number
    single = 1.0 if integer else 0.0
    rise = (0,) if below and edges[1] - edges[0] > single else ()
    fall = (len(edges) - 2,) if above and edges[-1] - edges[-2] > single else ()
    laid = NumberBins(tuple(edges), (), log, bounds, fall, rise)
    if found.zeros is None and not (tails and found.log_cells and (low > 0 or high < 0)):
        return laid
    return _with_zero(laid, width)


def with_values(
    found: PrivateRange,
    values: Sequence[tuple[float, float]],
    *,
    integer: bool,
    width: float,
    one_way_sigma: float | None = None,
) -> NumberBins:
    """The bins of a column whose frequent values were released (a thresholded estimate of
    its exact values, as categories are: :func:`~privsyn_core.measuring.private_domain.
    categories_from_counts`), with their noisy counts.

    When the released values hold at least :data:`DISCRETE_SHARE` of the column's noisy
    count (a score, a code, a count of few values), they are the column: a bin from each
    value to the next, decoded as that value, so the output draws only values the evidence
    shows, never one between them (a value not released comes out as the released one just
    below it). Otherwise each released value is a bin of its own (decoded exactly, as zero
    is in a column of amounts) among the bins of :func:`estimated_bins`."""
    numbers = sorted({v for v, _ in values})
    held = float(sum(max(0.0, c) for _, c in values))
    mass = float(sum(found.cell_counts)) + (found.zeros or 0.0)
    bounds = (float(found.lower), float(found.upper))  # type: ignore[arg-type]
    if mass <= 0 or held >= DISCRETE_SHARE * mass:
        edges = (*numbers, numbers[-1] + width)
        return NumberBins(tuple(float(e) for e in edges), tuple(range(len(numbers))), False, bounds)
    laid = estimated_bins(found, integer=integer, step=width, one_way_sigma=one_way_sigma)
    for value in numbers:
        laid = _with_point(laid, value, width)
    return laid


def _tail(bound: float, widened: float, integer: bool) -> list[float]:
    """The edges a tail from ``bound`` out to ``widened`` adds: for whole numbers, a bin for
    each of the first :data:`MAX_TAIL_VALUES` values past the bound (the value just past an
    estimated bound is often a real one: Adult's 16 years of school), then one bin for the
    rest, thinning outward; for other numbers one such bin. None when the bound cannot
    widen."""
    if integer:
        widened = float(math.ceil(widened))
    if widened == bound:
        return []
    step = 1.0 if widened > bound else -1.0
    singles = 0 if not integer else int(min(MAX_TAIL_VALUES, abs(widened - bound)))
    edges = [bound + step * k for k in range(1, singles + 1)]
    if not edges or edges[-1] != widened:
        edges.append(widened)
    return sorted(edges)


def _widened(bound: float, span: float, *, below: bool = False) -> float:
    """``bound`` moved outward by :data:`TAIL_DOUBLINGS` doublings, at most
    :data:`TAIL_SHARE` of ``span`` (the range), never across zero."""
    factor = 2.0**TAIL_DOUBLINGS
    outward = bound * factor if (bound > 0) != below else bound / factor
    limit = TAIL_SHARE * span
    return max(outward, bound - limit) if below else min(outward, bound + limit)


def _bin_count(found: PrivateRange, one_way_sigma: float | None) -> int:
    """Bins for the spread's noisy mass at :data:`BIN_SIGMAS` sigmas of 1-way noise each."""
    mass = float(sum(found.cell_counts))
    if one_way_sigma is None or one_way_sigma <= 0 or mass <= 0:
        return DEFAULT_BINS
    return int(np.clip(mass / (BIN_SIGMAS * one_way_sigma), MIN_BINS, DEFAULT_BINS))


def _quantile_edges(
    found: PrivateRange, low: float, top: float, count: int, integer: bool
) -> tuple[np.ndarray, bool]:
    """Edges of ``count`` bins of about equal noisy mass over ``[low, top]`` (and, with
    enough bins, :data:`OUTER_SHARE` of it beyond the outermost inner cuts), and whether
    they were cut on the log scale; equal width where there is no histogram."""
    counts = np.asarray(found.cell_counts, dtype=float)
    if counts.size == 0 or counts.sum() <= 0:
        edges = np.asarray(equal_width_edges(low, top - integer, count, integer=integer))
        return edges, False
    cells = np.asarray(found.cell_edges)
    cumulative = np.concatenate([[0.0], np.cumsum(counts)]) / counts.sum()
    targets = np.linspace(0, 1, count + 1)[1:-1]
    if count >= 4:
        targets = np.concatenate([[OUTER_SHARE], targets, [1.0 - OUTER_SHARE]])
    inner = interpolated_quantiles(cells, cumulative, targets, log=found.log_cells)
    cuts = np.clip(np.concatenate([[low], inner, [top]]), low, top)
    if integer:
        cuts = np.ceil(cuts)
    return np.unique(cuts), found.log_cells


def _with_zero(laid: NumberBins, width: float) -> NumberBins:
    """``laid`` with a bin ``[0, width)`` that holds zero alone (see :func:`_with_point`)."""
    return _with_point(laid, 0.0, width)


def _with_point(laid: NumberBins, value: float, width: float) -> NumberBins:
    """``laid`` with a bin ``[value, value + width)`` that holds ``value`` alone; the values
    between it and its neighbours fall in the bins beside it. Beside zero, a gap between it
    and a spread that lies on one side is a tail of the spread (thinning toward zero)."""
    edges = np.asarray(laid.edges)
    top = value + width
    kept = edges[(edges <= value) | (edges >= top)]
    merged = np.unique(np.concatenate([kept, [value, top]]))
    point = int(np.flatnonzero(merged == value)[0])

    def moved(bins: tuple[int, ...]) -> tuple[int, ...]:
        starts = [edges[b] for b in bins if edges[b] <= value or edges[b] >= top]
        return tuple(int(np.searchsorted(merged, start)) for start in starts)

    rise, fall = moved(laid.rise), moved(laid.fall)
    points = (*moved(laid.points), point)
    if value == 0.0 and edges[0] > top and merged.size - 1 > point + 1:
        rise = (*rise, point + 1)  # the gap above zero thins toward zero
    elif value == 0.0 and edges[-1] < 0 and point > 0:
        fall = (*fall, point - 1)  # below zero, a gap thinning toward zero
    edges_out = tuple(float(e) for e in merged)
    return NumberBins(edges_out, tuple(sorted(set(points))), laid.log, laid.bounds, fall, rise)


#: declared bounds from zero over at least this ratio (three orders of magnitude) are amounts
AMOUNT_RATIO = 1000.0


def declared_amount_bins(
    lower: float, upper: float, *, integer: bool, step: float | None = None
) -> NumberBins | None:
    """Bins for declared bounds from zero over at least :data:`AMOUNT_RATIO` (amounts: a
    money column declared ``[0, 99999]``): zero alone, and the rest on the log scale, as
    many as a column without declared bins gets; None for other bounds (equal widths).
    Public: it reads the bounds alone. Equal widths over such a range put the many small
    amounts in the first bin with the zeros."""
    width = step or (1.0 if integer else ZERO_CELL)
    if lower != 0.0 or upper < AMOUNT_RATIO * width:
        return None
    top = upper + 1.0 if integer else upper
    inner = np.geomspace(width, top, DEFAULT_BINS)
    if integer:
        inner = np.ceil(inner)
    edges = np.unique(np.concatenate([[0.0], inner]))
    return NumberBins(tuple(float(e) for e in edges), (0,), True, (lower, upper))
