"""History: every recorded run, the table's lifetime budget, two runs side by side, and the
stored release of any run.

Everything here comes from what the registry stored per run (public settings, ledger, bundle):
DP artifacts only, but for what names each table to its owner (its fingerprint, its size and
the name they gave it: owner-only, never in a bundle). The private table is read for its
fingerprint, to pick the runs made on it, and its size, to name it. Runs are shown and
compared per table: two files of one name are two tables. Nothing is cached: the registry
file is the truth, and other sessions and the CLI write to it too.
"""

from __future__ import annotations

import math
from pathlib import Path

import streamlit as st

from privsyn_core.config import PrivSynConfig
from privsyn_core.errors import InputError
from privsyn_core.privacy.budget import Budget
from privsyn_core.privacy.conversion import MAX_DELTA
from privsyn_core.release.registry import (
    WARN_SHARE,
    BudgetStatus,
    Registry,
    RunRecord,
    TableRecord,
)

# Streamlit runs a page as a script, without a package: it is named after its folders
# ("dashboard" in a checkout, "privsyn_dashboard" installed) for the imports below.
__package__ = f"{Path(__file__).resolve().parent.parent.name}.views"

from .. import records, resample, state
from ..review import literal
from ..settings import parse_delta
from ..state import session
from . import history_runs

st.title("History")
st.caption(
    "Every run the dashboard or the `privsyn` command line finished is kept in the run "
    "registry with its ledger, settings and release bundle. Shown here: those stored DP "
    "artifacts, and what tells your tables apart (their names, sizes and fingerprints: "
    "owner-only, kept on this machine)."
)
if notice := session.history_notice:
    session.history_notice = None
    st.success(notice)

registry = records.registry_or_stop()
with st.spinner("Reading the table to recognise its runs (once per table)"):
    dataset = state.dataset_fingerprint()
if session.disk is not None:  # a file on disk is never counted outside a run
    records.describe_table(dataset, session.table_name, len(session.disk.columns), None)
elif session.table is not None:
    rows, columns = session.table.shape
    records.describe_table(dataset, session.table_name, columns, rows)
show_all = st.toggle("Show runs on every table", key="history_all")
try:
    listed = registry.runs(None if show_all else dataset)
    tables = registry.tables()
    status = registry.budget(dataset)
    held_here = registry.held(dataset)
except records.REGISTRY_ERRORS as exc:
    records.stop_with(records.unavailable(exc))
titles = history_runs.titles(listed, tables)
here = next((t for t in tables if t.fingerprint == dataset), None)
titles[dataset] = history_runs.table_title(here or TableRecord(dataset, session.table_name, 0))
groups = history_runs.by_table(listed, dataset)
try:
    delta: float | None = parse_delta(session.delta_text)
except InputError:
    delta = None


def badges(shown: list[RunRecord]) -> None:
    """The DP badge of what a section shows: each run's own privacy unit, from its record (not
    this session's settings), one badge per unit among them."""
    for unit in history_runs.units(shown):
        state.dp_badge(unit)


def show_runs(listed: list[RunRecord]) -> None:
    st.subheader("Runs on every table" if show_all else "Runs on this table")
    badges(listed)
    if not show_all:
        st.markdown(f"**{literal(titles[dataset])}**")
    if not listed:
        st.info(
            "No runs recorded yet"
            + ("" if show_all else " on this table (same values, same columns)")
            + f". Registry: {registry.path}"
        )
        return
    for fingerprint, runs in groups.items():
        if show_all:
            in_use = " (the table in use)" if fingerprint == dataset else ""
            st.markdown(f"**{literal(titles[fingerprint])}**{in_use}")
        st.dataframe(
            history_runs.runs_frame(runs),
            key=f"history_runs_{fingerprint[:16]}",
            hide_index=True,
            width="stretch",
            column_config={
                "delta": st.column_config.NumberColumn(format="%.1e"),
                "rho": st.column_config.NumberColumn(format="%.4g"),
                "delta spent": st.column_config.NumberColumn(format="%.1e"),
            },
        )
    st.caption(
        "The code after # in a table's title (#"
        f"{dataset[: history_runs.SHORT_PRINT]} for the table in use) is the start of its "
        "fingerprint, a hash of its values: two tables with one file name have different "
        "ones. It and the numbers of rows (true counts) are owner-only: they stay in the "
        f"registry on this machine and never go into a bundle. Registry: {registry.path}. "
        "rho is what each run spent, in zCDP."
    )


