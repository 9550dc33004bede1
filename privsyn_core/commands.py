"""The ``privsyn`` commands (:mod:`privsyn_core.cli` parses the arguments and reports errors).

Every failure the user can fix ends in an :class:`~privsyn_core.errors.InputError` or
:class:`~privsyn_core.errors.UsageError` that the command line prints as one line; the output
file is written to a temporary name and moved into place only when complete, so a failed or
interrupted run leaves nothing behind.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from contextlib import nullcontext
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from privsyn_core import synthesize_command as steps
from privsyn_core.command_inputs import pair_rule_options, read_input
from privsyn_core.command_outputs import (
    asked,
    check_new_folder,
    check_output,
    same_file,
    spark_output,
    spark_parquet,
    table_file,
    write_text_atomically,
)
from privsyn_core.command_terminal import ProgressBar, print_changes
from privsyn_core.data.atomic import write_atomically, write_folder_atomically
from privsyn_core.data.inputs import readable_file
from privsyn_core.data.schema import DRAFT_WARNING, infer_schema
from privsyn_core.errors import UsageError
from privsyn_core.generation.blocks import block_sizes
from privsyn_core.generation.fitted import written
from privsyn_core.generation.fitted_data import Sample
from privsyn_core.generation.gum_settings import GumSettings
from privsyn_core.privacy.ledger import ROW, PrivacyUnit
from privsyn_core.privacy.noise import SecureNoise, SeededNoise
from privsyn_core.release.bundle import load_model, load_release
from privsyn_core.release.changes import changes, released_exclusions
from privsyn_core.release.marginal_files import marginal_files
from privsyn_core.release.registry import BudgetStatus, Registry, RunRecord, file_fingerprint
from privsyn_core.release.report import release_report
from privsyn_core.terminal import printable


def _synthesize(args: argparse.Namespace) -> int:
    """Measure a table and write its synthetic copy, in the steps of
    :mod:`privsyn_core.synthesize_command`: every output and declaration is checked before
    the budget is reserved, and the budget before anything is measured."""
    if args.iterations is None:
        args.iterations = GumSettings().iterations
    registry = None if args.no_registry else Registry()
    targets = steps.checked_targets(args, registry)
    run, spark = steps.prepared_run(args)
    output, cells = table_file(asked(targets, "-o"), args.csv_escape_formulas, args.rows)
    if steps.on_spark(args):  # Spark's tasks make the blocks and write them
        output = spark_parquet(asked(targets, "-o"), spark)
    # rows are made in blocks on worker processes and written as each is decoded
    run = partial(run, workers=args.workers, block_rows=args.block_rows, write=output.write)
    # the same file has the same fingerprint on every engine (its bytes), so its budget is
    # counted once whichever engine reads it
    dataset = file_fingerprint(args.input)
    config = steps.synthesis_config(args)
    # no seed: release mode (secure, exact noise); a seed: debug mode, marked not for release
    rng = None if args.seed is None else np.random.default_rng(args.seed)
    settings = steps.recorded_settings(args, config)
    reservation = steps.reserved(registry, dataset, args, config)
    with reservation or nullcontext(), output:
        result, started = steps.measured(run, args, config, rng, settings, reservation)
        run_id, bundle = steps.recorded(result, config, settings, reservation)
        if registry is not None:  # History names a table by its columns (kept or left out)
            width = len(result.synthetic.columns) + len(result.excluded)
            registry.describe_table(dataset, Path(args.input).name, width)
        output.commit()  # the rows were written to a temporary file as they were made
        cells.report()
        steps.write_extras(args, targets, result, config, bundle)
    if not args.quiet:
        steps.print_summary(args, result, registry, dataset, run_id, started)
    steps.warn_if_not_end_to_end(result)
    return 0


def _generate(args: argparse.Namespace) -> int:
    """Sample from the fitted model in a release bundle: the bundle is the only input (no
    table, no registry), so nothing is measured and nothing is spent."""
    on_spark = args.engine == "spark"
    where = list(args.where or [])
    if on_spark:
        target = spark_output(args, {"the bundle": args.bundle}, False)
    else:
        target = check_output(args.output, {"the bundle": args.bundle})
    model = load_model(args.bundle)
    gum_changes: dict[str, Any] = {}
    if args.iterations is not None:
        gum_changes["iterations"] = args.iterations
    if args.strategy is not None:
        gum_changes["strategy"] = args.strategy
    if args.decay is not None:
        gum_changes["decay"] = args.decay
    if args.initial is not None:
        gum_changes["initial"] = args.initial
    gum = replace(model.defaults.gum, **gum_changes)
    sampling = replace(model.defaults, gum=gum)
    if args.synthesis is not None:
        sampling = replace(sampling, synthesis=args.synthesis)
    sampling = replace(sampling, **pair_rule_options(args))
    if args.block_rows is not None:
        sampling = replace(sampling, block_rows=args.block_rows)
    rows = model.default_rows if args.rows is None else args.rows
    blocks = len(block_sizes(rows, sampling.block_rows))
    # a conditional sample draws rounds of blocks until enough rows match: no progress
    bar = ProgressBar(gum.iterations if blocks == 1 else blocks, not (args.quiet or where), 3)
    started = time.perf_counter()
    output, cells = table_file(target, args.csv_escape_formulas, rows)
    if on_spark:  # Spark's tasks make the blocks and write them (generation/spark_blocks.py)
        from privsyn_core.spark_session import spark_session

        output = spark_parquet(target, spark_session(args.spark_master))
    try:
        with output:
            # checks the blocks' memory (and the conditions) before any work: one line, no file
            made = (
                model.generate_where(
                    rows, where, seed=args.seed, settings=sampling, workers=args.workers
                )
                if where
                else model.generate_blocks(
                    rows, seed=args.seed, settings=sampling, workers=args.workers, on_progress=bar
                )
            )
            drawn = written(made, output.write)
            output.commit()
    finally:
        bar.close()
    cells.report()
    if not args.quiet:
        ledger = model.ledger
        epsilon = "-" if ledger.epsilon is None else f"{ledger.epsilon:g}"
        print(
            f"wrote {drawn.n_records} synthetic rows"
            + (f" where {printable('; '.join(where))}" if where else "")
            + f" to {printable(args.output)} in "
            f"{time.perf_counter() - started:.1f} s from {printable(args.bundle)}: read nothing "
            "but the "
            f"bundle and spent no privacy budget (the release cost epsilon={epsilon}, "
            f"rho={ledger.spent_rho:.5g}, once); {_iterations(drawn)}; "
            + ("seed " + str(args.seed) if args.seed is not None else "no seed"),
            file=sys.stderr,
        )
        if drawn.kept is not None:
            first = " (the first block's)" if drawn.blocks > 1 else ""
            print(f"GUM{first}: {drawn.kept.words()}", file=sys.stderr)
        if "not for release" in ledger.randomness:
            print(
                "privsyn: note: the bundle's measurements used debug-mode noise (a seed): "
                "NOT for release",
                file=sys.stderr,
            )
        print_changes(changes(replace(model, defaults=sampling), released_exclusions(model)))
    return 0


def _marginals(args: argparse.Namespace) -> int:
    """A release bundle's noisy marginals, as measured and after consistency, as CSV files
    in a new folder (:mod:`privsyn_core.release.marginal_files`): only the bundle is read,
    nothing is spent, and the folder appears whole or not at all."""
    target = check_new_folder(args.output)
    model = load_model(args.bundle)
    files, found = marginal_files(model, Path(args.bundle).name, args.csv_escape_formulas)
    try:
        write_folder_atomically(files, target)
    except OSError as exc:
        raise UsageError(
            f"cannot write {args.output}: {exc.strerror or exc}; nothing was written"
        ) from None
    if found:
        print(
            f"privsyn: warning: {found.warning(escaped=args.csv_escape_formulas)}", file=sys.stderr
        )
    if not args.quiet:
        count = len(model.noisy)
        print(
            f"wrote {count} noisy marginals and the same {count} after consistency to "
            f"{printable(args.output)}: a differentially private release that the bundle's "
            f"budget already paid for (epsilon "
            f"{'-' if model.ledger.epsilon is None else f'{model.ledger.epsilon:g}'}, rho "
            f"{model.ledger.spent_rho:.5g}); nothing more is spent. See its README.txt",
            file=sys.stderr,
        )
        if "not for release" in model.ledger.randomness:
            print(
                "privsyn: note: the bundle's measurements used debug-mode noise (a seed): "
                "NOT for release",
                file=sys.stderr,
            )
    return 0


def _report(args: argparse.Namespace) -> int:
    """A release bundle's report (:mod:`privsyn_core.release.report`), made again from its
    checked content: only the bundle is read, nothing is spent."""
    target = check_output(args.output, {"the bundle": args.bundle})
    release = load_release(args.bundle)
    page = release_report(release.model, convergence=release.convergence)
    write_atomically(page.encode(), target)
    print(
        f"wrote the release report of {printable(args.bundle)} to {printable(args.output)}: "
        "one page that opens offline in any browser",
        file=sys.stderr,
    )
    return 0


def _iterations(drawn: Sample) -> str:
    """GUM's iterations (and the MRF's sweeps after them), per block when the rows were made
    as several."""
    sweeps = sum(h.method == "mrf" for h in drawn.history)  # the first block's
    if drawn.blocks == 1:
        return f"{len(drawn.history) - sweeps} GUM iterations" + (
            f" and {sweeps} MRF sweeps" if sweeps else ""
        )
    counts = drawn.block_iterations
    steps = "GUM iterations and MRF sweeps" if sweeps else "GUM iterations"
    return f"{drawn.blocks} blocks of {min(counts)}-{max(counts)} {steps}"


def _schema_infer(args: argparse.Namespace) -> int:
    target = check_output(args.output, {"the input table": args.input}) if args.output else None
    table = read_input(args.input, args)
    text = infer_schema(table).dumps() + "\n"
    print(f"privsyn: note: {DRAFT_WARNING}", file=sys.stderr)
    if target is not None:
        write_text_atomically(text, target)
        print(f"wrote the draft schema to {printable(args.output)}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def _runs_list(args: argparse.Namespace) -> int:
    """Every recorded run with what it spent (rho and its thresholds' delta), the budget held
    by runs in progress (or dead), and per dataset the composed guarantee and its lifetime."""
    registry = Registry()
    dataset = file_fingerprint(readable_file(args.table)) if args.table else None
    runs = registry.runs(dataset)
    held = registry.held(dataset)
    if not runs and not held:
        print(f"no runs recorded in {registry.path}")
        return 0
    print(
        f"{'id':>4}  {'created':<19}  {'epsilon':>8}  {'rho':>10}  {'delta':>8}  {'noise':<8}  "
        "dataset"
    )
    for run in runs:
        created = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(run.created))
        epsilon = "-" if run.epsilon is None else f"{run.epsilon:g}"
        print(
            f"{run.id:>4}  {created:<19}  {epsilon:>8}  {run.rho:>10.4g}  "
            f"{run.spent_delta:>8.2g}  {run.randomness.split()[0]:<8}  {run.fingerprint[:12]}"
        )
    for reservation in held:  # reserved before measuring, never recorded: counted in full
        created = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(reservation.created))
        alive = reservation.process_alive()
        state = "in progress" if alive else "held: its run stopped before recording its spend"
        if alive is None:
            state = f"held by process {reservation.pid} on {reservation.host}"
        print(
            f"{'-':>4}  {created:<19}  {'-':>8}  {reservation.rho:>10.4g}  "
            f"{reservation.delta:>8.2g}  {'-':<8}  {reservation.fingerprint[:12]}  {state} "
            f"({reservation.purpose})"
        )
    fingerprints = dict.fromkeys([r.fingerprint for r in runs] + [h.fingerprint for h in held])
    for fingerprint in fingerprints:
        print(_books_line(fingerprint, registry.budget(fingerprint), args.delta))
    return 0


def _books_line(fingerprint: str, status: BudgetStatus, delta: float) -> str:
    """One dataset's books in a line: what its runs spent or hold together, the (epsilon,
    delta) that composes to at ``delta`` (:meth:`~privsyn_core.privacy.budget.Budget.stated`:
    zCDP adds rho, the thresholds' deltas add to the conversion's), and its lifetime budget."""
    committed = status.committed
    epsilon, total_delta = committed.stated(delta)
    lifetime = "no lifetime budget" if status.lifetime is None else status.lifetime.words
    return (
        f"dataset {fingerprint[:12]}: together {committed.words} spent or held, so "
        f"(epsilon {epsilon:.4g}, delta {total_delta:.3g})-DP; lifetime budget: {lifetime}"
    )


def _recorded_run(registry: Registry, run_id: int) -> RunRecord:
    try:
        return registry.run(run_id)
    except KeyError:
        raise UsageError(f"no run {run_id} in the registry; see 'privsyn runs list'") from None


def _runs_show(args: argparse.Namespace) -> int:
    run = _recorded_run(Registry(), args.id)
    print(json.dumps({"id": run.id, "config": run.config, "ledger": run.ledger}, indent=2))
    return 0


def _runs_export(args: argparse.Namespace) -> int:
    """Write a recorded run's release bundle again: no data is read, no budget is spent."""
    registry = Registry()
    run = _recorded_run(registry, args.id)
    bundle = registry.bundle(run.id) if run.has_bundle else None
    if bundle is None:
        raise UsageError(
            f"run {run.id} has no release bundle: it read domains off the raw data "
            "(--raw-domains), so it was never a DP release"
        )
    target = check_output(args.output, {"the run registry": registry.path})
    write_atomically(bundle, target)
    print(f"wrote the release bundle of run {run.id} to {printable(args.output)}", file=sys.stderr)
    return 0


