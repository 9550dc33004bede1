"""Conditional samples (issue 26 item 2): which method, measured against rejection from a
large sample.

Fits PrivSyn on Adult (the bundled sample, 32,561 rows, every structure estimated
privately) at epsilon 1 with a fixed noise seed, draws the reference, a 1,000,000-row
sample (seed 0), and for each condition compares with the reference filtered by that
condition:

* ``unconditioned``: a plain ``n``-row sample, the condition ignored (how much conditioning
  changes the table: the scale of the numbers below);
* ``conditioned targets``: every consistent marginal (1-way and joint) that contains a
  conditioned attribute restricted to the allowed codes and rescaled to the same total,
  the others left as they are, then an ``n``-row sample (prototyped here, outside the
  package); rows that still break the condition are counted and dropped;
* ``rejection``: ``model.sample(n, where=...)``, the package's method (blocks drawn from
  the model, matching rows kept, stop at ``n``).

The score is the mean (and the largest) 2-way L1 distance over all column pairs, on the
codes of the model's own decoders (the released bins), between the method's ``n`` rows
and the filtered reference; ``floor`` is the same for ``n`` rows drawn at random from a
second, independent 1M-row sample filtered the same way (sampling noise alone). Times are
wall seconds on this machine (2 cores, shared).

Run: ``python benchmarks/conditional.py [--rows 10000] [--reference 1000000]``.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from privsyn_core import PrivSyn  # noqa: E402
from privsyn_core.generation.conditional import matching, probability, resolve  # noqa: E402

CONDITIONS = {
    "sex=Female": ["sex=Female"],
    "age=30..40": ["age=30..40"],
    "education=Bachelors, sex=Male": ["education=Bachelors", "sex=Male"],
}


def codes(table: pd.DataFrame, model) -> np.ndarray:
    """The table's columns as the model's declared codes (released bins), one row each."""
    return np.stack([d.encode(table[d.name]) for d in model.decoders])


def two_way_l1(a: np.ndarray, b: np.ndarray, sizes: list[int]) -> tuple[float, float]:
    """Mean and largest L1 distance between the normalised 2-way histograms of a and b."""
    scores = []
    for i, j in itertools.combinations(range(len(sizes)), 2):
        cells = sizes[i] * sizes[j]
        ha = np.bincount(a[i] * sizes[j] + a[j], minlength=cells) / a.shape[1]
        hb = np.bincount(b[i] * sizes[j] + b[j], minlength=cells) / b.shape[1]
        scores.append(float(np.abs(ha - hb).sum()))
    return float(np.mean(scores)), float(np.max(scores))


def conditioned_targets(model, conditions):
    """The model with every marginal holding a conditioned attribute restricted to the
    allowed codes (weights per engine code) and rescaled to its total."""
    weights = {
        model.groupings[model.columns.index(c.column)].attribute: np.asarray(c.weights)
        for c in conditions
    }

    def restricted(table):
        if not set(table.attributes) & set(weights):
            return table
        values = np.asarray(table.values, dtype=float).reshape(table.shape)
        for axis, name in enumerate(table.attributes):
            if name in weights:
                shape = [1] * values.ndim
                shape[axis] = -1
                values = values * weights[name].reshape(shape)
        total = float(np.asarray(table.values).sum())
        values = values / max(values.sum(), 1e-300) * total
        return table.with_values(values.ravel())

    return replace(
        model,
        one_way=tuple(restricted(t) for t in model.one_way),
        marginals=tuple(restricted(t) for t in model.marginals),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--reference", type=int, default=1_000_000)
    parser.add_argument("--epsilon", type=float, default=1.0)
    args = parser.parse_args()
    adult = pd.read_csv(
        ROOT / "privsyn_core" / "samples" / "adult.csv", dtype=str, keep_default_na=False
    )
    model = PrivSyn(args.epsilon, 1 / len(adult) ** 2).fit(adult, rng=np.random.default_rng(7))
    sizes = [d.size for d in model.decoders]
    print(
        f"Adult (bundled, {len(adult):,} rows), epsilon {args.epsilon:g}, noise seed 7; "
        f"n = {args.rows:,}; reference: {args.reference:,} rows, seed 0"
    )
    started = time.perf_counter()
    reference = model.sample(args.reference, seed=0)
    ref_seconds = time.perf_counter() - started
    second = model.sample(args.reference, seed=99)
    print(f"reference sample: {ref_seconds:.1f} s\n")
    print(
        f"{'condition':<32} {'method':<20} {'P model':>8} {'P ref':>7} {'rows':>6} "
        f"{'broken':>7} {'mean L1':>8} {'max L1':>7} {'seconds':>8}"
    )
    for label, where in CONDITIONS.items():
        conditions = resolve(model, where)
        p = probability(model, conditions)
        keep = matching(reference, model, conditions)
        ref_codes = codes(reference[keep], model)
        p_ref = keep.mean()
        other = second[matching(second, model, conditions)]
        floor = other.sample(args.rows, random_state=1)
        runs = {"floor (1M subsample)": (floor, 0.0, 0)}
        started = time.perf_counter()
        plain = model.sample(args.rows, seed=1)
        runs["unconditioned"] = (plain, time.perf_counter() - started, 0)
        started = time.perf_counter()
        try:
            targeted = conditioned_targets(model, conditions).sample(args.rows, seed=1)
            ok = matching(targeted, model, conditions)
            runs["conditioned targets"] = (
                targeted[ok],
                time.perf_counter() - started,
                int((~ok).sum()),
            )
        except Exception as exc:  # a method that fails is a result too
            print(f"{label:<32} conditioned targets failed: {type(exc).__name__}: {exc}")
        started = time.perf_counter()
        rejected = model.sample(args.rows, seed=1, where=where)
        runs["rejection"] = (rejected, time.perf_counter() - started, 0)
        assert matching(rejected, model, conditions).all()
        for method, (table, seconds, broken) in runs.items():
            mean, largest = two_way_l1(codes(table, model), ref_codes, sizes)
            print(
                f"{label:<32} {method:<20} {p:>8.4f} {p_ref:>7.4f} {len(table):>6} "
                f"{broken:>7} {mean:>8.4f} {largest:>7.4f} {seconds:>8.2f}"
            )
        print()


if __name__ == "__main__":
    main()
