"""Synthesis runs in background threads, so a long run never freezes the page.

The page's script starts a :class:`Job` and returns at once; a fragment on the page polls the
job's :class:`RunProgress` (a lock-guarded object the worker thread writes into) a few times a
second and draws the stage, the GUM iteration and the convergence chart from a snapshot. The
thread never calls Streamlit: everything it learns goes into the progress object, and the
page's own script moves the outcome into ``st.session_state``.

The worker does all of a run's bookkeeping itself, so it happens even if the browser tab is
closed mid-run: the run's cost reserved in the registry before anything is measured (checked
against the lifetime budget together with what other runs hold), the record of a finished run
with its bundle, and the record of what a failed or cancelled run had spent, each against
that reservation (``dashboard.records``, the registry's one way of keeping books, as the CLI
and the Lab keep theirs).

Cancel sets an event that the engine's progress callback checks: the callback returns False at
the next stage boundary or GUM iteration, and the engine raises ``SynthesisCancelled`` carrying
the ledger of what was spent (``privsyn_core.progress``).

A server shared by many sessions runs at most :func:`max_runs` syntheses at once (each one
holds its table's encoding and GUM's synthetic rows in memory and keeps a core busy). A run
started past the cap waits in a first-in, first-out line and starts by itself when a slot
frees; its page says how many runs are ahead of it, and Cancel takes it out of the line
(nothing ran, nothing was spent). Waiting costs a parked thread and a reference to the
session's table, not a copy, so the server's memory grows with the cap, not with the line.
The line is bounded too (:func:`max_waiting`): a start past it is refused, and the page says
so, rather than parking threads without bound.
"""

from __future__ import annotations

import gc
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from privsyn_core.config import PrivSynConfig
from privsyn_core.errors import InputError
from privsyn_core.generation.gum import GumIterationRecord
from privsyn_core.generation.synthesis import SynthesisResult
from privsyn_core.privacy.ledger import FailedAfterSpending, PrivacyLedger
from privsyn_core.progress import (
    STAGE_TITLES,
    BlockProgress,
    GumProgress,
    Stage,
    StageFinished,
    StageStarted,
    SynthesisCancelled,
)

from . import records

#: environment variable that sets how many runs the whole server may have in progress
MAX_RUNS_VARIABLE = "PRIVSYN_DASHBOARD_RUNS"
DEFAULT_MAX_RUNS = 2
#: environment variable that sets how many runs may wait for a slot
MAX_WAITING_VARIABLE = "PRIVSYN_DASHBOARD_QUEUE"
DEFAULT_MAX_WAITING = 50
#: seconds between two looks of a waiting run at its cancel flag and the cap (the cap is read
#: from the environment, so a changed cap takes effect without a notification)
WAIT_POLL = 0.2

STAGES = list(Stage)


def _count(variable: str, default: int, least: int) -> int:
    text = os.environ.get(variable, "")
    try:
        return max(least, int(text)) if text.strip() else default
    except ValueError:
        return default


def max_runs() -> int:
    """The server-wide cap on runs in progress (``PRIVSYN_DASHBOARD_RUNS``, default 2)."""
    return _count(MAX_RUNS_VARIABLE, DEFAULT_MAX_RUNS, 1)


def max_waiting() -> int:
    """How many runs may wait for a slot (``PRIVSYN_DASHBOARD_QUEUE``, default 50; 0 refuses
    every start past the cap, as the dashboard did before it had a line)."""
    return _count(MAX_WAITING_VARIABLE, DEFAULT_MAX_WAITING, 0)


