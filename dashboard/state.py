"""Per-session state: the table (in memory, or a file on disk), its schema, the settings, the
run in progress and the last result.

Streamlit keeps ``st.session_state`` per browser session, so two people never see each
other's table, settings or results. Results live here with a fingerprint of their inputs;
the DP synthesis is never cached (a cache hit would replay the same noise). A run works in a
background thread (``dashboard.worker``); :func:`collect` moves its outcome in here on the
first script run after it ends, whichever page that is.

:class:`Session` is the one door to ``st.session_state``: every key the dashboard reads or
writes is an attribute of it, with its type and its value while unset, and no page or helper
touches ``st.session_state`` itself (``tests/test_dashboard_layout.py``). A key a widget is
bound to (``key=``) is the attribute's name, so the widget and the code read the same value.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar, overload

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

if TYPE_CHECKING:  # the types of single pages' keys: only named here, never imported at run time
    from privsyn_core.copied_rows import CopiedRowsReport
    from privsyn_core.lab import LabResult
    from privsyn_core.privacy.planner import CountsOnce, TableForecast
    from privsyn_core.release.bundle import Release

    from .views.lab_jobs import LabJob, LabStopped
    from .views.learn_game import GamePlay
    from .views.marginals_graph import GraphPage

#: package data of privsyn_core (privsyn_core/samples/README.md: source and licence), so an
#: installed dashboard finds it wherever it runs
SAMPLE = resources.files("privsyn_core") / "samples" / "adult.csv"
SAMPLE_NAME = "UCI Adult sample (bundled adult.csv)"

_ENGINE = PrivSynConfig()  # the dashboard starts from the engine's own defaults

T = TypeVar("T")

#: where the session's last run stands
RunState = Literal["idle", "running", "done", "cancelled", "failed", "refused"]


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


class _Key(Generic[T]):
    """One key of ``st.session_state``, named after the :class:`Session` attribute that holds
    it; ``default`` is what it reads while unset (it is not stored)."""

    def __init__(self, default: T) -> None:
        self.default = default
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, session: None, owner: type) -> _Key[T]: ...
    @overload
    def __get__(self, session: Session, owner: type) -> T: ...
    def __get__(self, session: Session | None, owner: type) -> T | _Key[T]:
        return self if session is None else self.read()

    def __set__(self, session: Session, value: T) -> None:
        st.session_state[self.name] = value

    def read(self) -> T:
        return st.session_state.get(self.name, self.default)

    def is_set(self) -> bool:
        return self.name in st.session_state

    def keep(self) -> None:
        """Store the value it reads (its default while unset), so the key is there to see."""
        st.session_state[self.name] = self.read()


class _Setting(_Key[T]):
    """A setting kept across pages: written back on every script run (:func:`init`)."""


class _Store(_Key[T]):
    """A per-session store (a dict the page fills): created on first read, then the same one."""

    def __init__(self, new: Callable[[], T]) -> None:
        super().__init__(new())
        self.new = new

    def read(self) -> T:
        return st.session_state.setdefault(self.name, self.new())


class Session:
    """Every key of the session's state, typed, in one place.

    It holds nothing itself: each attribute reads and writes ``st.session_state`` under its
    own name, so a widget bound to that name (``key="epsilon"``) and the code see one value.
    """

    # the settings: widgets of the Privacy, Run and Data pages, kept across pages
    epsilon: _Key[float | None] = _Setting(1.0)
    delta_text: _Key[str] = _Setting("1e-9")
    one_way_share: _Key[float] = _Setting(_ENGINE.one_way_share)
    indif_share: _Key[float] = _Setting(_ENGINE.indif_share)
    domain_share: _Key[float] = _Setting(_ENGINE.domain_share)
    iterations: _Key[int] = _Setting(_ENGINE.gum.iterations)
    stop_at_plateau: _Key[bool] = _Setting(True)
    seed_text: _Key[str] = _Setting("")
    raw_domains: _Key[bool] = _Setting(False)
    target: _Key[str | None] = _Setting(None)
    #: a person-level guarantee: the person column (None: per row) and K
    person: _Key[str | None] = _Setting(None)
    max_rows_per_person: _Key[int] = _Setting(1)

    # the table: in memory, or a file on disk (then ``table`` is None)
    table: _Key[pd.DataFrame | None] = _Key(None)
    disk: _Key[DiskTable | None] = _Key(None)
    #: a file on disk's number of integer codes per column (pre-coded files); None: not yet
    disk_codes: _Key[Mapping[str, int | None]] = _Key(MappingProxyType({}))
    disk_precoded: _Key[bool] = _Key(False)
    table_name: _Key[str] = _Key("")
    #: counts the tables loaded, so a run's outcome knows whether its table is still in use
    table_token: _Key[int] = _Key(0)
    dataset_fingerprint: _Key[str | None] = _Key(None)
    schema: _Key[Schema] = _Key(Schema(()))

    # the run in progress, and how the last one ended
    run_state: _Key[RunState] = _Key("idle")
    job: _Key[worker.Job | None] = _Key(None)
    job_token: _Key[int | None] = _Key(None)
    finished: _Key[Finished | None] = _Key(None)
    partial_history: _Key[Sequence[Any]] = _Key(())
    interrupted_run: _Key[int | None] = _Key(None)
    interrupted_stage: _Key[str | None] = _Key(None)
    interrupted_rho: _Key[float | None] = _Key(None)
    interrupted_waiting: _Key[bool] = _Key(False)
    run_message: _Key[str] = _Key("The run did not finish.")

    # the Data page: an upload read once (its id, and a refusal), a file on disk
    upload_seen: _Key[str | None] = _Key(None)
    upload_refused: _Key[tuple[str, str] | None] = _Key(None)
    disk_path: _Key[str] = _Key("")
    disk_domain_name: _Key[tuple[str, int] | None] = _Key(None)
    # the Data page's reviewed schema (dashboard/review.py)
    review_draft: _Key[Schema | None] = _Key(None)
    review_applied: _Key[list[str] | None] = _Key(None)
    # the Privacy page's forecast: (its inputs, it) and ((the table's fingerprint, the unit), its
    # counts)
    forecast: _Key[tuple[tuple[Any, ...], TableForecast] | None] = _Key(None)
    forecast_counts: _Key[tuple[tuple[str, PrivacyUnit], CountsOnce] | None] = _Key(None)
    # the Marginals page's graph, drawn once per result
    graph_key: _Key[tuple[Any, ...] | None] = _Key(None)
    graph_page: _Key[GraphPage | None] = _Key(None)
    # the History page's message after its rerun
    history_notice: _Key[str | None] = _Key(None)
    # the Lab: the comparison in progress, and how the last one ended
    lab_job: _Key[LabJob | None] = _Key(None)
    #: (preset, label, result, run ids)
    lab_result: _Key[tuple[str, str | None, LabResult, tuple[int, ...]] | None] = _Key(None)
    lab_stopped: _Key[LabStopped | None] = _Key(None)
    lab_notes: _Key[tuple[str, ...]] = _Key(())
    #: the comparison whose spend the user was asked to confirm (its settings), or None
    lab_confirming: _Key[tuple[Any, ...] | None] = _Key(None)
    # the Learn page's last play of the distinguishing game, with its inputs
    learn_game: _Key[GamePlay | None] = _Key(None)
    #: the Results page's owner-only check for copied rows: (the run's fingerprint, its report)
    copied_rows: _Key[tuple[str, CopiedRowsReport] | None] = _Key(None)
    # read once per session and run: a stored bundle never changes
    releases: _Key[dict[int, Release]] = _Store(dict)
    release_reports: _Key[dict[int, bytes]] = _Store(dict)
    #: "Sample again": per section, (its inputs, the table drawn)
    resampled: _Key[dict[str, tuple[tuple[Any, ...], pd.DataFrame]]] = _Store(dict)

    @staticmethod
    def forget(key: str) -> None:
        """Drop a widget's own state (``key``): it is drawn again from its arguments, e.g. a
        table editor whose edits were made on a schema that has since changed."""
        st.session_state.pop(key, None)


#: the session's state; stateless itself (every attribute is ``st.session_state``'s)
session = Session()


def init() -> None:
    """Every run of the app: defaults on a session's first visit (the sample table, the default
    settings, no result), and the settings kept across pages."""
    for key in vars(Session).values():
        if isinstance(key, _Setting):
            # re-assigned on every run, not just defaulted: Streamlit deletes a widget's value
            # at the end of any run that does not draw the widget, i.e. on every other page,
            # and the Run page would then synthesise at the default epsilon instead of the one
            # set. The widgets also say persist_state="session": without it, leaving a page
            # while its polling fragment runs (a run in progress) still reset them to the
            # defaults
            key.keep()
    if not Session.table.is_set():
        use_sample()
    for kept in (Session.run_state, Session.finished, Session.partial_history, Session.job):
        kept.keep()
    collect()


def use_sample() -> None:
    with resources.as_file(SAMPLE) as path:
        set_table(read_table(path), SAMPLE_NAME, file_fingerprint(path))


def set_table(table: pd.DataFrame, name: str, file_print: str | None = None) -> None:
    """``table`` becomes the session's table. ``file_print`` is the registry fingerprint of
    the file it was read from (:func:`~privsyn_core.release.registry.file_fingerprint`), so a
    file spends from one budget whether the dashboard or the command line reads it."""
    session.table = table
    session.disk = None
    _new_table(name, table.columns)
    session.dataset_fingerprint = file_print


def set_disk(table: DiskTable) -> None:
    """A file on disk becomes the session's table: only its path, size and column names come
    into the session; a run reads it where it lies."""
    session.table = None
    session.disk = table
    session.disk_codes = dict.fromkeys(table.columns)  # none declared yet
    session.disk_precoded = False
    _new_table(table.name, table.columns)


def _new_table(name: str, columns: Any) -> None:
    session.table_name = name
    session.table_token += 1
    session.dataset_fingerprint = None
    # nothing declared: kinds, whole numbers, date formats and domains are decided privately
    session.schema = Schema.undeclared(columns)
    session.finished = None
    session.run_state = "idle"
    session.partial_history = []


def running() -> bool:
    return session.job is not None


def still_waiting() -> tuple[worker.Job, worker.Snapshot] | None:
    """For a fragment that watches a run waiting for a slot: the run and its snapshot while
    it waits; once it starts or ends, a rerun of the whole app (which then polls it as it
    runs, or collects its outcome). None: the session has no run."""
    current = session.job
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
    current = session.job
    if current is None:
        if session.run_state == "running":
            session.run_state = "cancelled"
            session.interrupted_run = session.interrupted_stage = session.interrupted_rho = None
            session.interrupted_waiting = False
        return
    snap = current.progress.snapshot()
    if snap.outcome is None:
        return
    session.job = None
    session.partial_history = list(snap.history)
    same_table = session.table_token == session.job_token
    if snap.dataset is not None and same_table:
        session.dataset_fingerprint = snap.dataset
    outcome = snap.outcome
    if isinstance(outcome, worker.Done):
        session.finished = Finished(
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
        session.run_state = "done"
    elif isinstance(outcome, worker.Cancelled):
        session.run_state = "cancelled"
        session.interrupted_run = outcome.run_id
        session.interrupted_stage = outcome.stage
        session.interrupted_rho = outcome.spent_rho
        session.interrupted_waiting = outcome.waiting
    else:
        session.run_state = "refused" if outcome.refused else "failed"
        session.run_message = outcome.message


def unit() -> PrivacyUnit:
    """The guarantee's unit the Data page set: per row, or per person with at most K rows."""
    person = session.person
    return ROW if person is None else PrivacyUnit(person, int(session.max_rows_per_person))


