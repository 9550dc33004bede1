"""Marginals: which pairs depend on each other, which marginals PrivSyn measured, and why."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from privsyn_core.dependency_report import WITHIN_NOISE_SIGMAS, dependency_report

# Streamlit runs a page as a script, without a package: it is named after its folders
# ("dashboard" in a checkout, "privsyn_dashboard" installed) for the imports below.
__package__ = f"{Path(__file__).resolve().parent.parent.name}.views"

from .. import records, release_downloads, state
from ..charts import indif_heatmap, selection_summary
from ..settings import small_number
from ..state import session
from .marginals_graph import graph_page
from .marginals_graph_pairs import default_pairs_drawn

st.title("Marginals")
finished = state.finished_or_stop(
    "Run a synthesis first (Run page); this page shows what it measured."
)
result = finished.result

st.subheader("Noisy InDif dependency scores")
state.dp_badge()
report = dependency_report(result)
if report.scores is None or report.sigma is None:
    st.info(
        "This run measured no InDif scores (its selection does not use them, or the table "
        "has one column); the graph and the table below show the marginals it measured."
    )
else:
    st.markdown(f"Selection: {report.method}.")
    st.markdown(selection_summary(report))
    if report.independent_pairs:
        st.info(
            f"{report.independent_pairs} of the {report.measured_pairs} measured pairs "
            f"{'shows' if report.independent_pairs == 1 else 'show'} no more dependence than "
            f"{'its' if report.independent_pairs == 1 else 'their'} measurement noise would "
            "on its own, so "
            f"{'it is' if report.independent_pairs == 1 else 'they are'} drawn as independent "
            "(each from its 1-way margins): fitting "
            f"{'it' if report.independent_pairs == 1 else 'them'} would copy noise into the "
            "synthetic table."
        )
    if report.quasi_pairs:
        st.info(
            f"{report.quasi_pairs} of the {report.measured_pairs} measured pairs "
            f"{'is' if report.quasi_pairs == 1 else 'are'} independent but for a few cells (a "
            "column that copies another, say), so "
            f"{'it is' if report.quasi_pairs == 1 else 'they are'} drawn from that fit: "
            "outside those cells it averages the measurement noise of whole rows and columns "
            "instead of copying it cell by cell."
        )
    if report.guard:
        st.warning(f"The guard against independent columns fired: {report.guard}.")
    st.caption(
        "InDif is the L1 distance (in records) between a pair's joint distribution and the "
        "one independence would give (paper section 4.1). Every score carries Gaussian noise "
        f"of sigma {report.sigma:,.0f} records, which is public: the budget and the number of "
        "pairs set it (Theorem 4.2). The colour is the score in units of that sigma: grey "
        f"under {WITHIN_NOISE_SIGMAS:g} sigma, where the score of an independent pair lands "
        "97.7% of the time; yellow to dark red, on a log scale, stronger dependencies. Black "
        "marks: pairs measured together. Each row is named on the left, each column where it "
        "starts, on the diagonal. Hover a cell for its score."
    )
    st.plotly_chart(indif_heatmap(report, result.marginals), key="indif")

st.subheader("Dependency graph of the measured marginals")
state.dp_badge()
st.caption(
    "Dots are attributes, lines join attributes measured together; the key above the drawing "
    "says what widths and colours mean. Hover a dot or line for sizes, rho, sigma and cells; "
    "click a dot to see all its marginals. Each group is a connected component; with "
    "separate-and-join on, GUM synthesises each on its own (paper section 5.3)."
)
graph = result.graph
measured = graph.number_of_edges()
count = default_pairs_drawn(graph, result.marginals)
if measured > count:
    count = st.slider(
        "Pairs drawn",
        min_value=1,
        max_value=measured,
        value=count,
        key=f"pairs_drawn_{finished.run_id}",
        help=(
            f"This run measured {measured} pairs; drawing them all makes a tangle. The graph "
            "first draws the backbone (the tree tree-first selection measured, or a tree of "
            "the strongest dependencies), then the strongest other pairs. Move right to draw "
            "more. Clicking an attribute shows all its pairs whatever is set here."
        ),
    )
html_key = ("graph_html", finished.fingerprint, id(result), count)
if session.graph_key != html_key:
    session.graph_page = graph_page(graph, result.marginals, count)
    session.graph_key = html_key
page = session.graph_page
st.iframe(page.html, height=page.height)

st.subheader("All measured marginals")
state.dp_badge()
st.dataframe(result.marginals_frame(), key="marginals_table", hide_index=True, width="stretch")
release_downloads.offer_marginals(
    finished.run_id,
    finished.bundle,
    result.ledger.randomness,
    records.no_bundle_reason(finished.run_id, result.ledger.not_private),
    key="download_marginals",
)

st.subheader("Privacy ledger")
state.dp_badge()
ledger = result.ledger
budget_eps, _ = ledger.budget.stated(finished.delta)
spent_eps, spent_delta = ledger.spent.stated(finished.delta)
frame = result.ledger_frame()
everyone = set(result.engine.attributes)
frame["attributes"] = [
    f"all {len(everyone)} attributes" if set(names.split(", ")) == everyone and len(everyone) > 3
    else names
    for names in frame["attributes"]
]  # fmt: skip
# the mechanism's full name is a sentence: said once below the table, short in it
mechanisms = sorted(set(frame["mechanism"]))
frame["mechanism"] = [m.split(" (")[0] for m in frame["mechanism"]]
st.caption(
    f"What this run spent, step by step: epsilon {spent_eps:.3g} (delta "
    f"{small_number(spent_delta)}) of the epsilon {budget_eps:.3g} it was given. In the "
    f"paper's units (zCDP): rho {ledger.spent_rho:.4g} of {ledger.budget_rho:.4g}"
    + (
        "; delta set aside for the thresholds that hide rare values "
        f"{small_number(ledger.reserved_delta)}"
        if ledger.reserved_delta
        else ""
    )
    + ". Each row is one release: its sensitivity, the rho it cost, the noise (sigma) it got. "
    + "Noise: "
    + "; ".join(mechanisms)
    + "."
)
st.dataframe(frame, key="ledger_table", hide_index=True, width="stretch")
