"""Privacy: epsilon, delta and the budget split, with a live preview of the noise.

The preview uses only public inputs (epsilon, delta, the number of columns and which
domains are declared): it never touches the data.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from privsyn_core.config import PrivSynConfig
from privsyn_core.data.columns import open_parts
from privsyn_core.errors import InputError
from privsyn_core.privacy.planner import plan_budget

# Streamlit runs a page as a script, without a package: it is named after its folders
# ("dashboard" in a checkout, "privsyn_dashboard" installed) for the imports below.
__package__ = f"{Path(__file__).resolve().parent.parent.name}.views"

from .. import state
from ..settings import current_config, parse_delta, parse_epsilon

st.title("Privacy budget")
st.write(
    "PrivSyn satisfies (epsilon, delta)-differential privacy. Smaller epsilon means more noise. "
    "The budget is converted once to rho-zCDP and split over the steps below."
)

left, right = st.columns(2)
with left:
    st.number_input(
        "epsilon",
        min_value=None,
        max_value=None,
        value=None,  # an emptied box is None, not a silent default (settings.parse_epsilon)
        step=0.1,
        key="epsilon",
        persist_state="session",
        format="%.2f",
        help="a positive number such as 1: smaller means more privacy and more noise",
    )
    st.text_input(
        "delta",
        key="delta_text",
        persist_state="session",
        help="for example 1e-9; must be below 1/rows",
    )
    names = [c.name for c in state.schema().included()]
    if st.session_state.get("target") not in (None, *names):  # a column of an earlier table
        st.session_state["target"] = None
    st.selectbox(
        "prediction target (optional)",
        [None, *names],
        format_func=lambda name: "none" if name is None else name,
        key="target",
        persist_state="session",
        help="the column people will predict from the synthetic table, e.g. income. A public "
        "choice, so it costs nothing: the marginals that hold it weigh "
        f"{PrivSynConfig().target_weight:g} times more when marginals are chosen and the "
        "budget is split, so more of them are measured, and more precisely.",
    )
with right:
    st.slider(
        "share for 1-way marginals",
        0.02,
        0.5,
        key="one_way_share",
        persist_state="session",
        step=0.01,
    )
    st.slider(
        "share for InDif scores", 0.02, 0.5, key="indif_share", persist_state="session", step=0.01
    )
    st.slider(
        "share for private domains",
        0.01,
        0.2,
        key="domain_share",
        persist_state="session",
        step=0.01,
    )

try:
    epsilon = parse_epsilon(st.session_state["epsilon"])
    delta = parse_delta(st.session_state["delta_text"])
    config = current_config()
except InputError as exc:
    st.error(str(exc))
    st.stop()

schema = state.schema()
raw = st.session_state["raw_domains"]
parts = open_parts(schema)
included = len(schema.included())
plan = plan_budget(
    epsilon,
    delta,
    included,
    config=config,
    private_structure=0 if raw else len(parts.structure),
    private_categories=0 if raw else len(parts.categories),
    private_ranges=0 if raw else len(parts.ranges),
    private_undecided=0 if raw else len(parts.undecided),
)
st.subheader("Noise per step")
st.caption(
    f"At epsilon {epsilon:g} and delta {delta:g}, computed from your settings alone: no data "
    "is read."
)
st.metric("total rho (zCDP)", f"{plan.rho:.4g}")
st.dataframe(
    pd.DataFrame(plan.as_rows()),
    key="plan",
    hide_index=True,
    width="stretch",
    column_config={
        "rho": st.column_config.NumberColumn(format="%.2g"),
        "share": st.column_config.NumberColumn(format="percent"),
        "sigma": st.column_config.NumberColumn(format="%.1f"),
    },
)
st.caption(
    "sigma is the standard deviation of the Gaussian noise on each count (InDif: on each score)."
)
survival = plan.categories
if survival is not None:
    st.subheader("How common must a category be?")
    small, sure = st.columns(2)
    small.metric("records a category needs: kept half the time", f"{survival.count_50:,}")
    sure.metric("records a category needs: kept 95% of the time", f"{survival.count_95:,}")
    st.info(
        f"Up to {survival.columns} column(s) may have their categories estimated privately "
        "(their kind is left open, or declared categorical without categories): each value's "
        f"count gets noise (sigma {survival.sigma:.1f}) and only values whose noisy count "
        f"reaches {survival.threshold:.1f} are kept. Rarer values become 'other'; a column in "
        "which no value survives is dropped, after its share of the budget is spent. A small "
        "table may lose every column: raise epsilon, or declare the categories on the Data "
        "page (Declare what is public) so nothing is spent on them."
    )
