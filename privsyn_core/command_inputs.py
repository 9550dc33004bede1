"""What the ``privsyn`` commands read: a table with the CLI's reading options, a domain file,
a file to count where it lies (DuckDB or Spark), and ``--independence-threshold``.

Every problem is an :class:`~privsyn_core.errors.UsageError` or
:class:`~privsyn_core.errors.InputError` raised before anything is measured or spent.
"""

from __future__ import annotations

import argparse
from typing import Any

import pandas as pd

from privsyn_core.data.inputs import read_declaration, readable_file
from privsyn_core.data.io import read_table
from privsyn_core.data.table import DomainSpec, check_domain_spec
from privsyn_core.errors import UsageError
from privsyn_core.file_schemas import DOMAIN_FILE, check_file
from privsyn_core.terminal import printable


def read_input(path: str, args: argparse.Namespace, *, infer_types: bool = False) -> pd.DataFrame:
    """The table at ``path``, read with the command's reading options (those it has)."""
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


def read_domain(path: str | None) -> DomainSpec | None:
    """``--domain``'s file, checked before the table is read or counted (None: not given)."""
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


def file_source(args: argparse.Namespace, domain: DomainSpec | None) -> tuple[str, Any]:
    """The input for counting where the file lies, on DuckDB or Spark: a CSV file with a
    header or a Parquet file, raw (with or without --schema) or pre-coded (--domain); and
    the Spark session (None on DuckDB)."""
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


def pair_rule_options(args: argparse.Namespace) -> dict[str, Any]:
    """``--independence-threshold`` and ``--quasi-independence`` as the engine's settings
    (a number, or None for ``off``), only those given: the same fields of a config
    (``synthesize``) and of a release's sampling settings (``generate``)."""
    given = {
        "independence_threshold": args.independence_threshold,
        "quasi_independence": args.quasi_independence,
    }
    return {
        field: None if option == "off" else float(option)
        for field, option in given.items()
        if option is not None
    }