def _audit(args: argparse.Namespace) -> int:
    """Audit the engine's noisy steps on generated neighbouring tables (reads no data). Exit
    status 1 if any step leaks more than it claims."""
    from privsyn_core.privacy import audit  # scipy's statistics: a second of imports

    modes = ["debug", "release"] if args.mode == "both" else [args.mode]
    k = args.max_rows_per_person
    unit = ROW if k is None else PrivacyUnit("person", k)
    if k is not None:
        print(
            f"person-level neighbours: the per-row ones scaled by {k} (each row of the table "
            f"held {k} times by one person), one whole person ({3 * k} rows, all alike) added "
            f"or removed; every step keeps at most {k} rows per person and is calibrated for them"
        )
    print(
        f"privsyn audit: every noisy step, run many times on two generated neighbouring tables "
        f"(delta {args.delta:g}); measured epsilon is a {audit.CONFIDENCE:.0%}-confidence lower "
        "bound on the epsilon the code really has"
    )
    print(
        f"{'step':<16} {'mode':<8} {'trials':>7} {'claimed eps':>11} {'measured >=':>11} "
        f"{'mu claimed':>10} {'mu measured':>16}  verdict"
    )
    refuted = False
    for epsilon in args.epsilon:
        for mode in modes:
            debug = mode == "debug"
            seeded = np.random.default_rng(args.seed)
            noise = SeededNoise(seeded, unit=unit) if debug else SecureNoise(unit)
            trials = args.trials if debug else args.release_trials
            tables = np.random.default_rng(0)  # the generated neighbours
            results = audit.audit_engine(
                epsilon, args.delta, noise, trials, tables, rows_per_person=k
            )
            for result in results:
                refuted |= result.violates_claim
                measured = f"{result.mu_estimate:.3f} +- {result.mu_standard_error:.3f}"
                print(
                    f"{result.mechanism:<16} {mode:<8} {result.trials:>7} "
                    f"{result.claimed_epsilon:>11.3f} {result.epsilon_lower_bound:>11.3f} "
                    f"{result.mu_claimed:>10.3f} {measured:>16}  "
                    + ("LEAKS BEYOND ITS CLAIM" if result.violates_claim else "ok")
                )
    if refuted:
        print("privsyn: error: a step leaks more than its ledger claims", file=sys.stderr)
        return 1
    print("no step leaks more than it claims")
    return 0