class _Slots:
    """The runs in progress across every session of this server process, and the first-in,
    first-out line of runs waiting for one of the :func:`max_runs` slots."""

    def __init__(self) -> None:
        self._turn = threading.Condition()
        self._busy = 0
        self._line: list[RunProgress] = []
        #: runs taken out of the line by :meth:`leave` whose threads have not seen it yet
        self._left: set[RunProgress] = set()

    def join(self, progress: RunProgress) -> bool:
        """Take a slot for a run if one is free and nobody waits, else put it at the end of
        the line (False: the line is full). :meth:`wait_turn` then waits for its slot."""
        with self._turn:
            if not self._line and self._busy < max_runs():
                self._busy += 1
                progress.begin()
                return True
            if len(self._line) >= max_waiting():
                return False
            self._line.append(progress)
            self._number()
            return True

    def wait_turn(self, progress: RunProgress) -> bool:
        """Block until ``progress`` holds a slot: at once if :meth:`join` gave it one, else
        when it is first in line and a slot frees (True); False if it was cancelled while it
        waited (it leaves the line, and never held a slot)."""
        with self._turn:
            while True:
                if progress in self._left:  # cancelled and taken out by leave()
                    self._left.discard(progress)
                    return False
                if progress not in self._line:
                    return True
                if progress.cancelled:
                    self._line.remove(progress)
                    self._number()
                    self._turn.notify_all()
                    return False
                if self._line[0] is progress and self._busy < max_runs():
                    self._line.pop(0)
                    self._busy += 1
                    self._number()
                    progress.begin()
                    self._turn.notify_all()
                    return True
                self._turn.wait(WAIT_POLL)

    def give_back(self) -> None:
        """A run (or a Lab comparison) has ended: its slot frees, and its cyclic garbage is
        collected, once, here. The server runs without Streamlit's collection after every
        script run, which every poll of every session paid for."""
        with self._turn:
            self._busy -= 1
            self._turn.notify_all()
        gc.collect()

    def leave(self, progress: RunProgress) -> bool:
        """Take a waiting run out of the line now, in the caller's thread (Cancel): True if it
        was waiting (it never held a slot; its thread then ends without one), False if it
        holds a slot or has ended. The page that cancels sees the run gone in the same
        rerun, whatever the load on the server (with ten sessions polling, a cancel
        that waited for the run's own thread and then a poll took minutes)."""
        with self._turn:
            if progress not in self._line:
                return False
            self._line.remove(progress)
            self._left.add(progress)
            self._number()
            self._turn.notify_all()
            return True

    def wake(self) -> None:
        """Let waiting runs look at their cancel flags now (Cancel on a waiting run)."""
        with self._turn:
            self._turn.notify_all()

    def _number(self) -> None:
        for ahead, waiting in enumerate(self._line):
            waiting.note_place(ahead)

    @property
    def busy(self) -> int:
        with self._turn:
            return self._busy

    @property
    def waiting(self) -> int:
        with self._turn:
            return len(self._line)


SLOTS = _Slots()


@dataclass(frozen=True)
class RunRequest:
    """A run with everything it needs bound, taken in the page's script (the worker thread
    must not read ``st.session_state``).

    ``synthesize`` is the engine call with its table, budget, settings and randomness bound;
    the worker adds only the keyword argument ``on_progress``. ``dataset`` gives the
    registry's key for the table (hashing may read a whole file, so it runs in the worker
    too).
    """

    synthesize: Callable[..., SynthesisResult]
    dataset: Callable[[], str]
    name: str
    epsilon: float
    delta: float
    config: PrivSynConfig
    #: the public settings the registry stores with the run
    settings: dict[str, Any]


@dataclass(frozen=True)
class Done:
    result: SynthesisResult
    recorded: records.Recorded
    seconds: float


@dataclass(frozen=True)
class Cancelled:
    #: the run id under which the spend before the stop was recorded (None: nothing spent)
    run_id: int | None
    #: the stage the run stopped in (None: before the engine started)
    stage: str | None = None
    #: rho spent before the stop (recorded under ``run_id`` unless the registry refused it)
    spent_rho: float = 0.0
    #: cancelled while it waited for a slot: it never started
    waiting: bool = False


@dataclass(frozen=True)
class Failed:
    """The run did not finish, or its result was not recorded; ``message`` says why (and
    where its spend was recorded), for ``st.error``. ``refused``: nothing ran."""

    message: str
    refused: bool = False


Outcome = Done | Cancelled | Failed