def run_schema() -> Schema:
    """The session's schema as a run takes it: without the person column, which is never
    synthesised."""
    person = unit().person
    schema = session.schema
    columns = tuple(c for c in schema.columns if c.name != person)
    rules = tuple(r for r in schema.rules if person not in r.columns)
    return Schema(columns, schema.version, rules)


def dataset_fingerprint() -> str:
    """The registry's key for the session's table, hashed once per table (it reads every
    value). Owner-only: it identifies the data and stays on this machine."""
    known = session.dataset_fingerprint
    if known is None:
        on_disk, table = session.disk, session.table
        known = disk_fingerprint(on_disk) if on_disk is not None else registry_fingerprint(table)
        session.dataset_fingerprint = known
    return known


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


def finished_or_stop(message: str) -> Finished:
    """The session's finished run; without one, show ``message`` and end this page's script."""
    finished = session.finished
    if finished is None:
        st.info(message)
        st.stop()
    return finished


def dp_badge(of: PrivacyUnit | None = None) -> None:
    """The badge of a DP release, with its unit: ``of``, or the finished run's."""
    if of is None:
        finished = session.finished
        of = finished.result.ledger.unit if finished is not None else ROW
    st.badge(f"DP release, {of.words}", icon=":material/verified_user:", color="green")


def owner_badge() -> None:
    st.badge("owner-only: reads the raw data", icon=":material/visibility_lock:", color="orange")


def generated_badge() -> None:
    """For what is computed on generated tables only: neither a DP release nor owner-only."""
    st.badge("generated tables, no private data", icon=":material/science:", color="gray")
