"""Counting where the file lies: a generated pre-coded Parquet file synthesised with DuckDB
(out of core) or Spark (``--engine spark``, in ``local[2]`` mode).

Writes a ``--rows`` x ``--cols`` table (planted factors: every five columns share a hidden
factor, so selection finds dependencies) to a Parquet file in chunks of one million rows (row
groups of :data:`ROW_GROUP` rows), so the generator never holds the table either; then times
``privsyn synthesize --engine duckdb --rows N`` as a separate process and reports its wall
seconds, per-stage seconds, marginals, GUM iterations and peak RSS (the whole process, DuckDB
included). The file is not kept. Spark's peak RSS is the Python driver's; the JVM and its
Python workers are reported apart, as the sum of each process's own peak (an upper bound).
Run: ``python benchmarks/duckdb_file.py [--rows 10000000] [--cols 50] [--synthetic 1000000]
[--engine duckdb|spark]``.
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
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
CHUNK = 1_000_000
#: rows per Parquet row group: both engines read a file in parallel by row groups, so one
#: group of a million rows would leave a core idle (Spark's own writers cut about 128 MB)
ROW_GROUP = 131_072


def write_planted(path: Path, rows: int, cols: int, seed: int) -> dict[str, int]:
    rng = np.random.default_rng(seed)
    factors = max(1, cols // 5)
    sizes = rng.integers(2, 41, cols)
    keeps = rng.uniform(0.6, 0.9, cols)
    schema = pa.schema([(f"c{c:03d}", pa.uint8()) for c in range(cols)])
    with pq.ParquetWriter(path, schema) as writer:
        for start in range(0, rows, CHUNK):
            n = min(CHUNK, rows - start)
            hidden = rng.integers(0, 40, size=(factors, n))
            arrays = []
            for c in range(cols):
                copy = hidden[c % factors] % sizes[c]
                noise = rng.integers(0, sizes[c], n)
                arrays.append(
                    pa.array(np.where(rng.random(n) < keeps[c], copy, noise).astype(np.uint8))
                )
            writer.write_table(pa.Table.from_arrays(arrays, schema=schema), ROW_GROUP)
    return {f"c{c:03d}": int(sizes[c]) for c in range(cols)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--cols", type=int, default=50)
    parser.add_argument("--synthetic", type=int, default=1_000_000)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--engine", choices=["duckdb", "spark"], default="duckdb")
    parser.add_argument("--child", nargs=2, type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child, args.epsilon, args.synthetic, args.seed, args.engine)
        return
    with tempfile.TemporaryDirectory() as folder:
        data, domain_file = Path(folder) / "table.parquet", Path(folder) / "domain.json"
        started = time.perf_counter()
        domain = write_planted(data, args.rows, args.cols, args.seed)
        domain_file.write_text(json.dumps(domain))
        print(
            f"wrote {args.rows:,} x {args.cols} to Parquet ({data.stat().st_size / 2**20:.0f} MB) "
            f"in {time.perf_counter() - started:.0f} s",
            flush=True,
        )
        command = [
            sys.executable, __file__, "--child", str(data), str(domain_file),
            "--epsilon", str(args.epsilon), "--synthetic", str(args.synthetic),
            "--seed", str(args.seed), "--engine", args.engine,
        ]  # fmt: skip
        started = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
        seconds = time.perf_counter() - started
        if done.returncode:
            print(done.stderr)
            sys.exit(done.returncode)
        report = json.loads(done.stdout)
        stages = ", ".join(f"{k} {v:.1f}" for k, v in report["stages"].items())
        print(f"stages (s): {stages}")
        print(
            f"{args.engine}: rows {args.rows:,}, cols {args.cols}, synthetic "
            f"{args.synthetic:,}, epsilon "
            f"{args.epsilon:g}: {seconds:.0f} s end to end (process), {report['marginals']} "
            f"marginals, {report['iterations']} GUM iterations, peak RSS "
            f"{report['peak_rss_mb']:.0f} MB"
            + (
                f" (Spark's JVM and Python workers: {report['descendants_peak_rss_mb']:.0f} MB)"
                if args.engine == "spark"
                else ""
            )
        )


def descendants_peak_mb() -> float:
    """The sum of the peak RSS of this process's descendants still running (Spark's JVM and
    its Python workers), from ``/proc`` (Linux); 0 where there is none or no ``/proc``."""
    parents: dict[int, int] = {}
    peaks: dict[int, float] = {}
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(
                line.split(":", 1) for line in status.read_text().splitlines() if ":" in line
            )
        except OSError:
            continue
        pid = int(status.parent.name)
        parents[pid] = int(fields.get("PPid", "0"))
        peaks[pid] = int(fields.get("VmHWM", "0 kB").split()[0]) / 1024
    me, total = os.getpid(), 0.0
    for pid in peaks:
        ancestor = parents.get(pid, 0)
        while ancestor and ancestor != me:
            ancestor = parents.get(ancestor, 0)
        total += peaks[pid] if ancestor == me else 0.0
    return total


def child(
    data: Path, domain_file: Path, epsilon: float, synthetic: int, seed: int, engine: str
) -> None:
    """The measured process: counting on the engine, then generation, as the CLI runs them."""
    sys.path.insert(0, str(ROOT))
    from privsyn_core.generation.synthesis import generate
    from privsyn_core.measuring.counters.duckdb_counter import DuckDBCounter
    from privsyn_core.measuring.counters.spark_counter import SparkCounter
    from privsyn_core.pipeline import measure_coded

    sizes = json.loads(domain_file.read_text())
    counter = (
        SparkCounter.for_source(data, sizes)
        if engine == "spark"
        else DuckDBCounter.for_file(data, sizes)
    )
    rng = np.random.default_rng(seed)
    measurements = measure_coded(counter, epsilon, 1e-9, rng=rng)
    result = generate(measurements, n_records=synthetic, rng=rng)
    print(
        json.dumps(
            {
                "stages": result.stage_seconds,
                "marginals": len(result.marginals),
                "iterations": len(result.history),
                "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                "descendants_peak_rss_mb": descendants_peak_mb(),
            }
        )
    )


if __name__ == "__main__":
    main()
