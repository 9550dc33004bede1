"""Domains the schema leaves open, estimated with differential privacy.

Reading a column's categories or its minimum and maximum off the private table leaks: a
category held by one person, or an outlier's exact value, would appear in the output. Each
estimate here is a Gaussian measurement charged to the ledger:

* **Categories** by thresholded noisy counts (the "stability" histogram): every distinct
  value's count gets N(0, sigma^2) noise and only values whose noisy count clears
  ``tau = 1 + sigma * Phi^-1(1 - delta_c)`` are kept. A value held by a single record is kept
  with probability at most ``delta_c``, which is why this measurement spends part of
  ``delta`` as well as ``rho`` (approximate zCDP, Bun and Steinke 2016). The values that do not
  pass become one "other" category.
* **Numeric bounds** from two noisy histograms: a fixed, data-independent log-scale grid for
  the scale, then equal-width cells within it, or, when the first one sees too little for
  that, the grid of powers of two (:func:`private_range`). Each is read at several scales
  (cells, doublings, four doublings): the bounds are the outer edges of the blocks whose
  noisy sum clears a threshold, so a lone outlier cannot move them, and a column whose
  values the noise hides cell by cell still gets a coarse range.

How the domain budget is spread over the columns, once the structure step has decided their
kinds, is :class:`~privsyn_core.measuring.domain_split.DomainSplit`: categories get more than
ranges, and a range that found nothing gets a second estimate.

Missing values need no separate measurement: a column that may hold them gets a "missing"
code, and PrivSyn's own noisy 1-way marginal measures its rate.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from privsyn_core.privacy.ledger import Measurement, upper_quantile
from privsyn_core.privacy.noise import NoiseSource, as_noise

#: grid resolution: 4 cells per doubling (cells are 19% wide in relative terms)
_STEPS_PER_DOUBLING = 4
#: the grid covers magnitudes 2^-20 .. 2^60; smaller magnitudes fall in the cell at zero
_MIN_EXPONENT, _MAX_EXPONENT = -20, 60


@dataclass(frozen=True)
class NoisyEvidence:
    """What an estimate knows of its column: noisy counts and their noise, so that a second
    estimate adds to them instead of starting over. For a range, the
    counts over the grid of doublings (:func:`_grid_edges` with one step per doubling, a
    public grid: :func:`range_from_histogram`'s ``prior``); for categories, the counts of the
    column's distinct values in their sorted order (:class:`PrivateCategories`; private,
    like the values themselves, so it never leaves the preparation)."""

    counts: np.ndarray
    sigma: float

    def combined(self, other: NoisyEvidence) -> NoisyEvidence:
        """Both estimates, weighted by their precision (the noise of the average is
        :func:`combined_sigma`)."""
        w1, w2 = self.sigma**-2, other.sigma**-2
        counts = (w1 * self.counts + w2 * other.counts) / (w1 + w2)
        return NoisyEvidence(counts, combined_sigma(self.sigma, other.sigma))


def combined_sigma(*sigmas: float) -> float:
    """The noise of estimates added by their precision: ``1 / sqrt(sum 1 / sigma_i^2)``."""
    return math.fsum(s**-2 for s in sigmas) ** -0.5


@dataclass(frozen=True)
class PrivateCategories:
    """Categories that passed the threshold, in a stable order, and the noisy counts of
    every value, which a second estimate adds to (private: only the released values' own
    noisy counts, :attr:`counts`, are a release)."""

    categories: tuple[object, ...]
    threshold: float
    measurement: Measurement
    evidence: NoisyEvidence
    #: the noisy count of each released category, in the order of :attr:`categories`
    counts: tuple[float, ...] = ()


def private_categories(
    column: pd.Series,
    rho: float,
    delta: float,
    rng: NoiseSource | np.random.Generator,
    prior: PrivateCategories | None = None,
) -> PrivateCategories:
    """Release the values of ``column`` whose noisy count clears the threshold.

    Costs ``rho`` (Gaussian on the counts; one record changes one count by one) and
    ``delta`` (the chance a value unique to one record is released). ``prior``: see
    :func:`categories_from_counts`.
    """
    counts = column.dropna().value_counts(sort=False)
    order = sorted(range(len(counts)), key=lambda i: _order_key(counts.index[i]))
    return categories_from_counts(
        str(column.name),
        [counts.index[i] for i in order],
        counts.to_numpy(dtype=float)[order],
        rho,
        delta,
        rng,
        prior,
    )


def _order_key(value: object) -> tuple[str, object]:
    return (type(value).__name__, value)


def categories_from_counts(
    name: str,
    values: Sequence[object],
    counts: np.ndarray,
    rho: float,
    delta: float,
    rng: NoiseSource | np.random.Generator,
    prior: PrivateCategories | None = None,
) -> PrivateCategories:
    """The mechanism of :func:`private_categories` on exact ``counts`` of distinct ``values``
    (in their sorted order, so every counting backend draws the same noise for the same
    value).

    ``prior``, an earlier estimate of the same column, makes this a second estimate: its
    noisy counts are added to the earlier ones by precision, the threshold is set for the
    combined noise, and the values the earlier one released stay released. The combined
    count of a value is a weighted sum of two independent sub-Gaussian noises, itself
    sub-Gaussian with the combined sigma, so the tail bound and the ``delta`` of this
    estimate hold for it as they do for one draw; the earlier estimate spent its own
    ``delta``, and the union of what both release costs the sum of the two.
    """
    noise = as_noise(rng)
    sigma = noise.unit.sigma(rho)
    noisy = noise.add(np.asarray(counts, dtype=float), sigma, integer=True)
    evidence = NoisyEvidence(noisy, sigma)
    released: set[object] = set()
    if prior is not None:
        evidence = prior.evidence.combined(evidence)
        released = set(prior.categories)
    threshold = category_threshold(evidence.sigma, delta, noise)
    noisy_of = {
        v: float(n)
        for v, n in zip(values, evidence.counts, strict=True)
        if n >= threshold or v in released
    }
    kept = sorted(noisy_of, key=_order_key)
    measurement = Measurement(
        step="domain",
        attributes=(name,),
        sensitivity=noise.unit.sensitivity(),
        rho=rho,
        sigma=sigma,
        # one histogram query; the number of distinct values it covers is private
        n_queries=1,
        mechanism=f"{noise.mechanism(integer=True)}, thresholded at {threshold:.1f} "
        f"(delta {delta:.2g}){'' if prior is None else ', added to a first estimate'}",
        delta=delta,
    )
    released_counts = tuple(noisy_of[v] for v in kept)
    return PrivateCategories(tuple(kept), threshold, measurement, evidence, released_counts)


def category_threshold(sigma: float, delta: float, noise: NoiseSource) -> float:
    """The noisy count a value must reach to be released as a category.

    Per row, a value held by one record has count 1, and clears ``1 + sigma z(delta)`` with
    probability at most ``delta``. A person of at most K rows may hold up to K values no one
    else holds, with counts adding up to K: each clears ``K + sigma z(delta / K)`` with
    probability at most ``delta / K``, so any of them with probability at most ``delta``."""
    k = noise.unit.rows_per_person
    return k + sigma * noise.tail_quantile(delta / k)


def _grid_edges(steps_per_doubling: int = _STEPS_PER_DOUBLING) -> np.ndarray:
    """Edges of the fixed log grid: powers of ``2^(1/steps_per_doubling)`` from 2^-20 to 2^60
    on both sides of zero, with one cell around zero."""
    steps = np.arange(_MIN_EXPONENT * steps_per_doubling, _MAX_EXPONENT * steps_per_doubling + 1)
    positive = 2.0 ** (steps / steps_per_doubling)
    return np.concatenate([-positive[::-1], positive])


@dataclass(frozen=True)
class PrivateRange:
    """DP lower and upper bounds of a numeric column (None when nothing cleared the bar),
    with the noisy histogram they were read from, for the bins to be laid out on
    (:mod:`privsyn_core.data.number_bins`).

    When the column is a spike at zero plus a spread (amounts: zero for most rows), ``zeros``
    is the zero cell's noisy count, ``spread`` the bounds of the other values and the cells
    theirs alone, so that the spike cannot hide them: zero becomes a value of its own and the
    spread gets bins on a scale that fits it. ``lower`` and ``upper`` hold both."""

    lower: float | None
    upper: float | None
    measurement: Measurement
    #: the histogram inside the bounds (DP): its cell edges and noisy counts clipped at zero,
    #: equal-width cells, cells of the log grid or doublings
    cell_edges: tuple[float, ...] = ()
    cell_counts: tuple[float, ...] = ()
    #: the noisy counts over doublings, when the bounds were read there (a coarse estimate,
    #: or none): what a second estimate of the column builds on
    evidence: NoisyEvidence | None = None
    #: the noisy count of zeros, when zero is a spike of its own (None: not split off)
    zeros: float | None = None
    #: the bounds of the values other than zero, when zero is split off and they were found
    spread: tuple[float, float] | None = None
    #: the cells grow geometrically (the log grid or doublings): the scale the spread's bins
    #: follow, and the one on which a bin is decoded
    log_cells: bool = False

    def quantile_edges(self, bins: int, *, integer: bool) -> tuple[float, ...] | None:
        """Edges of about ``bins`` equal-mass bins, read off the noisy refining histogram
        (a DP quantile estimate at no extra cost; inside a cell of the log grid, on the log
        scale); None when that histogram is too coarse."""
        if self.lower is None or self.upper is None or len(self.cell_counts) <= bins:
            return None
        counts = np.asarray(self.cell_counts)
        if counts.sum() <= 0:
            return None
        edges = np.asarray(self.cell_edges)
        cumulative = np.concatenate([[0.0], np.cumsum(counts)]) / counts.sum()
        targets = np.linspace(0, 1, bins + 1)[1:-1]
        inner = interpolated_quantiles(edges, cumulative, targets, log=self.log_cells)
        cuts = np.concatenate([[self.lower], inner, [self.upper]])
        if integer:
            cuts = np.ceil(cuts)
            cuts[-1] = self.upper + 1
        cuts = np.unique(np.clip(cuts, self.lower, cuts[-1]))
        return tuple(float(c) for c in cuts) if cuts.size >= 2 else None


def interpolated_quantiles(
    edges: np.ndarray, cumulative: np.ndarray, targets: np.ndarray, *, log: bool
) -> np.ndarray:
    """Where the cumulative share ``cumulative`` (at ``edges``) reaches each of ``targets``:
    linearly inside a cell, or on the log scale inside a cell that does not hold zero when
    ``log`` (mass spread evenly over a doubling, as amounts are)."""
    if not log:
        return np.interp(targets, cumulative, edges)
    magnitude = np.where(np.abs(edges) > 0, np.log(np.abs(edges) + 1e-300), 0.0)
    cell = np.clip(np.searchsorted(cumulative, targets, side="right") - 1, 0, edges.size - 2)
    low, high = cumulative[cell], cumulative[cell + 1]
    share = np.where(high > low, (targets - low) / np.where(high > low, high - low, 1.0), 0.0)
    left, right = edges[cell], edges[cell + 1]
    same_sign = (left * right) > 0
    geometric = np.sign(left) * np.exp(
        magnitude[cell] + share * (magnitude[cell + 1] - magnitude[cell])
    )
    return np.where(same_sign, geometric, left + share * (right - left))


#: cells of the second, equal-width histogram that refines the coarse bounds
FINE_CELLS = 256
#: chance that pure noise lets some cell of one histogram clear the threshold
FALSE_CELL_RATE = 1e-3


#: exact counts of a column's numbers in the cells cut by ``edges`` (cell k is
#: ``[e_k, e_k+1)``); values beyond the ends fall in the end cells (``clip``) or are left out
Histogram = Callable[[np.ndarray, bool], np.ndarray]


def histogram_of(values: np.ndarray) -> Histogram:
    """The :data:`Histogram` of in-memory numbers (NaN and infinities left out)."""
    finite = values[np.isfinite(values)]

    def counts(edges: np.ndarray, clip: bool) -> np.ndarray:
        cells = np.searchsorted(edges, finite, side="right") - 1
        if clip:
            cells = np.clip(cells, 0, edges.size - 2)
        else:
            cells = cells[(cells >= 0) & (cells <= edges.size - 2)]
        return np.bincount(cells, minlength=edges.size - 1).astype(float)

    return counts


#: block sizes, in grid cells, at which a histogram's noisy counts are read: one cell, four
#: (on the log grid a doubling) and sixteen (four doublings)
SCALES = (1, 4, 16)
#: the scales at which the grid of doublings is read: a doubling, four doublings
DOUBLING_SCALES = (1, 4)
#: the bounds grow by each next cell whose noisy count exceeds this many sigmas, and a
#: cleared block keeps its edge beyond the finer cleared blocks it holds when what lies there
#: exceeds it: single tests next to the bulk, which pure noise passes with probability 2.3%
#: (the bound is then a cell or a block wider than the data: at a large budget in about 6%
#: of estimates), where a cell far from the bulk must clear the Bonferroni bound over the
#: whole grid. On a wide table at a small budget it keeps the tails the noise hides cell by
#: cell (lognormal amounts: 93% of the values inside the bounds, 90% at 3 sigmas)
TAIL_Z = 2.0
#: equal-width cells refine a range of at most this many doublings (years, timestamps, a
#: narrow range far from zero); over more, equal cells are too wide at the bottom and too
#: sparse at the top, so the second histogram is the log grid again, averaged with the first
REFINE_SPAN = 3
#: fewest fine cells worth a refining histogram; below it the second histogram counts the
#: doublings instead
MIN_REFINE = 4


@dataclass(frozen=True)
class _Found:
    """What one noisy histogram says: the first and last cell inside the bounds, the noisy
    mass of the cleared blocks (at the scale where it is largest), and the noisy counts
    (clipped at zero)."""

    first: int
    last: int
    mass: float
    noisy: np.ndarray
    #: the last cell of the block that set ``first``, and the first cell of the block that
    #: set ``last``: how far inward the evidence for each bound reaches
    first_block_end: int = 0
    last_block_start: int = 0


def _blocks(
    cells: int, scale: int, centre: int | None, *, shifted: bool = True
) -> list[tuple[int, int]]:
    """Cell ranges ``[start, stop)`` of the blocks of ``scale`` cells: aligned from cell 0, or,
    on the log grid, outward from the zero cell ``centre`` (a block of its own), so that blocks
    of four cells are doublings on both sides of zero; blocks of more than one cell also come
    shifted by half a block, so that a column's bulk is not split between two blocks that
    each hold too little of it."""
    shifts = (0, scale // 2) if scale > 1 and shifted else (0,)
    blocks: set[tuple[int, int]] = set()
    for shift in shifts:
        if centre is None:
            starts = range(-shift, cells, scale)
            blocks.update((max(0, a), min(a + scale, cells)) for a in starts)
            continue
        for b in range(centre + shift, 0, -scale):
            blocks.add((max(0, b - scale), min(b, centre)))
        for a in range(centre + 1 - shift, cells, scale):
            blocks.add((max(a, centre + 1), min(a + scale, cells)))
        blocks.add((centre, centre + 1))
    return sorted(b for b in blocks if b[0] < b[1])


def _block_sums(noisy: np.ndarray, blocks: list[tuple[int, int]]) -> np.ndarray:
    cumulative = np.concatenate([[0.0], np.cumsum(noisy)])
    return np.array([cumulative[b] - cumulative[a] for a, b in blocks])


def _outer_blocks(
    noisy: np.ndarray,
    sigma: float,
    centre: int | None = None,
    scales: tuple[int, ...] = SCALES,
) -> _Found | None:
    """Where a noisy histogram's mass is, read at every scale of ``scales`` (post-processing:
    sums of the noisy counts over blocks of cells, finest first).

    A block of ``s`` cells clears when its noisy sum exceeds ``1 + sigma sqrt(s) z``, with
    ``z`` the Bonferroni bound that pure noise passes with probability
    :data:`FALSE_CELL_RATE` over every block of every scale; the "1 +" keeps a block holding
    one record (an outlier) below it as often as an empty one. The bounds are the outer edges
    of the cleared blocks, each narrowed to the cleared finer blocks it holds, on each side
    where what is left of it (its cells beyond them) does not clear :data:`TAIL_Z` on its
    own, then grown by the next cells that clear it (single tests, not a scan): where single
    cells clear over the bulk of the column (a large budget) the bounds are as tight as the
    grid, and a doubling (or four) whose cells the noise hides still counts, as a whole,
    where the old rule (outermost single cells) cut the column's tails or, on a wide table at
    a small budget, found nothing. None when no block clears.
    """
    layouts = [_blocks(noisy.size, scale, centre) for scale in sorted(scales)]
    z = float(upper_quantile(FALSE_CELL_RATE / sum(len(blocks) for blocks in layouts)))
    cumulative = np.concatenate([[0.0], np.cumsum(noisy)])

    def clears(a: int, b: int, bound: float = z) -> bool:
        return bool(cumulative[b] - cumulative[a] > 1.0 + sigma * math.sqrt(b - a) * bound)

    # cleared blocks as (start, stop, narrowed start, narrowed stop), finer ones first
    cleared: list[tuple[int, int, int, int]] = []
    mass = 0.0
    for blocks in layouts:
        passed = [(a, b) for a, b in blocks if clears(a, b)]
        mass = max(mass, sum(float(cumulative[b] - cumulative[a]) for a, b in passed))
        coarser: list[tuple[int, int, int, int]] = []
        for a, b in passed:
            inner = [c for c in cleared if a <= c[0] and c[1] <= b]
            low = min((c[2] for c in inner), default=a)
            high = max((c[3] for c in inner), default=b)
            coarser.append(
                (
                    a,
                    b,
                    a if low == a or clears(a, low, TAIL_Z) else low,
                    b if high == b or clears(high, b, TAIL_Z) else high,
                )
            )
        cleared = coarser + [
            c for c in cleared if not any(a <= c[0] and c[1] <= b for a, b, _, _ in coarser)
        ]
    if not cleared:
        return None
    lowest = min(cleared, key=lambda c: c[2])
    highest = max(cleared, key=lambda c: c[3])
    first, last = lowest[2], highest[3] - 1
    # the tails: a cell next to the bounds is one test, not one of hundreds
    tail = 1.0 + sigma * TAIL_Z
    while first > 0 and noisy[first - 1] > tail:
        first -= 1
    while last < noisy.size - 1 and noisy[last + 1] > tail:
        last += 1
    return _Found(first, last, mass, np.clip(noisy, 0.0, None), lowest[1] - 1, highest[0])


def private_range(
    values: np.ndarray,
    rho: float,
    rng: NoiseSource | np.random.Generator,
    *,
    integer: bool,
    prior: NoisyEvidence | None = None,
) -> PrivateRange:
    """Bounds in two noisy histograms, each costing ``rho / 2`` (sensitivity 1 each).

    First a fixed log-scale grid (powers of 2^(1/4) on both sides of zero, from 2^-20 to
    2^60) finds the scale; then up to 256 equal-width cells inside the coarse bounds tighten
    them (years, timestamps and narrow ranges far from zero need this); values outside the
    coarse bounds are left out of the second histogram. Both grids depend only on public
    constants and the first stage's DP output. Each histogram is read at several scales
    (:func:`_outer_blocks`): a block counts only if its noisy sum clears a threshold that pure
    noise passes with probability 1e-3 over all of them, so a lone outlier cannot set a bound.

    When the first histogram's cleared mass is too small for :data:`MIN_REFINE` fine cells (a
    wide table at a small budget: the noise hides most cells), refining would only split
    noise, so the second histogram counts the doublings instead (one cell per power of two),
    added to the first one's doubling sums by precision: the budget goes to finding the
    column's bulk at all. The bounds are then whole doublings or blocks of four: coarse at
    worst, where the old rule (outermost single cells) left such a column out. ``prior``, the
    :class:`NoisyEvidence` of an earlier estimate of the same column that found nothing,
    makes both histograms count doublings, added to it: a second estimate (paid again)
    sharpens the first instead of starting over.
    """
    return range_from_histogram(histogram_of(values), rho, rng, integer=integer, prior=prior)


def range_from_histogram(
    histogram: Histogram,
    rho: float,
    rng: NoiseSource | np.random.Generator,
    *,
    integer: bool,
    prior: NoisyEvidence | None = None,
    zero_spike: bool = True,
) -> PrivateRange:
    """:func:`private_range` over the exact cell counts ``histogram`` gives (in memory, or
    counted in SQL over a public grid): the same measurement on every backend.

    ``zero_spike``: when the first look's cell at zero clears one test at
    :data:`FALSE_CELL_RATE` (a public cell, so one test), zero is split off as a spike
    (:attr:`PrivateRange.zeros`) and the bounds are read from the other cells: a column that
    is zero for 92% of its rows keeps the spread of the rest (post-processing of the same
    look; the refining looks leave zeros out by the same noisy count). False for dates."""
    noise = as_noise(rng)
    sigma = noise.unit.sigma(rho / 2)
    measurement = Measurement(
        step="domain",
        attributes=(),
        sensitivity=noise.unit.sensitivity(),
        rho=rho,
        sigma=sigma,
        n_queries=int(_grid_edges().size - 1 + FINE_CELLS),
        mechanism=f"{noise.mechanism(integer=True)}: fixed log grid, then up to 256 cells "
        "or the doublings",
    )
    looks = _Looks(histogram, sigma, noise, measurement)
    if prior is not None:
        return _whole(_sharpened(looks, prior), integer)
    coarse = _grid_edges()
    centre = (coarse.size - 1) // 2
    first_look, zeros = _first_look(looks, coarse, centre, zero_spike)
    found = _outer_blocks(first_look, sigma, centre)
    # as many fine cells as keep the average cell well above the threshold (from the noisy
    # mass the coarse bounds hold, a DP quantity), so refining tightens the ends instead of
    # keeping only the mode
    threshold = sigma * float(upper_quantile(FALSE_CELL_RATE / FINE_CELLS))
    cells = 0 if found is None else int(np.clip(found.mass / (4 * threshold), 1, FINE_CELLS))
    if found is None or cells < MIN_REFINE:
        second = _by_doublings(looks, first_look, centre, zeros)
    elif found.last - found.first + 1 > REFINE_SPAN * _STEPS_PER_DOUBLING:
        second = _wide(looks, first_look, found, zeros)
    else:
        second = _refined(looks, coarse, found, cells, zeros)
    return _with_zeros(_whole(second, integer), zeros)


@dataclass(frozen=True)
class _Looks:
    """A range estimate's noisy looks at a column's cell counts: two histograms (sensitivity
    1), each with noise ``sigma`` for ``rho / 2``."""

    histogram: Histogram
    sigma: float
    noise: NoiseSource
    measurement: Measurement

    def at(self, edges: np.ndarray, *, clip: bool) -> np.ndarray:
        """The cell counts over ``edges`` with Gaussian noise (one histogram)."""
        counts = np.asarray(self.histogram(edges, clip), dtype=float)
        return self.noise.add(counts, self.sigma, integer=True)


def _sharpened(looks: _Looks, prior: NoisyEvidence) -> PrivateRange:
    """A second estimate of a column whose first found nothing: both looks count the
    doublings, and their average is added to the first estimate's evidence."""
    doublings = _grid_edges(1)
    seen = [looks.at(doublings, clip=True) for _ in range(2)]
    evidence = prior.combined(NoisyEvidence((seen[0] + seen[1]) / 2, looks.sigma / math.sqrt(2)))
    return _doubling_bounds(evidence, looks.measurement)


