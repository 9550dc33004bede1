"""The InDif audit with person-level neighbours, at claimed epsilon 1, for K = 1, 5, 20.

The neighbours are the ones ``privsyn audit --max-rows-per-person K`` plays
(:func:`privsyn_core.privacy.audit.audit_engine`: the same generator, the same search): the
worst per-row pair :func:`~privsyn_core.privacy.audit.worst_indif_neighbours` finds, made
person-level by :meth:`~privsyn_core.privacy.audit.Neighbours.of_people`. Printed per K: the
measured epsilon lower bound (99% confidence), the most any audit of these neighbours could
find (the exact epsilon of a Gaussian separating them as far), and the separation against
the claim's. Run: ``python benchmarks/audit_persons.py [--trials 30000] [--k 1 5 20]``.
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
from privsyn_core.privacy.audit import (  # noqa: E402
    AUDIT_DOMAIN,
    audit_indif,
    worst_indif_neighbours,
)
from privsyn_core.privacy.conversion import rho_from_epsilon_delta  # noqa: E402
from privsyn_core.privacy.ledger import ROW, PrivacyUnit  # noqa: E402
from privsyn_core.privacy.noise import SeededNoise  # noqa: E402

DELTA = 1e-6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trials", type=int, default=30_000, help="debug-mode runs per side")
    parser.add_argument("--k", type=int, nargs="+", default=[1, 5, 20])
    parser.add_argument("--epsilon", type=float, default=1.0)
    args = parser.parse_args()

    rho = rho_from_epsilon_delta(args.epsilon, DELTA)
    rng = np.random.default_rng(0)
    # audit_engine draws its one-way neighbours first: the same draws, then the same search
    np.stack([rng.integers(0, s, size=200) for s in AUDIT_DOMAIN.sizes])
    per_row = worst_indif_neighbours(AUDIT_DOMAIN, 6, rng, 200)
    rows = []
    for k in args.k:
        neighbours = per_row if k == 1 else per_row.of_people(k)
        unit = ROW if k == 1 else PrivacyUnit("person", k)
        started = time.perf_counter()
        result = audit_indif(
            neighbours, rho, SeededNoise(np.random.default_rng(1), unit=unit), DELTA, args.trials
        )
        rows.append(
            {
                "K": k,
                "trials": result.trials,
                "claimed eps": result.claimed_epsilon,
                "measured eps >=": result.epsilon_lower_bound,
                "best possible eps": result.epsilon_of_neighbours,
                "mu neighbours / claimed": result.mu_of_neighbours / result.mu_claimed,
                "mu measured": result.mu_estimate,
                "+-": result.mu_standard_error,
                "s": time.perf_counter() - started,
            }
        )
        print(f"  done: K = {k}", flush=True)
    print_table(rows)


if __name__ == "__main__":
    main()
