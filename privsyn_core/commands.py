"""The ``privsyn`` commands (:mod:`privsyn_core.cli` parses the arguments and reports errors).

Every failure the user can fix ends in an :class:`~privsyn_core.errors.InputError` or
:class:`~privsyn_core.errors.UsageError` that the command line prints as one line; the output
file is written to a temporary name and moved into place only when complete, so a failed or
interrupted run leaves nothing behind.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from privsyn_core.config import PrivSynConfig
from privsyn_core.data.atomic import write_atomically, write_folder_atomically
from privsyn_core.data.inputs import read_declaration, readable_file
from privsyn_core.data.io import read_table
from privsyn_core.data.paths import is_parquet
from privsyn_core.data.schema import DRAFT_WARNING, Provenance, Schema, infer_schema
from privsyn_core.data.streamed import TableFile
from privsyn_core.data.table import DomainSpec, check_domain_spec
from privsyn_core.errors import InputError, UsageError
from privsyn_core.file_schemas import DOMAIN_FILE, check_file
from privsyn_core.generation.blocks import block_sizes
from privsyn_core.generation.fitted import Sample, written
from privsyn_core.generation.gum import GumSettings
from privsyn_core.pipeline import SynthesisResult, synthesize
from privsyn_core.privacy.ledger import (
    ROW,
    FailedAfterSpending,
    PrivacyLedger,
    PrivacyUnit,
)
from privsyn_core.privacy.noise import SecureNoise, SeededNoise
from privsyn_core.progress import (
    STAGE_TITLES,
    BlockProgress,
    GumProgress,
    ProgressEvent,
    StageFinished,
    StageStarted,
)
from privsyn_core.release.bundle import bundle_bytes, load_model, load_release
from privsyn_core.release.changes import Change, change_lines, changes, released_exclusions
from privsyn_core.release.csv_cells import FormulaScan
from privsyn_core.release.marginal_files import marginal_files
from privsyn_core.release.registry import (
    BudgetStatus,
    BudgetWarning,
    Registry,
    Reservation,
    RunRecord,
    file_fingerprint,
)
from privsyn_core.release.report import release_report
from privsyn_core.terminal import printable


def _read(path: str, args: argparse.Namespace, *, infer_types: bool = False) -> pd.DataFrame:
    names = [n.strip() for n in args.names.split(",")] if getattr(args, "names", None) else None
    return read_table(
        path,
        delimiter=getattr(args, "delimiter", None),
        encoding=getattr(args, "encoding", None),
        header=not getattr(args, "no_header", False),
        names=names,
        na_values=getattr(args, "na", None),
        infer_types=infer_types,
    )


def _read_domain(path: str | None) -> DomainSpec | None:
    if path is None:
        return None
    domain = read_declaration(path, "domain file")
    if not isinstance(domain, dict):
        raise UsageError(
            f"domain file {path} must map each column to its number of codes or its categories"
        )
    check_file(
        domain,
        DOMAIN_FILE,
        f"domain file {printable(path)}",
        'give each column its number of codes, such as 4, or its categories, such as ["a", "b"]',
    )
    check_domain_spec(domain)  # every engine: before the table is read or counted
    return domain


def _check_output(path: str, inputs: dict[str, str | Path | None] | None = None) -> Path:
    """Fail before any work (and any budget spent) if the output cannot be written, or if
    writing it would replace something the command reads: ``inputs`` maps what each input
    is ("the input table", "the run registry", ...) to its path. Outputs are written to a
    new file and moved into place, so an output that is an input, by any name (a symbolic
    or a hard link), would replace it, and one that is a device or a pipe would be replaced
    by a plain file."""
    target = Path(path)
    if target.is_dir():
        raise UsageError(
            f"cannot write {path}: it is a folder; give a file name such as {path}/out.csv"
        )
    if not target.parent.is_dir():
        raise UsageError(f"cannot write {path}: folder {target.parent} does not exist")
    if not os.access(target.parent, os.W_OK):
        raise UsageError(f"cannot write {path}: no permission to write in {target.parent}")
    if target.exists() and not target.is_file():
        raise UsageError(
            f"cannot write {path}: it is not a regular file (a device, a pipe or a socket), "
            "and the output would replace it; give the name of a file"
        )
    for what, source in (inputs or {}).items():
        if source is not None and _same_file(target, Path(source)):
            raise UsageError(
                f"cannot write {path}: it is {what} ({source}), which this command reads and "
                "the output would replace; give another file name"
            )
    return target


def _check_outputs(
    outputs: dict[str, str | None], inputs: dict[str, str | Path | None]
) -> dict[str, Path | None]:
    """:func:`_check_output` for each of a command's outputs (option -> path, None: not
    asked for), and no two of them the same file."""
    checked: dict[str, Path | None] = {}
    for option, path in outputs.items():
        if path is None:
            checked[option] = None
            continue
        for other, target in checked.items():
            if target is not None and _same_file(Path(path), target):
                raise UsageError(
                    f"cannot write {path} for both {other} and {option}: give each output "
                    "its own file"
                )
        checked[option] = _check_output(path, inputs)
    return checked


def _asked(targets: dict[str, Path | None], option: str) -> Path:
    """The checked path of an output the command was asked for (:func:`_check_outputs`)."""
    target = targets[option]
    assert target is not None, f"{option} was asked for"
    return target


def _same_file(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` name one file: the same path once links are followed, or
    one file under two names (a hard link)."""
    try:
        if a.resolve() == b.resolve():
            return True
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except (OSError, RuntimeError):  # a link loop: it names no file
        return False


