"""Synthesis runs in background threads, so a long run never freezes the page.

The page's script starts a :class:`Job` and returns at once; a fragment on the page polls the
job's :class:`RunProgress` (a lock-guarded object the worker thread writes into) a few times a
second and draws the stage, the GUM iteration and the convergence chart from a snapshot. The
thread never calls Streamlit: everything it learns goes into the progress object, and the
page's own script moves the outcome into ``st.session_state``.

The worker does all of a run's bookkeeping itself, so it happens even if the browser tab is
closed mid-run: the budget check against the registry before anything is measured, the record
of a finished run with its bundle, and the record of what a failed or cancelled run had spent
(the same records the dashboard made before it had a worker, and the CLI makes).

Cancel sets an event that the engine's progress callback checks: the callback returns False at
the next stage boundary or GUM iteration, and the engine raises ``SynthesisCancelled`` carrying
the ledger of what was spent (``privsyn_core.progress``).

A server shared by many sessions runs at most :func:`max_runs` syntheses at once (each one
holds its table's encoding and GUM's synthetic rows in memory and keeps a core busy); a start
past the cap is refused, and the page says so, rather than queueing threads without bound.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from privsyn_core.config import PrivSynConfig
from privsyn_core.errors import FailedAfterSpending, InputError
from privsyn_core.generation.gum import GumIterationRecord
from privsyn_core.pipeline import SynthesisResult
from privsyn_core.privacy.ledger import BudgetExceededError, PrivacyLedger
from privsyn_core.progress import (
    STAGE_TITLES,
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

STAGES = list(Stage)


def max_runs() -> int:
    """The server-wide cap on runs in progress (``PRIVSYN_DASHBOARD_RUNS``, default 2)."""
    text = os.environ.get(MAX_RUNS_VARIABLE, "")
    try:
        return max(1, int(text)) if text.strip() else DEFAULT_MAX_RUNS
    except ValueError:
        return DEFAULT_MAX_RUNS


class _Slots:
    """A counter of runs in progress across every session of this server process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._busy = 0

    def take(self) -> bool:
        with self._lock:
            if self._busy >= max_runs():
                return False
            self._busy += 1
            return True

    def give_back(self) -> None:
        with self._lock:
            self._busy -= 1

    @property
    def busy(self) -> int:
        with self._lock:
            return self._busy


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
    _started: float = field(default_factory=time.perf_counter)
    _ended: float | None = None

    # --- the page's side ------------------------------------------------------------------

    def cancel(self) -> None:
        self._cancel.set()

    def snapshot(self) -> Snapshot:
        with self._lock:
            end = self._ended if self._ended is not None else time.perf_counter()
            return Snapshot(
                self._stage_fraction,
                self._stage_text,
                None if self._gum is None else (self._gum.iteration + 1) / self._gum.iterations,
                None if self._gum is None else _gum_text(self._gum),
                tuple(self._history),
                self.iterations,
                end - self._started,
                self._cancel.is_set(),
                self._outcome,
                self._dataset,
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
        return not self._cancel.is_set()

    def note_dataset(self, dataset: str) -> None:
        with self._lock:
            self._dataset = dataset

    def end(self, outcome: Outcome) -> None:
        with self._lock:
            self._outcome = outcome
            self._ended = time.perf_counter()
            if isinstance(outcome, Done):
                self._stage_fraction = 1.0
                self._stage_text = f"done in {outcome.seconds:.1f} s"


def _gum_text(event: GumProgress) -> str:
    return (
        f"GUM iteration {event.iteration + 1} of at most {event.iterations}: mean L1 error "
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


def start(request: RunRequest) -> Job | None:
    """Start ``request`` in a new thread; None if the server already runs :func:`max_runs`."""
    if not SLOTS.take():
        return None
    progress = RunProgress(request.config.gum.iterations)

    def work() -> None:
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
    """The run and its records; every path ends in an outcome (see the module docstring)."""
    try:
        dataset = request.dataset()
    except (OSError, InputError) as exc:
        return Failed(f"The table could not be read: {exc}", refused=True)
    progress.note_dataset(dataset)
    refused = records.check(dataset, request.epsilon, request.delta)
    if refused:
        return Failed(refused, refused=True)
    if progress.cancelled:
        return Cancelled(None)
    started = time.perf_counter()
    try:
        result = request.synthesize(on_progress=progress.on_progress)
    except SynthesisCancelled as exc:
        spent = exc.ledger if exc.ledger.spent_rho > 0 else progress.spent
        run_id = records.record_interrupted(dataset, request.name, spent, request.settings)
        return Cancelled(run_id, STAGE_TITLES[exc.stage], spent.spent_rho if spent else 0.0)
    except FailedAfterSpending as exc:
        return Failed(records.record_failure(dataset, request.name, exc, request.settings))
    except (InputError, BudgetExceededError) as exc:
        return Failed(f"The run could not start or finish: {exc}")
    seconds = time.perf_counter() - started
    try:
        recorded = records.record(dataset, request.name, result, request.config, request.settings)
    except (BudgetExceededError, *records.REGISTRY_ERRORS) as exc:
        return Failed(records.not_recorded(exc))
    return Done(result, recorded, seconds)
