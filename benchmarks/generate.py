"""``privsyn generate`` at scale: N rows from a release bundle to Parquet (issue 23).

The rows are made as blocks on worker processes and written as each is decoded, so memory
is bounded by the workers times the block size, not by the rows. This runs the command line
as a child process (start-up, bundle loading and writing included) and prints rows, wall
seconds, CPU seconds, rows per second, peak memory of the whole process tree (the CLI, the
fork server and its workers: PSS summed at one moment, sampled from /proc,
:mod:`benchmarks.tree_rss`) and the file size.

Without ``--bundle`` it fits adult-coded (assets/adult-coded.csv, epsilon 1, debug-mode
noise, seed 0) and saves that bundle in the output folder first (not timed).

``--engine spark`` runs ``privsyn generate --engine spark --spark-master local[W]`` (W the
workers): Spark's tasks make the blocks and Spark writes the Parquet folder; the times
include starting Spark's JVM, and the memory its JVM and Python workers. ``--repeat R``
runs each case R times, interleaving the engines, and prints the median of each.
Run: ``python benchmarks/generate.py [--rows 10000000] [--workers all] [--block-rows N]
[--bundle release.zip] [--out /tmp] [--format parquet|csv] [--engine local spark]
[--repeat 3]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.common import print_table  # noqa: E402
from benchmarks.tree_rss import PeakTreeRss  # noqa: E402
from privsyn_core import PrivSyn  # noqa: E402
from privsyn_core.cores import available_cores  # noqa: E402


def adult_bundle(folder: Path) -> Path:
    table = pd.read_csv(ROOT / "assets" / "adult-coded.csv")
    domain = json.loads((ROOT / "assets" / "adult-coded-domain.json").read_text())
    bundle = folder / "adult-coded.zip"
    model = PrivSyn(1.0, 1 / len(table) ** 2, domain=domain)
    PrivSyn.save(model.fit(table, rng=np.random.default_rng(0)), bundle)
    return bundle


def run(argv: list[str]) -> tuple[float, float, float, int]:
    """Wall seconds, CPU seconds and peak memory (MB) of the process tree, and the exit
    status, of ``argv``."""
    started = time.perf_counter()
    child = subprocess.Popen(argv)
    with PeakTreeRss(pid=child.pid) as peak:
        child.wait()
    return time.perf_counter() - started, peak.cpu, peak.mb, child.returncode


def one_run(
    args: argparse.Namespace,
    cli: list[str],
    bundle: Path,
    folder: Path,
    rows: int,
    workers: int,
    engine: str,
) -> dict:
    out = folder / f"generated-{rows}-{workers}-{engine}.{args.format}"
    argv = [*cli, "generate", str(bundle), "--rows", str(rows), "-o", str(out)]
    argv += ["--seed", str(args.seed), "-q"]
    if engine == "spark":
        argv += ["--engine", "spark", "--spark-master", f"local[{workers}]"]
    else:
        argv += ["--workers", str(workers)]
    if args.block_rows:
        argv += ["--block-rows", str(args.block_rows)]
    seconds, cpu, peak, status = run(argv)
    size = output_bytes(out) / 2**20
    if out.exists() and args.out is None:
        shutil.rmtree(out) if out.is_dir() else os.unlink(out)
    return {
        "rows": rows,
        "engine": engine,
        "workers": workers,
        "status": status,
        "seconds": round(seconds, 1),
        "cpu_s": round(cpu, 1),
        "rows_per_s": round(rows / seconds),
        "peak_tree_mb": round(peak),
        "file_mb": round(size),
    }


def output_bytes(out: Path) -> int:
    """The output's size: a file, or Spark's folder of parts."""
    if out.is_dir():
        return sum(p.stat().st_size for p in out.iterdir() if p.is_file())
    return out.stat().st_size if out.exists() else 0


def median_of(results: list[dict]) -> dict:
    """One row of the medians of repeated runs (their count in ``runs``)."""
    row = dict(results[0])
    for key in ("seconds", "cpu_s", "rows_per_s", "peak_tree_mb", "file_mb"):
        row[key] = round(statistics.median(r[key] for r in results), 1)
    row["status"] = max(r["status"] for r in results)
    row["runs"] = len(results)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, nargs="+", default=[10_000_000])
    parser.add_argument("--workers", nargs="+", default=["all"])
    parser.add_argument("--block-rows", type=int, default=None)
    parser.add_argument("--bundle", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=None, help="folder (default: a temporary one)")
    parser.add_argument("--format", choices=["parquet", "csv"], default="parquet")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--engine", nargs="+", choices=["local", "spark"], default=["local"])
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as scratch:
        folder = args.out or Path(scratch)
        bundle = args.bundle or adult_bundle(folder)
        cli = [sys.executable, "-m", "privsyn_core"]
        rows_out = []
        for rows in args.rows:
            for asked in args.workers:
                workers = available_cores() if asked == "all" else int(asked)
                runs: dict[str, list[dict]] = {engine: [] for engine in args.engine}
                for attempt in range(args.repeat):
                    for engine in args.engine:
                        result = one_run(args, cli, bundle, folder, rows, workers, engine)
                        print({**result, "attempt": attempt + 1}, flush=True)
                        runs[engine].append(result)
                for results in runs.values():
                    rows_out.append(median_of(results))
    print(f"\nbundle {bundle.name}; {available_cores()} cores available; {args.format}")
    print_table(rows_out)


if __name__ == "__main__":
    main()
