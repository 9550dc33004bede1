"""Privacy: epsilon, delta and the budget split, with a live preview of the noise.

Plain words first, the paper's words on demand: every input, slider and number says what it
means in its help, and the paper's term comes after it ("In the paper: ..."). The engine
counts the budget in rho (zCDP, paper section 2.3); wherever a rho is shown, the epsilon it
amounts to at the user's delta stands beside it (:meth:`Budget.stated`). The split is shown
once, in one unit (each step's share of the whole budget, in the noise table); the sliders
set it, and their caption says how their shares become the table's.

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
from privsyn_core.measuring.domain_split import FIRST_CATEGORY_SHARE
from privsyn_core.privacy.budget import Budget
from privsyn_core.privacy.planner import (
    BudgetPlan,
    ColumnForecast,
    CountsOnce,
    StepPlan,
    TableForecast,
    forecast_columns,
    plan_budget,
)
from privsyn_core.selection.methods import selection_account

# Streamlit runs a page as a script, without a package: it is named after its folders
# ("dashboard" in a checkout, "privsyn_dashboard" installed) for the imports below.
__package__ = f"{Path(__file__).resolve().parent.parent.name}.views"

from .. import review, state
from ..settings import current_config, parse_delta, parse_epsilon, small_number
from ..state import session

#: what each of the planner's steps does, in plain words, by the planner's step name; the
#: engine's own note (the paper's terms) follows it in "What each step does"
STEP_WORDS = {
    "column kinds": "decides whether each column you left open holds numbers, dates or text "
    "(and whether its numbers are whole), from noisy counts of what its values look like.",
    "domains": "finds which categories each open column has, and the range of its numbers, "
    "from noisy counts. A category too rare to stand out of the noise is merged into "
    "'(other)'.",
    "1-way marginals": "counts how often each value of each column occurs, with noise. These "
    "counts also decide which values are too rare to keep.",
    "InDif scores": "scores, with noise, how strongly each pair of columns depends on each "
    "other, to choose which pairs are worth measuring. The more pairs are scored, the "
    "thinner this step's budget is spread and the noisier each score. In the paper: InDif, "
    "the independent difference (section 4.1); m below is the number of pairs, rho_2 this "
    "step's rho.",
    "parent sets": "chooses, for each column, the columns it depends on most (PrivBayes): a "
    "random choice that favours the better ones, with no noise added to counts.",
    "selected marginals": "counts each chosen pair (or group) of columns together, with "
    "noise: these counts are what the synthetic table is fitted to. A pair with more "
    "combinations of values gets more of this step's budget. In the paper: the marginals "
    "chosen in section 4.2, each given a budget in proportion to its number of cells (its "
    "combinations of values) to the power 2/3, written cells^(2/3) below.",
}

#: how the engine converts (epsilon, delta) to rho, by its conversion setting
CONVERSION_WORDS = {
    "tight": "the tightest known bound (Canonne, Kamath and Steinke 2020), which gives the "
    "largest rho, hence the least noise",
    "proposition": "the paper's Proposition C.2",
}

#: the sliders' help: what each share buys, in plain words, then the paper's term
ONE_WAY_HELP = (
    "How much of the budget counts each column on its own. More: single-column counts are "
    "more accurate and fewer rare values are merged; less: more is left for the pairs. A "
    "share of what is left after the column estimates (see the caption below and the table's "
    "'share of budget' column for the share of your whole budget). In the paper: the 1-way "
    "marginals' budget of Algorithm 3 (the paper gives it 10%; 30% measured better here)."
)
INDIF_HELP = (
    "How much of the budget scores which pairs of columns depend on each other, to choose the "
    "pairs worth measuring. More: better choices, less: more precise counts of the chosen "
    "pairs. A share of what is left after the column estimates. In the paper: the budget of "
    "the InDif scores (section 4.1, Algorithm 3)."
)
DOMAIN_HELP = (
    "How much of your whole budget estimates what you did not declare about the columns: "
    "their categories and the range of their numbers (the Data page says which are open). "
    "More keeps more rare categories and whole columns; whatever the estimates leave unspent "
    "goes to the steps after them. Not used when every column is declared. In the paper: not "
    "part of it (the paper assumes the domains are public)."
)


def _stated(step: StepPlan, plan: BudgetPlan, config: PrivSynConfig) -> float:
    """The epsilon one step's rho amounts to at the user's delta; the domains step also
    spends the delta set aside for its category thresholds."""
    spent = plan.reserved_delta if step.step == "domains" else 0.0
    return Budget(step.rho, spent).stated(plan.delta, config.conversion)[0]


def _split_words(plan: BudgetPlan) -> str:
    """How the sliders' shares become each step's share of the whole budget."""
    first = [s for s in plan.steps if s.step in ("column kinds", "domains")]
    if not first:
        return (
            "Every column's kind and domain is declared (or read off the data), so nothing is "
            "estimated first: the first two sliders split your whole budget, the selected "
            "marginals get the rest, and the last slider is not used."
        )
    taken = sum(s.rho for s in first) / plan.rho
    return (
        f"Estimating the columns you left open takes {taken:.1%} of your budget first; the "
        f"first two sliders split the other {1 - taken:.1%}, and the selected marginals get "
        "the rest of it. The table below shows every step as a share of your whole budget."
    )


st.title("Privacy budget")
st.write(
    "Differential privacy limits what the synthetic table can give away about any one "
    "person in yours, however it is used. You set how much with **epsilon** (smaller: more "
    "privacy, more noise) and **delta** (a tiny chance that the promise fails). Each step "
    "of PrivSyn spends part of this budget; the table below shows how much and how much "
    "noise that adds. In the paper: (epsilon, delta)-differential privacy, converted once "
    "to rho of zero-concentrated DP (zCDP), which adds up over the steps."
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
        help="How much the synthetic table may give away about any one person: a positive "
        "number such as 1. Smaller means more privacy and more noise; 0.1 is very private, 10 "
        "protects little. In the paper: epsilon of (epsilon, delta)-differential privacy.",
    )
    st.text_input(
        "delta",
        key="delta_text",
        persist_state="session",
        help="The chance that the promise does not hold at all: keep it far below 1 divided "
        "by your table's rows, for example 1e-9 (it suits tables up to 30,000 rows). In the "
        "paper: delta of (epsilon, delta)-DP, set to 1/n^2 for n rows.",
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
        "1-way marginals (share of the rest)",
        0.02,
        0.5,
        key="one_way_share",
        persist_state="session",
        step=0.01,
        format="percent",
        help=ONE_WAY_HELP,
    )
    st.slider(
        "pair scores, InDif (share of the rest)",
        0.02,
        0.5,
        key="indif_share",
        persist_state="session",
        step=0.01,
        format="percent",
        help=INDIF_HELP,
    )
    st.slider(
        "column estimates (share of the whole budget)",
        0.01,
        0.2,
        key="domain_share",
        persist_state="session",
        step=0.01,
        format="percent",
        help=DOMAIN_HELP,
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
right.caption(_split_words(plan))
stated_epsilon, stated_delta = plan.budget.stated(delta, config.conversion)

st.subheader("How the budget is spent, and the noise it buys")
st.caption(
    f"At epsilon {epsilon:g} and delta {small_number(delta)}, {unit.words}, computed from your "
    "settings alone: no data is read."
    + (
        ""
        if unit.is_row
        else f" Each count can move by {unit.rows_per_person} when a person joins or leaves, "
        f"so every sigma below is {unit.rows_per_person} times the per-row one."
    )
)
total, as_epsilon, as_delta = st.columns(3)
total.metric(
    "your budget as rho",
    f"{plan.rho:.4g}",
    help="The same budget in the unit the engine adds up: each step below spends a part of "
    "it, and the parts add up to this number (epsilons do not add up that way). It amounts "
    f"to epsilon {stated_epsilon:.3g} at delta {small_number(stated_delta)}, beside it. In the "
    "paper: rho of zero-concentrated DP (zCDP, section 2.3 and appendix C), converted from "
    f"(epsilon, delta) by {CONVERSION_WORDS.get(config.conversion, config.conversion)}.",
)
as_epsilon.metric(
    "the same budget as epsilon",
    f"{stated_epsilon:.3g}",
    help="The rho beside it, stated back as epsilon at your delta: the guarantee the whole "
    "run gives (it is your epsilon again, up to rounding).",
)
as_delta.metric(
    "at delta",
    small_number(stated_delta),
    help="The chance that the promise does not hold at all, for the whole run."
    + (
        f" {small_number(plan.reserved_delta)} of it is set aside for the category estimates (a "
        "category released by its noisy count), the rest converts epsilon to rho."
        if plan.reserved_delta
        else ""
    ),
)
rows = pd.DataFrame(plan.as_rows())
rows["share"] *= 100  # in percent, rounded as the captions round it
rows["epsilon"] = [_stated(step, plan, config) for step in plan.steps]
rows = rows[["step", "share", "rho", "epsilon", "sigma", "queries"]]
st.dataframe(
    rows,
    key="plan",
    hide_index=True,
    width="stretch",
    column_config={
        "step": st.column_config.TextColumn(
            "step", help="What PrivSyn measures, in order: see 'What each step does' below."
        ),
        "share": st.column_config.NumberColumn(
            "share of budget",
            format="%.1f%%",
            help="This step's part of your whole budget: the shares add up to 100%.",
        ),
        "rho": st.column_config.NumberColumn(
            "rho",
            format="%.2g",
            help="This step's part of the budget in the engine's unit; the rhos add up to "
            "your budget as rho, and the epsilon beside each is what it amounts to. In the "
            "paper: rho of rho-zCDP.",
        ),
        "epsilon": st.column_config.NumberColumn(
            "as epsilon",
            format="%.3g",
            help=f"The epsilon this step alone amounts to at your delta {small_number(delta)}. "
            "The steps' epsilons do not add up to yours: their rhos do, and the whole costs "
            "less epsilon than its parts added up.",
        ),
        "sigma": st.column_config.NumberColumn(
            "noise (sigma)",
            format="%.1f",
            help="How far a noisy count typically lands from the true one (InDif: a noisy "
            "score from the true score), in rows: about two counts in three are within one "
            "sigma. In the paper: the standard deviation of the Gaussian noise.",
        ),
        "queries": st.column_config.TextColumn(
            "measures", help="How many counts (or scores) this step measures."
        ),
    },
)
st.caption(
    "Each step counts something in your table and adds random noise to the counts: a larger "
    "share of the budget means less noise. Open *What each step does* for the details."
)
with st.expander("What each step does, in plain words and in the paper's"):
    for step in plan.steps:
        st.markdown(
            f"**{step.step}** ({step.rho / plan.rho:.1%} of your budget: rho {step.rho:.2g}, "
            f"epsilon {_stated(step, plan, config):.3g} alone at delta {small_number(delta)}): "
            f"{STEP_WORDS.get(step.step, '')}  \n*In detail:* {step.note}."
        )
    st.caption(
        "sigma is the standard deviation of the Gaussian noise on each count (InDif: on each "
        f"score). Selection on {included} columns: {selection_account(config.selection, included)}."
        " A column the private domain step leaves out does not count."
    )
survival = plan.categories
if survival is not None:
    st.subheader("How common must a category be?")
    small, sure = st.columns(2)
    needs = (
        "A category (a value of a column whose categories you did not declare) is released "
        "only when its noisy count clears a threshold, so a rare one is merged into "
        "'(other)'. 'At most': this assumes every open column is categorical; when some hold "
        "numbers, the categories get more of the budget and need fewer rows. In the paper: "
        "not part of it (the paper assumes the categories are public)."
    )
    small.metric(
        "records a category needs, at most: kept half the time",
        f"{survival.count_50:,}",
        help=f"A category with this many rows survives in one run of two. {needs}",
    )
    sure.metric(
        "records a category needs, at most: kept 95% of the time",
        f"{survival.count_95:,}",
        help=f"A category with this many rows survives in 19 runs of 20. {needs}",
    )
    st.info(
        f"Up to {survival.columns} column(s) may have their categories estimated privately "
        "(their kind is left open, or they are declared categorical without a list of "
        "categories). Each value's count gets noise, and only values whose noisy count "
        "clears a threshold are kept: rarer values become '(other)'. The numbers above "
        f"assume all {survival.columns} are categorical; columns that turn out to hold "
        "numbers leave more of the budget to the others, so the real threshold is lower "
        "(your table's is below). "
        f"{1 - FIRST_CATEGORY_SHARE:.0%} of the categories' budget is kept for a second "
        "try, added to the first: on the columns in which no value survived, or on every "
        "column when each kept some. A column in which no value survives either try is "
        f"dropped. In detail: noise sigma {survival.sigma:.1f} and threshold "
        f"{survival.threshold:.1f} on each count of the first estimate."
    )


#: tables of at most this many cells are forecast as the page loads; larger ones on request
FORECAST_CELLS = 2_000_000


def _forecast(
    epsilon: float, delta: float, config: PrivSynConfig, schema: Schema
) -> TableForecast | None:
    """The engine's forecast for the session's table at these settings, kept in the session
    (the exact counts once per table, the forecast once per table, schema and settings)."""
    table = session.table
    if table is None:  # a table on disk is not forecast (the caller says so)
        return None
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
                "schema.json ...`. A larger epsilon or a larger share for the column estimates "
                "(above) also keeps more."
            )
            st.page_link(
                "views/data.py",
                label="Review a drafted schema on the Data page",
                icon=":material/edit_note:",
            )
