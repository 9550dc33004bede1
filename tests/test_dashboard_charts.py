"""The Marginals page's noisy InDif heatmap and its one-line summary (the figure as JSON; the
browser test checks what plotly draws)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from dashboard.charts import indif_heatmap, selection_summary
from dashboard.heatmap_layout import PAIR_MARKS, ROW_PX, WITHIN_NOISE_GREY
from privsyn_core.dependency_report import WITHIN_NOISE_SIGMAS, DependencyReport
from privsyn_core.generation.synthesis import SelectedMarginal

SIGMA = 2628.0


def report_of(names: list[str], seed: int = 0, selected: int = 40) -> DependencyReport:
    """Scores like a 55-column table's at epsilon 1: most pairs 0 +- sigma, a few strong."""
    rng = np.random.default_rng(seed)
    d = len(names)
    z = rng.normal(0.0, 1.0, (d, d))
    z[np.triu_indices(d, 1)] += np.where(rng.random(d * (d - 1) // 2) < 0.05, 8.0, 0.0)
    z = np.triu(z, 1)
    z = z + z.T
    np.fill_diagonal(z, np.nan)
    iu = list(zip(*np.triu_indices(d, 1), strict=True))
    picks = [iu[k] for k in rng.choice(len(iu), size=selected, replace=False)]
    pairs = tuple((names[i], names[j]) for i, j in picks)
    within = sum(z[i, j] < WITHIN_NOISE_SIGMAS for i, j in picks)
    scores = pd.DataFrame(z, index=names, columns=names)
    return DependencyReport(SIGMA, scores, len(iu), pairs, (), int(within))


def marginals_of(report: DependencyReport) -> tuple[SelectedMarginal, ...]:
    return tuple(SelectedMarginal(p, 16, 0.01, 3.0, "selected") for p in report.selected)


def test_every_attribute_is_named_on_both_axes_at_sixty_columns():
    names = [f"num_accounts_{i:02d}_past_due" for i in range(60)]
    report = report_of(names)
    figure = indif_heatmap(report, marginals_of(report))
    layout = figure.layout
    # rows: one tick per attribute, explicitly (plotly would skip every other one)
    assert layout.yaxis.tickmode == "array"
    assert list(layout.yaxis.tickvals) == names and list(layout.yaxis.ticktext) == names
    # columns: each named where it starts, on its diagonal cell
    diagonal = {a.text: (a.x, a.y) for a in layout.annotations}
    assert set(diagonal) == set(names)
    for i, name in enumerate(names):
        assert diagonal[name] == (pytest.approx(i - 0.45), i)
    # the figure grows with the table: a row of at least ROW_PX[0] pixels per attribute
    plot_height = layout.height - layout.margin.t - layout.margin.b
    assert plot_height >= 60 * ROW_PX[0]
    assert layout.yaxis.tickfont.size <= ROW_PX[0] - 2


def test_colour_is_the_score_in_noise_units_grey_within_the_noise():
    names = [f"c{i}" for i in range(30)]
    report = report_of(names)
    figure = indif_heatmap(report, marginals_of(report))
    heat = figure.data[0]
    z = report.scores.to_numpy()
    colour = np.array(heat.z, dtype=float)
    lower = np.tril(np.ones_like(z, dtype=bool), k=-1)
    assert np.isnan(colour[~lower]).all(), "the upper triangle repeats the lower: left empty"
    within = lower & (z < WITHIN_NOISE_SIGMAS)
    assert within.any() and (colour[within] == 0.25).all()
    above = lower & (z >= WITHIN_NOISE_SIGMAS)
    assert above.any() and (colour[above] >= 1).all() and (colour[above] <= 2).all()
    # log scale: order kept above the noise, the highest score at the top of the ramp
    order = np.argsort(z[above])
    assert np.all(np.diff(colour[above][order]) >= 0)
    assert colour[above].max() == pytest.approx(2.0)
    scale = heat.colorscale
    assert scale[0][1] == scale[1][1] == WITHIN_NOISE_GREY and scale[1][0] == 0.5
    # the legend says what the unit is and where the noise ends
    title = figure.layout.title.text
    assert "noise" in title and f"{SIGMA:,.0f} records" in title
    assert not heat.colorbar.title.text  # above the bar, not on it (see indif_heatmap)
    ticks = dict(zip(heat.colorbar.ticktext, heat.colorbar.tickvals, strict=True))
    assert ticks[f"under {WITHIN_NOISE_SIGMAS:g}\u03c3: noise"] == 0.25
    assert ticks["2\u03c3"] == pytest.approx(1.0)
    # the hover gives the score in records and in sigmas
    raw = np.array(heat.customdata, dtype=float)
    assert np.allclose(raw[..., 0][lower], z[lower] * SIGMA)
    assert np.allclose(raw[..., 1][lower], z[lower])


def test_measured_pairs_are_marked_once_each_in_the_lower_triangle():
    names = [f"c{i}" for i in range(40)]
    report = report_of(names, selected=25)
    marginals = (
        *marginals_of(report),
        SelectedMarginal(("c1", "c2", "c3"), 64, 0.01, 3.0, "combined"),
        SelectedMarginal(("c7",), 4, 0.01, 3.0, "one_way"),
        SelectedMarginal(("c30", "c39"), 4, 0.01, 3.0, "tree"),  # tree-first's round 1
    )
    figure = indif_heatmap(report, marginals)
    marks = {t.name.split(":")[0]: t for t in figure.data[1:]}
    assert set(marks) == {
        PAIR_MARKS["selected"][1],
        PAIR_MARKS["combined"][1],
        PAIR_MARKS["tree"][1],
    }
    tree = marks[PAIR_MARKS["tree"][1]]
    assert list(zip(tree.y, tree.x, strict=True)) == [("c39", "c30")]
    selected = marks[PAIR_MARKS["selected"][1]]
    index = {n: i for i, n in enumerate(names)}
    cells = set(zip(selected.y, selected.x, strict=True))
    assert len(cells) == len(selected.x) == 25
    assert all(index[row] > index[col] for row, col in cells), "below the diagonal"
    assert cells == {tuple(sorted(p, key=index.get, reverse=True)) for p in report.selected}
    assert selected.marker.color == "black" and selected.marker.line.color == "white"
    assert len(marks[PAIR_MARKS["combined"][1]].x) == 3  # the clique's three pairs
    assert figure.layout.showlegend is True


def test_hostile_names_are_escaped():
    names = ["<img src=x onerror=alert(1)>", "b", "c"]
    report = report_of(names, selected=1)
    figure = indif_heatmap(report, marginals_of(report))
    text = figure.to_json()
    assert "<img" not in text and "&lt;img src=x onerror=alert(1)&gt;" in text


def test_the_summary_line_counts_selected_against_candidates():
    report = report_of([f"c{i}" for i in range(55)], selected=221)
    line = selection_summary(report)
    assert line.startswith("**221 of 1,485 candidate pairs selected**")
    assert f"{report.selected_within_noise:,} of the 221 scored under 2 sigma" in line
    assert "budget can measure" not in line
    # the hook: once the engine reports what the budget measures well, the line says it
    assert (
        "the budget can measure about 60 pairs of the median size with noise under 10%"
        in selection_summary(replace(report, measurable=60))
    )


def test_the_convergence_chart_shades_the_mrf_sweeps_and_shows_every_iteration():
    """On a wide table GUM's iterations are followed by the MRF's sweeps: the chart's x axis
    reaches the last of them, their span is shaded and named, and alpha (GUM's step) is
    drawn for GUM's iterations only."""
    from dashboard.charts import CONVERGENCE_NAMES, convergence_chart
    from privsyn_core.generation.gum import GumIterationRecord

    errors = {("a", "b"): 0.2, ("b", "c"): 0.1}
    history = [GumIterationRecord(t, 0.9, errors, 0.1) for t in range(8)] + [
        GumIterationRecord(8 + t, 0.1, errors, 0.1, None, "mrf") for t in range(40)
    ]
    figure = convergence_chart(history, 10)
    assert figure.layout.xaxis.range[1] >= 48
    (shade,) = figure.layout.shapes
    assert (shade.x0, shade.x1) == (8.5, 48.5)  # iterations counted from 1
    assert "MRF sweeps" in figure.layout.annotations[0].text
    (alpha,) = [t for t in figure.data if t.name == CONVERGENCE_NAMES["alpha"]]
    assert np.isfinite(alpha.y[:8]).all() and np.isnan(alpha.y[8:]).all()
    assert not convergence_chart(history[:8], 100).layout.shapes  # GUM alone: no shade


def test_a_finished_run_that_stopped_early_says_so_and_its_chart_ends_at_its_last_point():
    """A run whose GUM stopped at once drew one dot in the corner of a 0-100 axis, under
    "1 GUM iterations": the finished chart now ends at its last point, and the page says
    why GUM stopped and how far the MRF went."""
    from dashboard.charts import convergence_chart, iterations_done, stopped_early
    from privsyn_core.generation.gum import GumIterationRecord

    errors = {("a", "b"): 0.2}
    one = [GumIterationRecord(0, 0.9, errors, 0.05)]
    assert convergence_chart(one, 100).layout.xaxis.range[1] == 4.5
    assert convergence_chart(one, 100, live=True).layout.xaxis.range[1] == 100.5
    assert iterations_done(one) == "1 GUM iteration"
    assert stopped_early(one, 100).startswith("GUM ran 1 of at most 100 iterations")
    both = one * 6 + [GumIterationRecord(6, 0.1, errors, 0.05, None, "mrf")] * 40
    assert iterations_done(both) == "6 GUM iterations and 40 MRF sweeps"
    assert stopped_early([*one] * 100, 100) == ""  # ran every iteration it could
    assert stopped_early([], 100) == ""


def _wandering(steps: int = 6, marginals: int = 60) -> list:
    """A run whose whole-table error falls to iteration 3 and rises again after it, with
    ``marginals`` marginals (each of its own error)."""
    from privsyn_core.generation.gum import GumIterationRecord

    table = [0.09, 0.08, 0.076, 0.081, 0.085, 0.090][:steps]
    keys = [(f"c{i}", f"c{i + 1}") for i in range(marginals)]
    return [
        GumIterationRecord(
            t,
            1.0,
            {key: e * (1 + i / marginals) for i, key in enumerate(keys)},
            0.1,
            e,
            kept=(min(t + 1, 3),),
        )
        for t, e in enumerate(table)
    ]


def _kept(*ats: int, iterations: int = 6):
    from privsyn_core.generation.kept import KeptPart, KeptTable

    parts = tuple(KeptPart("gum", at, 30) for at in ats)
    return KeptTable(parts, iterations, 0, 0.076, 0.2)


def test_the_convergence_chart_marks_the_kept_iteration_with_a_star_and_a_label():
    """The error went down and back up: the chart says which iteration's table came out,
    on the whole-table line whose lowest point picked it (and starts from the start)."""
    from dashboard.charts import CONVERGENCE_NAMES, convergence_chart

    figure = convergence_chart(_wandering(), 100, kept=_kept(3))
    (star,) = [t for t in figure.data if t.name == CONVERGENCE_NAMES["kept"]]
    assert list(star.x) == [3] and list(star.y) == [0.076]
    assert star.marker.symbol == "star"
    assert any("kept: iteration 3" in a.text for a in figure.layout.annotations)
    assert {s.x0 for s in figure.layout.shapes if s.type == "line"} == {3}  # both panels
    (table,) = [t for t in figure.data if t.name == CONVERGENCE_NAMES["table"]]
    assert table.x[0] == 0 and table.y[0] == 0.2  # the starting table's score
    assert float(np.nanmin(table.y)) == star.y[0]
    # kept the starting table: the star sits at 0, on the start's score
    start = convergence_chart(_wandering(), 100, kept=_kept(0))
    (star,) = [t for t in start.data if t.name == CONVERGENCE_NAMES["kept"]]
    assert list(star.x) == [0] and list(star.y) == [0.2]
    assert any("the starting table" in a.text for a in start.layout.annotations)


def test_parts_that_kept_different_iterations_get_a_star_each():
    from dashboard.charts import CONVERGENCE_NAMES, convergence_chart

    figure = convergence_chart(_wandering(), 100, kept=_kept(3, 5, 5))
    (star,) = [t for t in figure.data if t.name == CONVERGENCE_NAMES["kept"]]
    assert list(star.x) == [3, 5]
    labels = [a.text for a in figure.layout.annotations]
    assert any("kept for 1 of 3 parts: iteration 3" in t for t in labels)
    assert any("kept for 2 of 3 parts: iteration 5" in t for t in labels)


@pytest.mark.parametrize("live", [False, True])
def test_the_legend_names_every_trace_group_and_nothing_hides_the_lines(live):
    """Sixty marginals are one faint trace with one legend entry, the alpha schedule has its
    own small axis with readable ticks, and no filled band covers the lines while a run is
    watched live (the closest table so far is starred instead)."""
    from dashboard.charts import CONVERGENCE_NAMES, convergence_chart

    kept = None if live else _kept(3)
    figure = convergence_chart(_wandering(), 100, live=live, kept=kept)
    names = [t.name for t in figure.data]
    star = CONVERGENCE_NAMES["best" if live else "kept"]
    expected = [CONVERGENCE_NAMES[k] for k in ("marginals", "mean", "table", "alpha")]
    assert sorted(names) == sorted([*expected, star])
    assert all(t.showlegend is not False for t in figure.data)
    (marginals,) = [t for t in figure.data if t.name == CONVERGENCE_NAMES["marginals"]]
    assert np.isnan(marginals.y).sum() == 60  # a gap after each of the 60 marginals
    assert "c0 \u00d7 c1" in marginals.text
    assert not [t for t in figure.data if t.fill not in (None, "none")]
    assert list(figure.layout.yaxis2.tickvals) == [0, 0.5, 1]
    assert figure.layout.yaxis2.title.text == "step \u03b1"
    assert "lower is better" in figure.layout.yaxis.title.text
    (alpha,) = [t for t in figure.data if t.name == CONVERGENCE_NAMES["alpha"]]
    assert alpha.yaxis == "y2"
    if live:
        assert any("closest so far: iteration 3" in a.text for a in figure.layout.annotations)


def test_the_convergence_chart_escapes_marginal_names():
    from dashboard.charts import CONVERGENCE_NAMES, convergence_chart
    from privsyn_core.generation.gum import GumIterationRecord

    history = [GumIterationRecord(0, 1.0, {("<b>x</b>", "y"): 0.1}, 0.1)]
    (marginals,) = [
        t for t in convergence_chart(history, 5).data if t.name == CONVERGENCE_NAMES["marginals"]
    ]
    assert "<b>" not in "".join(marginals.text)
