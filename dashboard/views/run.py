"""Run: one button; stage progress, a live GUM convergence chart, and Cancel.

The synthesis runs inside the script; the engine's progress callback updates the page.
Clicking Cancel (or any widget) interrupts the script at its next Streamlit call, which
happens inside the callback; the next run of this page sees the stale "running" flag and
reports the cancellation, keeping the partial convergence history.

Every run goes through the run registry: it must fit the table's lifetime budget before it
starts, and a finished run is recorded with its release bundle. A result the registry does not
record is discarded, so nothing off the record is ever offered.
"""

from __future__ import annotations

import time

import numpy as np
import streamlit as st

from dashboard import records, state
from dashboard.charts import convergence_chart
from dashboard.settings import current_config, parse_delta, parse_seed, public_settings
from privsyn_core import GumProgress, StageFinished, StageStarted, SynthesisCancelled, synthesize
from privsyn_core.errors import FailedAfterSpending, InputError
from privsyn_core.privacy import BudgetExceededError, PrivacyLedger
from privsyn_core.progress import STAGE_TITLES, Stage

st.title("Run PrivSyn")
ss = st.session_state


def _recorded_interruption(interrupted: dict | None) -> int | None:
    """The run id under which the interrupted run's spend was recorded. The stopped script
    records it at its next Streamlit call (within one GUM iteration) while this rerun has
    already started, so wait for it a little."""
    if interrupted is None:
        return None
    deadline = time.monotonic() + 5.0
    while interrupted["pending"] and time.monotonic() < deadline:
        time.sleep(0.02)
    return interrupted["run"]


if ss["run_state"] == "running":  # the previous run was interrupted by a click
    ss["run_state"] = "cancelled"

st.number_input("GUM iterations (at most)", 1, 500, key="iterations", step=10)
st.checkbox(
    "stop when the error stops falling (1% over 10 iterations)",
    key="stop_at_plateau",
    help="GUM's error against the noisy targets flattens out; stopping there saves time",
)
st.text_input(
    "seed (debug mode, not for release; empty: release mode with secure randomness)",
    key="seed_text",
)
try:
    delta = parse_delta(ss["delta_text"])
    seed = parse_seed(ss["seed_text"])
    config = current_config()
except InputError as exc:
    st.error(f"{exc} (fix it on the Privacy page)")
    st.stop()

st.write(
    f"Table **{ss['table_name']}**, epsilon **{ss['epsilon']:g}**, delta **{delta:g}**"
    + (" — domains read off the raw data (**not end-to-end DP**)" if ss["raw_domains"] else "")
)
start = st.button("Run synthesis", type="primary", key="run")
st.button("Cancel", key="cancel", help="stops the run; the budget already spent stays spent")

if ss["run_state"] == "cancelled":
    recorded = _recorded_interruption(ss.get("interrupted"))
    st.warning(
        "The last run was cancelled. Measurements made before the stop have used privacy "
        "budget; no table was released"
        + (
            f". Its spend is recorded as run {recorded} (History page)."
            if recorded is not None
            else "."
        )
    )

progress = st.progress(0.0, text="idle")
chart = st.empty()
stages = list(Stage)


def draw(history: list, key: str) -> None:
    chart.plotly_chart(convergence_chart(history, config.gum.iterations), key=key)


