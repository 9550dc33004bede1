"""Plotly figures for the dashboard (presentation only)."""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from privsyn_core.dependency_report import WITHIN_NOISE_SIGMAS, DependencyReport
from privsyn_core.generation.gum import GumIterationRecord
from privsyn_core.generation.kept import KeptTable
from privsyn_core.generation.synthesis import SelectedMarginal
from privsyn_core.progress import GumProgress
from privsyn_core.selection.greedy import WELL_MEASURED_L1

from .heatmap_layout import (
    BOTTOM_PX,
    LEGEND_TITLE_PX,
    PAIR_MARKS,
    SIGMA,
    TIMES,
    TOP_PX,
    HeatmapColours,
    HeatmapShape,
    heatmap_colours,
    heatmap_shape,
    pair_cells,
)


def _safe(names: Sequence[object]) -> list[str]:
    """Labels from the user's table, escaped so plotly's HTML labels cannot run anything."""
    return [html.escape(str(n)) for n in names]


def indif_heatmap(report: DependencyReport, marginals: Sequence[SelectedMarginal]) -> go.Figure:
    """Noisy InDif in units of its noise, lower triangle; measured pairs marked.

    Readable at 100 columns: one row of at least ``ROW_PX[0]`` pixels per attribute (the
    figure grows with the table), every row named on the left and every column named where
    it starts, on the diagonal (the empty upper triangle holds the names, so a column's name
    needs no more width than its cells). Colour: grey under ``WITHIN_NOISE_SIGMAS`` sigma (a
    score the noise alone gives), then a logarithmic ramp up to the highest score, so that
    3 sigma and 60 sigma both read. Measured pairs are black marks with a white rim, which
    show on grey and on the darkest red alike. The sizes, colours and marked cells are
    computed in :mod:`dashboard.heatmap_layout`; this draws them.
    """
    if report.scores is None or report.sigma is None:
        raise ValueError("no InDif scores were measured in this run")
    columns = list(report.scores.columns)
    names = _safe(columns)
    colours = heatmap_colours(report.scores.to_numpy(dtype=float, copy=True), report.sigma)
    shape = heatmap_shape(columns)
    figure = go.Figure(_heatmap_cells(names, colours, shape))
    for origin, cells in pair_cells(columns, marginals).items():
        figure.add_trace(_pair_marks(names, origin, cells, shape.mark))
    figure.update_layout(**_heatmap_frame(names, report.sigma, shape))
    return figure


def _heatmap_cells(names: list[str], colours: HeatmapColours, shape: HeatmapShape) -> go.Heatmap:
    """The cells, with the colour bar above them and each cell's score on hover."""
    n, height = shape.n, shape.height
    return go.Heatmap(
        z=colours.colour,
        x=names,
        y=names,
        zmin=0.0,
        zmax=2.0,
        colorscale=colours.colourscale,
        customdata=np.dstack([colours.raw, colours.z]),
        text=colours.status,
        xgap=1 if n <= 60 else 0,
        ygap=1 if n <= 60 else 0,
        hoverongaps=False,
        # the bar's own title, on top, overlapped the bar on a short figure (a table of
        # a few columns): the figure's title names it, and the bar sits under that
        colorbar={
            "orientation": "h",
            "xref": "container",
            "x": 0.0,
            "xanchor": "left",
            "yref": "container",
            "y": 1.0 - LEGEND_TITLE_PX / height,
            "yanchor": "top",
            "ypad": 0,
            "len": 0.62,
            "thickness": 12,
            "tickvals": colours.tick_at,
            "ticktext": colours.tick_text,
        },
        hovertemplate=f"%{{y}} {TIMES} %{{x}}<br>noisy InDif %{{customdata[0]:,.0f}} "
        f"records = %{{customdata[1]:.1f}}{SIGMA}<br>%{{text}}<extra></extra>",
    )


