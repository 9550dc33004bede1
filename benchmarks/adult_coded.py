"""Adult (integer-coded, 48,842 x 14) at epsilon 0.2, 1 and 2 over several seeds.

Prints, per epsilon, the median over seeds of wall seconds (untraced runs), the peak traced
memory of one extra run, the number of measured marginals and GUM iterations, and the three
fidelity measures (2-way L1, 3-way range queries, linear SVM misclassification on
'income>50K'), next to the independent-columns baseline.
delta = 1/n^2 as in the paper. Run: ``python benchmarks/adult_coded.py [--seeds 3] [--target]
[--independence-threshold 2|off]``
(``--target``: 'income>50K' is named as the prediction target).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.common import median, peak_memory_mb, print_table, timed  # noqa: E402
from privsyn_core import PrivSynConfig, synthesize  # noqa: E402
from privsyn_core.evaluation import fidelity_report  # noqa: E402
from privsyn_core.generation.gum_settings import GumSettings  # noqa: E402

LABEL = "income>50K"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--epsilons", type=float, nargs="+", default=[0.2, 1.0, 2.0])
    parser.add_argument("--iterations", type=int, default=GumSettings().iterations)
    parser.add_argument(
        "--target", action="store_true", help=f"name {LABEL!r} as the prediction target"
    )
    parser.add_argument(
        "--indif-margin",
        type=float,
        default=PrivSynConfig().indif_margin,
        help="Algorithm 1's margin over the InDif noise, in sigmas (0: the paper's rule)",
    )
    parser.add_argument(
        "--selection",
        choices=["auto", "densemarg", "treefirst", "privbayes", "all_pairs"],
        default=PrivSynConfig().selection,
        help="how the marginals are chosen (PrivSynConfig.selection; auto: treefirst from 30 "
        "columns, densemarg below)",
    )
    parser.add_argument(
        "--copy",
        choices=["row", "blanket"],
        default=GumSettings().copy,
        help="what GUM's duplications copy: the whole row, or the target's blanket",
    )
    parser.add_argument(
        "--independence-threshold",
        type=lambda v: None if v == "off" else float(v),
        default=PrivSynConfig().independence_threshold,
        help="measured pairs within this many times their noise are drawn as independent "
        "('off': every pair as measured)",
    )
    args = parser.parse_args()

    table = pd.read_csv(ROOT / "assets" / "adult-coded.csv")
    domain = json.loads((ROOT / "assets" / "adult-coded-domain.json").read_text())
    delta = 1 / len(table) ** 2
    config = PrivSynConfig(
        gum=GumSettings(iterations=args.iterations, copy=args.copy),
        target=LABEL if args.target else None,
        indif_margin=args.indif_margin,
        selection=args.selection,
        independence_threshold=args.independence_threshold,
    )
    print(
        f"adult-coded: {len(table)} rows x {table.shape[1]} columns, delta = 1/n^2 = "
        f"{delta:.3g}, prediction target: {config.target}, InDif margin {config.indif_margin:g}, "
        f"GUM copies: {config.gum.copy}, selection: {config.selection}, independence "
        f"threshold: {config.independence_threshold}"
    )

    rows = []
    for epsilon in args.epsilons:
        runs = []
        for seed in range(args.seeds):
            result, seconds = timed(
                lambda seed=seed, epsilon=epsilon: synthesize(
                    table,
                    epsilon,
                    delta,
                    domain=domain,
                    config=config,
                    rng=np.random.default_rng(seed),
                )
            )
            report = fidelity_report(table, result.synthetic, label=LABEL)
            runs.append((seconds, len(result.marginals), report, len(result.history)))
            print(
                f"  eps={epsilon:g} seed={seed}: {seconds:.2f} s, "
                f"{len(result.marginals)} marginals, "
                f"{len(result.history)} GUM iterations, L1 {report.two_way_l1:.4f}, "
                f"range {report.range_query_error:.5f}, SVM {report.svm_misclassification:.4f}",
                flush=True,
            )
        peak = peak_memory_mb(
            lambda epsilon=epsilon: synthesize(
                table, epsilon, delta, domain=domain, config=config, rng=np.random.default_rng(0)
            )
        )
        rows.append(
            {
                "epsilon": epsilon,
                "seeds": args.seeds,
                "rows": len(table),
                "cols": table.shape[1],
                "median_s": median([r[0] for r in runs]),
                "peak_MB": peak,
                "marginals": median([r[1] for r in runs]),
                "gum_iters": median([r[3] for r in runs]),
                "2way_L1": median([r[2].two_way_l1 for r in runs]),
                "range": median([r[2].range_query_error for r in runs]),
                "svm": median([r[2].svm_misclassification for r in runs]),
            }
        )
    rng = np.random.default_rng(0)
    independent = table.apply(lambda c: rng.permutation(c.to_numpy()))
    base = fidelity_report(table, independent, label=LABEL)
    print()
    print_table(rows)
    print(
        f"\nindependent columns (non-private): L1 {base.two_way_l1:.4f}, range "
        f"{base.range_query_error:.5f}, SVM {base.svm_misclassification:.4f}; non-private SVM "
        f"{base.nonprivate_svm_misclassification:.4f}; "
        f"majority {base.majority_misclassification:.4f}"
    )


if __name__ == "__main__":
    main()
