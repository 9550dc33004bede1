"""Measure once, sample many: fit time against sample time on Adult.

Fits ``PrivSyn(epsilon, 1/n^2)`` on adult-coded (48,842 x 14, declared domain) and on raw
Adult (every structure and domain estimated privately), then samples from each model: the
noisy-total row count, 10x that, and with GUM off. Every figure is the median of ``--repeats``
in-process runs (release-mode noise for fits; seeds for samples). Also the one-call
``synthesize`` for comparison. Run: ``python benchmarks/fit_sample.py [--repeats 3]``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from functools import partial
from pathlib import Path
from statistics import median

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from privsyn_core import GumSettings, PrivSyn, synthesize  # noqa: E402


def seconds(call) -> tuple[float, object]:
    started = time.perf_counter()
    value = call()
    return time.perf_counter() - started, value


def sample_times(model, n: int, gum: GumSettings | None, repeats: int) -> list[float]:
    """Seconds of ``repeats`` samples of ``n`` rows, seeds 0, 1, ..."""
    return [seconds(partial(model.sample, n, seed=s, gum=gum))[0] for s in range(repeats)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--epsilon", type=float, default=1.0)
    args = parser.parse_args()
    coded = pd.read_csv(ROOT / "assets" / "adult-coded.csv")
    domain = json.loads((ROOT / "assets" / "adult-coded-domain.json").read_text())
    raw = pd.read_csv(ROOT / "assets" / "adult.csv", dtype=str, keep_default_na=False)
    delta = 1 / len(coded) ** 2
    cases = [
        ("adult-coded", coded, PrivSyn(args.epsilon, delta, domain=domain), {"domain": domain}),
        ("raw Adult", raw, PrivSyn(args.epsilon, delta), {}),
    ]
    print(f"epsilon {args.epsilon}, delta 1/n^2, median of {args.repeats} runs (seconds)")
    print(f"{'table':<12} {'synthesize':>10} {'fit':>7} {'sample n':>9} {'sample 10n':>10} "
          f"{'sample, no GUM':>14} {'rows n':>7}")  # fmt: skip
    for name, table, estimator, extra in cases:
        one_call = [
            seconds(lambda t=table, e=extra: synthesize(t, args.epsilon, delta, **e))[0]
            for _ in range(args.repeats)
        ]
        fits = [seconds(partial(estimator.fit, table)) for _ in range(args.repeats)]
        model = fits[-1][1]
        n = model.default_rows
        same = sample_times(model, n, None, args.repeats)
        tenfold = sample_times(model, 10 * n, None, args.repeats)
        no_gum = sample_times(model, n, GumSettings(iterations=0), args.repeats)
        print(
            f"{name:<12} {median(one_call):>10.2f} {median(f for f, _ in fits):>7.2f} "
            f"{median(same):>9.2f} {median(tenfold):>10.2f} {median(no_gum):>14.2f} {n:>7}"
        )


if __name__ == "__main__":
    main()
