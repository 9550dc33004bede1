"""``privsyn synthesize`` on adult-coded at epsilon 1, as a whole process (issue 23: <= 1.5 s).

Runs the command a user runs (README, "Command line"), with a fixed seed, as a child process
``--runs`` times after one warm-up, and prints the median, minimum and maximum of its wall
seconds and of its CPU seconds (user + system, from ``os.wait4``: on a machine shared with
other jobs the CPU seconds are the fair figure, the wall seconds rise with the load). The
same for ``python -c "import privsyn_core.cli"`` (what ``privsyn --help`` pays) and for
``import privsyn_core.commands`` (every import a command needs: numpy, pandas and the engine;
not networkx, which only the dashboard's graph needs). Then the in-process ``synthesize``
(issue 23: <= 1 s), and the SHA-256 of the synthetic CSV: the same seed must give the same
file before and after a speed change.

Every run records itself in a run registry in a temporary folder (``PRIVSYN_REGISTRY``), as
a user's run does in theirs, so the registry's work (the release bundle) is timed and the
user's own registry is left alone. ``--no-bytecode`` runs the children with
``PYTHONDONTWRITEBYTECODE=1`` and no bytecode cache, so every module is compiled from source
on every start (a checkout in such an environment); by default they use a bytecode cache in
the temporary folder, as an installed package does.
Run: ``python benchmarks/cli_speed.py [--runs 7] [--no-bytecode]``.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the in-process runs time this checkout, as the children do
TABLE = ROOT / "assets" / "adult-coded.csv"
DOMAIN = ROOT / "assets" / "adult-coded-domain.json"


def timed_child(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds (user + system) of one child process; its output discarded."""
    with tempfile.TemporaryFile() as errors:
        started = time.perf_counter()
        child = subprocess.Popen(argv, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=errors)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - started
        child.returncode = os.waitstatus_to_exitcode(status)
        if child.returncode != 0:
            errors.seek(0)
            raise SystemExit(f"{argv} failed ({child.returncode}): {errors.read().decode()}")
    return wall, usage.ru_utime + usage.ru_stime


def summary(name: str, runs: list[tuple[float, float]]) -> str:
    walls, cpus = [r[0] for r in runs], [r[1] for r in runs]
    return (
        f"{name:<34} wall {statistics.median(walls):6.3f} s ({min(walls):.3f}-{max(walls):.3f})"
        f"   cpu {statistics.median(cpus):6.3f} s ({min(cpus):.3f}-{max(cpus):.3f})"
    )


def in_process(runs: int) -> list[tuple[float, float]]:
    """``synthesize`` on the table as the CLI reads it, in this process (imports not timed)."""
    import json

    import numpy as np

    from privsyn_core import PrivSynConfig, synthesize
    from privsyn_core.data.io import read_table

    table = read_table(TABLE)
    domain = json.loads(DOMAIN.read_text())
    out = []
    for _ in range(runs + 1):
        wall, cpu = time.perf_counter(), time.process_time()
        synthesize(
            table, 1.0, 1e-9, domain=domain, config=PrivSynConfig(), rng=np.random.default_rng(0)
        )
        out.append((time.perf_counter() - wall, time.process_time() - cpu))
    return out[1:]  # the first is the warm-up


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument(
        "--no-bytecode", action="store_true", help="compile every module at every start"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        env = {**os.environ, "PRIVSYN_REGISTRY": str(Path(folder) / "registry.sqlite3")}
        if args.no_bytecode:
            env["PYTHONDONTWRITEBYTECODE"] = "1"
            env.pop("PYTHONPYCACHEPREFIX", None)
        else:
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            env["PYTHONPYCACHEPREFIX"] = str(Path(folder) / "bytecode")
        output = Path(folder) / "synthetic.csv"
        python = [sys.executable, "-m", "privsyn_core"]
        cases = {
            "privsyn synthesize (adult-coded)": [
                *python,
                "synthesize",
                str(TABLE),
                "--domain",
                str(DOMAIN),
                "--epsilon",
                "1",
                "--seed",
                "0",
                "-o",
                str(output),
            ],
            "import privsyn_core.cli": [sys.executable, "-c", "import privsyn_core.cli"],
            "import privsyn_core.commands": [sys.executable, "-c", "import privsyn_core.commands"],
        }
        print(
            f"{args.runs} runs after a warm-up, medians (min-max); "
            f"{'no bytecode' if args.no_bytecode else 'bytecode cached'}; load "
            f"{os.getloadavg()[0]:.1f} at the start"
        )
        for name, argv in cases.items():
            runs = [timed_child(argv, env) for _ in range(args.runs + 1)][1:]
            print(summary(name, runs), flush=True)
        digest = hashlib.sha256(output.read_bytes()).hexdigest()
    print(summary("synthesize in process", in_process(args.runs)))
    print(f"synthetic CSV (seed 0) sha256 {digest}; load {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
