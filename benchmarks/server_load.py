"""The dashboard's server under many sessions: its CPU against the runs' own (issue 24).

Starts ``streamlit run dashboard/app.py`` (as the browser tests do: its own registry, a free
local port), opens ``--sessions`` browser sessions in Debian's Chromium, and has each start one
run of the bundled sample on the Run page at the dashboard's defaults (epsilon 1, GUM up to 100
iterations with the plateau stop). The server runs at most 2 at once (its default cap), so most
of them wait in line first. Printed:

- the server process's CPU seconds (user + system, from ``/proc``) from the first click until
  every session shows its result, and the wall time;
- the server's CPU seconds while the sessions then stay open, idle, for ``--idle`` seconds;
- the runs' own CPU seconds: what the server's worker thread does for a run (fingerprint,
  reservation, the same synthesis, the record with its bundle) done as many times in a fresh
  process, without a server, so what the server spends beyond that is the cost of serving:
  polling, redraws, reruns, and the threads' contention for the interpreter;
- with ``--cancel``: how long Cancel took to take the last session's waiting run out of the
  line (from the click until its page says so).

Run from the repository root: ``python benchmarks/server_load.py --sessions 10 --cancel``.
Chromium's own CPU is not counted (it is the users' machines' cost, not the server's).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT)]

from browser_support import CHROMIUM, Session, streamlit_server  # noqa: E402
from playwright.sync_api import sync_playwright  # noqa: E402

_TICK = os.sysconf("SC_CLK_TCK")

#: what the server's worker thread does for each run (dashboard/worker.py ``_run``): the
#: table's fingerprint, the registry's reservation, the engine call the Run page makes for
#: the sample at the dashboard's defaults (dashboard/views/run.py ``request``,
#: dashboard/state.py ``DEFAULTS``), and the record of the run with its release bundle
RUNS_ALONE = """
import os, sys, time
from functools import partial
from importlib import resources
from dashboard import worker
from dashboard.state import SAMPLE
from privsyn_core import synthesize
from privsyn_core.config import PrivSynConfig
from privsyn_core.data.io import read_table
from privsyn_core.data.schema import Schema
from privsyn_core.generation.gum_settings import GumSettings  # noqa: E402
from privsyn_core.release.registry import fingerprint
with resources.as_file(SAMPLE) as path:
    table = read_table(path)
config = PrivSynConfig(gum=GumSettings(iterations=100, patience=10))
run = partial(synthesize, table, 1.0, 1e-9, schema=Schema.undeclared(table.columns),
              raw_domains=False, config=config, rng=None, block_rows=2**62)
before, wall = os.times(), time.perf_counter()
for _ in range(int(sys.argv[1])):
    request = worker.RunRequest(run, partial(fingerprint, table), "adult.csv", 1.0, 1e-9,
                                config, {"epsilon": 1.0, "delta": 1e-9})
    outcome = worker._run(request, worker.RunProgress(100))
    assert isinstance(outcome, worker.Done), outcome
after = os.times()
cpu = sum(after[:4]) - sum(before[:4])
print(f"{cpu:.2f} {time.perf_counter() - wall:.2f}")
"""


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` and its waited-for children."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(f) for f in fields[11:15]) / _TICK


def runs_alone(runs: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory(prefix="privsyn-alone-") as folder:
        done = subprocess.run(
            [sys.executable, "-c", RUNS_ALONE, str(runs)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PRIVSYN_REGISTRY": str(Path(folder) / "registry.sqlite3")},
        )
    cpu, wall = done.stdout.split()
    return float(cpu), float(wall)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10)
    parser.add_argument("--idle", type=float, default=20.0, help="seconds open after the runs")
    parser.add_argument("--cancel", action="store_true", help="cancel the last waiting run")
    parser.add_argument("--limit", type=float, default=600.0, help="give up after (s)")
    args = parser.parse_args()

    with (
        tempfile.TemporaryDirectory(prefix="privsyn-load-") as folder,
        streamlit_server(Path(folder)) as server,
        sync_playwright() as playwright,
    ):
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--no-first-run", "--disable-sync"],
        )  # fmt: skip
        sessions = [Session(browser, server.url) for _ in range(args.sessions)]
        for user in sessions:
            user.page.get_by_role("heading", name="UCI Adult sample").wait_for(timeout=60_000)
            user.open("Run")
        pid = server.process.pid
        print(f"{args.sessions} sessions open on the Run page; server pid {pid}", flush=True)

        cpu0, wall0 = cpu_seconds(pid), time.perf_counter()
        for user in sessions:
            user.page.get_by_role("button", name="Run synthesis").click()
        cancelled = None
        if args.cancel:
            last = sessions[-1]
            last.page.get_by_text("Waiting for a free slot").first.wait_for(timeout=60_000)
            clicked = time.perf_counter()
            last.page.get_by_role("button", name="Cancel").last.click()
            last.page.get_by_text("while it waited for a free slot").first.wait_for(
                timeout=args.limit * 1000
            )
            cancelled = time.perf_counter() - clicked
        expected = sessions[:-1] if args.cancel else sessions
        pending = list(expected)
        while pending and time.perf_counter() - wall0 < args.limit:
            pending = [u for u in pending if not u.page.get_by_text("Synthesised").count()]
            time.sleep(0.5)
        wall = time.perf_counter() - wall0
        cpu = cpu_seconds(pid) - cpu0
        idle0 = cpu_seconds(pid)
        time.sleep(args.idle)
        idle = cpu_seconds(pid) - idle0
        for user in sessions:
            user.close()
        browser.close()

    finished = len(expected) - len(pending)
    alone_cpu, alone_wall = runs_alone(finished)
    print(f"runs finished:                  {finished} of {len(expected)}")
    print(f"wall time, first click to last result: {wall:.1f} s")
    print(f"server CPU seconds meanwhile:   {cpu:.1f}")
    print(f"runs' own CPU seconds:          {alone_cpu:.1f} ({finished} runs without a server, "
          f"{alone_wall:.1f} s wall)")  # fmt: skip
    print(f"server CPU beyond the runs:     {cpu - alone_cpu:.1f}")
    print(f"server CPU, {args.sessions} sessions idle {args.idle:.0f} s after: {idle:.1f}")
    if cancelled is not None:
        print(f"cancel of a waiting run took:   {cancelled:.1f} s (click to the page saying so)")


if __name__ == "__main__":
    main()