def _pair_marks(
    names: list[str], origin: str, cells: list[tuple[int, int]], size: float
) -> go.Scatter:
    """The marks of one origin's measured pairs: black with a white rim."""
    symbol, label = PAIR_MARKS[origin]
    return go.Scatter(
        x=[names[c] for _, c in cells],
        y=[names[r] for r, _ in cells],
        mode="markers",
        marker={
            "symbol": symbol,
            "color": "black",
            "size": size,
            "line": {"color": "white", "width": 1},
        },
        name=f"{label}: {len(cells)}",
        hoverinfo="skip",
    )


def _heatmap_frame(names: list[str], sigma: float, shape: HeatmapShape) -> dict[str, Any]:
    """The figure around the cells: the column names on the diagonal, the title, fixed
    margins, the axes and the legend of the marks."""
    n, height = shape.n, shape.height
    return {
        "annotations": _diagonal_names(names, shape.font),
        # the plot itself n rows tall: the margins hold the colour bar above and the x axis's
        # title below (plotly would take room for the title out of the plot otherwise)
        "height": height,
        "title": {
            "text": f"noisy InDif in units of its noise ({SIGMA} = {sigma:,.0f} records)",
            "font": {"size": 13},
            "x": 0.0,
            "xref": "container",
            "xanchor": "left",
            "y": 1.0 - 4 / height,
            "yref": "container",
            "yanchor": "top",
            "pad": {"l": 20},
        },
        # fixed margins: a colour bar or legend that pushed them would squeeze the rows
        "margin": {
            "l": int(shape.label_px + 14),
            "r": int(shape.right),
            "t": TOP_PX,
            "b": BOTTOM_PX,
            "autoexpand": False,
        },
        "plot_bgcolor": "white",
        "xaxis": {
            "showticklabels": False,
            "ticks": "",
            "showgrid": False,
            "zeroline": False,
            "range": [-0.5, n - 0.5],
            "title": {
                "text": "each column is named where it starts, on the diagonal",
                "font": {"size": 12},
            },
        },
        "yaxis": {
            # reversed, and exactly the n rows: markers would pad an automatic range
            "range": [n - 0.5, -0.5],
            "tickmode": "array",
            "tickvals": names,
            "ticktext": names,
            "tickfont": {"size": shape.font},
            "showgrid": False,
            "automargin": True,
        },
        "showlegend": True,
        "legend": {
            "orientation": "h",
            "xref": "container",
            "x": 1.0,
            "xanchor": "right",
            "yref": "container",
            "y": 1.0,
            "yanchor": "top",
        },
    }


def _diagonal_names(names: list[str], font: int) -> list[dict[str, Any]]:
    """Every column named where it starts: on its (empty) diagonal cell, reading right."""
    return [
        {
            "x": i - 0.45,
            "y": i,
            "xref": "x",
            "yref": "y",
            "text": name,
            "showarrow": False,
            "xanchor": "left",
            "yanchor": "middle",
            "font": {"size": font, "color": "#333"},
        }
        for i, name in enumerate(names)
    ]


def selection_summary(report: DependencyReport) -> str:
    """One line of Markdown: how many candidate pairs were selected, how many of those
    scored within the noise, and (once the engine reports it) how many the budget can
    measure well."""
    selected = len(report.selected)
    line = f"**{selected:,} of {report.candidates:,} candidate pairs selected**"
    if report.measurable is not None:
        line += (
            f"; the budget can measure about {report.measurable:,} pairs of the median size "
            f"with noise under {WELL_MEASURED_L1:.0%} of the rows each"
        )
    if selected:
        line += (
            f". {report.selected_within_noise:,} of the {selected:,} scored under "
            f"{WITHIN_NOISE_SIGMAS:g} sigma, within the noise"
        )
    if report.isolated_links:
        line += f"; {len(report.isolated_links):,} more link attributes no pair covered"
    return line + "."


