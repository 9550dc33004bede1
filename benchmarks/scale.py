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
[--epsilon 1] [--repeats 3] [--kernel auto|compiled|reference] [--workers 1 2 all]
[--block-rows N] [--l1] [--synthesis auto|gum|mrf|gum+mrf|mcf] [--cores 1 2 all]``.

``--workers`` (issue 23): the synthetic rows are made as blocks on worker processes; each
count listed is run ``--repeats`` times and gets a line of median seconds, CPU seconds and
peak memory of the process tree (this process, the fork server and its workers: PSS summed
at one moment, sampled, :mod:`benchmarks.tree_rss`), then the speed-up from 1 to all
workers. ``all`` is every core this process may use. ``--l1`` adds the 2-way L1
against the real table (all pairs; an owner-only diagnostic).

``--cores 1 2 4 all`` measures scaling across cores rather than workers: each count k runs
this script again as a child process whose CPU affinity is the first k cores this process
may use, with ``--workers all`` (so k workers, or fewer where there are fewer blocks, and
k threads in all), then prints one line per count and the speed-up from 1 (and from 2) to
the most cores. A child, not this process, because the block workers' fork server keeps
the affinity it started with.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.common import median, print_table  # noqa: E402
from benchmarks.tree_rss import PeakTreeRss  # noqa: E402
from privsyn_core import GumProgress, PrivSynConfig, StageFinished, synthesize  # noqa: E402
from privsyn_core.config import SYNTHESIS_METHODS  # noqa: E402
from privsyn_core.cores import available_cores  # noqa: E402
from privsyn_core.evaluation import two_way_l1  # noqa: E402
from privsyn_core.generation.gum_settings import GumSettings  # noqa: E402


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


def worker_counts(asked: list[str]) -> list[int]:
    """``asked`` as counts, ``all`` as every core this process may use, without repeats."""
    counts = [available_cores() if w == "all" else int(w) for w in asked]
    return list(dict.fromkeys(counts))


def core_counts(asked: list[str]) -> list[int]:
    """``asked`` as core counts, ``all`` as every core this process may use, without repeats
    and none above that."""
    cores = available_cores()
    counts = [cores if c == "all" else min(int(c), cores) for c in asked]
    return list(dict.fromkeys(counts))


def run_on_cores(args: argparse.Namespace) -> None:
    """Each count in ``--cores`` as a child of this script pinned to that many cores."""
    allowed = sorted(os.sched_getaffinity(0))
    summary = []
    for count in core_counts(args.cores):
        with tempfile.TemporaryDirectory() as folder:
            out = Path(folder) / "summary.json"
            argv = [sys.executable, __file__, *child_arguments(sys.argv[1:])]
            argv += ["--workers", "all", "--summary-json", str(out)]
            pinned = set(allowed[:count])
            print(f"\n== {count} cores: {' '.join(argv[1:])}", flush=True)
            subprocess.run(
                argv, check=True, preexec_fn=lambda cpus=pinned: os.sched_setaffinity(0, cpus)
            )
            row = json.loads(out.read_text())[0]
        summary.append({"cores": count, **row})
    print(
        f"\nscaling across cores ({args.table}, {args.rows} x {args.cols}, eps {args.epsilon:g}):"
    )
    print_table(summary)
    for base in (1, 2):
        first = next((r for r in summary if r["cores"] == base), None)
        last = summary[-1]
        if first is not None and last is not first:
            print(
                f"speed-up from {base} to {last['cores']} cores: "
                f"{first['median_s'] / last['median_s']:.2f}x"
            )


def child_arguments(argv: list[str]) -> list[str]:
    """``argv`` without its ``--cores`` and ``--workers`` options and their values."""
    kept, skipping = [], False
    for word in argv:
        if word in ("--cores", "--workers"):
            skipping = True
        elif skipping and not word.startswith("--"):
            continue
        else:
            skipping = False
            kept.append(word)
    return kept


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
    parser.add_argument(
        "--workers", nargs="+", default=["1", "2", "all"], help="worker counts to run ('all')"
    )
    parser.add_argument(
        "--cores", nargs="+", default=None, help="core counts to pin child runs to ('all')"
    )
    parser.add_argument("--summary-json", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--block-rows", type=int, default=None, help="rows per block")
    parser.add_argument("--l1", action="store_true", help="also the 2-way L1 (all pairs)")
    parser.add_argument("--synthesis", choices=SYNTHESIS_METHODS, default=PrivSynConfig().synthesis)
    args = parser.parse_args()
    if args.cores:
        run_on_cores(args)
        return

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

    config = PrivSynConfig(
        gum=GumSettings(iterations=args.iterations, kernel=args.kernel), synthesis=args.synthesis
    )
    real = table.to_numpy(dtype=np.int64) if args.l1 else None
    summary = []
    for workers in worker_counts(args.workers):
        totals, stage_runs, cpu, peaks, l1s = [], [], [], [], []
        for run in range(args.repeats):
            started = time.perf_counter()
            with PeakTreeRss() as peak:
                result = synthesize(
                    table,
                    args.epsilon,
                    1 / args.rows**2,
                    domain=domain,
                    config=config,
                    rng=np.random.default_rng(args.seed + run),
                    on_progress=progress,
                    workers=workers,
                    block_rows=args.block_rows,
                )
            totals.append(time.perf_counter() - started)
            cpu.append(peak.cpu)
            peaks.append(peak.mb)
            stage_runs.append(result.stage_seconds)
            if real is not None:
                synthetic = result.synthetic[table.columns].to_numpy(dtype=np.int64)
                l1s.append(two_way_l1(real, synthetic, [domain[c] for c in table.columns]))
            per_iteration = [h.seconds for h in result.history]
            print(
                f"{workers} workers, run {run}: {totals[-1]:.1f} s ({cpu[-1]:.1f} CPU s), "
                f"peak {peaks[-1]:.0f} MB, {len(result.marginals)} marginals, "
                f"{len(result.history)} GUM iterations in the first block "
                f"(median {median(per_iteration) if per_iteration else 0:.2f} s each), "
                f"{len(result.appended)} appended" + (f", 2-way L1 {l1s[-1]:.4f}" if l1s else ""),
                flush=True,
            )
        stages = [
            {"stage": k, "median_s": median([r[k] for r in stage_runs])} for k in stage_runs[0]
        ]
        print()
        print_table(stages)
        summary.append(
            {
                "workers": workers,
                "median_s": round(median(totals), 1),
                "min_s": round(min(totals), 1),
                "cpu_s": round(median(cpu), 1),
                "peak_mb": round(max(peaks)),
                **({"l1": round(median(l1s), 4)} if l1s else {}),
            }
        )
    print(
        f"\nrows {args.rows}, cols {args.cols}, epsilon {args.epsilon:g}, {args.repeats} runs "
        f"per worker count, {available_cores()} cores available (table alone {before:.0f} MB):"
    )
    print_table(summary)
    if args.summary_json is not None:
        args.summary_json.write_text(json.dumps(summary))
    if len(summary) > 1:
        first, last = summary[0], summary[-1]
        print(
            f"speed-up from {first['workers']} to {last['workers']} workers: "
            f"{first['median_s'] / last['median_s']:.2f}x"
        )


if __name__ == "__main__":
    main()
