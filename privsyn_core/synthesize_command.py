"""The steps of ``privsyn synthesize``, in the order :func:`privsyn_core.commands._synthesize`
takes them: check the outputs, read the declarations and the input, build the engine's
settings, reserve the budget, measure and synthesise, record and write, report.

The order carries the command's promises: every output is checked and every declaration read
before the registry reserves anything, the budget is reserved before anything is measured
(a refusal spends nothing), and the run is on the books before any output is moved into place.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from privsyn_core.command_inputs import file_source, pair_rule_options, read_domain, read_input
from privsyn_core.command_outputs import (
    asked,
    check_outputs,
    spark_output,
    write_text_atomically,
)
from privsyn_core.command_terminal import ProgressBar, budget_warnings_as_lines, print_changes
from privsyn_core.config import PrivSynConfig
from privsyn_core.data.atomic import write_atomically
from privsyn_core.data.paths import is_parquet
from privsyn_core.data.schema import Provenance, Schema
from privsyn_core.errors import InputError, UsageError
from privsyn_core.generation.gum_settings import GumSettings
from privsyn_core.generation.synthesis import SynthesisResult
from privsyn_core.pipeline import synthesize
from privsyn_core.privacy.ledger import FailedAfterSpending, PrivacyUnit
from privsyn_core.release.bundle import bundle_bytes
from privsyn_core.release.changes import changes
from privsyn_core.release.registry import Registry, Reservation
from privsyn_core.terminal import printable

#: the run: :func:`~privsyn_core.pipeline.synthesize` with its input and options bound
Run = Callable[..., SynthesisResult]


def on_spark(args: argparse.Namespace) -> bool:
    """Whether Spark's tasks write the rows (``--engine spark`` with a Parquet output)."""
    return args.engine == "spark" and is_parquet(Path(args.output))


def checked_targets(args: argparse.Namespace, registry: Registry | None) -> dict[str, Path | None]:
    """``-o``, ``--ledger`` and ``--bundle``, each checked to be writable and none of them an
    input (the table, the domain file, the schema, the registry) or another output."""
    inputs = {
        "the input table": args.input,
        "the domain file": args.domain,
        "the schema": args.schema,
        "the run registry": None if registry is None else registry.path,
    }
    spark = on_spark(args)
    targets = check_outputs(
        {"-o": None if spark else args.output, "--ledger": args.ledger, "--bundle": args.bundle},
        inputs,
    )
    if spark:
        others = {o: str(t) for o, t in targets.items() if t is not None}
        targets["-o"] = spark_output(args, {**inputs, **others}, args.raw_domains)
    return targets


def prepared_run(args: argparse.Namespace) -> tuple[Run, Any]:
    """The run with its input bound (the table read here, or the file counted where it lies
    on DuckDB or Spark) and the Spark session (None off Spark). Option clashes and the
    declarations are refused before the table is read."""
    if args.bundle and args.raw_domains:
        raise UsageError("--bundle holds only DP artifacts and cannot go with --raw-domains")
    if args.domain and args.schema:
        raise UsageError("give either --domain (pre-coded tables) or --schema, not both")
    domain = read_domain(args.domain)
    schema = Schema.load(args.schema) if args.schema else None
    PrivacyUnit.of(args.person, args.max_rows_per_person)  # refused before anything is read
    declared = {
        "domain": domain,
        "schema": schema,
        "raw_domains": args.raw_domains,
        **person_options(args),
    }
    if args.engine in ("duckdb", "spark"):
        source, spark = file_source(args, domain)
        return partial(synthesize, source, engine=args.engine, spark=spark, **declared), spark
    return partial(synthesize, read_input(args.input, args), **declared), None


def person_options(args: argparse.Namespace) -> dict[str, Any]:
    """The privacy unit's options: the person column and the most rows one person holds."""
    return {"person": args.person, "max_rows_per_person": args.max_rows_per_person}


def synthesis_config(args: argparse.Namespace) -> PrivSynConfig:
    """The engine's settings from the options (``--iterations``, ``--target``,
    ``--synthesis``, ``--initial``, ``--independence-threshold``, ``--quasi-independence``)."""
    gum = GumSettings(iterations=args.iterations)
    if args.initial is not None:
        gum = replace(gum, initial=args.initial)
    config = PrivSynConfig(gum=gum, target=args.target, synthesis=args.synthesis)
    return replace(config, **pair_rule_options(args))


def recorded_settings(args: argparse.Namespace, config: PrivSynConfig) -> dict[str, Any]:
    """The settings the registry records with the run."""
    return {
        "epsilon": args.epsilon,
        "delta": args.delta,
        "iterations": args.iterations,
        "synthesis": args.synthesis,
        "independence_threshold": config.independence_threshold,
        "quasi_independence": config.quasi_independence,
        "initial": config.gum.initial,
        "schema": args.schema,
        "domain": args.domain,
        "raw_domains": args.raw_domains,
        "target": args.target,
        **person_options(args),
    }


def reserved(
    registry: Registry | None, dataset: str, args: argparse.Namespace, config: PrivSynConfig
) -> Reservation | None:
    """The run's budget, reserved before anything is measured (a refusal here spends
    nothing); None without a registry."""
    if registry is None:
        return None
    purpose = f"privsyn synthesize, epsilon {args.epsilon:g}, delta {args.delta:g}"
    with budget_warnings_as_lines():
        return registry.reserve(
            dataset, Path(args.input).name, config.run_budget(args.epsilon, args.delta), purpose
        )


