"""A hundred runs in one process, the dashboard's way, without memory growth.

Each run goes through :func:`dashboard.worker.start` as a Run page click does: a thread of its
own, the budget check, the synthesis, the registry record with the release bundle. A server
runs for days, so whatever a run leaves behind accumulates: the memory after the runs must
stay where it was after a warm-up, and the registry must hold every run, whole.

The table is the first 8,000 rows of the bundled Adult sample (all 15 columns survive the
private domain estimates at epsilon 1) with two GUM iterations: the same code path as a
full run, a hundred times in about a minute or two on a shared machine. What a leak would
keep (a synthetic table, its bundle, a progress history) is still megabytes per run, far
above the bound, and the test checks that the instrument sees it: one outcome kept alive.
"""

from __future__ import annotations

import gc
import io
import json
import sqlite3
import tracemalloc
import zipfile
from functools import partial
from hashlib import sha256
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT

from dashboard import worker
from privsyn_core import synthesize
from privsyn_core.config import PrivSynConfig
from privsyn_core.data.io import read_table
from privsyn_core.generation.gum_settings import GumSettings
from privsyn_core.privacy.conversion import rho_from_epsilon_delta
from privsyn_core.release.registry import Registry, default_path, fingerprint

# slow as a whole: a hundred runs in one process: minutes
pytestmark = pytest.mark.slow

RUNS = 100
WARM_UP = 10
ROWS = 8000
DELTA = 1e-9
CONFIG = PrivSynConfig(gum=GumSettings(iterations=2, patience=None))
MB = 2**20


def epsilon_of(i: int) -> float:
    return 1.0 + (i % 5) * 0.25


def rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def one_run(table, dataset: str, i: int) -> worker.Done:
    """Run ``i`` as the dashboard runs it, in a worker thread; its outcome."""
    epsilon = epsilon_of(i)
    run = partial(synthesize, table, epsilon, DELTA, config=CONFIG, rng=np.random.default_rng(i))
    job = worker.start(
        worker.RunRequest(
            synthesize=run,
            dataset=lambda: dataset,
            name="adult-8000.csv",
            epsilon=epsilon,
            delta=DELTA,
            config=CONFIG,
            settings={"epsilon": epsilon, "delta": DELTA, "run": i},
        )
    )
    assert job is not None
    job.thread.join(120)
    outcome = job.progress.snapshot().outcome
    assert isinstance(outcome, worker.Done), outcome
    return outcome


def settled() -> tuple[int, int]:
    """Traced bytes and RSS once the garbage is collected."""
    gc.collect()
    return tracemalloc.get_traced_memory()[0], rss()


def test_a_hundred_runs_keep_memory_flat_and_the_registry_whole(capsys):
    table = read_table(ROOT / "privsyn_core" / "samples" / "adult.csv").head(ROWS)
    dataset = fingerprint(table)
    tracemalloc.start()
    try:
        for i in range(WARM_UP):
            one_run(table, dataset, i)
        traced_start, rss_start = settled()
        peak_rss = rss_start
        for i in range(WARM_UP, RUNS):
            one_run(table, dataset, i)
            peak_rss = max(peak_rss, rss())
        traced_end, rss_end = settled()
        # the instrument: one run's outcome kept alive (what a leak would keep per run)
        kept = one_run(table, dataset, RUNS)
        leak_unit = settled()[0] - traced_end
    finally:
        tracemalloc.stop()
    assert kept.result.n_records > 0 and leak_unit > 1 * MB, "the traced bytes see a kept run"
    measured = RUNS - WARM_UP
    traced_per_run = (traced_end - traced_start) / measured
    rss_per_run = (rss_end - rss_start) / measured
    with capsys.disabled():
        print(
            f"\n[soak] {measured} runs after {WARM_UP} warm-up ({ROWS} Adult rows, 2 GUM "
            f"iterations, worker + registry + bundle): traced growth "
            f"{traced_per_run / 1024:+.1f} KB/run, RSS {rss_per_run / 1024:+.1f} KB/run "
            f"(RSS {rss_start / MB:.0f} -> {rss_end / MB:.0f} MB, peak {peak_rss / MB:.0f} MB); "
            f"one run's kept outcome is {leak_unit / MB:.1f} MB"
        )
    # A leak of one run's outcome (its synthetic table, bundle and history) per run grows the
    # traced bytes by leak_unit per run: the bound is a twentieth of that
    assert traced_per_run < leak_unit / 20, (traced_per_run, leak_unit)
    # RSS also moves with the allocator's arenas (each run is a new thread; about 190 KB a
    # run measured here, flat in traced bytes): a looser bound, half a kept outcome per run
    assert rss_per_run < leak_unit / 2, (rss_per_run, leak_unit)

    registry = Registry()
    runs = [run for run in registry.runs() if run.config.get("run") is not None]
    assert len(registry.runs()) == len(runs) == RUNS + 1  # and the instrument's run
    assert sorted(run.config["run"] for run in runs) == list(range(RUNS + 1))
    total = 0.0
    for run in runs:
        epsilon = epsilon_of(run.config["run"])
        assert run.epsilon == pytest.approx(epsilon)
        assert 0 < run.rho <= rho_from_epsilon_delta(epsilon, DELTA) * (1 + 1e-9)
        assert sum(m["rho"] for m in run.ledger["measurements"]) == pytest.approx(run.rho)
        total += run.rho
        with zipfile.ZipFile(io.BytesIO(registry.bundle(run.id))) as archive:
            files = {name: archive.read(name) for name in archive.namelist()}
        manifest = json.loads(files.pop("manifest.json"))
        assert manifest["files"] == {n: sha256(d).hexdigest() for n, d in files.items()}
    assert registry.budget(dataset).spent.rho == pytest.approx(total, rel=1e-12)
    with sqlite3.connect(default_path()) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