@dataclass(frozen=True)
class Snapshot:
    """What the page draws, copied out under the lock."""

    #: which stages are done, e.g. "Stage 8 of 10: GUM synthesis"
    stage_fraction: float
    stage_text: str
    #: GUM's own progress once it has started (None before)
    gum_fraction: float | None
    gum_text: str | None
    history: tuple[GumIterationRecord | GumProgress, ...]
    iterations: int
    seconds: float
    cancelling: bool
    outcome: Outcome | None
    dataset: str | None
    #: runs ahead of this one in the line for a slot (None: it is not waiting)
    ahead: int | None = None
    #: seconds it waited (so far) for a slot
    waited: float = 0.0


@dataclass(eq=False)
class RunProgress:
    """Thread-safe progress of one run: the worker writes, the page reads snapshots."""

    iterations: int
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _cancel: threading.Event = field(default_factory=threading.Event, repr=False)
    _stage_fraction: float = 0.0
    _stage_text: str = "Reading the table's fingerprint and checking its privacy budget"
    _gum: GumProgress | None = None
    _history: list[GumProgress] = field(default_factory=list)
    _spent: PrivacyLedger | None = None
    _outcome: Outcome | None = None
    _dataset: str | None = None
    _ahead: int | None = None
    _queued: float = field(default_factory=time.perf_counter)
    #: when it took a slot (None: still waiting for one)
    _started: float | None = None
    _ended: float | None = None

    # --- the page's side ------------------------------------------------------------------

    def cancel(self) -> None:
        self._cancel.set()

    def snapshot(self) -> Snapshot:
        with self._lock:
            end = self._ended if self._ended is not None else time.perf_counter()
            started = self._started if self._started is not None else end
            return Snapshot(
                self._stage_fraction,
                self._stage_text,
                None if self._gum is None else (self._gum.iteration + 1) / self._gum.iterations,
                None if self._gum is None else _gum_text(self._gum),
                tuple(self._history),
                self.iterations,
                end - started,
                self._cancel.is_set(),
                self._outcome,
                self._dataset,
                self._ahead if self._outcome is None else None,
                started - self._queued,
            )

    # --- the worker's side ----------------------------------------------------------------

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    @property
    def spent(self) -> PrivacyLedger | None:
        with self._lock:
            return self._spent

    def on_progress(self, event: object) -> bool:
        """The engine's progress callback: note the event; False asks the engine to stop."""
        with self._lock:
            if isinstance(event, StageStarted):
                index = STAGES.index(event.stage)
                self._stage_fraction = index / len(STAGES)
                self._stage_text = f"Stage {index + 1} of {len(STAGES)}: {event.title}"
            elif isinstance(event, StageFinished):
                self._spent = event.spent
                index = STAGES.index(event.stage)
                self._stage_fraction = (index + 1) / len(STAGES)
                self._stage_text = (
                    f"Stage {index + 1} of {len(STAGES)} done: {STAGE_TITLES[event.stage]}"
                    + (f" ({event.summary})" if event.summary else "")
                )
            elif isinstance(event, GumProgress):
                self._history.append(event)
                self._gum = event
            elif isinstance(event, BlockProgress):
                # blocks run GUM in worker processes: one line per finished block instead
                self._stage_text = (
                    f"GUM synthesis: block {event.block} of {event.blocks} done "
                    f"({event.rows:,} rows, {event.iterations} GUM iterations, "
                    f"{event.seconds:.0f} s so far)"
                )
        return not self._cancel.is_set()

    def note_place(self, ahead: int) -> None:
        """The line's side: ``ahead`` runs are ahead of this one."""
        with self._lock:
            self._ahead = ahead
            self._stage_text = (
                "Waiting for a free slot: you are next"
                if ahead == 0
                else f"Waiting for a free slot: {ahead} {'run' if ahead == 1 else 'runs'} "
                "ahead of you"
            )

    def begin(self) -> None:
        """The line's side: the run took a slot and starts now."""
        with self._lock:
            self._ahead = None
            self._started = time.perf_counter()
            self._stage_text = "Reading the table's fingerprint and checking its privacy budget"

    def note_dataset(self, dataset: str) -> None:
        with self._lock:
            self._dataset = dataset

    def end(self, outcome: Outcome) -> None:
        """The run's outcome; the first one stays (Cancel of a waiting run ends it in the
        page's thread, before its own thread wakes to end it the same way)."""
        with self._lock:
            if self._outcome is not None:
                return
            self._outcome = outcome
            self._ended = time.perf_counter()
            if isinstance(outcome, Done):
                self._stage_fraction = 1.0
                self._stage_text = f"done in {outcome.seconds:.1f} s"


