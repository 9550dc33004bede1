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
  the scale, then equal-width cells within it (:func:`private_range`); the bounds are the
  outer edges of the outermost cells whose noisy count clears a threshold, so a lone outlier
  cannot move them.

Missing values need no separate measurement: a column that may hold them gets a "missing"
code, and PrivSyn's own noisy 1-way marginal measures its rate.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from privsyn_core.privacy.ledger import Measurement, gaussian_sigma, upper_quantile
from privsyn_core.privacy.noise import NoiseSource, as_noise

#: grid resolution: 4 cells per doubling (cells are 19% wide in relative terms)
_STEPS_PER_DOUBLING = 4
#: the grid covers magnitudes 2^-20 .. 2^60; smaller magnitudes fall in the cell at zero
_MIN_EXPONENT, _MAX_EXPONENT = -20, 60


@dataclass(frozen=True)
class PrivateCategories:
    """Categories that passed the threshold, in a stable order, and whether any did not."""

    categories: tuple[object, ...]
    threshold: float
    measurement: Measurement


def private_categories(
    column: pd.Series, rho: float, delta: float, rng: NoiseSource | np.random.Generator
) -> PrivateCategories:
    """Release the values of ``column`` whose noisy count clears the threshold.

    Costs ``rho`` (Gaussian on the counts; one record changes one count by one) and
    ``delta`` (the chance a value unique to one record is released).
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
) -> PrivateCategories:
    """The mechanism of :func:`private_categories` on exact ``counts`` of distinct ``values``
    (in their sorted order, so every counting backend draws the same noise for the same
    value)."""
    noise = as_noise(rng)
    sigma = gaussian_sigma(rho)
    threshold = 1.0 + sigma * noise.tail_quantile(delta)
    noisy = noise.add(np.asarray(counts, dtype=float), sigma, integer=True)
    kept = [value for value, n in zip(values, noisy, strict=True) if n >= threshold]
    kept.sort(key=_order_key)
    measurement = Measurement(
        step="domain",
        attributes=(name,),
        sensitivity=1.0,
        rho=rho,
        sigma=sigma,
        # one histogram query; the number of distinct values it covers is private
        n_queries=1,
        mechanism=f"{noise.mechanism(integer=True)}, thresholded at {threshold:.1f} "
        f"(delta {delta:.2g})",
        delta=delta,
    )
    return PrivateCategories(tuple(kept), threshold, measurement)


def _grid_edges() -> np.ndarray:
    steps = np.arange(_MIN_EXPONENT * _STEPS_PER_DOUBLING, _MAX_EXPONENT * _STEPS_PER_DOUBLING + 1)
    positive = 2.0 ** (steps / _STEPS_PER_DOUBLING)
    return np.concatenate([-positive[::-1], positive])


@dataclass(frozen=True)
class PrivateRange:
    """DP lower and upper bounds of a numeric column (None when nothing cleared the bar)."""

    lower: float | None
    upper: float | None
    measurement: Measurement
    #: the refining histogram (DP): its cell edges and noisy counts clipped at zero
    cell_edges: tuple[float, ...] = ()
    cell_counts: tuple[float, ...] = ()

    def quantile_edges(self, bins: int, *, integer: bool) -> tuple[float, ...] | None:
        """Edges of about ``bins`` equal-mass bins, read off the noisy refining histogram
        (a DP quantile estimate at no extra cost); None when that histogram is too coarse."""
        if self.lower is None or self.upper is None or len(self.cell_counts) <= bins:
            return None
        counts = np.asarray(self.cell_counts)
        if counts.sum() <= 0:
            return None
        edges = np.asarray(self.cell_edges)
        cumulative = np.concatenate([[0.0], np.cumsum(counts)]) / counts.sum()
        targets = np.linspace(0, 1, bins + 1)[1:-1]
        inner = np.interp(targets, cumulative, edges)
        cuts = np.concatenate([[self.lower], inner, [self.upper]])
        if integer:
            cuts = np.ceil(cuts)
            cuts[-1] = self.upper + 1
        cuts = np.unique(np.clip(cuts, self.lower, cuts[-1]))
        return tuple(float(c) for c in cuts) if cuts.size >= 2 else None


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


def _outer_cells(
    histogram: Histogram, edges: np.ndarray, sigma: float, noise: NoiseSource, *, clip: bool
) -> tuple[int, int, float, np.ndarray] | None:
    """Noisy histogram over the cells cut by ``edges``; the first and last cell whose noisy
    count clears a Bonferroni threshold, and the noisy total."""
    counts = np.asarray(histogram(edges, clip), dtype=float)
    noisy = noise.add(counts, sigma, integer=True)
    # "1 +": a cell holding one record (an outlier) clears it with probability at most
    # FALSE_CELL_RATE / cells, as an empty cell would without the 1
    threshold = 1.0 + sigma * float(upper_quantile(FALSE_CELL_RATE / counts.size))
    passed = np.flatnonzero(noisy > threshold)
    if passed.size == 0:
        return None
    return int(passed[0]), int(passed[-1]), float(noisy.sum()), np.clip(noisy, 0.0, None)


def private_range(
    values: np.ndarray, rho: float, rng: NoiseSource | np.random.Generator, *, integer: bool
) -> PrivateRange:
    """Bounds in two noisy histograms, each costing ``rho / 2`` (sensitivity 1 each).

    First a fixed log-scale grid (powers of 2^(1/4) on both sides of zero, from 2^-20 to
    2^60) finds the scale; then up to 256 equal-width cells inside the coarse bounds tighten
    them (years, timestamps and narrow ranges far from zero need this); values outside the
    coarse bounds are left out of the second histogram.
    Both grids depend only on public constants and the first stage's DP output. A cell counts
    only if its noisy count clears a threshold that pure noise passes with probability 1e-3
    over the whole grid, so a lone outlier cannot set a bound.
    """
    return range_from_histogram(histogram_of(values), rho, rng, integer=integer)


def range_from_histogram(
    histogram: Histogram, rho: float, rng: NoiseSource | np.random.Generator, *, integer: bool
) -> PrivateRange:
    """:func:`private_range` over the exact cell counts ``histogram`` gives (in memory, or
    counted in SQL over a public grid): the same measurement on every backend."""
    noise = as_noise(rng)
    sigma = gaussian_sigma(rho / 2)
    measurement = Measurement(
        step="domain",
        attributes=(),
        sensitivity=1.0,
        rho=rho,
        sigma=sigma,
        n_queries=int(_grid_edges().size - 1 + FINE_CELLS),
        mechanism=f"{noise.mechanism(integer=True)}: fixed log grid, then up to 256 cells",
    )
    coarse = _grid_edges()
    found = _outer_cells(histogram, coarse, sigma, noise, clip=True)
    if found is None:
        return PrivateRange(None, None, measurement)
    lower, upper = float(coarse[found[0]]), float(coarse[found[1] + 1])
    # as many fine cells as keep the average cell well above the threshold (from the noisy
    # total, a DP quantity), so refining tightens the ends instead of keeping only the mode
    threshold = sigma * float(upper_quantile(FALSE_CELL_RATE / FINE_CELLS))
    cells = int(np.clip(found[2] / (4 * threshold), 1, FINE_CELLS))
    fine = np.linspace(lower, upper, cells + 1)
    refined = _outer_cells(histogram, fine, sigma, noise, clip=False) if cells > 1 else None
    cell_edges: tuple[float, ...] = ()
    cell_counts: tuple[float, ...] = ()
    if refined is not None:
        first, last = refined[0], refined[1]
        lower, upper = float(fine[first]), float(fine[last + 1])
        cell_edges = tuple(float(e) for e in fine[first : last + 2])
        cell_counts = tuple(float(c) for c in refined[3][first : last + 1])
    if integer:  # whole numbers inside [lower edge, upper edge)
        lower = float(math.ceil(lower))
        upper = max(lower, float(math.ceil(upper) - 1))
    return PrivateRange(lower, upper, measurement, cell_edges, cell_counts)
