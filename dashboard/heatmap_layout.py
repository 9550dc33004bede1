"""The noisy-InDif heatmap's layout, in numbers: how each score maps to a colour, how tall the
rows and how wide the margins are so that every attribute is named, and which cells carry a
measured pair's mark. :func:`dashboard.charts.indif_heatmap` draws it with plotly.

Everything here reads the DP scores and the selection only (paper section 4.1): nothing of
the table's rows.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from privsyn_core.dependency_report import WITHIN_NOISE_SIGMAS
from privsyn_core.generation.synthesis import SelectedMarginal

from .text_width import text_px

#: the heatmap's colours: grey for a score within the noise, then light to dark for stronger
#: dependencies (plotly's YlOrRd, light end dropped so it differs from the grey)
WITHIN_NOISE_GREY = "#e3e3e3"
DEPENDENCY_RAMP = ("#fed976", "#feb24c", "#fd8d3c", "#f03b20", "#bd0026", "#800026")
#: how each origin's pairs are marked on the heatmap (the graph's edge colours tell the same)
PAIR_MARKS = {
    "tree": ("square", "tree pair (measured first)"),
    "selected": ("circle", "selected pair (Algorithm 1)"),
    "combined": ("diamond", "in a combined clique (Algorithm 2)"),
    "isolated": ("x", "isolated link"),
}
SIGMA, TIMES = "\u03c3", "\u00d7"
#: the narrowest the heatmap is drawn on the Marginals page, in pixels (a laptop's window)
CHART_PX = 800.0
#: one row of the heatmap, in pixels, at most and at least: every attribute's name fits
ROW_PX = (16, 36)
#: room above the plot (colour bar, legend) and below it (the x axis's title)
TOP_PX, BOTTOM_PX = 84, 44
#: the heatmap's legend title above its colour bar, in pixels from the top of the figure
LEGEND_TITLE_PX = 26


@dataclass(frozen=True, eq=False)
class HeatmapColours:
    """The lower triangle's cells as colours, with what the colour bar and the hover say.

    Colour value 0.25 (the grey) for a score within the noise, then 1 to 2 on a log scale
    from ``WITHIN_NOISE_SIGMAS`` to the highest score, so that 3 sigma and 60 sigma both
    read; NaN on and above the diagonal."""

    #: the scores in units of their noise (NaN off the lower triangle)
    z: np.ndarray
    #: the scores in records (``z`` times sigma)
    raw: np.ndarray
    colour: np.ndarray
    colourscale: list[list]
    tick_at: list[float]
    tick_text: list[str]
    #: "within the noise" or "above the noise" per cell (None off the lower triangle)
    status: np.ndarray


def heatmap_colours(scores: np.ndarray, sigma: float) -> HeatmapColours:
    """The colours of ``scores`` (noisy InDif in units of ``sigma``, a square matrix; it is
    written into: pass a copy)."""
    n = len(scores)
    z = scores
    lower = np.tril(np.ones((n, n), dtype=bool), k=-1)
    z[~lower] = np.nan
    band = WITHIN_NOISE_SIGMAS
    top = max(float(np.nanmax(z)) if lower.any() else band, 3 * band)
    colour = np.where(z < band, 0.25, 1 + np.log(np.maximum(z, band) / band) / np.log(top / band))
    colour[~lower] = np.nan
    stops = np.linspace(0.5, 1.0, len(DEPENDENCY_RAMP))
    colourscale = [[0.0, WITHIN_NOISE_GREY], [0.5, WITHIN_NOISE_GREY]] + [
        [float(s), c] for s, c in zip(stops, DEPENDENCY_RAMP, strict=True)
    ]
    ticks = [t for t in (2, 3, 5, 10, 20, 50, 100, 200, 500, 1000) if band <= t <= top]
    tick_at = [0.25] + [1 + math.log(t / band) / math.log(top / band) for t in ticks]
    tick_text = [f"under {band:g}{SIGMA}: noise"] + [f"{t:g}{SIGMA}" for t in ticks]
    status = np.where(z < band, "within the noise", "above the noise").astype(object)
    status[~lower] = None
    return HeatmapColours(z, z * sigma, colour, colourscale, tick_at, tick_text, status)


@dataclass(frozen=True)
class HeatmapShape:
    """The heatmap's size in pixels: a row per attribute, the names' font, and the margins
    that hold the row names on the left and the last columns' names on the right."""

    n: int
    row: float
    font: int
    #: the widest row name, in pixels (the left margin holds it)
    label_px: float
    #: the right margin: the last rows' names reach past the last column
    right: float
    height: int
    #: the size of a measured pair's mark
    mark: float


def heatmap_shape(columns: Sequence[object]) -> HeatmapShape:
    """The shape for ``columns``. Readable at 100 columns: one row of at least
    ``ROW_PX[0]`` pixels per attribute (the figure grows with the table), and every column
    named where it starts, on the diagonal, running right over the empty upper triangle."""
    n = len(columns)
    row = float(np.clip(560 / max(n, 1), *ROW_PX))
    font = 11 if n > 30 else 12
    label_px = [text_px(str(c), font) for c in columns]
    # a column's name starts on its diagonal cell and runs right over the empty triangle;
    # the last rows' names reach past the last column by their length less the cells to
    # their right: room for that on the right, with cells as wide as a chart of CHART_PX
    # gives them (the page is wider on most screens: then there is room to spare)
    right = 20.0
    for _ in range(3):
        cell = max(5.0, (CHART_PX - max(label_px, default=0.0) - right) / max(n, 1))
        overflow = max((w - (n - 1 - i) * cell for i, w in enumerate(label_px)), default=0.0)
        right = max(20.0, overflow + 10)
    height = int(n * row + TOP_PX + BOTTOM_PX)
    mark = float(np.clip(min(row, 650 / max(n, 1)) * 0.55, 4, 10))
    return HeatmapShape(n, row, font, max(label_px, default=0.0), right, height, mark)


def pair_cells(
    columns: Sequence[object], marginals: Sequence[SelectedMarginal]
) -> dict[str, list[tuple[int, int]]]:
    """The lower-triangle cells (row, column) of every pair a measured marginal holds, by
    the marginal's origin, in :data:`PAIR_MARKS`'s order (origins with no pair left out)."""
    index = {name: i for i, name in enumerate(columns)}
    marks: dict[str, set[tuple[int, int]]] = {}
    for marginal in marginals:
        attributes = [a for a in marginal.attributes if a in index]
        for i, a in enumerate(attributes):
            for b in attributes[i + 1 :]:
                r, c = sorted((index[a], index[b]), reverse=True)
                marks.setdefault(marginal.origin, set()).add((r, c))
    return {origin: sorted(marks[origin]) for origin in PAIR_MARKS if marks.get(origin)}
