"""Marginals: which pairs depend on each other, which marginals PrivSyn measured, and why."""

from __future__ import annotations

import streamlit as st

from dashboard import state
from dashboard.charts import indif_heatmap
from dashboard.graph import graph_html

st.title("Marginals")
finished = state.finished_or_stop(
    "Run a synthesis first (Run page); this page shows what it measured."
)
result = finished.result

st.subheader("Noisy InDif dependency scores")
state.dp_badge()
st.caption(
    "InDif is the L1 distance (in records) between a pair's joint distribution and the one "
    "independence would give, measured with Gaussian noise (paper section 4.1). Dots mark pairs "
    "measured together."
)
st.plotly_chart(indif_heatmap(result.noisy_indif, result.marginals), key="indif")

st.subheader("Dependency graph of the measured marginals")
state.dp_badge()
st.caption(
    "Nodes are attributes (size: number of values); edges join attributes measured together "
    "(width: noisy InDif). Orange marks combined cliques. Hover for rho, sigma and cells."
)
html_key = ("graph_html", finished.fingerprint, id(result))
if st.session_state.get("graph_key") != html_key:
    st.session_state["graph_html"] = graph_html(result.graph, result.marginals)
    st.session_state["graph_key"] = html_key
st.iframe(st.session_state["graph_html"], height=600)

st.subheader("All measured marginals")
state.dp_badge()
st.dataframe(result.marginals_frame(), key="marginals_table", hide_index=True, width="stretch")

st.subheader("Privacy ledger")
state.dp_badge()
ledger = result.ledger
st.caption(
    f"Budget rho {ledger.budget_rho:.4g}, spent {ledger.spent_rho:.4g}"
    + (
        f"; delta reserved for thresholding {ledger.reserved_delta:.2g}"
        if ledger.reserved_delta
        else ""
    )
)
st.dataframe(result.ledger_frame(), key="ledger_table", hide_index=True, width="stretch")