def measured(
    run: Run,
    args: argparse.Namespace,
    config: PrivSynConfig,
    rng: np.random.Generator | None,
    settings: dict[str, Any],
    reservation: Reservation | None,
) -> tuple[SynthesisResult, float]:
    """The synthesis and when it started. A run that fails after spending, or is
    interrupted, records what it spent against its reservation and gives back the rest."""
    bar = ProgressBar(args.iterations, enabled=not args.quiet)
    started = time.perf_counter()
    try:
        return run(
            args.epsilon,
            args.delta,
            n_records=args.rows,
            config=config,
            rng=rng,
            on_progress=bar,
        ), started
    except FailedAfterSpending as error:
        if reservation is None:
            raise
        run_id = reservation.spend(error.ledger, {**settings, "outcome": f"failed: {error}"})
        reservation.return_unspent()
        raise InputError(f"{error}; the spend is recorded as run {run_id}") from None
    except KeyboardInterrupt:
        # Ctrl-C: what the last finished stage had spent is what anything shown came from
        if reservation is not None:
            if bar.spent is not None and bar.spent.spent_rho > 0:
                run_id = reservation.spend(bar.spent, {**settings, "outcome": "interrupted"})
                print(
                    f"privsyn: the budget spent so far is recorded as run {run_id}",
                    file=sys.stderr,
                )
            reservation.return_unspent()
        raise
    finally:
        bar.close()


def recorded(
    result: SynthesisResult,
    config: PrivSynConfig,
    settings: dict[str, Any],
    reservation: Reservation | None,
) -> tuple[int | None, bytes | None]:
    """The run put on the books before anything is written, with its release bundle
    (None, None without a registry); the unspent rest of the reservation given back."""
    if reservation is None:
        return None, None
    run_id, bundle = reservation.record_result(result, config, settings)
    reservation.return_unspent()
    return run_id, bundle


def write_extras(
    args: argparse.Namespace,
    targets: dict[str, Path | None],
    result: SynthesisResult,
    config: PrivSynConfig,
    bundle: bytes | None,
) -> None:
    """``--bundle`` (the one the registry recorded, or made here) and ``--ledger``."""
    if args.bundle:
        write_atomically(bundle or bundle_bytes(result, config), asked(targets, "--bundle"))
    if args.ledger:
        ledger_json = json.dumps(result.ledger.to_json(), indent=2) + "\n"
        write_text_atomically(ledger_json, asked(targets, "--ledger"))


def print_summary(
    args: argparse.Namespace,
    result: SynthesisResult,
    registry: Registry | None,
    dataset: str,
    run_id: int | None,
    started: float,
) -> None:
    """What the run wrote and spent, the dataset's books, what it decided privately and what
    the release changed of the table."""
    ledger = result.ledger
    print(
        f"wrote {result.n_records} synthetic rows to {printable(args.output)} in "
        f"{time.perf_counter() - started:.1f} s; epsilon={args.epsilon:g}, "
        f"delta={args.delta:g} (rho={ledger.budget_rho:.5g}, spent {ledger.spent_rho:.5g}); "
        f"{len(result.marginals)} marginals; noise: {ledger.randomness}; "
        f"guarantee {ledger.unit.words}",
        file=sys.stderr,
    )
    if result.kept is not None:
        print(f"GUM: {result.kept.words()}", file=sys.stderr)
    if registry is not None:
        total = registry.budget(dataset).committed
        epsilon, delta = total.stated(args.delta)
        print(
            f"recorded as run {run_id} in {registry.path}; over all its runs this dataset "
            f"has spent {total.words}: (epsilon {epsilon:.4g}, delta {delta:.3g})-DP "
            "(see 'privsyn runs list')",
            file=sys.stderr,
        )
    decided = decided_structure(result)
    if decided:
        print(f"decided privately: {printable(decided)}", file=sys.stderr)
    if result.model is not None:
        print_changes(changes(result.model, result.excluded, result.dropped_rules))


def warn_if_not_end_to_end(result: SynthesisResult) -> None:
    """The warning a run whose structure or domains were read off the raw data gets, also
    with ``--quiet``."""
    if not result.end_to_end_dp:
        print(
            "privsyn: warning: NOT end-to-end DP: the structure or domains of "
            f"{printable(', '.join(result.ledger.not_private))} were read off the raw data "
            "(--raw-domains)",
            file=sys.stderr,
        )


def decided_structure(result: SynthesisResult) -> str:
    """The kinds (and whole numbers, date formats, decimals) the run decided, in one line:
    DP outputs, which the user should check before trusting the release's layout."""
    parts = []
    for column in result.columns:
        estimated = [c for c in column.choices if c.provenance is Provenance.PRIVATE]
        shown = [c.value for c in estimated if c.name == "kind"]
        shown += ["whole" for c in estimated if c.name == "whole numbers" and c.value == "yes"]
        shown += [c.value for c in estimated if c.name == "date format"]
        shown += [  # the precision read off DP bin edges (whole numbers say "whole")
            f"{n} decimal{'' if n == '1' else 's'}"
            for c in estimated
            for n in [c.value.split()[0]]
            if c.name == "decimals" and not c.value.startswith("0 (whole")
        ]
        if shown:
            parts.append(f"{column.codec.name} {' '.join(shown)}")
    return ", ".join(parts)
