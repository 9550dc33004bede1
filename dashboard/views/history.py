"""History: every recorded run, the table's lifetime budget, two runs side by side, and the
stored release of any run.

Everything here comes from what the registry stored per run (public settings, ledger, bundle):
DP artifacts only. The private table is read for one thing, its fingerprint, to pick the runs
made on it. Nothing is cached: the registry file is the truth, and other sessions and the CLI
write to it too.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from privsyn_core.errors import InputError
from privsyn_core.privacy.ledger import epsilon_from_rho, rho_from_epsilon_delta
from privsyn_core.release.registry import WARN_SHARE, BudgetStatus, Registry, RunRecord

# Streamlit runs a page as a script, without a package: it is named after its folders
# ("dashboard" in a checkout, "privsyn_dashboard" installed) for the imports below.
__package__ = f"{Path(__file__).resolve().parent.parent.name}.views"

from .. import records, resample, state
from ..settings import parse_delta
from ..state import session
from . import history_runs

st.title("History")
st.caption(
    "Every run the dashboard or the `privsyn` command line finished is kept in the run "
    "registry with its ledger, settings and release bundle. Shown here: those stored DP "
    "artifacts only; the table itself is read just to recognise it (its fingerprint)."
)
if notice := session.history_notice:
    session.history_notice = None
    st.success(notice)

registry = records.registry_or_stop()
with st.spinner("Reading the table to recognise its runs (once per table)"):
    dataset = state.dataset_fingerprint()
show_all = st.toggle("Show runs on every dataset", key="history_all")
try:
    listed = registry.runs(None if show_all else dataset)
    status = registry.budget(dataset)
    held = registry.held(dataset)
except records.REGISTRY_ERRORS as exc:
    records.stop_with(records.unavailable(exc))
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
    st.subheader("Runs" + ("" if show_all else f" on {session.table_name}"))
    badges(listed)
    if not listed:
        st.info(
            "No runs recorded yet"
            + ("" if show_all else " on this table (same values, same columns)")
            + f". Registry: {registry.path}"
        )
        return
    st.dataframe(
        history_runs.runs_frame(listed),
        key="history_runs",
        hide_index=True,
        width="stretch",
        column_config={
            "delta": st.column_config.NumberColumn(format="%.1e"),
            "rho": st.column_config.NumberColumn(format="%.4g"),
        },
    )
    st.caption(f"Registry: {registry.path}. rho is what each run spent, in zCDP.")


def show_budget(status: BudgetStatus, mine: list[RunRecord]) -> None:
    st.subheader("Lifetime budget of this table")
    badges(mine)
    spent, lifetime = status.committed_rho, status.lifetime_rho
    left, middle, right = st.columns(3)
    left.metric(
        "rho spent or held, all runs" if status.reserved_rho else "rho spent, all runs",
        f"{spent:.4g}",
        help=f"over {len(mine)} recorded runs"
        + (f", and rho {status.reserved_rho:.4g} held (below)" if status.reserved_rho else ""),
    )
    middle.metric("lifetime budget (rho)", "none" if lifetime is None else f"{lifetime:.4g}")
    right.metric(
        "rho left", "unlimited" if lifetime is None else f"{max(0.0, lifetime - spent):.4g}"
    )
    if lifetime is None:
        st.caption("No lifetime budget is set: runs on this table are never refused.")
    else:
        share = spent / lifetime if lifetime > 0 else 1.0
        st.progress(
            min(1.0, share),
            text=f"{share:.0%} of the lifetime budget "
            + ("spent or held" if status.reserved_rho else "spent"),
        )
    if held:
        st.warning(
            f"rho {status.reserved_rho:.4g} of it is held by runs that reserved their cost "
            "before measuring and have not recorded what they spent: runs in progress, or "
            "runs whose process stopped first (a crash, a kill). A stopped run's reservation "
            "stays counted in full, since nobody can tell what it measured or released."
        )
        st.dataframe(
            history_runs.held_frame(held),
            key="history_held",
            hide_index=True,
            width="stretch",
            column_config={"rho held": st.column_config.NumberColumn(format="%.4g")},
        )
    thresholds = sum(r.ledger.get("spent_delta") or 0.0 for r in mine)
    if delta is not None and spent > 0 and thresholds < delta:
        # the thresholded releases' delta adds up outside zCDP: convert rho at the rest
        st.caption(
            f"zCDP composes by adding rho: together the runs on this table are "
            f"(epsilon {epsilon_from_rho(spent, delta - thresholds):.4g}, delta {delta:g})-DP "
            "at the Privacy page's delta"
            + (f" (of which {thresholds:.2g} went to thresholded releases)" if thresholds else "")
            + "."
        )


def lifetime_from_input() -> float | None:
    """The lifetime budget as rho, from either unit the user chose (None: no valid input)."""
    units = ["epsilon at the current delta", "rho (zCDP)"]
    unit = st.radio("Enter it as", units, key="lifetime_unit", horizontal=True)
    if unit == units[1]:
        return st.number_input(
            "lifetime rho", min_value=1e-6, value=1.0, format="%.6f", key="lifetime_rho"
        )
    if delta is None:
        st.error("The delta on the Privacy page is not valid: fix it, or enter rho instead.")
        return None
    epsilon = st.number_input(
        "lifetime epsilon", min_value=0.01, value=5.0, step=0.5, key="lifetime_epsilon"
    )
    rho = rho_from_epsilon_delta(epsilon, delta)
    st.caption(f"epsilon {epsilon:g} at delta {delta:g} is rho {rho:.4g}")
    return rho


def budget_controls(status: BudgetStatus) -> None:
    with st.expander("Set or clear the lifetime budget", expanded=False):
        st.write(
            "A lifetime budget caps the rho all runs on this table may spend together. A run "
            "that would pass it is refused before it measures anything; past "
            f"{WARN_SHARE:.0%} of it each run warns. Enter it as epsilon (converted once to "
            "rho at the delta on the Privacy page: the whole history is then (epsilon, "
            "delta)-DP) or as rho directly. Raising it later is allowed, but deliberate."
        )
        rho = lifetime_from_input()
        set_clicked = st.button("Set the lifetime budget", key="set_lifetime", disabled=rho is None)
        clear_clicked = st.button(
            "Clear the lifetime budget", key="clear_lifetime", disabled=status.lifetime_rho is None
        )
    if not (set_clicked or clear_clicked):
        return
    value = rho if set_clicked else None
    try:
        Registry().set_lifetime_budget(dataset, session.table_name, value)
    except records.REGISTRY_ERRORS as exc:
        records.stop_with(records.unavailable(exc))
    session.history_notice = (
        "Lifetime budget cleared." if value is None else f"Lifetime budget set to rho {value:.4g}."
    ) + (
        " It is already spent: further runs on this table will be refused."
        if value is not None and status.committed_rho >= value
        else ""
    )
    st.rerun()


def pick(title: str, listed: list[RunRecord], index: int, key: str) -> int:
    """A run id chosen from ``listed``, newest first."""
    labels = {r.id: history_runs.label(r) for r in reversed(listed)}
    return st.selectbox(title, list(labels), index=index, key=key, format_func=labels.get)


def compare(listed: list[RunRecord]) -> None:
    st.subheader("Compare two runs")
    if len(listed) < 2:
        st.info("Two recorded runs are needed to compare.")
        return
    left, right = st.columns(2)
    with left:
        a = pick("First run", listed, index=1, key="compare_a")
    with right:
        b = pick("Second run", listed, index=0, key="compare_b")
    if a == b:
        st.info("Pick two different runs.")
        return
    first, second = (next(r for r in listed if r.id == i) for i in (a, b))
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
    run_id = pick("Run to download or sample again", listed, index=0, key="bundle_run")
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
compare(listed)
redownload(listed)
