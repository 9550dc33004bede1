"""Empirical privacy audit of every noisy step, in both randomness modes.

For each step (1-way marginals, InDif scores, a 2-way marginal) and each claimed epsilon, the
step runs many times on two neighbouring datasets and :mod:`privsyn_core.privacy.audit` plays the
distinguishing game. Printed per row: the claimed epsilon (the ledger's CKS conversion of the
step's rho at delta), the exact epsilon of a Gaussian separating *these* neighbours (the
most any audit of them could find), the measured lower bound (99% confidence), and the
separation mu: claimed sqrt(2 rho), attained by the neighbours, and measured.
Run: ``python benchmarks/audit.py [--trials 50000] [--release-trials 5000]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.common import print_table  # noqa: E402
from privsyn_core.privacy.audit import AUDIT_DOMAIN, audit_engine  # noqa: E402
from privsyn_core.privacy.noise import SecureNoise, SeededNoise  # noqa: E402

DELTA = 1e-6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trials", type=int, default=50_000, help="debug-mode runs per side")
    parser.add_argument("--release-trials", type=int, default=5_000)
    parser.add_argument("--epsilons", type=float, nargs="+", default=[1.0, 4.0])
    args = parser.parse_args()

    print(f"domain {AUDIT_DOMAIN.attributes} sizes {AUDIT_DOMAIN.sizes}, delta {DELTA:g}")
    rows = []
    for epsilon in args.epsilons:
        for mode in ("debug", "release"):
            noise = SeededNoise(np.random.default_rng(1)) if mode == "debug" else SecureNoise()
            trials = args.trials if mode == "debug" else args.release_trials
            started = time.perf_counter()
            results = audit_engine(epsilon, DELTA, noise, trials, np.random.default_rng(0))
            seconds = (time.perf_counter() - started) / len(results)
            for result in results:
                rows.append(
                    {
                        "step": result.mechanism,
                        "mode": mode,
                        "trials": result.trials,
                        "claimed eps": result.claimed_epsilon,
                        "best possible eps": result.epsilon_of_neighbours,
                        "measured eps >=": result.epsilon_lower_bound,
                        "mu claimed": result.mu_claimed,
                        "mu neighbours": result.mu_of_neighbours,
                        "mu measured": result.mu_estimate,
                        "+-": result.mu_standard_error,
                        "violates": result.violates_claim,
                        "s (mean per step)": seconds,
                    }
                )
            print(f"  done: epsilon {epsilon:g}, {mode}", flush=True)
    print_table(rows)


if __name__ == "__main__":
    main()
