"""Per-session state: the table (in memory, or a file on disk), its schema, the settings, the
run in progress and the last result.

Streamlit keeps ``st.session_state`` per browser session, so two people never see each
other's table, settings or results. Results live here with a fingerprint of their inputs;
the DP synthesis is never cached (a cache hit would replay the same noise). A run works in a
background thread (``dashboard.worker``); :func:`collect` moves its outcome in here on the
first script run after it ends, whichever page that is.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib import resources
from typing import Any

import pandas as pd
import streamlit as st

from privsyn_core.config import PrivSynConfig
from privsyn_core.data.io import read_table
from privsyn_core.data.schema import Schema
from privsyn_core.errors import InputError
from privsyn_core.generation.synthesis import SynthesisResult
from privsyn_core.privacy.ledger import ROW, PrivacyUnit
from privsyn_core.release.registry import file_fingerprint
from privsyn_core.release.registry import fingerprint as registry_fingerprint

from . import sources, worker
from .sources import DiskTable

#: package data of privsyn_core (privsyn_core/samples/README.md: source and licence), so an
#: installed dashboard finds it wherever it runs
SAMPLE = resources.files("privsyn_core") / "samples" / "adult.csv"
SAMPLE_NAME = "UCI Adult sample (bundled adult.csv)"

_ENGINE = PrivSynConfig()  # the dashboard starts from the engine's own defaults
DEFAULTS: dict[str, Any] = {
    "epsilon": 1.0,
    "delta_text": "1e-9",
    "one_way_share": _ENGINE.one_way_share,
    "indif_share": _ENGINE.indif_share,
    "domain_share": _ENGINE.domain_share,
    "iterations": _ENGINE.gum.iterations,
    "stop_at_plateau": True,
    "seed_text": "",
    "raw_domains": False,
    "target": None,
    #: a person-level guarantee: the person column (None: per row) and K
    "person": None,
    "max_rows_per_person": 1,
}


@dataclass(frozen=True)
class Finished:
    """A finished run, what it was run on, and how the registry recorded it.

    Only recorded runs get here: a run the registry refused is discarded, so every result the
    dashboard shows or offers is on the record. ``bundle`` is the registry's own copy of the
    release (None for raw-domain runs), so a download is byte-identical to what it holds.
    """

    result: SynthesisResult
    fingerprint: str
    table_name: str
    epsilon: float
    delta: float
    seconds: float
    run_id: int
    bundle: bytes | None
    #: the registry's lifetime-budget warnings for this run, shown with the result
    budget_warnings: tuple[str, ...] = ()


def init() -> None:
    """Every run of the app: defaults on a session's first visit (the sample table, the default
    settings, no result), and the settings kept across pages."""
    ss = st.session_state
    for key, value in DEFAULTS.items():
        # re-assigned on every run, not just defaulted: Streamlit deletes a widget's value at
        # the end of any run that does not draw the widget, i.e. on every other page, and the
        # Run page would then synthesise at the default epsilon instead of the one set. The
        # widgets also say persist_state="session": without it, leaving a page while its
        # polling fragment runs (a run in progress) still reset them to the defaults
        ss[key] = ss.get(key, value)
    if "table" not in ss:
        use_sample()
    ss.setdefault("run_state", "idle")
    ss.setdefault("finished", None)
    ss.setdefault("partial_history", [])
    ss.setdefault("job", None)
    collect()


def load_sample() -> pd.DataFrame:
    with resources.as_file(SAMPLE) as path:
        return read_table(path)


def use_sample() -> None:
    with resources.as_file(SAMPLE) as path:
        set_table(read_table(path), SAMPLE_NAME, file_fingerprint(path))


def set_table(table: pd.DataFrame, name: str, file_print: str | None = None) -> None:
    """``table`` becomes the session's table. ``file_print`` is the registry fingerprint of
    the file it was read from (:func:`~privsyn_core.release.registry.file_fingerprint`), so a
    file spends from one budget whether the dashboard or the command line reads it."""
    ss = st.session_state
    ss["table"] = table
    ss["disk"] = None
    _new_table(name, table.columns)
    ss["dataset_fingerprint"] = file_print


def set_disk(table: DiskTable) -> None:
    """A file on disk becomes the session's table: only its path, size and column names come
    into the session; a run reads it where it lies."""
    ss = st.session_state
    ss["table"] = None
    ss["disk"] = table
    # its number of integer codes per column (pre-coded files); None: not declared yet
    ss["disk_codes"] = dict.fromkeys(table.columns)
    ss["disk_precoded"] = False
    _new_table(table.name, table.columns)


def _new_table(name: str, columns: Any) -> None:
    ss = st.session_state
    ss["table_name"] = name
    ss["table_token"] = ss.get("table_token", 0) + 1
    ss["dataset_fingerprint"] = None
    # nothing declared: kinds, whole numbers, date formats and domains are decided privately
    ss["schema"] = Schema.undeclared(columns)
    ss["finished"] = None
    ss["run_state"] = "idle"
    ss["partial_history"] = []


def table() -> pd.DataFrame | None:
    """The session's table in memory; None when it is a file on disk (see :func:`disk`)."""
    return st.session_state["table"]