#: the convergence chart's trace groups, in plain words (the legend and the tests read these)
CONVERGENCE_NAMES = {
    "marginals": "each selected marginal",
    "mean": "average of the selected marginals",
    "table": "whole table, every pair of columns (picks the table kept)",
    "kept": "the table kept",
    "best": "closest table so far",
    "alpha": "step size \u03b1",
}
_MARGINAL_GREY = "rgba(110, 110, 110, 0.3)"
_TABLE_BLUE = "#1f6fb4"
_KEPT_GOLD = "#f2a900"


def convergence_chart(
    history: Sequence[GumIterationRecord | GumProgress],
    iterations: int,
    *,
    live: bool = False,
    kept: KeptTable | None = None,
) -> go.Figure:
    """GUM's convergence: how far the synthetic table is from the noisy marginals, iteration
    by iteration (counted from 1; 0 is the starting table), and the step size below.

    The lines: each selected marginal's L1 error when GUM reached it (faint, one legend entry
    for all of them), their average (the curve of the paper's Figures 10 and 11), and the
    whole table's error after each iteration (:attr:`GumIterationRecord.table_error`), the
    score by which GUM keeps its closest table rather than its last. ``kept`` (a finished
    run) marks the table returned; while a run is ``live`` the closest table so far is
    marked instead. Below, on its own small axis, the step size alpha (paper 5.3); on a wide
    table the Markov random field's sweeps that follow GUM (``method`` "mrf") are shaded and
    carry no alpha (their step is fixed).

    The marginals are one trace with gaps between them, not a trace each: hundreds of traces
    cost the page a good part of a second per redraw while a run is watched live.
    """
    from plotly.subplots import make_subplots

    figure = make_subplots(
        rows=2, cols=1, shared_xaxes=True, row_heights=[0.8, 0.2], vertical_spacing=0.05
    )
    start = None if kept is None else kept.start_score
    last = _draw_history(figure, history, start) if history else 0
    # live: the room GUM may still use; finished: up to the last point, so that a run
    # that stopped early does not leave its points in a corner of an empty axis
    right = max(1, iterations, last) if live else max(4, last)
    if history:
        _mark_kept(figure, history, kept, start, live, right)
    _convergence_axes(figure, history, start, right)
    return figure


def _draw_history(
    figure: go.Figure, history: Sequence[GumIterationRecord | GumProgress], start: float | None
) -> int:
    """The error lines above and the step sizes below; the last iteration drawn."""
    # NumPy arrays: plotly validates arrays at once, not value by value, so the figure
    # stays cheap to rebuild while a run redraws it live
    x = np.array([h.iteration + 1 for h in history], dtype=float)
    figure.add_trace(_marginal_lines(history, x), row=1, col=1)
    figure.add_trace(
        go.Scatter(
            x=x,
            y=np.array([h.mean_error for h in history]),
            mode="lines+markers" if len(history) <= 40 else "lines",
            name=CONVERGENCE_NAMES["mean"],
            line={"width": 3, "color": "black"},
            marker={"size": 5},
            hovertemplate="iteration %{x}: average error %{y:.4f}<extra></extra>",
        ),
        row=1,
        col=1,
    )
    table = np.array(
        [np.nan if h.table_error is None else h.table_error for h in history], dtype=float
    )
    if np.isfinite(table).any():
        tx, ty = (np.r_[0.0, x], np.r_[start, table]) if start is not None else (x, table)
        figure.add_trace(
            go.Scatter(
                x=tx,
                y=ty,
                mode="lines+markers" if len(history) <= 40 else "lines",
                connectgaps=True,  # the MRF's table is judged every few sweeps only
                name=CONVERGENCE_NAMES["table"],
                line={"width": 2, "color": _TABLE_BLUE},
                marker={"size": 5},
                hovertemplate="iteration %{x}: whole-table error %{y:.4f}<extra></extra>",
            ),
            row=1,
            col=1,
        )
    _draw_step_sizes(figure, history, x)
    return int(x.max())


