"""Evidence for the engine's defaults: candidate settings on several tables, epsilons and seeds.

Studies, each a list of arms (a name, the measurement settings, the generation settings),
run on the same tables, epsilons and seeds; arms with the same measurement settings share one
measurement per seed (generation is post-processing), as in ``paper_lab.py``:

* ``strategy``: GUM's update strategy (S5, the paper's; S3; S6) crossed with linking isolated
  attributes (on, the authors' code; off, the paper's text);
* ``split``: the 1-way marginals' share of the budget (0.1, the paper's; 0.2; 0.3; 0.4) and a
  smaller InDif share, on the strategy study's winner (S3 without isolated links);
* ``target``: no prediction target against the table's label as the target with weights 2, 4,
  8 and 16 (tables without a label are left out);
* ``combine``: Algorithm 2's rule (the paper's cliques under gamma cells; only cliques that add
  no noise; none), each with and without the table's label as the target;
* ``indif``: the InDif share (0.1, the paper's; 0.05), with and without the target;
* ``initial``, ``margin``, ``judge``, ``independence``: GUM's start and kept table,
  Algorithm 1's margin over the InDif noise, GUM's judge, and measured pairs within their
  noise drawn as independent (issue 22), each on the engine's defaults.

In the first two studies every setting an arm does not name is the paper's (``BASE``), so they
measure the same thing whatever the engine's defaults are; the last three studies
start from the engine's defaults, which they are there to complete (each combine arm names
its rule). Metrics, owner-only: mean 2-way L1, 3-way range-query error, SVM misclassification
on the label. Prints mean ± std per arm, and per (table, epsilon) each arm's rank on L1; the
last table averages the ranks, which is what a default must win.

Run: ``python benchmarks/defaults.py --study strategy [--tables ...] [--epsilons 0.2 1 2]
[--seeds 3] [--json out.json]``; ``--summarise out.json ...`` prints saved runs.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.common import print_table, run_grid  # noqa: E402
from benchmarks.paper_lab import PAPER, PAPER_GUM, TABLES, load, score  # noqa: E402
from privsyn_core import GumSettings, PrivSynConfig  # noqa: E402
from privsyn_core.generation.synthesis import generate  # noqa
from privsyn_core.lab import GENERATION_FIELDS  # noqa: E402
from privsyn_core.pipeline import measure  # noqa: E402

#: the paper's settings, which every arm changes only where it says
BASE = PrivSynConfig(gum=GumSettings(**PAPER_GUM), **PAPER)

#: study -> [(arm, measurement changes, GUM changes)]; "{label}" stands for the table's label
STUDIES: dict[str, list[tuple[str, dict[str, Any], dict[str, Any]]]] = {
    "strategy": [
        (f"{s} {'links' if links else 'no links'}", {"connect_isolated": links}, {"strategy": s})
        for links in (True, False)
        for s in ("S5", "S3", "S6")
    ],
    # on the strategy study's winner (S3, no isolated links)
    "split": [
        *[
            (f"1-way {w:.2f}", {"one_way_share": w, "connect_isolated": False}, {"strategy": "S3"})
            for w in (0.1, 0.2, 0.3, 0.4)
        ],
        (
            "1-way 0.30 InDif 0.05",
            {"one_way_share": 0.3, "indif_share": 0.05, "connect_isolated": False},
            {"strategy": "S3"},
        ),
    ],
    "target": [
        ("no target", {}, {}),
        *[(f"target w={w}", {"target": "{label}", "target_weight": w}, {}) for w in (2, 4, 8, 16)],
    ],
    # Algorithm 2's cliques, on the engine's defaults, with and without the table's label as
    # the prediction target (the target weighs in on which cliques add noise)
    "combine": [
        (f"{rule}{suffix}", {"combine": rule, **target}, {})
        for suffix, target in (("", {}), (" +target", {"target": "{label}"}))
        for rule in ("paper", "no_added_noise", "off")
    ],
    # the InDif share, on the engine's defaults (pairs measured as they are), with and
    # without the table's label as the prediction target
    "indif": [
        (f"InDif {share:.2f}{suffix}", {"indif_share": share, **target}, {})
        for suffix, target in (("", {}), (" +target", {"target": "{label}"}))
        for share in (0.1, 0.05)
    ],
    # GUM's initial table and whether it returns its best table, on the engine's defaults
    # (issue 22): one measurement per seed serves all four arms
    "initial": [
        ("tree, best kept", {}, {}),
        ("tree, last", {}, {"keep_best": False}),
        ("independent, best kept", {}, {"initial": "independent"}),
        ("independent, last (paper)", {}, {"initial": "independent", "keep_best": False}),
    ],
    # Algorithm 1's margin over the InDif noise (issue 22, the winner's curse), on the
    # engine's defaults
    "margin": [
        (f"margin {k:g}{' (paper)' if k == 0 else ''}", {"indif_margin": k}, {})
        for k in (0.0, 1.0, 2.0)
    ],
    # which table GUM keeps: judged on the noisy InDif of the unmeasured pairs too, or on
    # the measured marginals alone (issue 22); one measurement per seed serves both
    "judge": [
        ("measured and InDif", {}, {}),
        ("measured only", {}, {"judge_unmeasured": False}),
    ],
    # measured pairs within their noise drawn as independent, or every pair as measured
    # (issue 22, generation/independence.py); a generation setting: one measurement serves both
    "independence": [
        ("within noise: independent", {}, {}),
        ("every pair as measured (paper)", {"independence_threshold": None}, {}),
    ],
    # cells within their noise of empty targeted as empty and kept empty in the rows (issue
    # 39, generation/empty_cells.py); a generation setting: one measurement serves every arm
    "empty": [
        ("rows left as drawn", {"empty_sigmas": None}, {}),
        *[(f"empty at <= {k:g} sigma", {"empty_sigmas": k}, {}) for k in (0.0, 1.0, 2.0, 3.0)],
    ],
}
METRICS = ("2way_L1", "range", "svm")


def run_seed(study: str, name: str, epsilon: float, seed: int) -> list[dict[str, Any]]:
    table, domain, label = load(name)
    if study == "target" and label is None:
        return []
    base = BASE if study in ("strategy", "split") else PrivSynConfig()
    where = {"domain": domain} if isinstance(domain, dict) else {"schema": domain}
    measured: dict[str, Any] = {}
    rows = []
    for arm, measure_changes, gum_changes in STUDIES[study]:
        if label is None and "{label}" in measure_changes.values():
            continue
        changes = {k: label if v == "{label}" else v for k, v in measure_changes.items()}
        config = replace(base, gum=replace(base.gum, **gum_changes), **changes)
        # generation fields change nothing measured: arms differing only there share one
        key = repr(sorted((k, v) for k, v in changes.items() if k not in GENERATION_FIELDS))
        if key not in measured:
            measured[key] = measure(
                table,
                epsilon,
                1 / len(table) ** 2,
                **where,
                config=config,
                rng=np.random.default_rng(1000 * seed + len(measured)),
            )
        started = time.perf_counter()
        result = generate(measured[key], config=config, rng=np.random.default_rng(seed))
        seconds = time.perf_counter() - started
        scores = score(table, result, label, svm=label is not None)
        rows.append(
            {"table": name, "epsilon": epsilon, "seed": seed, "arm": arm, **scores,
             "seconds": seconds, "marginals": len(result.marginals),
             "with_label": sum(label in m.attributes for m in result.marginals) if label else 0}
        )  # fmt: skip
    return rows


def summarise(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["table"], r["epsilon"], r["arm"]), []).append(r)
    out = []
    for (table, epsilon, arm), runs in groups.items():
        row: dict[str, Any] = {"table": table, "eps": epsilon, "arm": arm, "seeds": len(runs)}
        for metric in METRICS:
            values = [r[metric] for r in runs if not math.isnan(r[metric])]
            sd = statistics.stdev(values) if len(values) > 1 else 0.0
            row[metric] = f"{statistics.mean(values):.4g} ± {sd:.2g}" if values else "n/a"
        row["marginals"] = statistics.mean(r["marginals"] for r in runs)
        row["with_label"] = statistics.mean(r["with_label"] for r in runs)
        row["gen_s"] = round(statistics.median(r["seconds"] for r in runs), 2)
        out.append(row)
    return out


def mean_ranks(rows: list[dict[str, Any]], metric: str) -> list[dict[str, Any]]:
    """Each arm's rank (1 = lowest mean) per (table, epsilon), and the mean rank over them."""
    cells = sorted({(r["table"], r["epsilon"]) for r in rows}, key=str)
    ranks: dict[str, list[float]] = {}
    for table, epsilon in cells:
        means: dict[str, list[float]] = {}
        for r in rows:
            if (r["table"], r["epsilon"]) == (table, epsilon) and not math.isnan(r[metric]):
                means.setdefault(r["arm"], []).append(r[metric])
        # arms with the same mean share the average of their places: a tie must not rank
        # whichever arm the study happens to list first
        value = {arm: statistics.mean(v) for arm, v in means.items()}
        order = sorted(value.values())
        for arm, mean in value.items():
            places = [i for i, v in enumerate(order, start=1) if v == mean]
            ranks.setdefault(arm, []).append(statistics.mean(places))
    return [
        {"metric": metric, "arm": arm, "mean rank": round(statistics.mean(r), 2), "cells": len(r)}
        for arm, r in sorted(ranks.items(), key=lambda item: statistics.mean(item[1]))
    ]


def report(rows: list[dict[str, Any]]) -> None:
    print()
    print_table(summarise(rows))
    for metric in METRICS:
        ranked = mean_ranks(rows, metric)
        if ranked:
            print(f"\nmean rank on {metric} over tables and epsilons (lower is better):")
            print_table(ranked)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--study", choices=sorted(STUDIES), default="strategy")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument(
        "--tables", nargs="+", default=["adult-coded", "adult-raw", "nltcs"], choices=TABLES
    )
    parser.add_argument("--epsilons", type=float, nargs="+", default=[0.2, 1.0, 2.0])
    parser.add_argument("--json", type=Path, help="write every run's numbers here")
    parser.add_argument("--summarise", type=Path, nargs="+", help="print saved --json files")
    args = parser.parse_args()
    if args.summarise:
        report([r for path in args.summarise for r in json.loads(path.read_text())])
        return
    rows = run_grid(
        args.tables,
        args.epsilons,
        args.seeds,
        lambda name, epsilon, seed: run_seed(args.study, name, epsilon, seed),
        args.json,
    )
    report(rows)


if __name__ == "__main__":
    main()
