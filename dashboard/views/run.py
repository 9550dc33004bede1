"""Run: one button; stage progress, a live GUM convergence chart, and Cancel.

The synthesis runs in a background thread (``dashboard.worker``): this script starts it and
returns, so the page and every other page keep working during a long run. When the server
already runs its cap of syntheses, the run waits in line for a slot and the page says how many
runs are ahead of it. A fragment polls the run's progress every second and redraws the stage
and the GUM iteration, another the convergence chart every two seconds, and a run waiting in
line is looked at every two seconds (ten sessions polling twice a second cost a shared server
more CPU than their runs); when the run ends the app reruns, and
``state.collect`` moves the outcome into the session. Cancel sets a flag the engine's progress
callback reads: the run stops at the next stage boundary or GUM iteration, and what it had
spent is recorded (a run still waiting for a slot leaves the line and spends nothing).

Every run goes through the run registry: it must fit the table's lifetime budget before it
starts, and a finished run is recorded with its release bundle. A result the registry does not
record is discarded, so nothing off the record is ever offered.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import streamlit as st

from privsyn_core import synthesize
from privsyn_core.config import PrivSynConfig
from privsyn_core.errors import InputError
from privsyn_core.generation.gum_settings import GumSettings
from privsyn_core.generation.kept import KeptTable
from privsyn_core.release.registry import fingerprint as registry_fingerprint

# Streamlit runs a page as a script, without a package: it is named after its folders
# ("dashboard" in a checkout, "privsyn_dashboard" installed) for the imports below.
__package__ = f"{Path(__file__).resolve().parent.parent.name}.views"

from .. import sources, state, worker
from ..charts import convergence_chart, iterations_done, stopped_early
from ..settings import current_config, parse_delta, parse_epsilon, parse_seed, public_settings
from ..state import session

#: seconds between two looks at a run's progress while it runs
POLL = 1.0
#: seconds between two redraws of the live convergence chart: a plotly figure costs the server
#: tens of milliseconds to build and send each time, the progress bars next to nothing
CHART_POLL = 2.0
#: seconds between two looks at a run waiting for a slot: its place changes only when a run
#: ends, and ten sessions waiting on a shared server each redrawing twice a second cost the
#: server more CPU than the runs themselves
WAIT_POLL = 2.0

st.title("Run PrivSyn")
job = session.job

st.number_input(
    "GUM iterations (at most)", 1, 500, key="iterations", persist_state="session", step=10
)
st.checkbox(
    "stop early (at the noise level, or when the error stops falling)",
    key="stop_at_plateau",
    persist_state="session",
    help="GUM stops once its error against the noisy marginals is within their own noise "
    "(fitting further would fit the noise), or when 5 iterations in a row do not improve "
    "its best table. Untick to run every iteration asked for, e.g. to watch it converge.",
)
st.text_input(
    "seed (debug mode, not for release; empty: release mode with secure randomness)",
    key="seed_text",
    persist_state="session",
)
try:
    parse_epsilon(session.epsilon)
    delta = parse_delta(session.delta_text)
    seed = parse_seed(session.seed_text)
    config = current_config()
except InputError as exc:
    st.error(f"{exc} (fix it on the Privacy page)")
    st.stop()

on_disk = session.disk
st.write(
    f"Table **{session.table_name}**"
    + (" (a file on disk, counted by DuckDB)" if on_disk is not None else "")
    + f", epsilon **{session.epsilon:g}**, delta **{delta:g}**"
    + (
        " — domains read off the raw data (**not end-to-end DP**)"
        if session.raw_domains and not (on_disk is not None and session.disk_precoded)
        else ""
    )
)


#: the dashboard draws the whole table as one block, so that GUM's convergence can be watched
#: iteration by iteration (blocks run GUM in worker processes and report only when each ends);
#: the command line splits large tables into blocks on every core
ONE_BLOCK = 2**62


def request(config: PrivSynConfig) -> worker.RunRequest:
    """The engine call for the session's table with everything bound now, in the script:
    the worker thread must not read the session."""
    epsilon = float(session.epsilon)
    rng = None if seed is None else np.random.default_rng(seed)
    settings = public_settings(delta, seed)
    unit = state.unit()  # the person column never reaches the schema of the run
    persons = {"person": unit.person, "max_rows_per_person": unit.rows_per_person}
    if unit.person is None:
        persons = {}
    if on_disk is None:
        table, schema, raw = session.table, state.run_schema(), bool(session.raw_domains)
        run = partial(
            synthesize, table, epsilon, delta, schema=schema, raw_domains=raw, config=config,
            rng=rng, block_rows=ONE_BLOCK, **persons,
        )  # fmt: skip
        known = session.dataset_fingerprint
        dataset = (lambda: known) if known else partial(registry_fingerprint, table)
    else:
        # counted where the file lies, on DuckDB: a pre-coded file with its numbers of codes,
        # a raw one encoded in SQL with the session's schema
        if session.disk_precoded:
            sizes = {name: int(codes) for name, codes in session.disk_codes.items()}
            declared: dict[str, Any] = {"domain": sizes}
            settings = {**settings, "raw_domains": False, "domain": sizes}
        else:
            declared = {"schema": state.run_schema(), "raw_domains": bool(session.raw_domains)}
        declared = {**declared, **persons}
        settings = {**settings, "engine": "duckdb"}
        # opened once in the worker thread, checked as opened, and both fingerprinted and
        # counted through that opening (dashboard.sources.DiskRun): never the name again, so
        # a file swapped after the Data page's check is refused, not read; hashed on every
        # run, since the file may have changed since its last fingerprint
        reading = sources.DiskRun(on_disk.path, sources.allowed_root())
        count = partial(
            synthesize, epsilon=epsilon, delta=delta, engine="duckdb", config=config, rng=rng,
            block_rows=ONE_BLOCK, **declared,
        )  # fmt: skip
        run = partial(reading.synthesize, count)
        dataset = reading.fingerprint
    return worker.RunRequest(
        synthesize=run,
        dataset=dataset,
        name=session.table_name,
        epsilon=epsilon,
        delta=delta,
        config=config,
        settings=settings,
    )


def draw(
    history: list | tuple,
    key: str,
    iterations: int | None = None,
    live: bool = False,
    kept: KeptTable | None = None,
) -> None:
    chart = convergence_chart(history, iterations or config.gum.iterations, live=live, kept=kept)
    st.plotly_chart(chart, key=key)


#: the step size's letter (written as an escape: ruff flags a bare Greek alpha)
ALPHA = "\u03b1"


def how_to_read(gum: GumSettings, live: bool = False) -> str:
    """The chart's lines in plain words, and the step size alpha of paper section 5.3."""
    if gum.decay_schedule == "step":
        schedule = (
            f"it starts at {gum.alpha0:g} and is multiplied by {gum.decay:g} every "
            f"{gum.decay_every} iterations"
        )
    elif gum.decay_schedule == "none":
        schedule = f"it stays at {gum.alpha0:g}"
    else:
        schedule = f"it starts at {gum.alpha0:g} and shrinks ({gum.decay_schedule} decay)"
    star = (
        "The star marks the closest table so far: GUM returns its closest table, not "
        "necessarily its last."
        if live
        else "The star marks the table that came out."
    )
    return (
        "**How to read this chart.** GUM changes a starting table step by step until its "
        "counts match the noisy marginals (the measured counts of the column pairs and "
        "triples it selected). Error is the L1 distance between two tables' shares: 0 means "
        "they match exactly, 2 that they have nothing in common. Each faint line is one "
        "selected marginal, seen as GUM reaches it (the axis stops a little above the black "
        "line; double-click the chart to see every faint line in full); the black line is "
        "their average. The blue "
        "line is the whole table after each iteration, averaged over every pair of columns: the "
        "selected marginals, and the pairs no marginal covers (judged against their noisy "
        "dependency scores). Those pairs are most pairs of a wide table and most are nearly "
        "independent, so the blue line sits below the black one. GUM keeps the table where "
        f"the blue line is lowest, which can be the starting table itself. {star} All of it is "
        "computed from the released noisy measurements, so "
        f"choosing costs no privacy budget. **Step size {ALPHA}** (bottom strip): how far one "
        f"update may move the table, at most {ALPHA} times the records already in a cell "
        f"(PrivSyn paper, section 5.3); {schedule}, so that GUM settles."
    )


