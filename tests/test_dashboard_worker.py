"""The dashboard's background runs (dashboard/worker.py), without Streamlit: the server-wide
cap and the line of runs waiting for a slot, Cancel within one GUM iteration with its spend
recorded (or out of the line, spending nothing), refusals before anything runs."""

from __future__ import annotations

import gc
import math
import threading
import time
from functools import partial

import numpy as np
import pytest
from conftest import ROOT

from dashboard import worker
from privsyn_core import synthesize
from privsyn_core.config import PrivSynConfig
from privsyn_core.data.io import read_table
from privsyn_core.errors import InputError
from privsyn_core.generation.gum_settings import GumSettings
from privsyn_core.privacy.budget import Budget
from privsyn_core.privacy.conversion import rho_from_epsilon_delta
from privsyn_core.progress import BlockProgress, GumProgress
from privsyn_core.release.registry import Registry, fingerprint

SETTINGS = {"epsilon": 1.0, "delta": 1e-9}


def request(run, config: PrivSynConfig | None = None, dataset: str = "table") -> worker.RunRequest:
    return worker.RunRequest(
        synthesize=run,
        dataset=lambda: dataset,
        name="t.csv",
        epsilon=1.0,
        delta=1e-9,
        config=config or PrivSynConfig(),
        settings=SETTINGS,
    )


def ended(job: worker.Job, timeout: float = 120) -> worker.Outcome:
    job.thread.join(timeout)
    outcome = job.progress.snapshot().outcome
    assert outcome is not None, "the run ended"
    return outcome


