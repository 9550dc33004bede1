"""``privsyn generate`` at scale: N rows from a release bundle to Parquet (issue 23).

The rows are made as blocks on worker processes and written as each is decoded, so memory
is bounded by the workers times the block size, not by the rows. This runs the command line
as a child process (start-up, bundle loading and writing included) and prints rows, wall
seconds, CPU seconds, rows per second, peak memory of the whole process tree (the CLI, the
fork server and its workers: PSS summed at one moment, sampled from /proc,
:mod:`benchmarks.tree_rss`) and the file size.

Without ``--bundle`` it fits adult-coded (assets/adult-coded.csv, epsilon 1, debug-mode
noise, seed 0) and saves that bundle in the output folder first (not timed).
Run: ``python benchmarks/generate.py [--rows 10000000] [--workers all] [--block-rows N]
[--bundle release.zip] [--out /tmp] [--format parquet|csv]``.
"""

from __future__ import annotations

import argparse
import json
import os
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
    model.fit(table, rng=np.random.default_rng(0)).save(bundle)
    return bundle


def run(argv: list[str]) -> tuple[float, float, float, int]:
    """Wall seconds, CPU seconds and peak memory (MB) of the process tree, and the exit
    status, of ``argv``."""
    started = time.perf_counter()
    child = subprocess.Popen(argv)
    with PeakTreeRss(pid=child.pid) as peak:
        child.wait()
    return time.perf_counter() - started, peak.cpu, peak.mb, child.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, nargs="+", default=[10_000_000])
    parser.add_argument("--workers", nargs="+", default=["all"])
    parser.add_argument("--block-rows", type=int, default=None)
    parser.add_argument("--bundle", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=None, help="folder (default: a temporary one)")
    parser.add_argument("--format", choices=["parquet", "csv"], default="parquet")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as scratch:
        folder = args.out or Path(scratch)
        bundle = args.bundle or adult_bundle(folder)
        cli = [sys.executable, "-m", "privsyn_core"]
        rows_out = []
        for rows in args.rows:
            for asked in args.workers:
                workers = available_cores() if asked == "all" else int(asked)
                out = folder / f"generated-{rows}-{workers}.{args.format}"
                argv = [*cli, "generate", str(bundle), "--rows", str(rows), "-o", str(out)]
                argv += ["--seed", str(args.seed), "--workers", str(workers), "-q"]
                if args.block_rows:
                    argv += ["--block-rows", str(args.block_rows)]
                seconds, cpu, peak, status = run(argv)
                size = out.stat().st_size / 2**20 if out.exists() else 0.0
                rows_out.append(
                    {
                        "rows": rows,
                        "workers": workers,
                        "status": status,
                        "seconds": round(seconds, 1),
                        "cpu_s": round(cpu, 1),
                        "rows_per_s": round(rows / seconds),
                        "peak_tree_mb": round(peak),
                        "file_mb": round(size),
                    }
                )
                print(rows_out[-1], flush=True)
                if out.exists() and args.out is None:
                    os.unlink(out)
    print(f"\nbundle {bundle.name}; {available_cores()} cores available; {args.format}")
    print_table(rows_out)


if __name__ == "__main__":
    main()