def _marginal_lines(
    history: Sequence[GumIterationRecord | GumProgress], x: np.ndarray
) -> go.Scatter:
    """Every selected marginal's error, as one faint trace with a gap after each."""
    keys = list(history[-1].errors)
    errors = np.array(
        [[h.errors.get(key, np.nan) for h in history] for key in keys], dtype=float
    ).reshape(len(keys), len(history))
    gap = np.full((len(keys), 1), np.nan)  # a break between one marginal and the next
    names = np.repeat(_safe([" \u00d7 ".join(key) for key in keys]), len(history) + 1)
    return go.Scatter(
        x=np.tile(np.append(x, np.nan), len(keys)),
        y=np.hstack([errors, gap]).ravel(),
        text=names,
        mode="lines",
        line={"width": 1, "color": _MARGINAL_GREY},
        name=CONVERGENCE_NAMES["marginals"],
        hovertemplate="%{text}<br>iteration %{x}: error %{y:.3f}<extra></extra>",
    )


def _draw_step_sizes(
    figure: go.Figure, history: Sequence[GumIterationRecord | GumProgress], x: np.ndarray
) -> None:
    """GUM's step size alpha on the small axis below, and the MRF's sweeps shaded (they
    have no alpha: their step is fixed)."""
    sweeps = np.array([_is_sweep(h) for h in history])
    figure.add_trace(
        go.Scatter(
            x=x,
            y=np.where(sweeps, np.nan, np.array([h.alpha for h in history])),
            mode="lines",
            name=CONVERGENCE_NAMES["alpha"],
            line={"color": "firebrick", "width": 2},
            hovertemplate="iteration %{x}: step size \u03b1 = %{y:.2f}<extra></extra>",
        ),
        row=2,
        col=1,
    )
    if sweeps.any():
        figure.add_vrect(
            x0=float(x[sweeps].min()) - 0.5,
            x1=float(x[sweeps].max()) + 0.5,
            fillcolor="rgba(46, 139, 87, 0.12)",
            line_width=0,
            annotation_text="MRF sweeps (a Markov random field fitted to the same marginals)",
            annotation_position="top left",
            row=1,
            col=1,
        )


def _convergence_axes(
    figure: go.Figure,
    history: Sequence[GumIterationRecord | GumProgress],
    start: float | None,
    right: float,
) -> None:
    """The iteration axis up to ``right``, the error axis with room above the lines that
    tell the story, the step size's axis, and the legend above the chart."""
    figure.update_xaxes(range=[-0.5, right + 0.5], **({"dtick": 1} if right <= 10 else {}))
    figure.update_xaxes(
        title={"text": "iteration (0: the starting table)", "standoff": 4}, row=2, col=1
    )
    top = _story_top(history, start)
    figure.update_yaxes(
        title="error against the noisy marginals<br>(L1: 0 = exact, lower is better)",
        rangemode="tozero",
        row=1,
        col=1,
        **({} if top is None else {"range": [0, top]}),
    )
    figure.update_yaxes(title="step \u03b1", range=[0, 1.15], tickvals=[0, 0.5, 1], row=2, col=1)
    figure.update_layout(
        height=470,
        margin={"l": 10, "r": 10, "t": 70, "b": 10},
        legend={"orientation": "h", "x": 0, "xanchor": "left", "y": 1.02, "yanchor": "bottom"},
        hovermode="closest",
    )


def _story_top(
    history: Sequence[GumIterationRecord | GumProgress], start: float | None
) -> float | None:
    """The top of the error axis: room above the average's and the whole table's highest
    points. A few marginals' errors jump far higher at their visits and would squash the
    lines that tell the story into the bottom fifth (plotly's double-click shows them all);
    None, plotly's own range, when there is nothing to go by."""
    lines = [h.mean_error for h in history]
    lines += [h.table_error for h in history if h.table_error is not None]
    lines += [] if start is None else [start]
    finite = [v for v in lines if math.isfinite(v)]
    if not finite or max(finite) <= 0:
        return None
    return 1.4 * max(finite)


