"""Lab comparisons in background threads, in the same server-wide slots as runs.

A comparison is several runs' worth of work, so it runs like one (``dashboard.worker``): the
page starts a :class:`LabJob` and returns at once, a fragment polls the job's
:class:`LabTracker` (written by the worker thread under a lock, never by Streamlit), and Cancel
sets a flag that the engine's progress callback reads at the next step or GUM iteration. When
the server already runs its cap of syntheses, the comparison waits in the same first-in,
first-out line as runs (``worker.SLOTS``); cancelled there, it never starts and nothing is
recorded.

The worker keeps the books, so they are kept even if the tab is closed: the comparison's whole
privacy cost is reserved in the run registry before the first measurement (checked against
the table's lifetime budget together with what other runs hold, so no session can spend it
meanwhile), every measurement is recorded against that reservation as soon as it is spent, a
cancelled or failed one with what it had spent, and the rest is given back when it ends
(``dashboard.records``, the registry's one way of keeping books). A measurement the registry
cannot record stops the comparison and keeps the reservation: nothing is spent off the record.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from privsyn_core.errors import InputError
from privsyn_core.lab import LabCancelled, LabPlan, LabProgress, LabResult
from privsyn_core.privacy.ledger import FailedAfterSpending, PrivacyLedger

from .. import records
from ..worker import SLOTS


@dataclass(frozen=True)
class LabRequest:
    """A comparison with everything bound, taken in the page's script (the worker thread must
    not read ``st.session_state``).

    ``compare`` is :func:`privsyn_core.lab.run_lab` with its table, budget, plan and label
    bound; the worker adds ``on_progress`` and ``on_measured``.
    """

    compare: Callable[..., LabResult]
    dataset: Callable[[], str]
    name: str
    preset: str
    label: str | None
    epsilon: float
    delta: float
    plan: LabPlan

    def settings(self) -> dict[str, Any]:
        """The public settings each of its measurements is recorded with."""
        return {
            "outcome": f"lab: {self.preset}",
            "epsilon": self.epsilon,
            "delta": self.delta,
            "configurations": [arm.name for arm in self.plan.arms],
            "seeds": self.plan.seeds,
        }


@dataclass(frozen=True)
class LabDone:
    result: LabResult
    run_ids: tuple[int, ...]
    seconds: float
    budget_warnings: tuple[str, ...]


@dataclass(frozen=True)
class LabStopped:
    """The comparison did not finish; ``message`` says why and where its spend is recorded.
    ``kind``: "cancelled" (by the user), "refused" (nothing ran) or "failed"."""

    kind: Literal["cancelled", "refused", "failed"]
    message: str
    run_ids: tuple[int, ...] = ()


LabOutcome = LabDone | LabStopped


@dataclass(frozen=True)
class LabSnapshot:
    """What the page draws, copied out under the lock."""

    progress: LabProgress | None
    #: comparisons and runs ahead of this one in the line for a slot (None: not waiting)
    ahead: int | None
    seconds: float
    cancelling: bool
    outcome: LabOutcome | None


@dataclass(eq=False)
class LabTracker:
    """Thread-safe progress of one comparison: the worker writes, the page reads snapshots.
    It has what ``worker.SLOTS`` asks of a waiting run (``cancelled``, ``note_place``,
    ``begin``)."""

    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _cancel: threading.Event = field(default_factory=threading.Event, repr=False)
    _progress: LabProgress | None = None
    _ahead: int | None = None
    _started: float | None = None
    _ended: float | None = None
    _outcome: LabOutcome | None = None

    def cancel(self) -> None:
        self._cancel.set()
        SLOTS.wake()  # waiting in line: leave it at once

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def snapshot(self) -> LabSnapshot:
        with self._lock:
            now = self._ended if self._ended is not None else time.perf_counter()
            return LabSnapshot(
                self._progress,
                self._ahead if self._outcome is None else None,
                0.0 if self._started is None else now - self._started,
                self._cancel.is_set(),
                self._outcome,
            )

    def note_place(self, ahead: int) -> None:
        with self._lock:
            self._ahead = ahead

    def begin(self) -> None:
        with self._lock:
            self._ahead = None
            self._started = time.perf_counter()

    def note(self, progress: LabProgress) -> None:
        with self._lock:
            self._progress = progress

    def end(self, outcome: LabOutcome) -> None:
        with self._lock:
            self._outcome = outcome
            self._ended = time.perf_counter()


@dataclass(eq=False)
class LabJob:
    request: LabRequest
    tracker: LabTracker
    thread: threading.Thread

    def cancel(self) -> None:
        self.tracker.cancel()


def start(request: LabRequest) -> LabJob | None:
    """Start ``request`` in a new thread, at once or after what is ahead of it in the line
    for a slot. None if the line is full (nothing started, nothing spent)."""
    tracker = LabTracker()
    if not SLOTS.join(tracker):  # type: ignore[arg-type]  # it has what a waiting run has
        return None

    def work() -> None:
        try:
            if not SLOTS.wait_turn(tracker):  # type: ignore[arg-type]
                tracker.end(
                    LabStopped(
                        "cancelled",
                        "it waited for a free slot, never started and spent nothing.",
                    )
                )
                return
        except BaseException as exc:  # a bug: still an outcome, never a thread left hanging
            tracker.end(
                LabStopped("failed", f"The comparison could not wait for a slot ({exc!r}).")
            )
            return
        try:
            tracker.end(_compare(request, tracker))
        except BaseException as exc:  # a bug: still an outcome, never a thread left hanging
            tracker.end(
                LabStopped("failed", f"The comparison stopped with an internal error ({exc!r}).")
            )
        finally:
            SLOTS.give_back()

    thread = threading.Thread(target=work, name="privsyn-lab", daemon=True)
    job = LabJob(request, tracker, thread)
    thread.start()
    return job


class _Books:
    """The comparison's side of the registry: its reservation and the records against it."""

    def __init__(self, request: LabRequest, held: records.Held, tracker: LabTracker) -> None:
        self.request, self.held, self.tracker = request, held, tracker
        self.run_ids: list[int] = []
        self.spent = 0.0
        #: why the comparison had to stop for the books (None: it did not)
        self.problem: str | None = None

    def on_progress(self, progress: LabProgress) -> bool:
        """The engine's callback: note it; False stops the comparison."""
        self.tracker.note(progress)
        return self.problem is None and not self.tracker.cancelled

    def on_measured(self, ledger: PrivacyLedger) -> None:
        """Record a measurement as soon as it is spent (a stopped one with what it spent)."""
        self.spent += ledger.spent_rho
        settings = self.request.settings()
        if self.tracker.cancelled or self.problem is not None:
            settings["outcome"] += " (stopped)"
        try:
            self.run_ids.append(self.held.reservation.spend(ledger, settings))
        except records.REGISTRY_ERRORS as exc:
            self.problem = (
                f"A measurement of rho {ledger.spent_rho:.4g} could not be recorded in the "
                f"run registry ({exc}), so the comparison stopped there; its whole "
                "reservation stays counted against the table's budget."
            )

    def close(self) -> None:
        """Give back what the comparison did not spend, once every spend is on the record."""
        if self.problem is None:
            try:
                self.held.reservation.return_unspent()
            except records.REGISTRY_ERRORS as exc:
                self.problem = f"The run registry could not be written ({exc})."

    def stopped(self, kind: Literal["cancelled", "failed"], why: str) -> LabStopped:
        """The outcome of a comparison that did not finish, with where its spend is."""
        self.close()
        if self.run_ids:
            where = (
                f"What was spent (rho {self.spent:.4g}) is recorded as "
                f"{'run' if len(self.run_ids) == 1 else 'runs'} "
                f"{', '.join(map(str, self.run_ids))} (History page)."
            )
        else:
            where = "Nothing was spent."
        return LabStopped(kind, f"{why} {where}", tuple(self.run_ids))


