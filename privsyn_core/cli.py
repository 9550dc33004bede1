"""The ``privsyn`` command line: synthesise and evaluate without a browser.

Every failure the user can fix (a missing file, a value outside its domain, a bad epsilon)
ends the program with status 2 and one line on stderr saying what to do; the output file is
written to a temporary name and moved into place only when complete, so a failed or
interrupted run leaves nothing behind.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm import tqdm

from privsyn_core.config import PrivSynConfig
from privsyn_core.gum import GumSettings
from privsyn_core.pipeline import synthesize
from privsyn_core.privacy import BudgetExceededError
from privsyn_core.progress import (
    STAGE_TITLES,
    GumProgress,
    ProgressEvent,
    StageFinished,
    StageStarted,
    SynthesisCancelled,
)
from privsyn_core.table import TableError


class UsageError(Exception):
    """A problem with the command's input, reported as one line."""


def _read_csv(path: str) -> pd.DataFrame:
    file = Path(path)
    if not file.is_file():
        raise UsageError(f"cannot read {path}: no such file")
    try:
        return pd.read_csv(file)
    except pd.errors.EmptyDataError:
        raise UsageError(f"{path} is empty: give a CSV with a header row and data") from None
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path} is not a readable CSV ({exc})") from None


def _read_domain(path: str | None) -> dict[str, object] | None:
    if path is None:
        return None
    file = Path(path)
    if not file.is_file():
        raise UsageError(f"cannot read domain file {path}: no such file")
    try:
        domain = json.loads(file.read_text())
    except json.JSONDecodeError as exc:
        raise UsageError(
            f"domain file {path} is not valid JSON ({exc.msg}, line {exc.lineno})"
        ) from None
    if not isinstance(domain, dict):
        raise UsageError(
            f"domain file {path} must map each column to its number of codes or its categories"
        )
    return domain


def _write_atomically(frame: pd.DataFrame, path: str) -> None:
    target = Path(path)
    if not target.parent.is_dir():
        raise UsageError(f"cannot write {path}: folder {target.parent} does not exist")
    handle, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    os.close(handle)
    try:
        frame.to_csv(tmp, index=False)
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


class _ProgressBar:
    """One tqdm bar over all stages and GUM iterations, on stderr."""

    def __init__(self, iterations: int, enabled: bool) -> None:
        self.bar = tqdm(
            total=len(STAGE_TITLES) + iterations,
            file=sys.stderr,
            disable=not enabled or not sys.stderr.isatty(),
            leave=False,
            unit="step",
            bar_format="{desc:<44} {percentage:3.0f}%|{bar}| {elapsed}<{remaining}",
        )

    def __call__(self, event: ProgressEvent) -> bool:
        if isinstance(event, StageStarted):
            self.bar.set_description_str(event.title)
        elif isinstance(event, StageFinished):
            self.bar.update(1)
        elif isinstance(event, GumProgress):
            self.bar.set_description_str(
                f"GUM {event.iteration + 1}/{event.iterations}, mean L1 {event.mean_error:.4f}"
            )
            self.bar.update(1)
        return True

    def close(self) -> None:
        self.bar.close()


def _synthesize(args: argparse.Namespace) -> int:
    table = _read_csv(args.input)
    domain = _read_domain(args.domain)
    gum = GumSettings(iterations=args.iterations)
    config = PrivSynConfig(gum=gum)
    rng = np.random.default_rng(args.seed)
    bar = _ProgressBar(args.iterations, enabled=not args.quiet)
    started = time.perf_counter()
    try:
        result = synthesize(
            table,
            args.epsilon,
            args.delta,
            domain=domain,
            n_records=args.rows,
            config=config,
            rng=rng,
            on_progress=bar,
        )
    finally:
        bar.close()
    _write_atomically(result.synthetic, args.output)
    if not args.quiet:
        ledger = result.ledger
        print(
            f"wrote {result.n_records} synthetic rows to {args.output} in "
            f"{time.perf_counter() - started:.1f} s; epsilon={args.epsilon:g}, "
            f"delta={args.delta:g} (rho={ledger.budget_rho:.5g}, spent {ledger.spent_rho:.5g}); "
            f"{len(result.marginals)} marginals",
            file=sys.stderr,
        )
    return 0


def _evaluate(args: argparse.Namespace) -> int:
    from privsyn_core.evaluation import fidelity_report

    real = _read_csv(args.real)
    synthetic = _read_csv(args.synthetic)
    report = fidelity_report(real, synthetic, label=args.label, seed=args.seed)
    print(report.format())
    return 0


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="privsyn", description="Differentially private synthetic tables with PrivSyn."
    )
    commands = parser.add_subparsers(dest="command", required=True)

    syn = commands.add_parser("synthesize", help="write a DP synthetic copy of a CSV table")
    syn.add_argument("input", help="private table (CSV with a header row)")
    syn.add_argument("-o", "--output", required=True, help="where to write the synthetic CSV")
    syn.add_argument("--epsilon", type=float, required=True, help="privacy parameter epsilon")
    syn.add_argument(
        "--delta", type=float, default=1e-9, help="privacy parameter delta (default 1e-9)"
    )
    syn.add_argument(
        "--domain",
        help="JSON mapping each column to its number of codes (0..k-1) or list of categories",
    )
    syn.add_argument("--seed", type=int, default=None, help="seed for a reproducible run")
    syn.add_argument(
        "--iterations", type=_positive_int, default=GumSettings().iterations, help="GUM iterations"
    )
    syn.add_argument(
        "--rows", type=int, default=None, help="rows to synthesise (default: the noisy total)"
    )
    syn.add_argument("-q", "--quiet", action="store_true", help="no progress bar or summary")
    syn.set_defaults(run=_synthesize)

    ev = commands.add_parser(
        "evaluate", help="fidelity of a synthetic table against the real one (owner-only)"
    )
    ev.add_argument("real", help="the real table (CSV)")
    ev.add_argument("synthetic", help="the synthetic table (CSV)")
    ev.add_argument("--label", help="column to predict for the SVM measure")
    ev.add_argument("--seed", type=int, default=0, help="seed of the train/test split and queries")
    ev.set_defaults(run=_evaluate)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except (UsageError, TableError, BudgetExceededError, ValueError) as exc:
        print(f"privsyn: error: {exc}", file=sys.stderr)
        return 2
    except SynthesisCancelled as exc:
        print(f"privsyn: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("privsyn: interrupted; no output written", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
