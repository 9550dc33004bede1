"""Scale run: a generated 600,000 x 100 table with planted or dense correlations.

``--table planted`` (default): twenty hidden factors each drive five columns (domains of 2 to
40 values; each value copies its factor with probability 0.6-0.9, else is uniform), so the
table has strong, known dependencies inside groups and none across them.

``--table dense``: every column after the first copies an earlier column (chosen uniformly,
value taken mod its own domain size) with probability 0.4-0.75, else is uniform. Dependencies
chain through the whole table, so selection keeps hundreds of pairs (about 850 at epsilon 1,
740 marginals after combining) in one component: the worst case for GUM's per-marginal cost.

Prints seconds per stage, seconds per GUM iteration, total seconds (median over
``--repeats`` runs) and the process's CPU seconds over them (on a shared machine wall time
varies with the neighbours' load, CPU time much less), the number of marginals and GUM
iterations, and peak resident memory (the process's high-water mark, which includes the
table itself).
Run: ``python benchmarks/scale.py [--table planted|dense] [--rows 600000] [--cols 100]
[--epsilon 1] [--repeats 3] [--kernel auto|compiled|reference]``.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.common import median, print_table  # noqa: E402
from privsyn_core import GumProgress, PrivSynConfig, StageFinished, synthesize  # noqa: E402
from privsyn_core.generation.gum import GumSettings  # noqa: E402


def planted_table(rows: int, cols: int, rng: np.random.Generator) -> tuple[pd.DataFrame, dict]:
    factors = max(1, cols // 5)
    hidden = rng.integers(0, 40, size=(factors, rows))
    data, domain = {}, {}
    for c in range(cols):
        size = int(rng.integers(2, 41))
        keep = rng.uniform(0.6, 0.9)
        copy = hidden[c % factors] % size
        noise = rng.integers(0, size, rows)
        data[f"c{c:03d}"] = np.where(rng.random(rows) < keep, copy, noise).astype(np.int16)
        domain[f"c{c:03d}"] = size
    return pd.DataFrame(data), domain


def dense_table(rows: int, cols: int, rng: np.random.Generator) -> tuple[pd.DataFrame, dict]:
    data, domain = {}, {}
    columns: list[np.ndarray] = []
    for c in range(cols):
        size = int(rng.integers(2, 41))
        noise = rng.integers(0, size, rows)
        if columns:
            parent = columns[int(rng.integers(0, len(columns)))]
            keep = rng.uniform(0.4, 0.75)
            noise = np.where(rng.random(rows) < keep, parent % size, noise)
        columns.append(noise.astype(np.int16))
        data[f"c{c:03d}"] = columns[-1]
        domain[f"c{c:03d}"] = size
    return pd.DataFrame(data), domain


TABLES = {"planted": planted_table, "dense": dense_table}


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--table", choices=sorted(TABLES), default="planted")
    parser.add_argument("--rows", type=int, default=600_000)
    parser.add_argument("--cols", type=int, default=100)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--iterations", type=int, default=GumSettings().iterations)
    parser.add_argument("--kernel", choices=["auto", "compiled", "reference"], default="auto")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=3, help="runs (seeds seed, seed+1, ...)")
    args = parser.parse_args()

    table, domain = TABLES[args.table](args.rows, args.cols, np.random.default_rng(args.seed))
    before = peak_rss_mb()
    print(
        f"{args.table} table: {args.rows} rows x {args.cols} columns; "
        f"RSS before run {before:.0f} MB"
    )

    last = time.perf_counter()

    def progress(event: object) -> bool:
        nonlocal last
        if isinstance(event, StageFinished):
            print(f"  {event.stage.value:<12} {event.seconds:8.2f} s  {event.summary}", flush=True)
        elif isinstance(event, GumProgress) and event.iteration % 10 == 0:
            now = time.perf_counter()
            print(
                f"    GUM iteration {event.iteration:3d}: mean L1 {event.mean_error:.4f}, "
                f"{now - last:.1f} s since last report",
                flush=True,
            )
            last = now
        return True

    config = PrivSynConfig(gum=GumSettings(iterations=args.iterations, kernel=args.kernel))
    totals, stage_runs, cpu = [], [], []
    for run in range(args.repeats):
        started, cpu_started = time.perf_counter(), time.process_time()
        result = synthesize(
            table,
            args.epsilon,
            1 / args.rows**2,
            domain=domain,
            config=config,
            rng=np.random.default_rng(args.seed + run),
            on_progress=progress,
        )
        totals.append(time.perf_counter() - started)
        cpu.append(time.process_time() - cpu_started)
        stage_runs.append(result.stage_seconds)
        per_iteration = [h.seconds for h in result.history]
        print(
            f"run {run}: {totals[-1]:.1f} s ({cpu[-1]:.1f} CPU s), "
            f"{len(result.marginals)} marginals, "
            f"{len(result.history)} GUM iterations "
            f"(median {median(per_iteration) if per_iteration else 0:.2f} s each), "
            f"{len(result.appended)} appended",
            flush=True,
        )
    stages = [{"stage": k, "median_s": median([r[k] for r in stage_runs])} for k in stage_runs[0]]
    print()
    print_table(stages)
    print(
        f"\nrows {args.rows}, cols {args.cols}, epsilon {args.epsilon:g}, {args.repeats} runs: "
        f"median total {median(totals):.1f} s (min {min(totals):.1f}, max {max(totals):.1f}; "
        f"median CPU {median(cpu):.1f} s), "
        f"peak RSS {peak_rss_mb():.0f} MB (table alone {before:.0f} MB)"
    )


if __name__ == "__main__":
    main()