def _mark_kept(
    figure: go.Figure,
    history: Sequence[GumIterationRecord | GumProgress],
    kept: KeptTable | None,
    start: float | None,
    live: bool,
    right: float,
) -> None:
    """A star (and a dotted line) at each step whose table the run returned, or, while it is
    live, at the closest table so far; on the whole-table line, else on the average."""
    marked = _kept_steps(history, kept, live)
    if marked is None:
        return
    name, steps, labels = marked
    shown = _on_the_lines(history, steps, labels, start)
    if not shown:
        return
    figure.add_trace(
        go.Scatter(
            x=[at for at, _, _ in shown],
            y=[y for _, y, _ in shown],
            mode="markers",
            marker={
                "symbol": "star",
                "size": 18,
                "color": _KEPT_GOLD,
                "line": {"color": "black", "width": 1},
            },
            name=name,
            text=[label for _, _, label in shown],
            hovertemplate="%{text}<br>whole-table error %{y:.4f}<extra></extra>",
        ),
        row=1,
        col=1,
    )
    for at, y, label in shown:
        figure.add_vline(x=at, line={"dash": "dot", "color": _KEPT_GOLD, "width": 1.5})
        # near either end of the axis the label leans inwards, so that it is never cut off
        lean = "right" if at > 0.7 * right else "left" if at < 0.3 * right else "center"
        figure.add_annotation(
            x=at,
            y=y,
            xref="x",
            yref="y",
            text=f"<b>{label}</b>",
            showarrow=True,
            arrowhead=0,
            xanchor=lean,
            ax={"right": -24, "left": 24, "center": 0}[lean],
            ay=-34,
            bgcolor="rgba(255, 255, 255, 0.85)",
            bordercolor=_KEPT_GOLD,
            font={"color": "#222"},
        )


def _kept_steps(
    history: Sequence[GumIterationRecord | GumProgress], kept: KeptTable | None, live: bool
) -> tuple[str, list[int], list[str]] | None:
    """The legend name, the steps to star and their labels: the steps whose tables a
    finished run returned (a part each, when the parts kept different steps), or while it is
    live the closest table so far (when every part agrees on it); None: nothing to star."""
    if kept is not None:
        made = [p for p in kept.parts if p.source != "independent"]
        steps = sorted({p.at for p in made})
        labels = [
            f"kept: {kept.step_name(at)}"
            if kept.at is not None
            else f"kept for {sum(p.at == at for p in made)} of {len(kept.parts)} parts: "
            f"{kept.step_name(at)}"
            for at in steps
        ]
        return CONVERGENCE_NAMES["kept"], steps, labels
    if live and history and history[-1].kept and len(set(history[-1].kept)) == 1:
        steps = [history[-1].kept[0]]
        labels = [f"closest so far: {'the start' if steps[0] == 0 else f'iteration {steps[0]}'}"]
        return CONVERGENCE_NAMES["best"], steps, labels
    return None


def _on_the_lines(
    history: Sequence[GumIterationRecord | GumProgress],
    steps: list[int],
    labels: list[str],
    start: float | None,
) -> list[tuple[int, float, str]]:
    """Each step with the error where its star goes (the whole-table line, else the
    average; the start's score at 0) and its label; steps with no such point left out."""
    by_step = {h.iteration + 1: h for h in history}
    ys = []
    for at in steps:
        record = by_step.get(at)
        if at == 0:
            ys.append(start)
        elif record is None:
            ys.append(None)
        else:
            ys.append(record.mean_error if record.table_error is None else record.table_error)
    return [
        (at, y, label)
        for at, y, label in zip(steps, ys, labels, strict=True)
        if y is not None and math.isfinite(y)
    ]


def _is_sweep(record: GumIterationRecord | GumProgress) -> bool:
    """Whether a history record is an MRF sweep rather than a GUM iteration."""
    return record.method == "mrf"


def iterations_done(history: list | tuple) -> str:
    """ "6 GUM iterations", "1 GUM iteration and 40 MRF sweeps": what the chart shows."""
    sweeps = sum(_is_sweep(h) for h in history)
    gum = len(history) - sweeps
    text = f"{gum} GUM iteration{'s' if gum != 1 else ''}"
    return text + (f" and {sweeps} MRF sweep{'s' if sweeps != 1 else ''}" if sweeps else "")