def _gum_text(event: GumProgress) -> str:
    step = "MRF sweep, iteration" if event.method == "mrf" else "GUM iteration"
    return (
        f"{step} {event.iteration + 1} of at most {event.iterations}: mean L1 error "
        f"{event.mean_error:.4f} against the noisy marginals"
    )


@dataclass(eq=False)
class Job:
    """One session's run: what was asked, its progress and its thread."""

    request: RunRequest
    progress: RunProgress
    thread: threading.Thread

    def cancel(self) -> None:
        self.progress.cancel()
        if SLOTS.leave(self.progress):  # waiting: out of the line now, so this rerun shows it
            self.progress.end(Cancelled(None, waiting=True))


def start(request: RunRequest) -> Job | None:
    """Start ``request`` in a new thread: at once if a slot is free and nobody waits, else
    after the runs ahead of it in line. None if the line is full (:func:`max_waiting`)."""
    progress = RunProgress(request.config.gum.iterations)
    if not SLOTS.join(progress):
        return None

    def work() -> None:
        try:
            if not SLOTS.wait_turn(progress):
                progress.end(Cancelled(None, waiting=True))
                return
        except BaseException as exc:  # a bug: still an outcome, never a thread left hanging
            progress.end(Failed(f"The run could not wait for a slot ({exc!r})."))
            return
        try:
            progress.end(_run(request, progress))
        except BaseException as exc:  # a bug: still an outcome, never a thread left hanging
            progress.end(Failed(f"The run stopped with an internal error ({exc!r})."))
        finally:
            SLOTS.give_back()

    thread = threading.Thread(target=work, name="privsyn-run", daemon=True)
    job = Job(request, progress, thread)
    thread.start()
    return job


def _run(request: RunRequest, progress: RunProgress) -> Outcome:
    """The run and its records; every path ends in an outcome (see the module docstring).

    Reserve, then measure: the run's whole cost is held in the registry before the engine
    starts, so a run that another session's run would push past the lifetime budget is
    refused here. The reservation is given back only once what was spent is recorded; on an
    unexpected error it stays, since what was measured is then unknown."""
    try:
        dataset = request.dataset()
    except (OSError, InputError) as exc:
        return Failed(f"The table could not be read: {exc}", refused=True)
    progress.note_dataset(dataset)
    if progress.cancelled:
        return Cancelled(None)
    cost = request.config.run_budget(request.epsilon, request.delta)
    purpose = f"dashboard run, epsilon {request.epsilon:g}, delta {request.delta:g}"
    held = records.reserve(dataset, request.name, cost, request.delta, purpose)
    if isinstance(held, str):
        return Failed(held, refused=True)
    reservation = held.reservation
    started = time.perf_counter()
    try:
        result = request.synthesize(on_progress=progress.on_progress)
    except SynthesisCancelled as exc:
        spent = exc.ledger if exc.ledger.spent_rho > 0 else progress.spent
        run_id = records.record_interrupted(reservation, spent, request.settings)
        return Cancelled(run_id, STAGE_TITLES[exc.stage], spent.spent_rho if spent else 0.0)
    except FailedAfterSpending as exc:
        return Failed(records.record_failure(reservation, exc, request.settings))
    except InputError as exc:  # refused before measuring anything (the engine's checks)
        reservation.return_unspent()
        return Failed(f"The run could not start or finish: {exc}")
    seconds = time.perf_counter() - started
    try:
        recorded = records.record(held, result, request.config, request.settings)
    except records.REGISTRY_ERRORS as exc:
        return Failed(records.not_recorded(exc))
    return Done(result, recorded, seconds)
