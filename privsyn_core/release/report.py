"""The release report: one HTML page that says what a release is, from its DP content alone.

:func:`release_report` is a pure function of what a release bundle holds (the fitted model:
its ledger, noisy and consistent marginals, released schema and configuration, and GUM's
error per iteration of the bundled sample) to one HTML page: the budget and the ledger, the
marginals selected and their dependency graph, the convergence curve, and every structural
choice with where it came from (declared, or a DP estimate). Nothing on it was read off the
table without noise: the only row count is the noisy total the model samples by default.

The page is self-contained: inline CSS, the graph and the curve as inline SVG, no script and
nothing fetched, so it opens offline in any browser. Every string that comes from the table
(column names, categories, date formats) or from the bundle file is untrusted and passes
through :func:`html.escape`; numbers are formatted from floats.

The bundle writer stores the page as ``report.html``; ``privsyn report`` and the dashboard
make it again from the bundle's checked content, never from that file, which anyone could
have replaced.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from itertools import combinations
from typing import Any

from privsyn_core.data.codecs import BinnedCodec
from privsyn_core.generation.fitted_data import FittedData
from privsyn_core.privacy.ledger import guarantee
from privsyn_core.release.changes import KINDS, changes, released_exclusions
from privsyn_core.release.marginal_files import MISSING
from privsyn_core.selection.methods import selection_account

#: the ledger's step names in words
STEPS = {
    "one_way": "1-way marginal",
    "indif": "InDif scores (all pairs)",
    "marginal": "selected marginal",
    "domain": "domain estimate",
    "identifier": "identifier check",
    "structure": "structure vote",
    "privbayes": "PrivBayes parent choice",
}
#: the most categories listed per column (the rest are counted)
_LISTED = 12
#: the longest column name drawn in the graph (the full name is its tooltip)
#: tables longer than this are folded (a click opens them)
_OPEN_ROWS = 30
_GRAPH_NAME = 24

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1f2328;
background:#f6f8fa}
main{max-width:1000px;margin:0 auto;padding:24px 32px 48px;background:#fff}
h1{font-size:1.7rem;margin:0 0 4px}h2{font-size:1.25rem;margin:32px 0 8px;
border-bottom:1px solid #d0d7de;padding-bottom:4px}
p,li{line-height:1.45}.note{color:#57606a;font-size:.9rem}
.badge{display:inline-block;padding:4px 10px;border-radius:12px;font-weight:600;font-size:.9rem}
.dp{background:#dafbe1;color:#116329;border:1px solid #4ac26b}
.debug{background:#ffebe9;color:#a40e26;border:1px solid #ff8182}
table{border-collapse:collapse;margin:8px 0;font-size:.9rem}
th,td{border:1px solid #d0d7de;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f6f8fa}td.n{text-align:right;font-variant-numeric:tabular-nums}
.bar{display:inline-block;height:10px;background:#0969da;vertical-align:middle;margin-right:6px}
.est{color:#9a6700;font-weight:600;white-space:nowrap}.dec{color:#57606a;white-space:nowrap}
dl{display:grid;grid-template-columns:max-content auto;gap:4px 16px;margin:8px 0}
dt{color:#57606a}dd{margin:0;font-weight:600}
svg{background:#fff;border:1px solid #d0d7de;max-width:100%;height:auto}
code{background:#f6f8fa;padding:1px 4px;border-radius:4px}
"""


def _e(value: object) -> str:
    """Any value as escaped text (table-derived strings are untrusted)."""
    return html.escape(str(value), quote=True)


def _num(value: object, digits: int = 4) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return _e("-" if value is None else value)
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:.{digits}g}" if math.isfinite(value) else _e(value)


