"""Where the ``privsyn`` commands write, checked before any work and any budget spent.

Outputs are written to a temporary name and moved into place only when complete
(:mod:`privsyn_core.data.atomic`), so an output that is one of the command's inputs, by any
name, would replace it, and one that is a device or a pipe would become a plain file: both are
refused here, each in one line that says what to give instead.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from privsyn_core.data.atomic import write_atomically
from privsyn_core.data.paths import is_parquet
from privsyn_core.data.streamed import TableFile
from privsyn_core.errors import UsageError
from privsyn_core.release.csv_cells import FormulaScan


def check_output(path: str, inputs: dict[str, str | Path | None] | None = None) -> Path:
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
        if source is not None and same_file(target, Path(source)):
            raise UsageError(
                f"cannot write {path}: it is {what} ({source}), which this command reads and "
                "the output would replace; give another file name"
            )
    return target


def check_outputs(
    outputs: dict[str, str | None], inputs: dict[str, str | Path | None]
) -> dict[str, Path | None]:
    """:func:`check_output` for each of a command's outputs (option -> path, None: not
    asked for), and no two of them the same file."""
    checked: dict[str, Path | None] = {}
    for option, path in outputs.items():
        if path is None:
            checked[option] = None
            continue
        for other, target in checked.items():
            if target is not None and same_file(Path(path), target):
                raise UsageError(
                    f"cannot write {path} for both {other} and {option}: give each output "
                    "its own file"
                )
        checked[option] = check_output(path, inputs)
    return checked


def asked(targets: dict[str, Path | None], option: str) -> Path:
    """The checked path of an output the command was asked for (:func:`check_outputs`)."""
    target = targets[option]
    assert target is not None, f"{option} was asked for"
    return target


def same_file(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` name one file: the same path once links are followed, or
    one file under two names (a hard link)."""
    try:
        if a.resolve() == b.resolve():
            return True
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except (OSError, RuntimeError):  # a link loop: it names no file
        return False


def check_new_folder(path: str) -> Path:
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


def spark_output(
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
        if source is not None and same_file(target, Path(source)):
            raise UsageError(
                f"cannot write {args.output}: it is {what} ({source}), which this command "
                "reads or writes; give another name"
            )
    return target


def spark_parquet(target: Path, spark: Any) -> Any:
    """The writer with which Spark's tasks make the blocks and write them as Parquet
    (:mod:`privsyn_core.generation.spark_blocks`, imported only on Spark)."""
    from privsyn_core.generation.spark_blocks import SparkParquet

    return SparkParquet(target, spark)


def table_file(
    target: Path, escape_formulas: bool, rows: int | None
) -> tuple[TableFile, FormulaScan]:
    """The synthetic table's output, written block by block (:class:`TableFile`), and the
    scan of its CSV cells that warns once at the end."""
    cells = FormulaScan(escape_formulas)
    return TableFile(target, rows=rows, prepare=None if is_parquet(target) else cells), cells


def write_text_atomically(text: str, target: Path) -> None:
    write_atomically(text.encode(), target)