def show_budget(status: BudgetStatus, mine: list[RunRecord]) -> None:
    st.subheader("Lifetime budget of this table")
    badges(mine)
    committed, lifetime = status.committed, status.lifetime
    held = status.held.rho > 0 or status.held.delta > 0
    left, middle, right = st.columns(3)
    left.metric(
        "rho spent or held, all runs" if held else "rho spent, all runs",
        f"{committed.rho:.4g}",
        help=f"over {len(mine)} recorded runs"
        + (f", and {status.held.words} held (below)" if held else "")
        + ". zCDP adds rho up over runs.",
    )
    middle.metric(
        "delta spent, all runs",
        f"{committed.delta:.2g}",
        help="What the thresholded releases (categories and values found privately) spent: "
        "approximate DP, so these deltas add up over runs, on top of the delta at which rho "
        "is stated as epsilon.",
    )
    if lifetime is None:
        right.metric("lifetime budget", "none", help="Set one below to cap what runs may spend.")
        st.caption("No lifetime budget is set: runs on this table are never refused.")
    else:
        left_over = committed.left_of(lifetime)
        right.metric(
            "rho left",
            f"{left_over.rho:.4g}",
            help=f"The lifetime budget is {lifetime.words}; both parts are checked before a "
            "run measures anything.",
        )
        rho_share = part_share(committed.rho, lifetime.rho)
        delta_share = part_share(committed.delta, lifetime.delta)
        share = max(rho_share, delta_share)
        fuller = "rho" if rho_share >= delta_share else "delta"
        st.progress(
            min(1.0, share),
            text=f"{share:.0%} of the lifetime budget "
            + ("spent or held" if held else "spent")
            + f" ({fuller}, the part nearer its end; rho {rho_share:.0%}"
            + (f", delta {delta_share:.0%})" if math.isfinite(lifetime.delta) else ")"),
        )
        st.caption(
            f"Lifetime budget: {lifetime.words}."
            + (
                " It was set before deltas were counted: it caps rho only. Set it again to "
                "cap delta too."
                if math.isinf(lifetime.delta)
                else f" Delta left for thresholded releases: {left_over.delta:.2g}."
            )
        )
    if held:
        st.warning(
            f"{status.held.words} of it is held by runs that reserved their cost "
            "before measuring and have not recorded what they spent: runs in progress, or "
            "runs whose process stopped first (a crash, a kill). A stopped run's reservation "
            "stays counted in full, since nobody can tell what it measured or released."
        )
        st.dataframe(
            history_runs.held_frame(held_here),
            key="history_held",
            hide_index=True,
            width="stretch",
            column_config={
                "rho held": st.column_config.NumberColumn(format="%.4g"),
                "delta held": st.column_config.NumberColumn(format="%.1e"),
            },
        )
    if delta is not None and committed.rho > 0:
        epsilon, total_delta = committed.stated(delta)
        conversion = total_delta - committed.delta
        st.caption(
            f"Together the runs on this table are (epsilon {epsilon:.4g}, delta "
            f"{total_delta:.2g})-DP: zCDP adds rho up (rho {committed.rho:.4g}), and the "
            f"thresholded releases' deltas add up too (delta {committed.delta:.2g}), on top of "
            f"the delta at which rho is stated as epsilon (delta {conversion:.2g}"
            + (", what they leave of the Privacy page's)." if total_delta == delta else ").")
        )


def part_share(spent: float, cap: float) -> float:
    """The share of a lifetime part spent: nothing of an uncapped part, all of a zero one
    once anything is spent."""
    if math.isinf(cap) or spent == 0:
        return 0.0
    return spent / cap if cap > 0 else 1.0


def lifetime_from_input() -> Budget | None:
    """The lifetime budget, from either form the user chose (None: no valid input)."""
    forms = ["epsilon and delta", "rho and delta (zCDP)"]
    form = st.radio("Enter it as", forms, key="lifetime_unit", horizontal=True)
    share = PrivSynConfig().threshold_delta_share
    if form == forms[1]:
        rho = st.number_input(
            "lifetime rho", min_value=1e-6, value=1.0, format="%.6f", key="lifetime_rho"
        )
        thresholds = delta_input(
            "lifetime delta for thresholded releases",
            "lifetime_threshold_delta",
            share,
            "The most the thresholded releases of all runs may spend together.",
        )
        return None if thresholds is None else Budget(rho, thresholds)
    epsilon = st.number_input(
        "lifetime epsilon", min_value=0.01, value=5.0, step=0.5, key="lifetime_epsilon"
    )
    whole = delta_input(
        "lifetime delta",
        "lifetime_delta",
        1.0,
        "The delta of the whole history's guarantee. Each run's thresholded releases spend "
        f"up to {share:.0%} of its own delta, so it should be several runs' deltas.",
    )
    if whole is None:
        return None
    lifetime = Budget.for_epsilon_delta(epsilon, whole, share)
    st.caption(
        f"The whole history stays (epsilon {epsilon:g}, delta {whole:g})-DP: rho up to "
        f"{lifetime.rho:.4g} (stated at delta {whole - lifetime.delta:.2g}) and delta up to "
        f"{lifetime.delta:.2g} for thresholded releases."
    )
    return lifetime


def delta_input(label: str, key: str, share: float, help_text: str) -> float | None:
    """A delta typed as text (``1e-8``), by default ten runs' worth at the Privacy page's
    delta (times ``share``); None, with the reason shown, when it is not a valid delta."""
    suggested = min(MAX_DELTA, 10 * share * (delta or 1e-9))
    text = st.text_input(label, value=f"{suggested:.2g}", key=key, help=help_text)
    try:
        return parse_delta(text)
    except InputError as exc:
        st.error(str(exc))
        return None