def wait_for(condition, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the condition held in time"
        time.sleep(0.01)


@pytest.mark.slow
def test_runs_past_the_cap_wait_in_line_and_start_in_order(monkeypatch):
    monkeypatch.setenv(worker.MAX_RUNS_VARIABLE, "1")
    release = threading.Event()
    started: list[str] = []

    def blocked(name):
        def run(*, on_progress):
            started.append(name)
            release.wait(30)
            raise InputError(f"{name} stopped by the test")

        return run

    first = worker.start(request(blocked("first")))
    wait_for(lambda: started == ["first"])
    second = worker.start(request(blocked("second")))
    third = worker.start(request(blocked("third")))
    assert second is not None and third is not None  # waiting, not refused
    wait_for(lambda: third.progress.snapshot().ahead == 1)
    assert second.progress.snapshot().ahead == 0 and first.progress.snapshot().ahead is None
    assert "you are next" in second.progress.snapshot().stage_text
    assert "1 run ahead of you" in third.progress.snapshot().stage_text
    assert worker.SLOTS.busy == 1 and worker.SLOTS.waiting == 2
    time.sleep(0.5)
    assert started == ["first"], "nothing past the cap started"
    release.set()
    for job, name in [(first, "first"), (second, "second"), (third, "third")]:
        outcome = ended(job)
        assert isinstance(outcome, worker.Failed) and f"{name} stopped" in outcome.message
    assert started == ["first", "second", "third"]  # first in, first out
    assert worker.SLOTS.busy == 0 and worker.SLOTS.waiting == 0


def test_cancel_takes_a_waiting_run_out_of_line_and_spends_nothing(monkeypatch):
    monkeypatch.setenv(worker.MAX_RUNS_VARIABLE, "1")
    release = threading.Event()
    called: list[str] = []

    def blocked(*, on_progress):
        called.append("blocked")
        release.wait(30)
        raise InputError("stopped by the test")

    first = worker.start(request(blocked))
    wait_for(lambda: called == ["blocked"])
    waiting = worker.start(request(lambda *, on_progress: called.append("waiting")))
    behind = worker.start(request(lambda *, on_progress: called.append("behind")))
    wait_for(lambda: behind.progress.snapshot().ahead == 1)
    waiting.cancel()
    # ended as cancel() returns, in the caller's thread: no wait for the run's own thread
    # (issue 24: under load, a cancel that waited for it and then a poll took minutes)
    assert waiting.progress.snapshot().outcome == worker.Cancelled(None, waiting=True)
    outcome = ended(waiting, timeout=5)  # at once, although the slot is still held
    assert outcome == worker.Cancelled(None, waiting=True)
    wait_for(lambda: behind.progress.snapshot().ahead == 0)  # it moved up
    assert worker.SLOTS.busy == 1 and worker.SLOTS.waiting == 1
    release.set()
    ended(first)
    ended(behind)
    assert called == ["blocked", "behind"] and not Registry().runs()
    assert worker.SLOTS.busy == 0 and worker.SLOTS.waiting == 0


def test_at_most_the_cap_runs_at_once_and_a_full_line_refuses(monkeypatch):
    monkeypatch.setenv(worker.MAX_RUNS_VARIABLE, "2")
    monkeypatch.setenv(worker.MAX_WAITING_VARIABLE, "4")
    lock = threading.Lock()
    now, most = [0], [0]
    release = threading.Event()

    def counted(*, on_progress):
        with lock:
            now[0] += 1
            most[0] = max(most[0], now[0])
        release.wait(30)
        time.sleep(0.05)
        with lock:
            now[0] -= 1
        raise InputError("stopped by the test")

    jobs = [worker.start(request(counted)) for _ in range(6)]
    assert all(job is not None for job in jobs)
    wait_for(lambda: worker.SLOTS.waiting == 4 and worker.SLOTS.busy == 2)
    assert worker.start(request(counted)) is None  # the line is full: refused, no thread
    release.set()
    for job in jobs:
        ended(job)
    assert most[0] == 2 and worker.SLOTS.busy == 0 and worker.SLOTS.waiting == 0


def test_a_bug_in_a_run_is_an_outcome_and_frees_its_slot():
    def broken(*, on_progress):
        raise ZeroDivisionError("oops")

    outcome = ended(worker.start(request(broken)))
    assert isinstance(outcome, worker.Failed) and "internal error" in outcome.message
    assert worker.SLOTS.busy == 0


def test_a_runs_cyclic_garbage_is_collected_when_it_ends():
    """The server runs without Streamlit's collection after every script run (a full pass per
    poll took over half of a busy server's time): the worker collects once, when a run ends."""
    collected = threading.Event()

    class Cycle:
        def __init__(self) -> None:
            self.itself = self

        def __del__(self) -> None:
            collected.set()

    def leaves_a_cycle(*, on_progress):
        Cycle()
        raise ZeroDivisionError("after making garbage")

    gc.disable()  # only the worker's own collection can find the cycle
    try:
        ended(worker.start(request(leaves_a_cycle)))
        assert collected.is_set()
    finally:
        gc.enable()


@pytest.mark.slow
def test_cancel_stops_within_one_gum_iteration_and_records_the_spend():
    table = read_table(ROOT / "privsyn_core" / "samples" / "adult.csv")
    config = PrivSynConfig(gum=GumSettings(iterations=500, patience=None, noise_floor=None))
    run = partial(synthesize, table, 1.0, 1e-9, config=config, rng=np.random.default_rng(1))
    job = worker.start(request(run, config, dataset=fingerprint(table)))
    deadline = time.monotonic() + 120
    while len(job.progress.snapshot().history) < 3 and time.monotonic() < deadline:
        assert job.progress.snapshot().outcome is None, job.progress.snapshot().outcome
        time.sleep(0.01)
    seen = len(job.progress.snapshot().history)
    assert seen >= 3, "GUM started"
    job.cancel()
    outcome = ended(job)
    snap = job.progress.snapshot()
    assert isinstance(outcome, worker.Cancelled) and snap.cancelling
    # the callback reads the flag after every iteration: at most the one under way finishes
    assert seen <= len(snap.history) <= seen + 1
    (recorded,) = Registry().runs()
    assert outcome.run_id == recorded.id and recorded.config["outcome"] == "cancelled"
    assert not recorded.has_bundle
    # every measurement is made before GUM starts: all of them are on the record
    assert recorded.ledger["measurements"][-1]["step"] == "marginal"
    assert 0 < recorded.rho <= rho_from_epsilon_delta(1.0, 1e-9) * (1 + 1e-9)


def test_a_run_past_the_lifetime_budget_is_refused_before_it_starts():
    Registry().set_lifetime_budget(
        "table", "t.csv", Budget(rho_from_epsilon_delta(1.0, 1e-9) / 2, math.inf)
    )
    called = []
    outcome = ended(worker.start(request(lambda *, on_progress: called.append(1))))
    assert isinstance(outcome, worker.Failed) and outcome.refused
    assert "Run refused" in outcome.message and not called
    assert not Registry().runs()


def test_progress_snapshots_are_taken_while_the_worker_writes():
    progress = worker.RunProgress(iterations=10)

    def writer():
        for i in range(2000):
            progress.on_progress(GumProgress(i, 2000, 0.5, 0.1, {}, 0.0))

    thread = threading.Thread(target=writer)
    thread.start()
    lengths = []
    while thread.is_alive():
        lengths.append(len(progress.snapshot().history))
    thread.join()
    assert lengths == sorted(lengths)  # every snapshot a consistent prefix
    assert len(progress.snapshot().history) == 2000
    assert progress.on_progress(GumProgress(0, 1, 0.5, 0.1, {}, 0.0)) is True
    progress.cancel()
    assert progress.on_progress(GumProgress(1, 1, 0.5, 0.1, {}, 0.0)) is False


def test_two_sessions_running_at_once_cannot_both_pass_a_lifetime_budget(monkeypatch):
    """The server runs two syntheses at once: two sessions that click Run together on a
    table whose lifetime budget holds 1.5 runs. The second one's reservation is refused
    before it measures anything, while the first is still measuring (issue 21)."""
    monkeypatch.setenv(worker.MAX_RUNS_VARIABLE, "2")
    one_run = rho_from_epsilon_delta(1.0, 1e-9)
    Registry().set_lifetime_budget("shared", "t.csv", Budget(1.5 * one_run, math.inf))
    measuring = threading.Event()
    release = threading.Event()
    measured: list[str] = []

    def slow_run(name):
        def run(*, on_progress):
            measured.append(name)
            measuring.set()
            release.wait(30)
            raise InputError(f"{name} stopped by the test before spending")

        return run

    first = worker.start(request(slow_run("first"), dataset="shared"))
    assert measuring.wait(30)
    second = ended(worker.start(request(slow_run("second"), dataset="shared")))
    assert isinstance(second, worker.Failed) and second.refused
    assert (
        "lifetime privacy budget" in second.message and "held by runs in progress" in second.message
    )
    assert measured == ["first"]  # the refused run never reached the engine
    (held,) = Registry().held("shared")
    assert held.rho == one_run and held.process_alive()
    release.set()
    assert isinstance(ended(first), worker.Failed)
    assert Registry().held() == []  # nothing was measured: the reservation was given back


def test_a_run_of_several_blocks_says_which_block_is_done():
    """Blocks run GUM in worker processes and report per block, not per iteration: the Run
    page's line must follow them rather than stand still on the stage's start."""
    progress = worker.RunProgress(iterations=100)
    assert progress.on_progress(BlockProgress(3, 12, 50_000, 31, 42.0)) is True
    text = progress.snapshot().stage_text
    assert "block 3 of 12 done" in text and "50,000 rows" in text
    progress.cancel()
    assert progress.on_progress(BlockProgress(4, 12, 50_000, 30, 50.0)) is False
