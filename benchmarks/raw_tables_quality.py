"""SDMetrics' quality report of a synthetic CSV against the real one; for ``raw_tables.py``.

Runs in ``benchmarks/.peers-venv`` (``raw_tables.py --install-peers`` adds SDMetrics 0.32,
MIT), as a subprocess. The metadata is read off the real CSV as an analyst would declare it:
a column whose values are at least 95% numbers is numerical, 95% dates datetime, one whose
values are all distinct is an id (left out of the report), any other categorical; values
are read without surrounding spaces, as the engine reads them. Prints one JSON line: the
overall score, column shapes and column pair trends; and the same report with the pairs'
numeric columns cut on the real column's bins (``*_real_bins``).

Why both: the report cuts each numeric column into 10 equal-width bins over its own range,
the synthetic column over the synthetic range. A synthetic column whose minimum or maximum
differs from the real one (a value of 51 rows in 32,561 too rare to measure, a tail drawn a
little further) is then cut on other bins, and the pair scores compare different things:
on raw Adult, ``education`` x ``education-num`` scores 0.47 where the two tables' joint
shares on the real bins agree to 0.91.

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

    real, synthetic = (
        pd.read_csv(path, dtype=str, keep_default_na=False, na_values=[""]).apply(
            lambda c: c.str.strip()  # as the engine reads every value (raw_tables.py)
        )
        for path in (args.real, args.synthetic)
    )
    for name in real.columns:  # a column the synthetic table lost comes out empty
        if name not in synthetic:
            synthetic[name] = pd.NA
    columns = {}
    for name in real.columns:
        present = real[name].dropna()
        numbers = pd.to_numeric(present, errors="coerce")
        if len(present) and present.nunique() == len(present):
            continue  # an id: written anew by design
        dates = pd.to_datetime(present, errors="coerce", format="mixed")
        if len(present) and numbers.notna().mean() >= 0.95:
            columns[name] = {"sdtype": "numerical"}
            real[name] = pd.to_numeric(real[name], errors="coerce")
            synthetic[name] = pd.to_numeric(synthetic[name], errors="coerce")
        elif len(present) and dates.notna().mean() >= 0.95:
            columns[name] = {"sdtype": "datetime"}
            for frame in (real, synthetic):
                frame[name] = pd.to_datetime(frame[name], errors="coerce", format="mixed")
        else:
            columns[name] = {"sdtype": "categorical"}
    kept = list(columns)
    scores = _scores(real[kept], synthetic[kept], columns)
    scores |= {
        f"{k}_real_bins": v for k, v in _scores(real[kept], synthetic[kept], columns, True).items()
    }
    print(json.dumps(scores))


def _scores(real, synthetic, columns, real_bins: bool = False) -> dict[str, float]:
    import numpy as np
    from sdmetrics.reports.single_table import QualityReport
    from sdmetrics.reports.single_table._properties import column_pair_trends

    trends = column_pair_trends.ColumnPairTrends
    own = trends._discretize_column
    edges = {
        name: np.histogram_bin_edges(real[name].dropna())
        for name, meta in columns.items()
        if meta["sdtype"] == "numerical"
    }

    def on_real_bins(self, name, data, bin_edges=None):
        if name not in edges:  # a datetime: cut as SDMetrics cuts it
            return own(self, name, data, bin_edges)
        cuts = edges[name].copy()
        cuts[0], cuts[-1] = -np.inf, np.inf  # the synthetic values beyond fall in the end bins
        return own(self, name, data, cuts)

    if real_bins:
        trends._discretize_column = on_real_bins
    try:
        report = QualityReport()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            report.generate(real, synthetic, {"columns": columns}, verbose=False)
    finally:
        trends._discretize_column = own
    properties = report.get_properties()
    found = dict(zip(properties["Property"], properties["Score"], strict=True))
    return {
        "overall": report.get_score(),
        "column_shapes": found.get("Column Shapes"),
        "column_pair_trends": found.get("Column Pair Trends"),
    }


if __name__ == "__main__":
    main()