class _NoBar:
    """The progress bar when none is drawn (no terminal, or ``--quiet``): tqdm's calls that
    :class:`_ProgressBar` makes, doing nothing."""

    total = 0

    def set_description_str(self, text: str) -> None:
        pass

    def update(self, steps: int) -> None:
        pass

    def close(self) -> None:
        pass


class _ProgressBar:
    """One tqdm bar over all stages and GUM iterations, on stderr. It also keeps the ledger of
    the last finished stage: what an interrupted run had spent (the bar has shown results of
    those measurements, such as GUM's error against the noisy marginals)."""

    def __init__(self, iterations: int, enabled: bool, stages: int = len(STAGE_TITLES)) -> None:
        self.spent: PrivacyLedger | None = None
        self.iterations = iterations
        self.blocks = 0
        self.bar: Any = _NoBar()
        if enabled and sys.stderr.isatty():  # tqdm loads only to draw: 20 ms of every run
            from tqdm import tqdm

            self.bar = tqdm(
                total=stages + iterations,
                file=sys.stderr,
                leave=False,
                unit="step",
                bar_format="{desc:<44} {percentage:3.0f}%|{bar}| {elapsed}<{remaining}",
            )

    def __call__(self, event: ProgressEvent) -> bool:
        if isinstance(event, StageStarted):
            self.bar.set_description_str(event.title)
        elif isinstance(event, StageFinished):
            self.spent = event.spent
            self.bar.update(1)
        elif isinstance(event, GumProgress):
            if not self.blocks and event.iterations > self.iterations:  # MRF sweeps follow
                self.bar.total += event.iterations - self.iterations
                self.iterations = event.iterations
            step = "MRF" if event.method == "mrf" else "GUM"
            self.bar.set_description_str(
                f"{step} {event.iteration + 1}/{event.iterations}, mean L1 {event.mean_error:.4f}"
            )
            self.bar.update(1)
        elif isinstance(event, BlockProgress):
            if not self.blocks:  # several blocks: a step per block, not per iteration
                self.blocks = event.blocks
                self.bar.total = self.bar.total - self.iterations + event.blocks
            self.bar.set_description_str(
                f"GUM block {event.block}/{event.blocks} ({event.iterations} iterations)"
            )
            self.bar.update(1)
        return True

    def close(self) -> None:
        self.bar.close()


def _threshold(option: float | str) -> float | None:
    """``--independence-threshold`` as the engine's setting: ``off`` is None."""
    return None if option == "off" else float(option)


def _table_file(
    target: Path, escape_formulas: bool, rows: int | None
) -> tuple[TableFile, FormulaScan]:
    """The synthetic table's output, written block by block (:class:`TableFile`), and the
    scan of its CSV cells that warns once at the end."""
    cells = FormulaScan(escape_formulas)
    return TableFile(target, rows=rows, prepare=None if is_parquet(target) else cells), cells