def release_report(
    model: FittedData,
    config: Mapping[str, Any] | None = None,
    convergence: Sequence[float] | None = None,
    title: str = "PrivSyn release",
) -> str:
    """The release report of ``model`` (see the module docstring) as an HTML string.
    ``config`` is the run's configuration (default the model's), ``convergence`` GUM's mean
    L1 error per iteration of the bundled sample (None: the bundle holds none), ``title``
    names the release (escaped)."""
    config = model.config if config is None else config
    ledger = model.ledger
    debug = "not for release" in ledger.randomness
    badge = (
        '<span class="badge debug">DEBUG RUN: NOT FOR RELEASE (seeded noise, replayable)</span>'
        if debug
        else '<span class="badge dp">Differentially private release</span>'
    )
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        # no script, no fetch: a report that a browser opens as a document and nothing more
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'; img-src data:\">",
        f"<title>Release report: {_e(title)}</title>",
        f"<style>{_CSS}</style></head><body><main>",
        f"<h1>Release report: {_e(title)}</h1>",
        f"<p>{badge}</p>",
        "<p>Everything on this page is a differentially private measurement, computed from "
        "one (post-processing), or a public setting. Nothing here was read off the table "
        "without noise: the row count below is the noisy estimate, and the real one is not "
        "released.</p>",
        _budget(model),
        _changes(model),
        _ledger(model),
        _marginals(model, config),
        _graph_section(model),
        _convergence_section(convergence),
        _choices(model),
        _settings(config),
        '<p class="note">Made by PrivSyn Studio from the release bundle\'s content. '
        "<code>privsyn report RELEASE.zip -o report.html</code> makes it again from the "
        "bundle.</p>",
        "</main></body></html>",
    ]
    return "\n".join(parts) + "\n"


def _budget(model: FittedData) -> str:
    ledger = model.ledger
    spent_epsilon = ledger.spent_epsilon()
    rows = [
        ("Guarantee", _e(guarantee(ledger.unit))),
        ("epsilon", _num(ledger.epsilon)),
        ("delta", _num(ledger.delta)),
        ("Budget in zCDP rho", _num(ledger.budget_rho, 6)),
        ("rho spent", _num(ledger.spent_rho, 6)),
        ("epsilon spent (at delta)", _num(spent_epsilon)),
        ("Conversion", _e(ledger.conversion)),
        ("delta reserved for thresholding", _num(ledger.reserved_delta)),
        ("Noise", _e(ledger.randomness)),
        ("Rows (noisy estimate, DP)", f"{model.default_rows:,}"),
        ("Columns synthesised", f"{len(model.engine):,}"),
    ]  # fmt: skip
    items = "".join(f"<dt>{_e(k)}</dt><dd>{v}</dd>" for k, v in rows)
    return (
        "<h2>Privacy budget</h2>"
        f"<dl>{items}</dl>"
        '<p class="note">Sampling more rows from this release (<code>privsyn generate</code>) '
        "spends nothing more: it is post-processing of the measurements below.</p>"
    )


def _changes(model: FittedData) -> str:
    """What the synthetic table changes of the real one, kind by kind, with the fix."""
    found = changes(model, released_exclusions(model))
    if not found:
        return (
            "<h2>What the synthetic table changes</h2><p>Nothing beyond the noise: every "
            "column keeps its declared or estimated values.</p>"
        )
    sections = []
    for kind, heading in KINDS.items():
        group = [c for c in found if c.kind == kind]
        if not group:
            continue
        rows = "".join(f"<tr><td>{_e(c.text)}</td></tr>" for c in group)
        table = f"<table>{rows}</table>"
        sections.append(
            f"<h3>{_e(heading.capitalize())} ({len(group)})</h3>"
            f"<p>To avoid: {_e(group[0].fix)}.</p>{_folded(table, len(group), heading)}"
        )
    return (
        "<h2>What the synthetic table changes</h2>"
        "<p>Read off the release's DP content (its codecs, its consistent 1-way marginals and "
        "the measured marginals' targets): each share is an estimate, as every number here "
        "is.</p>" + "".join(sections)
    )


def _folded(table: str, rows: int, what: str) -> str:
    """A long table inside a ``<details>`` element (opens with a click, no script)."""
    if rows <= _OPEN_ROWS:
        return table
    return f"<details><summary>{_e(what)} ({rows:,} rows)</summary>{table}</details>"


def _bar(share: float) -> str:
    return f'<span class="bar" style="width:{max(1, round(120 * share))}px"></span>{share:.1%}'


