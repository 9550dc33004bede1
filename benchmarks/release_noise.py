"""What release-mode noise costs on adult-coded (48,842 x 14) at epsilon 1.

Release mode (secure randomness, exact discrete Gaussian) and debug mode (seeded NumPy) run
alternately, several times each. GUM's running time depends on the noise *values* (how fast
it plateaus), not on the mode, so the cost of the mode is measured where the noise is drawn:
the stages that add noise (1-way, InDif, marginals). Printed: median whole-run seconds per
mode, median noise-stage seconds per mode, their difference as a share of the median debug
run, and the one-time import of OpenDP (used for InDif's real-valued noise) in a new process.
Run: ``python benchmarks/release_noise.py [--runs 5]``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.common import median, print_table, timed  # noqa: E402
from privsyn_core import synthesize  # noqa: E402

NOISE_STAGES = ("one_way", "indif", "measure")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()

    table = pd.read_csv(ROOT / "assets" / "adult-coded.csv")
    domain = json.loads((ROOT / "assets" / "adult-coded-domain.json").read_text())
    delta = 1 / len(table) ** 2
    print(f"adult-coded: {len(table)} rows x {table.shape[1]} columns, epsilon 1, delta 1/n^2")
    synthesize(table, 1.0, delta, domain=domain)  # warm-up: imports, caches

    totals: dict[str, list[float]] = {"release": [], "debug": []}
    noise: dict[str, list[float]] = {"release": [], "debug": []}
    counts = 0
    for run in range(args.runs):
        for mode in ("release", "debug"):
            rng = None if mode == "release" else np.random.default_rng(run)
            result, seconds = timed(
                lambda rng=rng: synthesize(table, 1.0, delta, domain=domain, rng=rng)
            )
            totals[mode].append(seconds)
            noise[mode].append(sum(result.stage_seconds[s] for s in NOISE_STAGES))
            counts = sum(e.n_queries for e in result.ledger.entries)
    added = median(noise["release"]) - median(noise["debug"])
    print_table(
        [
            {
                "mode": mode,
                "runs": args.runs,
                "run s (median)": median(totals[mode]),
                "noise stages s (median)": median(noise[mode]),
            }
            for mode in ("release", "debug")
        ]
    )
    print(f"noisy values per run: about {counts}")
    print(
        f"release-mode noise adds {added:.3f} s = "
        f"{100 * added / median(totals['debug']):.1f}% of the median debug run"
    )
    probe = (
        "import time, numpy as np; from privsyn_core.privacy.noise import SecureNoise; "
        "t = time.perf_counter(); SecureNoise().add(np.zeros(3), 1.0, integer=False); "
        "print(time.perf_counter() - t)"
    )
    first = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, check=True
    )
    print(f"one-time cost in a new process (OpenDP import + call): {float(first.stdout):.2f} s")


if __name__ == "__main__":
    main()