def _first_look(
    looks: _Looks, coarse: np.ndarray, centre: int, zero_spike: bool
) -> tuple[np.ndarray, float | None]:
    """The first look, at the fixed log grid, with the zero spike taken out of it when its
    cell clears one test at :data:`FALSE_CELL_RATE` (and that noisy count, else None)."""
    first_look = looks.at(coarse, clip=True)
    spike = 1.0 + looks.sigma * float(upper_quantile(FALSE_CELL_RATE))
    if not (zero_spike and first_look[centre] > spike):
        return first_look, None
    zeros = float(first_look[centre])
    first_look = first_look.copy()
    first_look[centre] = 0.0
    return first_look, zeros


def _by_doublings(
    looks: _Looks, first_look: np.ndarray, centre: int, zeros: float | None
) -> PrivateRange:
    """Too little cleared mass to refine: the first look's doublings (sums of four cells:
    noise 2 sigma) and a second look at the doublings themselves (noise sigma), weighted by
    precision."""
    doublings = _grid_edges(1)
    sums = _block_sums(first_look, _blocks(first_look.size, 4, centre, shifted=False))
    second = looks.at(doublings, clip=True)
    if zeros is not None:
        second[(doublings.size - 1) // 2] = 0.0
    evidence = NoisyEvidence(sums, 2 * looks.sigma).combined(NoisyEvidence(second, looks.sigma))
    return _doubling_bounds(evidence, looks.measurement)


def _wide(looks: _Looks, first: np.ndarray, found: _Found, zeros: float | None) -> PrivateRange:
    """A range over more than :data:`REFINE_SPAN` doublings: a second look at the log grid,
    averaged with the ``first``, its cells the histogram."""
    coarse = _grid_edges()
    centre = (coarse.size - 1) // 2
    second = looks.at(coarse, clip=True)
    if zeros is not None:
        second[centre] = zeros  # the first look's count: zero is left out of both
    average = (first + second) / 2
    if zeros is not None:
        average[centre] = 0.0
    found = _outer_blocks(average, looks.sigma / math.sqrt(2), centre) or found
    counts = np.clip(average, 0.0, None)[found.first : found.last + 1]
    edges = coarse[found.first : found.last + 2]
    return PrivateRange(
        float(edges[0]),
        float(edges[-1]),
        looks.measurement,
        tuple(float(e) for e in edges),
        tuple(float(c) for c in counts),
        log_cells=True,
    )


def _refined(
    looks: _Looks, coarse: np.ndarray, found: _Found, cells: int, zeros: float | None
) -> PrivateRange:
    """A narrow range: a second look at ``cells`` equal-width cells inside the coarse bounds,
    which tightens each bound as far as the first look's evidence for it reaches."""
    lower, upper = float(coarse[found.first]), float(coarse[found.last + 1])
    fine = np.linspace(lower, upper, cells + 1)
    fine_look = looks.at(fine, clip=False)
    if zeros is not None and lower <= 0.0 < upper:
        # the spread straddles zero: its cell holds the spike too, taken out by its count
        at_zero = int(np.searchsorted(fine, 0.0, side="right") - 1)
        fine_look[at_zero] = fine_look[at_zero] - zeros
    refined = _outer_blocks(fine_look, looks.sigma)
    cell_edges: tuple[float, ...] = ()
    cell_counts: tuple[float, ...] = ()
    if refined is not None:
        first, last = refined.first, refined.last
        # refining tightens a bound only as far as the first histogram's evidence for it
        # reaches: a tail whose fine cells the noise hides keeps the coarse bound
        if fine[first] <= coarse[found.first_block_end + 1]:
            lower = float(fine[first])
        if fine[last + 1] >= coarse[found.last_block_start]:
            upper = float(fine[last + 1])
        inside = (fine[:-1] >= lower) & (fine[1:] <= upper)
        cell_edges = tuple(float(e) for e in fine[np.flatnonzero(inside)[0] :][: inside.sum() + 1])
        cell_counts = tuple(float(c) for c in refined.noisy[inside])
    return PrivateRange(lower, upper, looks.measurement, cell_edges, cell_counts)


def _doubling_bounds(evidence: NoisyEvidence, measurement: Measurement) -> PrivateRange:
    """Bounds read off noisy counts of doublings (None where no doublings cleared), with
    the doublings inside them as the histogram."""
    edges = _grid_edges(1)
    found = _outer_blocks(
        evidence.counts, evidence.sigma, (edges.size - 1) // 2, scales=DOUBLING_SCALES
    )
    if found is None:
        return PrivateRange(None, None, measurement, evidence=evidence)
    lower, upper = float(edges[found.first]), float(edges[found.last + 1])
    counts = np.clip(evidence.counts[found.first : found.last + 1], 0.0, None)
    return PrivateRange(
        lower,
        upper,
        measurement,
        tuple(float(e) for e in edges[found.first : found.last + 2]),
        tuple(float(c) for c in counts),
        evidence=evidence,
        log_cells=True,
    )


def _with_zeros(found: PrivateRange, zeros: float | None) -> PrivateRange:
    """``found`` with the zero spike split off before it was read (see
    :func:`range_from_histogram`); with no spread found, the column is its zeros."""
    if zeros is None:
        return found
    if found.lower is None or found.upper is None:
        return replace(found, lower=0.0, upper=0.0, zeros=zeros)
    return replace(
        found,
        lower=min(found.lower, 0.0),
        upper=max(found.upper, 0.0),
        zeros=zeros,
        spread=(found.lower, found.upper),
    )


#: a bound this close to zero lies in the log grid's cell at zero: it is zero
ZERO_CELL = 2.0**_MIN_EXPONENT


def _whole(found: PrivateRange, integer: bool) -> PrivateRange:
    """Bounds inside the zero cell read as zero (no -3e-8 in a column of amounts), and
    whole-number bounds inside ``[lower edge, upper edge)`` for a column of whole numbers."""
    if found.lower is None or found.upper is None:
        return found
    lower = 0.0 if abs(found.lower) <= ZERO_CELL else found.lower
    upper = 0.0 if abs(found.upper) <= ZERO_CELL and found.upper < 0 else found.upper
    if not integer:
        return replace(found, lower=lower, upper=upper)
    lower = float(math.ceil(lower))
    upper = max(lower, float(math.ceil(upper) - 1))
    return replace(found, lower=lower, upper=upper)