def stopped_early(history: list | tuple, planned: int) -> str:
    """Why the chart ends where it does, when GUM ran fewer iterations than it could."""
    gum = sum(not _is_sweep(h) for h in history)
    if not history or gum >= planned:
        return ""
    return (
        f"GUM ran {gum} of at most {planned} iterations: it stops once its table is as close "
        "to the noisy marginals as their noise allows, or when the error stops falling "
        "(stop early)."
    )


def side_by_side(real: pd.Series, synthetic: pd.Series, *, bins: int = 30) -> go.Figure:
    """Two normalised histograms of one column (owner-only: shows the real one)."""
    figure = go.Figure()
    numeric = pd.api.types.is_numeric_dtype(real) and real.nunique() > 20
    for name, series in (("real", real), ("synthetic", synthetic)):
        if numeric:
            figure.add_trace(
                go.Histogram(x=series, name=name, histnorm="probability", nbinsx=bins, opacity=0.6)
            )
        else:
            shares = series.astype(str).value_counts(normalize=True, dropna=False)
            figure.add_trace(go.Bar(x=_safe(shares.index), y=shares.to_numpy(), name=name))
    figure.update_layout(barmode="group", height=320, margin={"l": 10, "r": 10, "t": 30, "b": 10})
    return figure


def pair_error_heatmap(errors: pd.DataFrame) -> go.Figure:
    names = _safe(errors.columns)
    return go.Figure(
        go.Heatmap(
            z=errors.to_numpy(),
            x=names,
            y=names,
            colorscale="Reds",
            colorbar={"title": "2-way L1"},
            hovertemplate="%{y} x %{x}<br>L1 %{z:.3f}<extra></extra>",
        )
    ).update_layout(height=520, margin={"l": 10, "r": 10, "t": 30, "b": 10})


def distinguishing_game(on_d: np.ndarray, on_neighbour: np.ndarray, *, bins: int = 60) -> go.Figure:
    """Overlaid histograms of the attacker's test statistic over runs on D and on D'.

    The overlap is the lesson: where the two overlap, no attacker can tell which table an
    output came from. Both share one set of bins, so the overlap drawn is not an artefact of
    binning.
    """
    figure = go.Figure()
    values = np.concatenate([on_d, on_neighbour])
    if values.size:
        low, high = float(values.min()), float(values.max())
        size = (high - low) / bins if high > low else 1.0
        xbins = {"start": low, "end": high + size, "size": size}
        for name, runs, color in (
            ("D: without the extra person", on_d, "steelblue"),
            ("D': with the extra person", on_neighbour, "darkorange"),
        ):
            figure.add_trace(
                go.Histogram(
                    x=runs,
                    name=name,
                    xbins=xbins,
                    histnorm="probability",
                    marker_color=color,
                    opacity=0.55,
                )
            )
    figure.update_layout(
        barmode="overlay",
        height=340,
        xaxis={"title": "the attacker's score (likelihood-ratio test statistic)"},
        yaxis={"title": "share of runs"},
        legend={"orientation": "h", "x": 0, "y": 1.02, "yanchor": "bottom"},
        margin={"l": 10, "r": 10, "t": 40, "b": 10},
    )
    return figure


#: one colour per configuration of a Lab comparison (plotly's default qualitative colours)
LAB_COLOURS = ("#636EFA", "#EF553B", "#00CC96", "#AB63FA")