def _ledger(model: FittedData) -> str:
    ledger = model.ledger
    total = ledger.budget_rho or 1.0
    steps: dict[str, list[Any]] = {}
    for entry in ledger.entries:
        steps.setdefault(entry.step, []).append(entry)
    summary = []
    for step, entries in steps.items():
        rho = sum(e.rho for e in entries)
        sigmas = sorted({_num(e.sigma) for e in entries}, key=lambda t: float(t.replace(",", "")))
        sigma = sigmas[0] if len(sigmas) == 1 else f"{sigmas[0]} to {sigmas[-1]}"
        mechanisms = sorted({e.mechanism for e in entries})
        summary.append(
            f"<tr><td>{_e(STEPS.get(step, step))}</td><td class=n>{len(entries):,}</td>"
            f"<td class=n>{sum(e.n_queries for e in entries):,}</td><td class=n>{_num(rho)}</td>"
            f"<td>{_bar(rho / total)}</td><td class=n>{sigma}</td>"
            f"<td>{_e('; '.join(mechanisms))}</td></tr>"
        )
    rows = []
    for i, entry in enumerate(ledger.entries, 1):
        columns = ", ".join(entry.attributes)
        if len(entry.attributes) > 6:
            columns = f"{len(entry.attributes)} columns"
        rows.append(
            f"<tr><td class=n>{i}</td><td>{_e(STEPS.get(entry.step, entry.step))}</td>"
            f"<td>{_e(columns)}</td><td class=n>{entry.n_queries:,}</td>"
            f"<td class=n>{_num(entry.sensitivity)}</td><td class=n>{_num(entry.rho)}</td>"
            f"<td>{_bar(entry.rho / total)}</td><td class=n>{_num(entry.sigma)}</td></tr>"
        )
    every = (
        "<table><tr><th>#</th><th>step</th><th>columns</th><th>queries</th><th>sensitivity</th>"
        "<th>rho</th><th>share of budget</th><th>sigma</th></tr>" + "".join(rows) + "</table>"
    )
    return (
        "<h2>Privacy ledger</h2>"
        f"<p>{len(ledger.entries):,} measurements of the table, each with Gaussian noise of "
        "standard deviation sigma (in rows); their rho adds up to the budget (zCDP "
        "composition). By step:</p>"
        "<table><tr><th>step</th><th>measurements</th><th>queries</th><th>rho</th>"
        "<th>share of budget</th><th>sigma</th><th>mechanism</th></tr>"
        + "".join(summary)
        + "</table>"
        + _folded(every, len(rows), "Every measurement")
    )


def _targets(model: FittedData) -> list[tuple[tuple[str, ...], int, float, float]]:
    """The selected marginals (after the 1-way ones): columns, cells, rho, sigma."""
    d = len(model.engine)
    return [(m.attributes, m.table.cells, m.rho, m.sigma) for m in model.noisy[d:]]


def _marginals(model: FittedData, config: Mapping[str, Any]) -> str:
    targets = _targets(model)
    rows = "".join(
        f"<tr><td class=n>{i}</td><td>{' &times; '.join(_e(n) for n in names)}</td>"
        f"<td class=n>{cells:,}</td>"
        f"<td class=n>{_num(rho)}</td><td class=n>{_num(sigma)}</td></tr>"
        for i, (names, cells, rho, sigma) in enumerate(targets, 1)
    )
    name = str(config.get("selection", "densemarg"))  # the default before "auto"
    method = f"<code>{_e(name)}</code>"
    if name == "auto":
        method += f" ({_e(selection_account(name, len(model.engine)))})"
    return (
        "<h2>Selected marginals</h2>"
        f"<p>{len(targets)} marginals chosen by {method} from the noisy InDif "
        "scores (or declared), then measured with noise; GUM made the synthetic table match "
        "them and every column's 1-way marginal. A marginal on one column belongs to a "
        "column no selected pair covered. Cells count the values after low counts were "
        "merged. <code>privsyn marginals RELEASE.zip -o DIR</code> writes their noisy "
        "counts as CSV files.</p>"
        + _folded(
            "<table><tr><th>#</th><th>columns</th><th>cells</th><th>rho</th><th>sigma</th></tr>"
            + rows
            + "</table>",
            len(targets),
            "Every selected marginal",
        )
    )


def _graph_section(model: FittedData) -> str:
    return (
        "<h2>Dependency graph</h2>"
        "<p>Each dot is a column; a line joins two columns measured together in a selected "
        "marginal (thicker: in more marginals). A hollow dot is a column measured only on "
        "its own. GUM synthesises each connected group on its own.</p>"
        + dependency_svg(list(model.engine.attributes), [t[0] for t in _targets(model)])
    )