def _synthesize(args: argparse.Namespace) -> int:
    if args.iterations is None:
        args.iterations = GumSettings().iterations
    registry = None if args.no_registry else Registry()
    inputs = {
        "the input table": args.input,
        "the domain file": args.domain,
        "the schema": args.schema,
        "the run registry": None if registry is None else registry.path,
    }
    on_spark = args.engine == "spark" and is_parquet(Path(args.output))
    targets = _check_outputs(
        {"-o": None if on_spark else args.output, "--ledger": args.ledger, "--bundle": args.bundle},
        inputs,
    )
    if on_spark:
        others = {o: str(t) for o, t in targets.items() if t is not None}
        targets["-o"] = _spark_output(args, {**inputs, **others}, args.raw_domains)
    if args.bundle and args.raw_domains:
        raise UsageError("--bundle holds only DP artifacts and cannot go with --raw-domains")
    if args.domain and args.schema:
        raise UsageError("give either --domain (pre-coded tables) or --schema, not both")
    domain = _read_domain(args.domain)
    schema = Schema.load(args.schema) if args.schema else None
    PrivacyUnit.of(args.person, args.max_rows_per_person)  # refused before anything is read
    persons = {"person": args.person, "max_rows_per_person": args.max_rows_per_person}
    if args.engine in ("duckdb", "spark"):
        source, spark = _file_source(args, domain)
        run = partial(
            synthesize,
            source,
            engine=args.engine,
            spark=spark,
            domain=domain,
            schema=schema,
            raw_domains=args.raw_domains,
            **persons,
        )
    else:
        table = _read(args.input, args)
        run = partial(
            synthesize,
            table,
            domain=domain,
            schema=schema,
            raw_domains=args.raw_domains,
            **persons,
        )
    output, cells = _table_file(_asked(targets, "-o"), args.csv_escape_formulas, args.rows)
    if on_spark:  # Spark's tasks make the blocks and write them (generation/spark_blocks.py)
        output = _spark_parquet(_asked(targets, "-o"), spark)
    # rows are made in blocks on worker processes and written as each is decoded
    run = partial(run, workers=args.workers, block_rows=args.block_rows, write=output.write)
    # the same file has the same fingerprint on every engine (its bytes), so its budget is
    # counted once whichever engine reads it
    dataset = file_fingerprint(args.input)
    gum = GumSettings(iterations=args.iterations)
    config = PrivSynConfig(gum=gum, target=args.target, synthesis=args.synthesis)
    if args.independence_threshold is not None:
        config = replace(config, independence_threshold=_threshold(args.independence_threshold))
    # no seed: release mode (secure, exact noise); a seed: debug mode, marked not for release
    rng = None if args.seed is None else np.random.default_rng(args.seed)
    settings = {
        "epsilon": args.epsilon,
        "delta": args.delta,
        "iterations": args.iterations,
        "synthesis": args.synthesis,
        "independence_threshold": config.independence_threshold,
        "schema": args.schema,
        "domain": args.domain,
        "raw_domains": args.raw_domains,
        "target": args.target,
        **persons,
    }
    reservation = None
    if registry is not None:  # reserve, then measure: refused here, nothing is measured
        purpose = f"privsyn synthesize, epsilon {args.epsilon:g}, delta {args.delta:g}"
        with _budget_warnings_as_lines():
            reservation = registry.reserve(
                dataset, Path(args.input).name, config.run_budget(args.epsilon, args.delta), purpose
            )
    with reservation or nullcontext(), output:
        result, started = _measured(run, args, config, rng, settings, reservation)
        run_id, bundle = None, None
        if reservation is not None:  # on the books before anything is written
            run_id, bundle = reservation.record_result(result, config, settings)
            reservation.give_back()
        if registry is not None:  # History names a table by its columns (kept or left out)
            width = len(result.synthetic.columns) + len(result.excluded)
            registry.describe_table(dataset, Path(args.input).name, width)
        output.commit()  # the rows were written to a temporary file as they were made
        cells.report()
        if args.bundle:
            write_atomically(bundle or bundle_bytes(result, config), _asked(targets, "--bundle"))
        if args.ledger:
            ledger_json = json.dumps(result.ledger.to_json(), indent=2) + "\n"
            _write_text_atomically(ledger_json, _asked(targets, "--ledger"))
    if not args.quiet:
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
        decided = _decided_structure(result)
        if decided:
            print(f"decided privately: {printable(decided)}", file=sys.stderr)
        if result.model is not None:
            _print_changes(changes(result.model, result.excluded, result.dropped_rules))
    if not result.end_to_end_dp:
        print(
            "privsyn: warning: NOT end-to-end DP: the structure or domains of "
            f"{printable(', '.join(result.ledger.not_private))} were read off the raw data "
            "(--raw-domains)",
            file=sys.stderr,
        )
    return 0