def lab_convergence(errors: dict[str, list[Sequence[float]]]) -> go.Figure:
    """Each configuration's mean L1 against its noisy marginals per iteration, on a log scale:
    a thin line per seed and a thick one for the mean over seeds (runs that stopped early end
    early; the mean is over the seeds still running)."""
    figure = go.Figure()
    for (name, runs), colour in zip(errors.items(), LAB_COLOURS, strict=False):
        label = html.escape(name)
        for k, run in enumerate(runs):
            figure.add_trace(
                go.Scatter(
                    x=np.arange(1, len(run) + 1),
                    y=np.asarray(run),
                    mode="lines",
                    line={"color": colour, "width": 1},
                    opacity=0.35,
                    legendgroup=label,
                    showlegend=False,
                    hovertemplate=f"{label}, seed {k + 1}<br>iteration %{{x}}"
                    "<br>mean L1 %{y:.3f}<extra></extra>",
                )
            )
        # a run that stopped early keeps its last error (its table no longer changes), so
        # the mean does not jump where a seed's run ends
        longest = max(len(r) for r in runs)
        if longest == 0:  # every marginal was appended: GUM had nothing to iterate on
            continue
        held = np.array([np.pad(r, (0, longest - len(r)), mode="edge") for r in runs if len(r)])
        figure.add_trace(
            go.Scatter(
                x=np.arange(1, longest + 1),
                y=held.mean(axis=0),
                mode="lines",
                line={"color": colour, "width": 3},
                name=label,
                legendgroup=label,
                hovertemplate=f"{label}, mean over seeds<br>iteration %{{x}}<br>mean L1 "
                "%{y:.3f}<extra></extra>",
            )
        )
    figure.update_layout(
        height=380,
        margin={"l": 10, "r": 10, "t": 10, "b": 10},
        xaxis_title="iteration",
        # log scale: the first iterations fall by a factor of ten, and the configurations
        # differ in the tail, which a linear axis squeezes into a line
        yaxis={
            "title": "mean L1 vs the noisy marginals (log scale)",
            "type": "log",
            **_log_ticks([e for runs in errors.values() for run in runs for e in run]),
        },
        legend={"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0},
    )
    return figure


def _log_ticks(values: Sequence[float]) -> dict[str, list]:
    """Ticks at 1, 2, 3 and 5 times the powers of ten across ``values``, written out in full
    (plotly's own log ticks label 0.04 as a bare "4")."""
    positive = [v for v in values if v > 0]
    if not positive:
        return {}
    low, high = math.floor(math.log10(min(positive))), math.ceil(math.log10(max(positive)))
    ticks = [m * 10.0**k for k in range(low, high + 1) for m in (1, 2, 3, 5)]
    ticks = [t for t in ticks if min(positive) / 1.5 <= t <= max(positive) * 1.5]
    return {"tickvals": ticks, "ticktext": [f"{t:g}" for t in ticks]}


def lab_fidelity(summary: pd.DataFrame, metrics: Sequence[str]) -> go.Figure:
    """One panel per metric: a bar per configuration at its mean over seeds, with an error
    bar of one standard deviation. ``summary`` has columns configuration, metric, mean, std."""
    from plotly.subplots import make_subplots

    figure = make_subplots(rows=1, cols=len(metrics), subplot_titles=list(metrics))
    names = list(dict.fromkeys(summary["configuration"]))
    colours = {n: c for n, c in zip(names, LAB_COLOURS, strict=False)}
    for col, metric in enumerate(metrics, start=1):
        rows = summary[summary["metric"] == metric]
        figure.add_trace(
            go.Bar(
                x=_safe(rows["configuration"]),
                y=rows["mean"],
                error_y={"type": "data", "array": rows["std"].fillna(0), "visible": True},
                marker_color=[colours[n] for n in rows["configuration"]],
                text=[f"{m:#.3g}" for m in rows["mean"]],
                textposition="inside",
                insidetextanchor="start",  # at the bar's foot, clear of the error bar
                hovertemplate="%{x}<br>mean %{y:.4g} ± %{error_y.array:.2g}<extra></extra>",
                showlegend=False,
            ),
            row=1,
            col=col,
        )
        figure.update_yaxes(rangemode="tozero", tickformat=".2~g", row=1, col=col)
    figure.update_layout(height=360, margin={"l": 10, "r": 10, "t": 40, "b": 10}, bargap=0.3)
    return figure
