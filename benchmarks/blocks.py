"""Block size: 2-way L1 and seconds of the same rows made as blocks of different sizes.

Issue 23: synthetic rows are made as independent blocks, each a GUM of its own over the same
fitted model (:mod:`privsyn_core.generation.blocks`). This measures what the block size
costs and buys, for the default of ``SamplingSettings.block_rows``: one fit per table
(debug-mode noise, seed 0, delta 1/n^2), then for each block size the same number of rows
sampled with ``--seeds`` sampling seeds, in this process (``workers=1``, so the seconds and
CPU seconds are one core's work; blocks on several workers divide the wall time, not the
work). Prints per (table, rows, block size) the median 2-way L1 against the real table
(all pairs; an owner-only diagnostic), wall and CPU seconds, and GUM iterations per block.

Tables: ``adult`` (assets/adult-coded.csv, 48,842 x 15) and ``dense``/``planted``, the
generators of ``benchmarks/scale.py`` at ``--wide-rows`` x ``--wide-cols`` (default
100,000 x 40). Run: ``python benchmarks/blocks.py [--tables adult dense] [--seeds 2]
[--blocks 12500 25000 50000 100000] [--epsilon 1]``; block sizes at or above the rows are
one block (the table made as before blocks).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.common import median, print_table  # noqa: E402
from benchmarks.scale import TABLES  # noqa: E402
from privsyn_core import PrivSyn, PrivSynConfig  # noqa: E402
from privsyn_core.evaluation import two_way_l1  # noqa: E402
from privsyn_core.generation.blocks import block_sizes  # noqa: E402


def load(name: str, rows: int, cols: int) -> tuple[pd.DataFrame, dict[str, int]]:
    if name == "adult":
        table = pd.read_csv(ROOT / "assets" / "adult-coded.csv")
        domain = json.loads((ROOT / "assets" / "adult-coded-domain.json").read_text())
        return table, domain
    return TABLES[name](rows, cols, np.random.default_rng(0))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tables", nargs="+", default=["adult", "dense"])
    parser.add_argument("--blocks", type=int, nargs="+", default=[12_500, 25_000, 50_000, 100_000])
    parser.add_argument(
        "--rows", type=int, default=None, help="rows to sample (default: the table's)"
    )
    parser.add_argument("--wide-rows", type=int, default=100_000)
    parser.add_argument("--wide-cols", type=int, default=40)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--seeds", type=int, default=2)
    args = parser.parse_args()

    out = []
    for name in args.tables:
        table, domain = load(name, args.wide_rows, args.wide_cols)
        sizes = [domain[c] for c in table.columns]
        real = table.to_numpy(dtype=np.int64)
        started = time.perf_counter()
        model = PrivSyn(
            args.epsilon, 1 / len(table) ** 2, domain=domain, config=PrivSynConfig()
        ).fit(table, rng=np.random.default_rng(0))
        fitted = time.perf_counter() - started
        print(f"{name}: {len(table)} x {table.shape[1]}, fitted in {fitted:.1f} s", flush=True)
        n = args.rows or len(table)
        seen: set[int] = set()
        for block in sorted(args.blocks):
            count = len(block_sizes(n, block))
            if count in seen:  # the same split as a smaller size already measured
                continue
            seen.add(count)
            settings = replace(model.defaults, block_rows=block)
            l1s, walls, cpus, iterations = [], [], [], []
            for seed in range(args.seeds):
                wall, cpu = time.perf_counter(), time.process_time()
                drawn = model.generate(n, seed=seed, settings=settings, workers=1)
                walls.append(time.perf_counter() - wall)
                cpus.append(time.process_time() - cpu)
                iterations += list(drawn.block_iterations or (len(drawn.history),))
                synthetic = drawn.table[table.columns].to_numpy(dtype=np.int64)
                l1s.append(two_way_l1(real, synthetic, sizes))
            row = {
                "table": name,
                "rows": n,
                "block_rows": max(block_sizes(n, block)),
                "blocks": count,
                "L1": round(median(l1s), 4),
                "L1_all": " ".join(f"{v:.4f}" for v in l1s),
                "wall_s": round(median(walls), 2),
                "cpu_s": round(median(cpus), 2),
                "iterations": f"{min(iterations)}-{max(iterations)}",
            }
            out.append(row)
            print(row, flush=True)
    print()
    print_table(out)


if __name__ == "__main__":
    main()