def disk() -> DiskTable | None:
    return st.session_state.get("disk")


def job() -> worker.Job | None:
    """The session's run in progress, if any."""
    return st.session_state.get("job")


def running() -> bool:
    return job() is not None


def still_waiting() -> tuple[worker.Job, worker.Snapshot] | None:
    """For a fragment that watches a run waiting for a slot: the run and its snapshot while
    it waits; once it starts or ends, a rerun of the whole app (which then polls it as it
    runs, or collects its outcome). None: the session has no run."""
    current = job()
    if current is None:
        return None
    snap = current.progress.snapshot()
    if snap.outcome is not None or snap.ahead is None:
        st.rerun()
    return current, snap


def collect() -> None:
    """Move the session's finished run (done, cancelled, failed or refused) out of its worker
    and into the session. A "running" state with no worker behind it is a run that was lost
    (the session was restored without its thread): it is reported as cancelled."""
    ss = st.session_state
    current = ss.get("job")
    if current is None:
        if ss["run_state"] == "running":
            ss["run_state"] = "cancelled"
            ss["interrupted_run"] = ss["interrupted_stage"] = ss["interrupted_rho"] = None
            ss["interrupted_waiting"] = False
        return
    snap = current.progress.snapshot()
    if snap.outcome is None:
        return
    ss["job"] = None
    ss["partial_history"] = list(snap.history)
    same_table = ss.get("table_token") == ss.get("job_token")
    if snap.dataset is not None and same_table:
        ss["dataset_fingerprint"] = snap.dataset
    outcome = snap.outcome
    if isinstance(outcome, worker.Done):
        ss["finished"] = Finished(
            outcome.result,
            f"{(snap.dataset or '')[:16]}-run{outcome.recorded.run_id}",
            current.request.name,
            current.request.epsilon,
            current.request.delta,
            outcome.seconds,
            run_id=outcome.recorded.run_id,
            bundle=outcome.recorded.bundle,
            budget_warnings=outcome.recorded.budget_warnings,
        )
        ss["run_state"] = "done"
    elif isinstance(outcome, worker.Cancelled):
        ss["run_state"] = "cancelled"
        ss["interrupted_run"] = outcome.run_id
        ss["interrupted_stage"] = outcome.stage
        ss["interrupted_rho"] = outcome.spent_rho
        ss["interrupted_waiting"] = outcome.waiting
    else:
        ss["run_state"] = "refused" if outcome.refused else "failed"
        ss["run_message"] = outcome.message


def schema() -> Schema:
    return st.session_state["schema"]


def unit() -> PrivacyUnit:
    """The guarantee's unit the Data page set: per row, or per person with at most K rows."""
    ss = st.session_state
    person = ss.get("person")
    return ROW if person is None else PrivacyUnit(person, int(ss["max_rows_per_person"]))


def run_schema() -> Schema:
    """The session's schema as a run takes it: without the person column, which is never
    synthesised."""
    person = unit().person
    return Schema(tuple(c for c in schema().columns if c.name != person))


def dataset_fingerprint() -> str:
    """The registry's key for the session's table, hashed once per table (it reads every
    value). Owner-only: it identifies the data and stays on this machine."""
    ss = st.session_state
    if ss.get("dataset_fingerprint") is None:
        on_disk = disk()
        ss["dataset_fingerprint"] = (
            disk_fingerprint(on_disk) if on_disk is not None else registry_fingerprint(table())
        )
    return ss["dataset_fingerprint"]


def disk_fingerprint(on_disk: DiskTable) -> str:
    """The registry's key for a file on disk, hashed through the file as opened and checked
    (``sources.opened``), never through its name alone: a name swapped since the Data page
    checked it is refused here too. A refusal is shown and ends the page's script."""
    try:
        with sources.opened(on_disk.path) as opened:
            return opened.fingerprint()
    except InputError as exc:
        st.error(f"Cannot read {on_disk.name}: {exc}.")
        st.stop()
        raise  # st.stop() does not return


def fingerprint(frame: pd.DataFrame, schema: Schema, settings: dict[str, Any]) -> str:
    digest = hashlib.sha256()
    digest.update(pd.util.hash_pandas_object(frame, index=False).to_numpy().tobytes())
    digest.update(schema.dumps().encode())
    digest.update(repr(sorted(settings.items())).encode())
    return digest.hexdigest()[:16]


def finished_or_stop(message: str) -> Finished:
    """The session's finished run; without one, show ``message`` and end this page's script."""
    finished = st.session_state.get("finished")
    if finished is None:
        st.info(message)
        st.stop()
    return finished


def dp_badge(of: PrivacyUnit | None = None) -> None:
    """The badge of a DP release, with its unit: ``of``, or the finished run's."""
    if of is None:
        finished = st.session_state.get("finished")
        of = finished.result.ledger.unit if finished is not None else ROW
    st.badge(f"DP release, {of.words}", icon=":material/verified_user:", color="green")


def owner_badge() -> None:
    st.badge("owner-only: reads the raw data", icon=":material/visibility_lock:", color="orange")


def generated_badge() -> None:
    """For what is computed on generated tables only: neither a DP release nor owner-only."""
    st.badge("generated tables, no private data", icon=":material/science:", color="gray")