def not_ready() -> str | None:
    """Why the session's table cannot run yet (a disk file with undeclared codes)."""
    if on_disk is None or not session.disk_precoded:
        return None
    missing = [name for name, codes in session.disk_codes.items() if not codes]
    if missing:
        return (
            f"Declare the number of codes of every column of {on_disk.name} on the Data page "
            f"first ({len(missing)} still open, e.g. {missing[0]!r})."
        )
    return None


@st.fragment(run_every=POLL)
def live() -> None:
    """The run in progress: redrawn from a snapshot of its progress every POLL seconds."""
    current = session.job
    if current is None:
        return
    snap = current.progress.snapshot()
    if snap.outcome is not None:
        st.rerun()  # the whole app: state.collect() takes the outcome into the session
    if snap.cancelling:
        st.warning("Cancelling: the run stops at the end of the current GUM iteration or stage.")
    st.progress(min(1.0, snap.stage_fraction), text=snap.stage_text)
    if snap.gum_text is not None:
        st.progress(min(1.0, snap.gum_fraction or 0.0), text=snap.gum_text)
    st.caption(
        f"Running for {snap.seconds:.0f} s in the background: other pages keep working "
        "meanwhile, and the result will be here when it is done."
    )


@st.fragment(run_every=CHART_POLL)
def live_chart() -> None:
    """GUM's convergence so far, redrawn every CHART_POLL seconds (the outcome is the
    progress fragment's to notice)."""
    current = session.job
    if current is None:
        return
    snap = current.progress.snapshot()
    # the x axis grows with the run (up to its iteration cap), so early iterations are legible
    shown = min(snap.iterations, max(10, len(snap.history) * 3 // 2 + 1))
    draw(snap.history, key="live", iterations=shown, live=True)
    st.caption(how_to_read(config.gum, live=True))


@st.fragment(run_every=WAIT_POLL)
def waiting() -> None:
    """The run in line for a slot, looked at every WAIT_POLL seconds; once it starts (or
    ends), the whole page again, which polls it as it runs."""
    watched = state.still_waiting()
    if watched is not None:
        in_line(watched[1])


def in_line(snap: worker.Snapshot) -> None:
    """A run in line for a slot: where it stands, and that it starts by itself."""
    place = (
        "Your run is next in line"
        if snap.ahead == 0
        else f"{snap.ahead} {'run is' if snap.ahead == 1 else 'runs are'} ahead of yours in line"
    )
    st.info(
        f"**Waiting for a free slot.** {place}. This server runs at most {worker.max_runs()} "
        "syntheses at once for all its users, and they are all busy; yours starts by itself "
        "when a slot frees, in the order the runs were asked for. Nothing is measured and no "
        "budget is spent until it starts. You can leave this page meanwhile.",
        icon=":material/hourglass_top:",
    )
    st.caption(f"Waiting for {snap.waited:.0f} s.")


if job is not None:
    st.button("Run synthesis", type="primary", key="run", disabled=True)
    # outside the polling fragment: a click reruns the whole page, which no poll can replace
    # (a click on a button inside the fragment could be lost to the fragment's next timed
    # rerun on a loaded server, seen with ten sessions on two cores)
    st.button(
        "Cancel",
        key="cancel",
        on_click=job.cancel,
        disabled=job.progress.snapshot().cancelling,
        help="stops the run within one GUM iteration (the budget already spent stays spent); "
        "a run still waiting for a slot leaves the line and spends nothing",
    )
    if job.progress.snapshot().ahead is None:
        live()
        live_chart()
    else:
        waiting()
    st.stop()

waiting = not_ready()
start = st.button("Run synthesis", type="primary", key="run", disabled=waiting is not None)
if waiting:
    st.info(waiting)

if start:
    started = worker.start(request(config))
    if started is None:
        st.warning(
            f"The server is busy: it runs {worker.SLOTS.busy} syntheses, its limit for all "
            f"users together ({worker.MAX_RUNS_VARIABLE}={worker.max_runs()}), and "
            f"{worker.SLOTS.waiting} more are waiting for a slot, as many as it lets wait "
            f"({worker.MAX_WAITING_VARIABLE}={worker.max_waiting()}). Nothing was started and "
            "no budget was spent: try again in a while."
        )
        st.stop()
    session.job = started
    session.job_token = session.table_token
    session.run_state = "running"
    session.partial_history = []
    session.finished = None
    st.rerun()

if session.run_state == "cancelled":
    recorded, stage = session.interrupted_run, session.interrupted_stage
    # "Greedy marginal selection" reads "during greedy marginal selection"; "GUM" stays
    title = stage[0].lower() + stage[1:] if stage and stage[1:2].islower() else stage
    where = f" during {title}" if stage else ""
    if stage and session.partial_history:
        where += f" (after {len(session.partial_history)} GUM iterations)"
    spent = session.interrupted_rho
    if session.interrupted_waiting:
        where, spend = " while it waited for a free slot", "It never started: nothing was spent."
    elif recorded is not None:
        spend = (
            "Measurements made before the stop have used privacy budget. Its spend is "
            f"recorded as run {recorded} (History page)."
        )
    elif spent:
        spend = (
            f"Measurements made before the stop used rho {spent:.4g} of privacy budget, "
            "which the run registry could not record."
        )
    elif spent is None:
        spend = "What it spent before the stop, if anything, is listed on the History page."
    else:
        spend = "It stopped before measuring anything: nothing was spent."
    st.warning(f"The last run was cancelled{where}; no table was released. {spend}")
elif session.run_state in ("failed", "refused"):
    st.error(session.run_message)

finished = session.finished
if finished is not None:
    result = finished.result
    st.progress(1.0, text=f"done in {finished.seconds:.1f} s")
    draw(list(result.history), key="final", kept=result.kept)
    # the run's own settings: the sidebar's may have changed since it started
    gum = config.gum if result.model is None else result.model.defaults.gum
    if result.kept is not None:
        st.markdown(f"**Which table came out.** {result.kept.words()}")
    if note := stopped_early(result.history, gum.iterations):
        st.caption(note)
    st.caption(how_to_read(gum))
    state.dp_badge()
    st.success(
        f"Synthesised {result.n_records:,} rows from {finished.table_name} at epsilon "
        f"{finished.epsilon:g} in {finished.seconds:.1f} s: {len(result.marginals)} marginals, "
        f"{iterations_done(result.history)}. Recorded as run {finished.run_id} in the "
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
elif session.partial_history:
    st.caption("The stopped run's GUM iterations, up to the stop:")
    draw(session.partial_history, key="partial", iterations=max(10, len(session.partial_history)))