def budget_controls(status: BudgetStatus) -> None:
    with st.expander("Set or clear the lifetime budget", expanded=False):
        st.write(
            "A lifetime budget caps what all runs on this table may spend together: rho, "
            "and the delta their thresholded releases spend. A run that would pass either "
            "is refused before it measures anything; past "
            f"{WARN_SHARE:.0%} of either, each run warns. Enter it as the (epsilon, delta) "
            "the whole history must keep, or as rho and delta directly. Raising it later is "
            "allowed, but deliberate."
        )
        lifetime = lifetime_from_input()
        set_clicked = st.button(
            "Set the lifetime budget", key="set_lifetime", disabled=lifetime is None
        )
        clear_clicked = st.button(
            "Clear the lifetime budget", key="clear_lifetime", disabled=status.lifetime is None
        )
    if not (set_clicked or clear_clicked):
        return
    value = lifetime if set_clicked else None
    try:
        Registry().set_lifetime_budget(dataset, session.table_name, value)
    except records.REGISTRY_ERRORS as exc:
        records.stop_with(records.unavailable(exc))
    session.history_notice = (
        "Lifetime budget cleared." if value is None else f"Lifetime budget set to {value.words}."
    ) + (
        " It is already spent: further runs on this table will be refused."
        if value is not None and not status.committed.fits(value)
        else ""
    )
    st.rerun()


def pick(title: str, listed: list[RunRecord], index: int, key: str, named: bool = False) -> int:
    """A run id chosen from ``listed``, newest first; ``named``: each with its table's title
    (runs of several tables in one list)."""
    labels = {
        r.id: history_runs.label(r, titles[r.fingerprint] if named else None)
        for r in reversed(listed)
    }
    chosen = st.selectbox(title, list(labels), index=index, key=key, format_func=labels.__getitem__)
    assert chosen is not None, "a selectbox with an index always holds a choice"
    return chosen


def compare() -> None:
    """Two runs of one table side by side: the table first (when runs of several are listed),
    then its runs, by default its two newest."""
    st.subheader("Compare two runs")
    choices = history_runs.comparable(groups)
    if not choices:
        st.info("Two recorded runs of one table are needed to compare.")
        return
    chosen = choices[0]  # the table in use when it has two runs, else the latest one run twice
    if len(groups) > 1:
        chosen = st.selectbox(
            "Table", choices, key="compare_table", format_func=titles.__getitem__,
            help="Only runs of one table are compared: runs of two tables differ by their "
            "data first. Listed: the tables with two runs or more.",
        )  # fmt: skip
    runs = groups[chosen]
    left, right = st.columns(2)
    # the run pickers are the table's own: another table starts again from its two newest
    with left:
        a = pick("First run", runs, index=1, key=f"compare_a_{chosen[:16]}")
    with right:
        b = pick("Second run", runs, index=0, key=f"compare_b_{chosen[:16]}")
    if a == b:
        st.info("Pick two different runs.")
        return
    first, second = (next(r for r in runs if r.id == i) for i in (a, b))
    badges([first, second])
    st.markdown("**Settings**")
    st.dataframe(
        history_runs.settings_frame(first, second), key="compare_settings", hide_index=True
    )
    st.markdown("**rho per step** (from each run's stored ledger)")
    st.dataframe(history_runs.steps_frame(first, second), key="compare_steps", hide_index=True)
    st.markdown("**Marginals selected**")
    frame = history_runs.marginals_frame(first, second)
    both = int((frame[f"run {a}"] & frame[f"run {b}"]).sum())
    st.caption(f"{both} marginals in both runs, {len(frame) - both} in only one.")
    st.dataframe(frame, key="compare_marginals", hide_index=True, width="stretch")


def redownload(listed: list[RunRecord]) -> None:
    st.subheader("Download a past release, or sample it again")
    if not listed:
        st.info("No recorded runs to download.")
        return
    run_id = pick(
        "Run to download or sample again", listed, index=0, key="bundle_run", named=len(groups) > 1
    )
    run = next(r for r in listed if r.id == run_id)
    badges([run])
    try:
        bundle = registry.bundle(run.id) if run.has_bundle else None
    except records.REGISTRY_ERRORS as exc:
        records.stop_with(records.unavailable(exc))
    why_none = records.no_bundle_reason(
        run.id, run.ledger.get("not_private", []), history_runs.outcome(run)
    )
    records.offer_bundle(run.id, bundle, run.randomness, why_none, key="history_bundle")
    model, why_not = resample.model_from_bundle(bundle)
    resample.sample_again(model, run.id, key="history_resample", why_not=why_not or why_none)


show_runs(listed)
mine = [r for r in listed if r.fingerprint == dataset] if show_all else listed
show_budget(status, mine)
budget_controls(status)
compare()
redownload(listed)
