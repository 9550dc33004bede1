"""Raw UCI Adult (train + test, 48,842 x 15 mixed columns) with private domains at epsilon 1.

Reads the files as distributed (no header, ", " separated, "?" for missing; the test file's
labels end with "."), lets the engine estimate every domain privately, and prints the median
over seeds of wall seconds, the domain step's share of time and of rho, and the three
fidelity measures computed on the binned table (real and synthetic rows coded by the same
codecs, the DP ones the run produced), and the kinds the structure step decided.
Run: ``python benchmarks/adult_raw.py [--seeds 3] [--epsilon 1]``.
"""

from __future__ import annotations

import argparse
import sys
from io import StringIO
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.common import median, print_table, timed  # noqa: E402
from privsyn_core import synthesize  # noqa: E402
from privsyn_core.data.columns import coded_frame  # noqa: E402
from privsyn_core.data.io import read_table  # noqa: E402
from privsyn_core.evaluation import fidelity_report  # noqa: E402

NAMES = [
    "age", "workclass", "fnlwgt", "education", "education-num", "marital-status",
    "occupation", "relationship", "race", "sex", "capital-gain", "capital-loss",
    "hours-per-week", "native-country", "income",
]  # fmt: skip


def load_adult(folder: Path) -> pd.DataFrame:
    train = read_table(folder / "adult.data", header=False, names=NAMES, na_values=["?"])
    test_file = folder / "adult.test"
    if not test_file.exists():
        return train
    lines = test_file.read_text().splitlines()[1:]  # first line is a comment
    test = pd.read_csv(
        StringIO("\n".join(lines)),
        header=None,
        names=NAMES,
        na_values=["?"],
        skipinitialspace=True,
        dtype=object,  # text, as read_table reads the training file
    )
    test["income"] = test["income"].str.rstrip(".")
    return pd.concat([train, test], ignore_index=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument(
        "--data",
        type=Path,
        default=ROOT.parent / "shared" / "datasets" / "adult",
        help="folder with adult.data and adult.test",
    )
    args = parser.parse_args()
    table = load_adult(args.data)
    delta = 1 / len(table) ** 2
    print(f"raw adult: {table.shape[0]} rows x {table.shape[1]} columns, delta {delta:.3g}")
    rows = []
    for seed in range(args.seeds):
        result, seconds = timed(
            lambda seed=seed: synthesize(
                table, args.epsilon, delta, rng=np.random.default_rng(seed)
            )
        )
        real_codes = coded_frame(result.columns, table)
        syn_codes = coded_frame(result.columns, result.synthetic)
        report = fidelity_report(real_codes, syn_codes, label="income")
        spent = result.ledger.spent_by_step()
        rows.append(
            {
                "seed": seed,
                "seconds": seconds,
                "domain_s": result.stage_seconds["encode"],
                "domain_rho_share": spent.get("domain", 0.0) / result.ledger.budget_rho,
                "structure_rho_share": spent.get("structure", 0.0) / result.ledger.budget_rho,
                "kinds": "".join(
                    c.choices[0].value[0] for c in result.columns
                ),  # n(umeric) c(ategorical) d(atetime), in column order
                "excluded": len(result.excluded),
                "2way_L1": report.two_way_l1,
                "range": report.range_query_error,
                "svm": report.svm_misclassification,
            }
        )
        print(rows[-1], flush=True)
    summary = {k: median([r[k] for r in rows]) for k in rows[0] if k not in ("seed", "kinds")}
    summary["domain_time_share"] = summary["domain_s"] / summary["seconds"]
    print()
    print_table([{"epsilon": args.epsilon, "seeds": args.seeds, **summary}])


if __name__ == "__main__":
    main()