def dependency_svg(columns: Sequence[str], marginals: Sequence[Sequence[str]]) -> str:
    """The columns on a circle, a line per pair measured together, as inline SVG."""
    n = len(columns)
    # room for a label of _GRAPH_NAME characters on either side of the circle
    width, height, radius = 900, 580, 240 if n > 1 else 0
    cx, cy = width / 2, height / 2
    spots = {
        name: (
            cx + radius * math.cos(2 * math.pi * i / n - math.pi / 2),
            cy + radius * math.sin(2 * math.pi * i / n - math.pi / 2),
        )
        for i, name in enumerate(columns)
    }
    weight: dict[tuple[str, str], int] = {}
    for names in marginals:
        for a, b in combinations([x for x in names if x in spots], 2):
            key = (a, b) if columns.index(a) < columns.index(b) else (b, a)
            weight[key] = weight.get(key, 0) + 1
    paired = {x for pair in weight for x in pair}
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img" '
        'aria-label="dependency graph of the selected marginals">'
    ]
    for (a, b), count in weight.items():
        (x1, y1), (x2, y2) = spots[a], spots[b]
        out.append(
            f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="#0969da" '
            f'stroke-opacity="0.7" stroke-width="{min(1.5 + 1.5 * (count - 1), 6):.1f}">'
            f"<title>{_e(a)} &times; {_e(b)}: {count} marginal{'s' if count > 1 else ''}"
            "</title></line>"
        )
    font = 13 if n <= 30 else 10 if n <= 60 else 8
    for name, (x, y) in spots.items():
        fill = "#0969da" if name in paired else "#fff"
        out.append(
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="6" fill="{fill}" stroke="#0969da" '
            f'stroke-width="2"><title>{_e(name)}</title></circle>'
        )
        dx, dy = x - cx, y - cy
        norm = math.hypot(dx, dy) or 1.0
        lx, ly = x + 12 * dx / norm, y + 12 * dy / norm + font / 3
        anchor = "middle" if abs(dx) < 1 else "start" if dx > 0 else "end"
        shown = name if len(name) <= _GRAPH_NAME else name[: _GRAPH_NAME - 1] + "…"
        out.append(
            f'<text x="{lx:.1f}" y="{ly:.1f}" font-size="{font}" text-anchor="{anchor}" '
            f'fill="#1f2328">{_e(shown)}<title>{_e(name)}</title></text>'
        )
    out.append("</svg>")
    return "".join(out)


def _convergence_section(convergence: Sequence[float] | None) -> str:
    head = "<h2>GUM convergence</h2>"
    if convergence is None:
        return head + (
            "<p>This bundle holds no record of GUM's iterations (it was saved without a "
            "sample, or by an older version), so there is no curve to draw.</p>"
        )
    if not convergence:
        return head + (
            "<p>GUM ran no iterations for the bundled sample: every selected marginal was "
            "drawn directly, column by column (appending, PrivSyn section 5.3), so there is "
            "no curve to draw.</p>"
        )
    return head + (
        "<p>GUM's mean L1 error (0 to 2) between the synthetic table's marginals and the "
        "noisy marginals, per iteration, while it made the bundled sample (its first block, "
        "when there were several). It is computed from the noisy marginals only. Lower is "
        f"closer; a curve that has flattened has converged. {len(convergence):,} "
        f"iteration{'s' if len(convergence) != 1 else ''}: from {convergence[0]:.4g} to "
        f"{convergence[-1]:.4g} (lowest {min(convergence):.4g}).</p>" + convergence_svg(convergence)
    )


def _nice_step(rough: float) -> float:
    """1, 2 or 5 times a power of ten, at least ``rough``: a tick step people read."""
    power = 10 ** math.floor(math.log10(rough))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= rough * (1 - 1e-9))


def convergence_svg(errors: Sequence[float]) -> str:
    """GUM's mean L1 per iteration as a line chart in inline SVG."""
    width, height, left, right, top, bottom = 720, 300, 64, 16, 16, 48
    plot_w, plot_h = width - left - right, height - top - bottom
    values = [float(v) for v in errors]
    tick = _nice_step(max(max(values), 1e-9) / 5)
    high = tick * math.ceil(max(max(values), 1e-9) / tick)
    last = max(len(values) - 1, 1)

    def xy(i: int, v: float) -> tuple[float, float]:
        return left + plot_w * i / last, top + plot_h * (1 - v / high)

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img" aria-label="GUM convergence curve">'
    ]
    for k in range(round(high / tick) + 1):  # y grid and ticks
        v = tick * k
        _, y = xy(0, v)
        out.append(
            f'<line x1="{left}" y1="{y:.1f}" x2="{width - right}" y2="{y:.1f}" stroke="#eaeef2"/>'
            f'<text x="{left - 6}" y="{y + 4:.1f}" font-size="11" text-anchor="end">{v:.3g}</text>'
        )
    step = max(1, math.ceil(last / 10))
    for i in range(0, last + 1, step):
        x, _ = xy(i, 0)
        out.append(
            f'<text x="{x:.1f}" y="{top + plot_h + 16}" font-size="11" '
            f'text-anchor="middle">{i}</text>'
        )
    out.append(
        f'<line x1="{left}" y1="{top + plot_h}" x2="{width - right}" y2="{top + plot_h}" '
        f'stroke="#57606a"/><line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" '
        'stroke="#57606a"/>'
    )
    points = " ".join(f"{x:.1f},{y:.1f}" for x, y in (xy(i, v) for i, v in enumerate(values)))
    out.append(f'<polyline points="{points}" fill="none" stroke="#0969da" stroke-width="2"/>')
    if len(values) <= 40:  # few iterations: each one a dot
        out += [
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="#0969da"/>'
            for x, y in (xy(i, v) for i, v in enumerate(values))
        ]
    out.append(
        f'<text x="{left + plot_w / 2}" y="{height - 10}" font-size="12" '
        'text-anchor="middle">GUM iteration</text>'
        f'<text x="14" y="{top + plot_h / 2}" font-size="12" text-anchor="middle" '
        f'transform="rotate(-90 14 {top + plot_h / 2})">mean L1 error</text>'
    )
    out.append(
        f"<title>first {values[0]:.4g}, last {values[-1]:.4g}, lowest {min(values):.4g}</title>"
    )
    out.append("</svg>")
    return "".join(out)


