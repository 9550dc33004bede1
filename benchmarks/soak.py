"""Load and soak with full default settings (issue 11, item 5).

1. Ten browser sessions (Debian's Chromium, on loopback) open one dashboard server and each
   clicks Run synthesis on the bundled Adult sample with the defaults (epsilon 1, delta 1e-9,
   at most 100 GUM iterations with the plateau stop, release mode). The server runs at most
   ``PRIVSYN_DASHBOARD_RUNS`` (default 2) at once; the rest wait in line. Prints the time from
   the first click until every session shows its result, and the server's resident memory
   before the clicks and at its peak (``VmHWM`` from /proc, the kernel's high-water mark, and
   the highest of samples taken every 0.1 s).
2. ``--runs`` runs (default 100) in this process the dashboard's way (``dashboard.worker``:
   a thread per run, budget check, synthesis, registry record with the bundle), on the Adult
   sample with the default settings, and prints the growth per run after ``--warm-up`` runs,
   in traced bytes (tracemalloc, which NumPy reports to) and in RSS.

Run: ``python benchmarks/soak.py [--sessions 10] [--runs 100] [--warm-up 10]``
(``--sessions 0`` or ``--runs 0`` skips a part). The registry is a temporary file. Wall times
depend on the neighbours' load on a shared machine: the CPU seconds are printed next to them.
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import sys
import tempfile
import time
import tracemalloc
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

MB = 2**20


def concurrent_sessions(sessions: int) -> None:
    import subprocess
    import urllib.request

    from playwright.sync_api import sync_playwright
    from test_dashboard_soak import CHROMIUM, Sampler, User, _free_port, rss_bytes

    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    folder = Path(tempfile.mkdtemp(prefix="privsyn-soak-"))
    env = {**os.environ, "PRIVSYN_REGISTRY": str(folder / "registry.sqlite3")}
    with (folder / "streamlit.log").open("w") as log:
        server = subprocess.Popen(
            [
                sys.executable, "-m", "streamlit", "run", "dashboard/app.py",
                "--server.headless", "true", "--server.port", str(port),
                "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false",
                "--server.fileWatcherType", "none",
            ],
            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env,
        )  # fmt: skip
    try:
        for _ in range(200):
            try:
                if urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).read() == b"ok":
                    break
            except OSError:
                time.sleep(0.3)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"]
            )
            users = [User(browser, url, 1.0, 0) for _ in range(sessions)]
            for user in users:  # the defaults: only open the Run page
                user.page.goto(url)
                user.idle()
                user.page.get_by_role("heading", name="UCI Adult sample").wait_for(timeout=60_000)
                user.open("Run")
            idle = rss_bytes(server.pid)
            cpu_before = _cpu_seconds(server.pid)
            with Sampler(server.pid) as sampler:
                started = time.monotonic()
                for user in users:
                    user.page.get_by_role("button", name="Run synthesis").click()
                pending = list(users)
                while pending:
                    if time.monotonic() - started > 1800:
                        raise RuntimeError(f"{len(pending)} runs unfinished after 30 min")
                    pending = [user for user in pending if not user.finished()]
                    time.sleep(0.2)
                seconds = time.monotonic() - started
            cpu = _cpu_seconds(server.pid) - cpu_before
            peak = max(sampler.peak, rss_bytes(server.pid, "VmHWM"))
            waited = sum(user.saw_line for user in users)
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=30)
    print(
        f"{sessions} sessions, default settings, cap {os.environ.get('PRIVSYN_DASHBOARD_RUNS', 2)}"
        f": all finished {seconds:.1f} s after the first click (server CPU {cpu:.1f} s); "
        f"{waited} sessions were seen waiting in line"
    )
    print(
        f"server RSS with every session open, before the clicks: {idle / MB:.0f} MB; peak "
        f"{peak / MB:.0f} MB (+{(peak - idle) / MB:.0f} MB)"
    )


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def hundred_runs(runs: int, warm_up: int) -> None:
    os.environ["PRIVSYN_REGISTRY"] = str(Path(tempfile.mkdtemp()) / "registry.sqlite3")
    from test_soak_runs import rss

    from dashboard import worker
    from privsyn_core import synthesize
    from privsyn_core.config import PrivSynConfig
    from privsyn_core.data.io import read_table
    from privsyn_core.release.registry import Registry, fingerprint

    table = read_table(ROOT / "privsyn_core" / "samples" / "adult.csv")
    dataset = fingerprint(table)
    config = PrivSynConfig()

    def one() -> None:
        run = partial(synthesize, table, 1.0, 1e-9, config=config)
        job = worker.start(
            worker.RunRequest(run, lambda: dataset, "adult.csv", 1.0, 1e-9, config, {})
        )
        job.thread.join()
        outcome = job.progress.snapshot().outcome
        assert isinstance(outcome, worker.Done), outcome

    def settled() -> tuple[int, int]:
        gc.collect()
        return tracemalloc.get_traced_memory()[0], rss()

    tracemalloc.start()
    for _ in range(warm_up):
        one()
    traced_start, rss_start = settled()
    started, cpu_start = time.perf_counter(), time.process_time()
    for _ in range(runs - warm_up):
        one()
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu_start
    traced_end, rss_end = settled()
    tracemalloc.stop()
    measured = runs - warm_up
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"{runs} runs in one process (default settings, worker + registry + bundle), measured "
        f"after {warm_up}: {seconds / measured:.2f} s/run (CPU {cpu / measured:.2f} s/run)"
    )
    print(
        f"growth per run: traced {(traced_end - traced_start) / measured / 1024:+.1f} KB, RSS "
        f"{(rss_end - rss_start) / measured / 1024:+.1f} KB (RSS {rss_start / MB:.0f} -> "
        f"{rss_end / MB:.0f} MB, peak {peak:.0f} MB); registry rows {len(Registry().runs())}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--warm-up", type=int, default=10)
    args = parser.parse_args()
    os.chdir(ROOT)
    if args.sessions:
        concurrent_sessions(args.sessions)
    if args.runs:
        hundred_runs(args.runs, args.warm_up)


if __name__ == "__main__":
    main()