if start:
    refused = records.check(state.dataset_fingerprint(), float(ss["epsilon"]), delta)
    if refused:
        ss["run_state"] = "refused"
        records.stop_with(refused)
    ss["run_state"] = "running"
    ss["partial_history"] = []
    ss["finished"] = None
    # what the interruption handler below needs, taken while Streamlit calls still work
    dataset, name, settings = (
        state.dataset_fingerprint(),
        ss["table_name"],
        public_settings(delta, seed),
    )
    spent: list[PrivacyLedger | None] = [None]
    # "pending" until this script either finishes or records its interruption
    interrupted = ss["interrupted"] = {"pending": True, "run": None}
    last_draw = [0.0]
    started = time.perf_counter()

    def on_progress(event: object) -> bool:
        if isinstance(event, StageStarted):
            done = stages.index(event.stage) / len(stages)
            progress.progress(done, text=event.title)
        elif isinstance(event, StageFinished):
            spent[0] = event.spent
            done = (stages.index(event.stage) + 1) / len(stages)
            progress.progress(done, text=f"{STAGE_TITLES[event.stage]}: {event.summary}")
        elif isinstance(event, GumProgress):
            ss["partial_history"].append(event)
            share = (stages.index(Stage.GUM) + event.iteration / event.iterations) / len(stages)
            progress.progress(
                share,
                text=f"GUM iteration {event.iteration + 1} of at most {event.iterations}: "
                f"mean L1 {event.mean_error:.4f}",
            )
            now = time.perf_counter()
            if now - last_draw[0] > 0.2:
                last_draw[0] = now
                draw(ss["partial_history"], key=f"live-{event.iteration}")
        return True

    try:
        result = synthesize(
            state.table(),
            float(ss["epsilon"]),
            delta,
            schema=state.schema(),
            raw_domains=bool(ss["raw_domains"]),
            config=config,
            rng=None if seed is None else np.random.default_rng(seed),
            on_progress=on_progress,
        )
    except FailedAfterSpending as exc:
        ss["run_state"] = "failed"
        records.stop_with(records.record_failure(dataset, name, exc, settings))
    except (InputError, BudgetExceededError) as exc:
        ss["run_state"] = "failed"
        st.error(f"The run could not start or finish: {exc}")
        st.stop()
    except SynthesisCancelled as exc:
        ss["run_state"] = "cancelled"
        st.warning(str(exc))
        st.stop()
    except BaseException:
        # Cancel (any click) stops the script at its next Streamlit call, inside on_progress,
        # with Streamlit's own exception; every later st.* call, session_state included,
        # raises it again. So record what was spent (the page has already shown results of
        # those measurements) from values taken beforehand, then let the stop go on.
        interrupted["run"] = records.record_interrupted(dataset, name, spent[0], settings)
        interrupted["pending"] = False
        raise
    interrupted["pending"] = False
    seconds = time.perf_counter() - started
    try:
        recorded = records.record(dataset, name, result, config, settings)
    except (BudgetExceededError, *records.REGISTRY_ERRORS) as exc:
        ss["run_state"] = "failed"
        records.stop_with(records.not_recorded(exc))
    ss["finished"] = state.Finished(
        result,
        state.fingerprint(state.table(), state.schema(), {"epsilon": ss["epsilon"]}),
        ss["table_name"],
        float(ss["epsilon"]),
        delta,
        seconds,
        run_id=recorded.run_id,
        bundle=recorded.bundle,
        budget_warnings=recorded.budget_warnings,
    )
    ss["run_state"] = "done"
    progress.progress(1.0, text=f"done in {seconds:.1f} s")

finished = ss.get("finished")
if finished is not None:
    result = finished.result
    draw(list(result.history), key="final")
    state.dp_badge()
    st.success(
        f"Synthesised {result.n_records:,} rows from {finished.table_name} at epsilon "
        f"{finished.epsilon:g} in {finished.seconds:.1f} s: {len(result.marginals)} marginals, "
        f"{len(result.history)} GUM iterations. Recorded as run {finished.run_id} in the "
        "run registry (History page)."
    )
    for note in finished.budget_warnings:
        st.warning(f"Lifetime budget: {note}. See the History page before running again.")
    if result.ledger.randomness != "release":
        st.warning(
            "Debug mode (a seed was set): the noise is reproducible and this result is NOT for "
            "release. Clear the seed for a release run."
        )
    if not result.end_to_end_dp:
        st.warning(
            "NOT end-to-end DP: the domains of "
            + ", ".join(result.ledger.not_private)
            + " were read off the raw data."
        )
    for name, why in result.excluded:
        st.info(f"Column {name!r} was left out: {why}")
    st.page_link("views/marginals.py", label="See the marginals")
    st.page_link("views/results.py", label="Download the synthetic table")
elif ss["partial_history"]:
    draw(ss["partial_history"], key="partial")