def _values(decoder: Any) -> str:
    """A released column's values in words, as its codec decodes them: its categories (the
    first few), or the range its bins cover."""
    if isinstance(decoder, BinnedCodec):
        bins = f"{decoder.bins} bin{'' if decoder.bins == 1 else 's'}"
        whole = " (whole numbers)" if decoder.integer else ""
        return f"{bins} over {decoder.span_label(0, decoder.bins - 1)}{whole}"
    if decoder is None:
        return ""
    labels = [MISSING if v is None else v for v in decoder.labels()]
    listed = ", ".join(str(v) for v in labels[:_LISTED])
    more = f" and {len(labels) - _LISTED} more" if len(labels) > _LISTED else ""
    return f"{len(labels)} values: {listed}{more}"


def _choices(model: FittedData) -> str:
    decoders = {d.name: d for d in model.decoders}
    rows = []
    for entry in model.schema:
        if not isinstance(entry, Mapping):
            continue
        name = entry.get("name", "")
        if entry.get("excluded"):
            rows.append(
                f"<tr><td><b>{_e(name)}</b></td><td colspan=4>left out of the synthetic table</td>"
                "</tr>"
            )
            continue
        choices = entry.get("choices")
        if not isinstance(choices, list) or not choices:
            choices = [{"choice": "kind", "value": entry.get("kind"), "provenance": "declared"}]
        listed = [c for c in choices if isinstance(c, Mapping)]
        span = f" rowspan={len(listed)}" if len(listed) > 1 else ""
        for i, choice in enumerate(listed):
            where = (
                '<span class="dec">declared</span>'
                if choice.get("provenance") == "declared"
                else '<span class="est">DP estimate</span>'
            )
            head = f"<td{span}><b>{_e(name)}</b></td>" if i == 0 else ""
            tail = f"<td{span}>{_e(_values(decoders.get(name)))}</td>" if i == 0 else ""
            rows.append(
                f"<tr>{head}<td>{_e(choice.get('choice'))}</td><td>{_e(choice.get('value'))}</td>"
                f"<td>{where}</td>{tail}</tr>"
            )
    return (
        "<h2>Structural choices</h2>"
        "<p>Every choice about each column's layout and where it came from: "
        '<span class="dec">declared</span> by the data owner (public), or a '
        '<span class="est">DP estimate</span> paid for in the ledger.</p>'
        "<table><tr><th>column</th><th>choice</th><th>value</th><th>from</th>"
        "<th>released values</th></tr>" + "".join(rows) + "</table>"
    )


def _flat(config: Mapping[str, Any], prefix: str = "") -> list[tuple[str, object]]:
    out: list[tuple[str, object]] = []
    for key, value in config.items():
        if isinstance(value, Mapping):
            out += _flat(value, f"{prefix}{key}.")
        else:
            out.append((f"{prefix}{key}", value))
    return out


def _settings(config: Mapping[str, Any]) -> str:
    rows = "".join(
        f"<tr><td><code>{_e(k)}</code></td><td>{_e(v)}</td></tr>"
        for k, v in (_flat(config) if isinstance(config, Mapping) else [])
    )
    return (
        "<h2>Settings</h2><p>The run's configuration: public choices made before anything "
        "was measured.</p><table><tr><th>setting</th><th>value</th></tr>" + rows + "</table>"
    )
