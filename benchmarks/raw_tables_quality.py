"""SDMetrics' quality report of a synthetic CSV against the real one; for ``raw_tables.py``.

Runs in ``benchmarks/.peers-venv`` (``raw_tables.py --install-peers`` adds SDMetrics 0.32,
MIT), as a subprocess. The metadata is read off the real CSV as an analyst would declare it:
a column whose values are at least 95% numbers is numerical, one whose values are all
distinct is an id (left out of the report), any other categorical. Prints one JSON line: the
overall score, column shapes and column pair trends.

Run: ``benchmarks/.peers-venv/bin/python benchmarks/raw_tables_quality.py --real real.csv
--synthetic synthetic.csv``.
"""

from __future__ import annotations

import argparse
import json
import warnings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--real", required=True)
    parser.add_argument("--synthetic", required=True)
    args = parser.parse_args()

    import pandas as pd
    from sdmetrics.reports.single_table import QualityReport

    real = pd.read_csv(args.real, dtype=str, keep_default_na=False, na_values=[""])
    synthetic = pd.read_csv(args.synthetic, dtype=str, keep_default_na=False, na_values=[""])
    for name in real.columns:  # a column the synthetic table lost comes out empty
        if name not in synthetic:
            synthetic[name] = pd.NA
    columns = {}
    for name in real.columns:
        present = real[name].dropna()
        numbers = pd.to_numeric(present, errors="coerce")
        if len(present) and present.nunique() == len(present):
            continue  # an id: written anew by design
        if len(present) and numbers.notna().mean() >= 0.95:
            columns[name] = {"sdtype": "numerical"}
            real[name] = pd.to_numeric(real[name], errors="coerce")
            synthetic[name] = pd.to_numeric(synthetic[name], errors="coerce")
        else:
            columns[name] = {"sdtype": "categorical"}
    kept = list(columns)
    report = QualityReport()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report.generate(real[kept], synthetic[kept], {"columns": columns}, verbose=False)
    properties = report.get_properties()
    scores = dict(zip(properties["Property"], properties["Score"], strict=True))
    print(
        json.dumps(
            {
                "overall": report.get_score(),
                "column_shapes": scores.get("Column Shapes"),
                "column_pair_trends": scores.get("Column Pair Trends"),
            }
        )
    )


if __name__ == "__main__":
    main()
