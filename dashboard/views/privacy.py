"""Privacy: epsilon, delta and the budget split, with a live preview of the noise.

The noise plan uses only public inputs (epsilon, delta, the number of columns and which
domains are declared): it never touches the data. Below it, the owner-only forecast of which
columns a run at these settings is likely to leave out, and why, is the engine's
(:func:`privsyn_core.privacy.planner.forecast_columns`): simulated runs of the private
structure and domain estimates on the table's exact counts, spending nothing.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from privsyn_core.config import PrivSynConfig
from privsyn_core.data.columns import open_parts
from privsyn_core.data.schema import Schema
from privsyn_core.errors import InputError
from privsyn_core.measuring.counters import FrameTable
from privsyn_core.measuring.private_domain import FIRST_CATEGORY_SHARE
from privsyn_core.privacy.planner import (
    ColumnForecast,
    CountsOnce,
    TableForecast,
    forecast_columns,
    plan_budget,
)
from privsyn_core.selection.methods import selection_account

# Streamlit runs a page as a script, without a package: it is named after its folders
# ("dashboard" in a checkout, "privsyn_dashboard" installed) for the imports below.
__package__ = f"{Path(__file__).resolve().parent.parent.name}.views"

from .. import review, state
from ..settings import current_config, parse_delta, parse_epsilon
from ..state import session

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
    names = [c.name for c in session.schema.included()]
    if session.target not in (None, *names):  # a column of an earlier table
        session.target = None
    st.selectbox(
        "prediction target (optional)",
        [None, *names],
        format_func=lambda name: "none" if name is None else name,
        placeholder="none",  # shown, not format_func(None), while no column is chosen
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
    epsilon = parse_epsilon(session.epsilon)
    delta = parse_delta(session.delta_text)
    config = current_config()
except InputError as exc:
    st.error(str(exc))
    st.stop()

schema = state.run_schema()  # without the person column, which a run never synthesises
unit = state.unit()
raw = session.raw_domains
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
    unit=unit,
)
st.subheader("Noise per step")
st.caption(
    f"At epsilon {epsilon:g} and delta {delta:g}, {unit.words}, computed from your settings "
    "alone: no data is read."
    + (
        ""
        if unit.is_row
        else f" Each count can move by {unit.rows_per_person} when a person joins or leaves, "
        f"so every sigma below is {unit.rows_per_person} times the per-row one."
    )
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
    f" Selection on {included} columns: {selection_account(config.selection, included)}."
    " A column the private domain step leaves out does not count."
)
survival = plan.categories
if survival is not None:
    st.subheader("How common must a category be?")
    small, sure = st.columns(2)
    small.metric("records a category needs, at most: kept half the time", f"{survival.count_50:,}")
    sure.metric("records a category needs, at most: kept 95% of the time", f"{survival.count_95:,}")
    st.info(
        f"Up to {survival.columns} column(s) may have their categories estimated privately "
        "(their kind is left open, or declared categorical without categories): each value's "
        f"count gets noise and only values whose noisy count reaches the threshold are kept. "
        f"The numbers above are for a first estimate and assume all {survival.columns} are "
        f"categorical (sigma {survival.sigma:.1f}, threshold {survival.threshold:.1f}); "
        "columns read as numbers take less of the domain budget, so the real threshold is "
        f"lower (your table's is below). Rarer values become '(other)'. "
        f"{1 - FIRST_CATEGORY_SHARE:.0%} of the categories' budget is kept for a second "
        "estimate, added to the first: of the "
        "columns in which no value survived, or of every column when each kept some. A column "
        "in which no value survives either estimate is dropped."
    )


#: tables of at most this many cells are forecast as the page loads; larger ones on request
FORECAST_CELLS = 2_000_000


def _forecast(
    epsilon: float, delta: float, config: PrivSynConfig, schema: Schema
) -> TableForecast | None:
    """The engine's forecast for the session's table at these settings, kept in the session
    (the exact counts once per table, the forecast once per table, schema and settings)."""
    table = session.table
    fingerprint = state.dataset_fingerprint()
    unit = state.unit()
    key = (fingerprint, unit, schema.dumps(), epsilon, delta, config.domain_share)
    cached = session.forecast
    if cached is not None and cached[0] == key:
        return cached[1]
    if table.size > FORECAST_CELLS and not st.button(
        "Forecast which columns a run keeps",
        key="forecast_button",
        help=f"reads the whole table ({table.size:,} cells): a few seconds to a minute",
    ):
        return None
    counts = session.forecast_counts
    if counts is None or counts[0] != (fingerprint, unit):
        counts = (fingerprint, unit), CountsOnce(FrameTable(table), unit)
        session.forecast_counts = counts
    with st.spinner("Simulating the private estimates on your table..."):
        forecast = forecast_columns(counts[1], schema, epsilon, delta, config=config, unit=unit)
    session.forecast = (key, forecast)
    return forecast


def _outlook(column: ColumnForecast, draws: int) -> str:
    left_out = round(column.lost * draws)
    if column.status == "likely lost":
        return f"likely left out ({left_out} of {draws} runs)"
    if left_out:
        return f"left out in {left_out} of {draws} runs"
    if column.status == "reduced":
        return "kept, changed"
    return "kept in every run, with few of its values"


def _names(columns: list[str]) -> str:
    """Column names for markdown: escaped (they come from the file), six at most."""
    shown = ", ".join(review.literal(c) for c in columns[:6])
    return shown + (f" and {len(columns) - 6} more" if len(columns) > 6 else "")


st.subheader("Which columns will a run keep?")
state.owner_badge()
if raw:
    st.caption(
        "The raw-domains demo switch (Data page) reads categories and bounds off the data: no "
        "column is lost to private estimates, and the run is not end-to-end DP."
    )
elif session.disk is not None:
    st.info(
        "Not forecast for a table on disk: it would read the whole file. The category "
        "threshold above still applies; declare what is public on the Data page to keep a "
        "column whatever the budget."
    )
elif not parts.structure and not parts.domain_estimates:
    st.caption("Every column's kind and domain is declared: nothing is estimated privately.")
else:
    forecast = _forecast(epsilon, delta, config, schema)
    if forecast is not None:
        draws = forecast.draws
        st.caption(
            f"The engine's own private estimates of each column's kind, categories and bounds, "
            f"run {draws} times on your table with simulated noise at these settings. Nothing "
            "is spent or released; this is shown to you, the owner, only."
        )
        risky = forecast.at_risk()
        lost = [c.name for c in risky if c.status == "likely lost"]
        unsure = [c.name for c in risky if c.status == "at risk"]
        thin = [c.name for c in risky if c.status == "loses values"]
        changed = [c.name for c in risky if c.status == "reduced"]
        if forecast.category_threshold is not None:
            st.caption(
                "In your table, a category needs about "
                f"**{forecast.category_threshold:,.0f} rows** to be kept half the time."
            )
        if not (lost or unsure or thin):
            st.success(
                f"At this budget all {len(forecast.columns)} columns are kept in all {draws} "
                "simulated runs"
                + (f"; {len(changed)} with a change the run will list." if changed else ".")
            )
        else:
            lines = []
            if lost:
                lines.append(
                    f"**Likely left out: {len(lost)} of {len(forecast.columns)} columns** "
                    f"({_names(lost)})."
                )
            if unsure:
                lines.append(f"Left out in some simulated runs: {_names(unsure)}.")
            if thin:
                lines.append(f"Kept, but most of their rows become '(other)': {_names(thin)}.")
            if changed:
                lines.append(f"Kept, with a change the run will list: {_names(changed)}.")
            st.warning(" ".join(lines))
        if risky:
            # st.table renders its cells as markdown: every cell is escaped (names come from
            # the file)
            st.table(
                pd.DataFrame(
                    {
                        "column": [review.literal(c.name) for c in risky],
                        "outlook": [_outlook(c, draws) for c in risky],
                        "a run keeps": [review.literal(c.kept) for c in risky],
                        "what it changes": [review.literal(c.reduced) for c in risky],
                        "why": [review.literal(c.why) for c in risky],
                    }
                ).set_index("column"),
            )
            st.info(
                "**To keep a column, declare what you would publish anyway**: its categories "
                "(a fixed list such as grades or states) or a plausible range. Declared domains "
                "cost nothing and no estimate can lose them. On the Data page, *Declare what is "
                "public: review a drafted schema* drafts them from your table; tick the lines "
                "you would publish. From the command line: `privsyn schema infer table.csv -o "
                "schema.json`, review it, then `privsyn synthesize table.csv --schema "
                "schema.json ...`. A larger epsilon or a larger share for private domains "
                "(above) also keeps more."
            )
            st.page_link(
                "views/data.py",
                label="Review a drafted schema on the Data page",
                icon=":material/edit_note:",
            )