def _plan(args: argparse.Namespace) -> int:
    """Noise per step from public inputs only: nothing is read but the arguments."""
    from privsyn_core.privacy.planner import plan_budget  # only this command plans

    plan = plan_budget(
        args.epsilon,
        args.delta,
        args.columns,
        private_structure=args.private_structure + args.undeclared,
        private_categories=args.private_categories,
        private_ranges=args.private_ranges,
        private_undecided=args.undeclared,
        # no table is read: the person column's name does not change the noise, only K
        unit=ROW
        if args.max_rows_per_person == 1
        else PrivacyUnit("person", args.max_rows_per_person),
    )
    print(
        f"epsilon {args.epsilon:g}, delta {args.delta:g}: rho = {plan.rho:.6g} (zCDP)"
        + (
            f", and delta {plan.reserved_delta:.3g} of it for thresholded releases (rho is "
            f"converted at the rest, {args.delta - plan.reserved_delta:.3g})"
            if plan.reserved_delta
            else ""
        )
    )
    if args.max_rows_per_person > 1:
        print(
            f"per person, at most {args.max_rows_per_person} rows: every sigma is "
            f"{args.max_rows_per_person} times the per-row one"
        )
    print(f"{'step':<20} {'rho':>10} {'share':>7} {'sigma':>10}  queries")
    for row in plan.as_rows():
        sigma = "-" if row["sigma"] is None else f"{row['sigma']:.4g}"
        print(
            f"{row['step']:<20} {row['rho']:>10.4g} {row['share']:>7.1%} {sigma:>10}  "
            f"{row['queries']}"
        )
    if plan.categories is not None:
        print(f"category estimates: {plan.categories.summary()}")
    return 0


def _evaluate(args: argparse.Namespace) -> int:
    """Owner-only: the fidelity measures and the check for copied rows, both of which read the
    real rows (printed for the owner, never written into a release)."""
    from privsyn_core.copied_rows import copied_rows_report
    from privsyn_core.evaluation import fidelity_report

    if args.holdout is not None and same_file(Path(args.holdout), Path(args.real)):
        raise UsageError(
            f"--holdout {printable(args.holdout)} is the real table itself: give real rows "
            "that were never given to the synthesizer, or leave out --holdout to hold out half "
            "the real rows"
        )
    # numbers are read as numbers so range queries order them as numbers
    real = read_input(args.real, args, infer_types=True)
    synthetic = read_input(args.synthetic, argparse.Namespace(), infer_types=True)
    holdout = None if args.holdout is None else read_input(args.holdout, args, infer_types=True)
    report = fidelity_report(real, synthetic, label=args.label, seed=args.seed)
    copies = copied_rows_report(real, synthetic, holdout=holdout, seed=args.seed)
    print(report.format())
    print()
    print(copies.format())
    return 0