def _measured(
    run: Callable[..., SynthesisResult],
    args: argparse.Namespace,
    config: PrivSynConfig,
    rng: np.random.Generator | None,
    settings: dict[str, Any],
    reservation: Reservation | None,
) -> tuple[SynthesisResult, float]:
    """The synthesis and when it started. A run that fails after spending, or is
    interrupted, records what it spent against its reservation and gives back the rest."""
    bar = _ProgressBar(args.iterations, enabled=not args.quiet)
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
        reservation.give_back()
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
            reservation.give_back()
        raise
    finally:
        bar.close()


@contextmanager
def _budget_warnings_as_lines() -> Iterator[None]:
    """The registry's lifetime-budget warnings, each as one ``privsyn: warning:`` line."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", BudgetWarning)
        yield
    for item in caught:
        if issubclass(item.category, BudgetWarning):
            print(f"privsyn: warning: {item.message}", file=sys.stderr)
        else:
            warnings.warn_explicit(item.message, item.category, item.filename, item.lineno)


def _generate(args: argparse.Namespace) -> int:
    """Sample from the fitted model in a release bundle: the bundle is the only input (no
    table, no registry), so nothing is measured and nothing is spent."""
    on_spark = args.engine == "spark"
    where = list(args.where or [])
    if on_spark:
        target = _spark_output(args, {"the bundle": args.bundle}, False)
    else:
        target = _check_output(args.output, {"the bundle": args.bundle})
    model = load_model(args.bundle)
    gum_changes: dict[str, Any] = {}
    if args.iterations is not None:
        gum_changes["iterations"] = args.iterations
    if args.strategy is not None:
        gum_changes["strategy"] = args.strategy
    if args.decay is not None:
        gum_changes["decay"] = args.decay
    gum = replace(model.defaults.gum, **gum_changes)
    sampling = replace(model.defaults, gum=gum)
    if args.synthesis is not None:
        sampling = replace(sampling, synthesis=args.synthesis)
    if args.independence_threshold is not None:
        threshold = _threshold(args.independence_threshold)
        sampling = replace(sampling, independence_threshold=threshold)
    if args.block_rows is not None:
        sampling = replace(sampling, block_rows=args.block_rows)
    rows = model.default_rows if args.rows is None else args.rows
    blocks = len(block_sizes(rows, sampling.block_rows))
    # a conditional sample draws rounds of blocks until enough rows match: no progress
    bar = _ProgressBar(gum.iterations if blocks == 1 else blocks, not (args.quiet or where), 3)
    started = time.perf_counter()
    output, cells = _table_file(target, args.csv_escape_formulas, rows)
    if on_spark:  # Spark's tasks make the blocks and write them (generation/spark_blocks.py)
        from privsyn_core.spark_session import spark_session

        output = _spark_parquet(target, spark_session(args.spark_master))
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
        _print_changes(changes(replace(model, defaults=sampling), released_exclusions(model)))
    return 0


def _print_changes(found: tuple[Change, ...]) -> None:
    """What the release changed of the table (DP content only), a few lines a kind."""
    if not found:
        return
    print("what the synthetic table changes (from the release's DP content):", file=sys.stderr)
    for line in change_lines(found, most=5):
        print(printable(line), file=sys.stderr)


def _check_new_folder(path: str) -> Path:
    """Fail before any work if ``path`` cannot become a new folder of outputs: it must not
    exist, or be an empty folder. A folder with anything in it is never written into or
    replaced (its files are not this command's to overwrite)."""
    target = Path(path)
    if target.is_symlink():
        raise UsageError(f"cannot write {path}: it is a link; give the name of a new folder")
    if target.exists() and not target.is_dir():
        raise UsageError(f"cannot write {path}: it is a file; give the name of a new folder")
    if target.is_dir() and any(target.iterdir()):
        raise UsageError(
            f"cannot write {path}: the folder exists and is not empty, and privsyn does not "
            f"write into it or replace it; give a new folder name, or empty or remove {path} "
            "first"
        )
    if not target.absolute().parent.is_dir():
        raise UsageError(f"cannot write {path}: folder {target.parent} does not exist")
    if not os.access(target.absolute().parent, os.W_OK):
        raise UsageError(f"cannot write {path}: no permission to write in {target.parent}")
    return target


def _marginals(args: argparse.Namespace) -> int:
    """A release bundle's noisy marginals, as measured and after consistency, as CSV files
    in a new folder (:mod:`privsyn_core.release.marginal_files`): only the bundle is read,
    nothing is spent, and the folder appears whole or not at all."""
    target = _check_new_folder(args.output)
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


def _spark_output(
    args: argparse.Namespace, inputs: dict[str, str | Path | None], raw_domains: bool
) -> Path:
    """The Parquet folder that Spark's tasks write the rows to (``--engine spark``), checked
    before any work: Spark writes Parquet only (a folder of part files; a CSV written by
    Spark would be a folder of parts too, without the formula escaping of this CLI's CSV),
    its tasks are the workers, and only a DP model may be sent to them."""
    if not is_parquet(Path(args.output)):
        raise UsageError(
            f"--engine spark writes the rows as Parquet (a folder of part files): give -o a "
            f"name ending .parquet, or leave out --engine spark to write {args.output} here"
        )
    if args.workers is not None:
        raise UsageError(
            "--workers sets this machine's processes; with --engine spark, Spark's cores make "
            "the blocks (--spark-master local[N] for N of this machine's)"
        )
    if raw_domains:
        raise UsageError(
            "--engine spark sends only the DP model to Spark's tasks, and --raw-domains makes "
            "a model that is not DP; drop --raw-domains or write -o as CSV"
        )
    from privsyn_core.generation.spark_blocks import check_parquet_folder

    target = Path(args.output)
    check_parquet_folder(target)
    for what, source in inputs.items():
        if source is not None and _same_file(target, Path(source)):
            raise UsageError(
                f"cannot write {args.output}: it is {what} ({source}), which this command "
                "reads or writes; give another name"
            )
    return target


def _spark_parquet(target: Path, spark: Any) -> Any:
    from privsyn_core.generation.spark_blocks import SparkParquet

    return SparkParquet(target, spark)


def _report(args: argparse.Namespace) -> int:
    """A release bundle's report (:mod:`privsyn_core.release.report`), made again from its
    checked content: only the bundle is read, nothing is spent."""
    target = _check_output(args.output, {"the bundle": args.bundle})
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


def _decided_structure(result: SynthesisResult) -> str:
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


def _file_source(args: argparse.Namespace, domain: DomainSpec | None) -> tuple[str, Any]:
    """The input for counting where the file lies, on DuckDB or Spark: a CSV file with a
    header or a Parquet file, raw (with or without --schema) or pre-coded (--domain)."""
    if domain is not None and not all(
        isinstance(v, int) and not isinstance(v, bool) for v in domain.values()
    ):
        raise UsageError(
            f"--engine {args.engine} reads a pre-coded table with --domain giving a number of "
            "codes for every column; for categories give --schema instead"
        )
    if args.no_header or args.delimiter or args.encoding or args.names or args.na:
        raise UsageError(
            f"--engine {args.engine} takes a CSV file with a header (delimiter from the "
            "header, UTF-8), or a Parquet file; drop the reading options"
        )
    readable_file(args.input)  # before its fingerprint reads it: a FIFO would never end
    if args.engine == "spark":
        from privsyn_core.spark_session import spark_session

        return args.input, spark_session(args.spark_master)
    return args.input, None


def _write_text_atomically(text: str, target: Path) -> None:
    write_atomically(text.encode(), target)


def _schema_infer(args: argparse.Namespace) -> int:
    target = _check_output(args.output, {"the input table": args.input}) if args.output else None
    table = _read(args.input, args)
    text = infer_schema(table).dumps() + "\n"
    print(f"privsyn: note: {DRAFT_WARNING}", file=sys.stderr)
    if target is not None:
        _write_text_atomically(text, target)
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
    target = _check_output(args.output, {"the run registry": registry.path})
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

    if args.holdout is not None and _same_file(Path(args.holdout), Path(args.real)):
        raise UsageError(
            f"--holdout {printable(args.holdout)} is the real table itself: give real rows "
            "that were never given to the synthesizer, or leave out --holdout to hold out half "
            "the real rows"
        )
    # numbers are read as numbers so range queries order them as numbers
    real = _read(args.real, args, infer_types=True)
    synthetic = _read(args.synthetic, argparse.Namespace(), infer_types=True)
    holdout = None if args.holdout is None else _read(args.holdout, args, infer_types=True)
    report = fidelity_report(real, synthetic, label=args.label, seed=args.seed)
    copies = copied_rows_report(real, synthetic, holdout=holdout, seed=args.seed)
    print(report.format())
    print()
    print(copies.format())
    return 0