def _compare(request: LabRequest, tracker: LabTracker) -> LabOutcome:
    """The comparison and its records; every path ends in an outcome."""
    try:
        dataset = request.dataset()
    except (OSError, InputError) as exc:
        return LabStopped("refused", f"The table could not be read: {exc}")
    if tracker.cancelled:
        return LabStopped("cancelled", "it stopped before measuring anything and spent nothing.")
    total = request.plan.budget(request.epsilon, request.delta)
    held = records.reserve(
        dataset, request.name, total, request.delta, request.settings()["outcome"]
    )
    if isinstance(held, str):
        return LabStopped("refused", held)
    books = _Books(request, held, tracker)
    started = time.perf_counter()
    try:
        result = request.compare(on_progress=books.on_progress, on_measured=books.on_measured)
    except LabCancelled:
        if books.problem is not None:
            return books.stopped("failed", books.problem)
        return books.stopped("cancelled", "no results are shown.")
    except FailedAfterSpending as exc:
        return books.stopped("failed", f"The comparison failed after spending: {exc}.")
    except InputError as exc:
        return books.stopped("failed", f"The comparison could not run: {exc}.")
    books.close()
    if books.problem is not None:  # the last record failed after the last step
        return books.stopped("failed", books.problem)
    return LabDone(
        result, tuple(books.run_ids), time.perf_counter() - started, held.budget_warnings
    )
