"""The ``privsyn`` command line: synthesise and evaluate without a browser.

Every failure the user can fix (a missing file, a value outside its domain, a bad epsilon)
ends the program with status 2 and one line on stderr saying what to do; the output file is
written to a temporary name and moved into place only when complete, so a failed or
interrupted run leaves nothing behind.

The parser and the error handling live here and import almost nothing, so ``privsyn --help``
and a usage mistake answer at once; the commands (:mod:`privsyn_core.commands`) load the engine
only when one runs.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from privsyn_core.errors import InputError, UsageError
from privsyn_core.limits import MAX_ITERATIONS, check_iterations
from privsyn_core.privacy.conversion import check_epsilon_delta
from privsyn_core.privacy.ledger import BudgetExceededError
from privsyn_core.progress import SynthesisCancelled
from privsyn_core.terminal import printable
from privsyn_core.width_policy import WIDTH_POLICY

#: GUM's update strategies (paper 5.2), listed here so the parser needs no engine import
_STRATEGIES = (
    "replace",
    "duplicate",
    "half_half",
    "replace_plus_duplicate",
    "half_half_plus_duplicate",
    "half_half_plus_replace",
)


def _command(name: str) -> Callable[[argparse.Namespace], int]:
    """The command ``name`` of :mod:`privsyn_core.commands`, imported when it runs."""

    def run(args: argparse.Namespace) -> int:
        from privsyn_core import commands

        return getattr(commands, name)(args)

    return run


def _count(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value

    parse.__name__ = "number"
    return parse


def _max_rows_option(
    parser: argparse.ArgumentParser, help: str, default: int | None = None
) -> None:
    """``--max-rows-per-person K``: a whole number >= 1 (refused in one line otherwise)."""
    parser.add_argument(
        "--max-rows-per-person", type=_count(1), default=default, metavar="K", help=help
    )


#: the synthesis methods (:data:`privsyn_core.config.SYNTHESIS_METHODS`; the parser needs no
#: engine import, and tests/test_cli.py checks the two agree)
_SYNTHESES = ("auto", "gum", "mcf", "mrf", "gum+mrf", "independent")
#: GUM's starting tables (:data:`privsyn_core.generation.initial.INITIALS`; tests/test_cli.py
#: checks the two agree)
_INITIALS = ("tree", "independent")
#: what --synthesis chooses, in one line
_SYNTHESIS = (
    "how rows are made to match the marginals: auto (default: gum+mrf on a table of "
    f"{WIDTH_POLICY.mrf_from} or more columns, gum below), gum (the paper's GUM), mrf (a "
    "Markov random field fitted to "
    "the same marginals), gum+mrf (both, the table closer to the measurements kept; the "
    "faster gum on a wide table), mcf (the paper's min-cost-flow strawman), independent (each "
    "column on its own from its noisy 1-way marginal: the baseline to beat)"
)


#: what --independence-threshold means, in one line
_INDEPENDENCE = (
    "draw a measured pair as independent when its interaction is within T times the size "
    "its measurement noise alone would give it (default 2), or 'off' to draw every measured "
    "pair as measured"
)
#: what --quasi-independence means, in one line
_QUASI = (
    f"on a table of {WIDTH_POLICY.quasi_independence_from} or more columns, draw a measured "
    "pair that is independent but for a "
    "few cells from that fit, when Mallows' Cp with P per parameter prefers it (default 2), or "
    "'off' to keep every measured pair as measured"
)
#: what --initial means, in one line
_INITIAL = (
    "the table GUM starts from: tree (default: columns drawn along a tree of the measured "
    "pairs) or independent (each column from its own noisy 1-way marginal, the paper's start)"
)


def _independence(text: str) -> float | str:
    """``--independence-threshold`` and ``--quasi-independence``: a finite number >= 0, or
    ``off``."""
    if text.strip().lower() == "off":
        return "off"
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number >= 0 or 'off', got {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0 or 'off', got {text!r}")
    return value


_independence.__name__ = "threshold"


def _iterations(text: str) -> int:
    """GUM's iterations, within the limit every reader of them checks
    (:func:`~privsyn_core.limits.check_iterations`)."""
    try:
        return check_iterations(_count(0)(text))
    except InputError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


_iterations.__name__ = "number"


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a port is between 1 and 65535, got {value}")
    return value


def _studio(args: argparse.Namespace) -> int:
    """``privsyn studio``, imported when it runs (it loads the dashboard, not the engine)."""
    from privsyn_core.studio import studio

    return studio(args)


def _privacy_number(name: str) -> Callable[[str], float]:
    """Parse epsilon or delta and refuse, before anything is read, a value that is no privacy
    guarantee (:func:`~privsyn_core.privacy.ledger.check_epsilon_delta` says why and what to
    use)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            example = "1" if name == "epsilon" else "1e-9"
            raise argparse.ArgumentTypeError(
                f"{name} must be a number such as {example}, got {text!r}"
            ) from None
        try:
            if name == "epsilon":
                check_epsilon_delta(value, 1e-9)
            else:
                check_epsilon_delta(1.0, value)
        except InputError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return value

    parse.__name__ = name
    return parse


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage mistake is one line on stderr, like every other error, and a
    negative number in any spelling (``-1e-9``, ``-inf``) is a value to refuse with its own
    message, not an unknown option ("expected one argument")."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = re.compile(r"^-(\d|\.\d|inf|nan)", re.IGNORECASE)

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"privsyn: error: {message} (see '{self.prog} --help')\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="privsyn", description="Differentially private synthetic tables with PrivSyn."
    )
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    syn = commands.add_parser("synthesize", help="write a DP synthetic copy of a table")
    syn.add_argument("input", help="private table (CSV or Parquet)")
    syn.add_argument(
        "-o", "--output", required=True, help="where to write the synthetic table (.csv/.parquet)"
    )
    syn.add_argument(
        "--epsilon", type=_privacy_number("epsilon"), required=True,
        help="privacy parameter epsilon",
    )  # fmt: skip
    syn.add_argument(
        "--delta", type=_privacy_number("delta"), default=1e-9,
        help="privacy parameter delta, at most 1e-3; about 1/n^2 for n rows (default 1e-9)",
    )  # fmt: skip
    syn.add_argument(
        "--domain",
        help="JSON mapping each column to its number of codes (0..k-1) or list of categories",
    )
    syn.add_argument(
        "--schema",
        help="public schema (JSON, see 'privsyn schema infer'); what it leaves open is "
        "estimated privately",
    )
    syn.add_argument(
        "--raw-domains",
        action="store_true",
        help="read undeclared categories and bounds off the data: a demo shortcut that is NOT "
        "end-to-end DP",
    )
    _add_read_options(syn)
    syn.add_argument("--ledger", help="also write the privacy ledger as JSON here")
    syn.add_argument(
        "--bundle",
        help="also write the release bundle (zip: synthetic table, noisy marginals, schema, "
        "ledger, configuration, versions, manifest with SHA-256)",
    )
    syn.add_argument(
        "--no-registry",
        action="store_true",
        help="do not record the run in the run registry (PRIVSYN_REGISTRY sets its file)",
    )
    syn.add_argument(
        "--seed",
        type=_count(0),
        default=None,
        help="debug mode: reproducible, seeded noise, marked NOT for release (default: "
        "release mode, exact discrete Gaussian noise from secure randomness)",
    )
    syn.add_argument(
        "--iterations",
        type=_iterations,
        default=None,
        help="GUM iterations (default 100, GUM's own; 0 keeps the starting table, see "
        f"--initial; at most {MAX_ITERATIONS:,})",
    )
    syn.add_argument("--initial", choices=_INITIALS, default=None, help=_INITIAL)
    syn.add_argument("--synthesis", choices=_SYNTHESES, default="auto", help=_SYNTHESIS)
    syn.add_argument(
        "--independence-threshold", type=_independence, default=None, metavar="T",
        help=_INDEPENDENCE,
    )  # fmt: skip
    syn.add_argument(
        "--quasi-independence", type=_independence, default=None, metavar="P", help=_QUASI
    )
    syn.add_argument(
        "--rows", type=_count(1), default=None, help="rows to synthesise (default: the noisy total)"
    )
    _block_options(syn)
    syn.add_argument(
        "--target",
        default=None,
        metavar="COLUMN",
        help="the column people will predict from the synthetic table (a public choice): "
        "selection and the budget favour the marginals that hold it",
    )
    syn.add_argument(
        "--person",
        default=None,
        metavar="COLUMN",
        help="a person-level guarantee: the column that says whose row each is; needs "
        "--max-rows-per-person. The column is never synthesised nor released",
    )
    _max_rows_option(
        syn,
        "keep at most K rows of each person (chosen at random) and calibrate every "
        "measurement's noise for K rows (K times the per-row noise); K is public",
    )
    syn.add_argument(
        "--engine",
        choices=["numpy", "duckdb", "spark"],
        default="numpy",
        help="where counting happens: numpy (in memory, default), duckdb (scans the file out "
        "of core) or spark (counts on a Spark cluster and, when -o is .parquet, makes and "
        "writes the rows there as a Parquet folder); duckdb and spark read a CSV file "
        "with a header or a Parquet file, raw (with or without --schema) or pre-coded "
        "(--domain with numbers of codes), and encode it in SQL",
    )
    syn.add_argument(
        "--spark-master",
        help="Spark master URL for --engine spark (default local[N], N the cores this process "
        "may use)",
    )
    _csv_escape_option(syn)
    syn.add_argument("-q", "--quiet", action="store_true", help="no progress bar or summary")
    syn.set_defaults(run=_command("_synthesize"))

    gen = commands.add_parser(
        "generate",
        help="sample a new synthetic table from a release bundle (reads no data, spends nothing)",
        description="Sample a new synthetic table from the fitted model in a release bundle "
        "(--bundle of 'synthesize', or 'runs export'). Only the bundle is read: no data, no "
        "run registry, no privacy budget; any number of rows, any seed, any GUM settings.",
    )
    gen.add_argument("bundle", help="the release bundle (.zip)")
    gen.add_argument(
        "-o", "--output", required=True, help="where to write the synthetic table (.csv/.parquet)"
    )
    gen.add_argument(
        "--rows", type=_count(1), default=None,
        help="rows to synthesise (default: the release's noisy total)",
    )  # fmt: skip
    gen.add_argument(
        "--where",
        action="append",
        metavar="CONDITION",
        help="keep only rows that satisfy CONDITION, on released values: a category "
        "(sex=Female; several as race=White|Black) or a range of a numeric or date column "
        "(age=30..40 with both ends included, age>=30, age<40); give it again for several "
        "conditions (all must hold). The rows follow the release's model conditioned on them "
        "(drawn and filtered: rejection); still no privacy spend",
    )
    _block_options(gen)
    gen.add_argument(
        "--seed", type=_count(0), default=None,
        help="make the table reproducible: the same seed and settings give the same table",
    )  # fmt: skip
    gen.add_argument(
        "--iterations", type=_iterations, default=None,
        help=f"GUM iterations (default: the release's setting; 0 keeps the starting table, see "
        f"--initial; at most {MAX_ITERATIONS:,})",
    )  # fmt: skip
    gen.add_argument(
        "--initial", choices=_INITIALS, default=None,
        help=_INITIAL.replace("tree (default: ", "tree (") + " (default: the release's setting)",
    )  # fmt: skip
    gen.add_argument(
        "--synthesis", choices=_SYNTHESES, default=None,
        help=_SYNTHESIS + " (default: the release's setting)",
    )  # fmt: skip
    gen.add_argument(
        "--independence-threshold", type=_independence, default=None, metavar="T",
        help=_INDEPENDENCE.replace("default 2", "default: the release's setting"),
    )  # fmt: skip
    gen.add_argument(
        "--quasi-independence", type=_independence, default=None, metavar="P",
        help=_QUASI.replace("default 2", "default: the release's setting"),
    )  # fmt: skip
    gen.add_argument(
        "--strategy",
        choices=sorted(_STRATEGIES),
        default=None,
        help="GUM's update strategy (default: the release's, normally half_half)",
    )
    gen.add_argument(
        "--decay",
        type=float,
        default=None,
        help="GUM's step-decay factor of alpha, in (0, 1] (default: the release's, 0.84)",
    )
    gen.add_argument(
        "--engine",
        choices=["local", "spark"],
        default="local",
        help="where the blocks are made: local (worker processes, default) or spark (tasks "
        "of a Spark cluster make them and Spark writes them: -o names a Parquet folder)",
    )
    gen.add_argument(
        "--spark-master",
        help="Spark master URL for --engine spark (default local[N], N the cores this process "
        "may use)",
    )
    _csv_escape_option(gen)
    gen.add_argument("-q", "--quiet", action="store_true", help="no progress bar or summary")
    gen.set_defaults(run=_command("_generate"))

    marg = commands.add_parser(
        "marginals",
        help="write a release bundle's noisy marginals as CSV files (reads no data, spends "
        "nothing)",
        description="Write every noisy marginal of a release bundle, as measured and after "
        "consistency, as CSV files in the table's own values, with a README and an index "
        "that label them a differentially private release. Only the bundle is read.",
    )
    marg.add_argument("bundle", help="the release bundle (.zip)")
    marg.add_argument(
        "-o", "--output", required=True,
        help="a new folder to write them to (an empty folder is filled; one with files in it "
        "is refused)",
    )  # fmt: skip
    _csv_escape_option(marg)
    marg.add_argument("-q", "--quiet", action="store_true", help="no summary")
    marg.set_defaults(run=_command("_marginals"))

    report = commands.add_parser(
        "report",
        help="write a release bundle's report as one HTML page (reads no data, spends nothing)",
        description="Write the release report of a bundle: its budget and ledger, the "
        "marginals selected and their dependency graph, GUM's convergence and the structural "
        "choices with where each came from. DP content and public settings only; one HTML "
        "page that opens offline in any browser. It is made again from the bundle's checked "
        "content, never copied from the bundle's own report.html.",
    )
    report.add_argument("bundle", help="the release bundle (.zip)")
    report.add_argument("-o", "--output", required=True, help="the report (.html)")
    report.set_defaults(run=_command("_report"))

    ev = commands.add_parser(
        "evaluate",
        help="fidelity of a synthetic table against the real one, and a check for copied real "
        "rows (owner-only)",
    )
    ev.add_argument("real", help="the real table (CSV)")
    ev.add_argument("synthetic", help="the synthetic table (CSV)")
    ev.add_argument("--label", help="column to predict for the SVM measure")
    ev.add_argument(
        "--holdout",
        metavar="FILE",
        help="real rows that were NOT given to the synthesizer (same columns, read like the "
        "real table): the copied-rows check compares the synthetic rows with them (default: "
        "half the real rows, held out at random)",
    )
    ev.add_argument(
        "--seed", type=_count(0), default=0,
        help="seed of the train/test split, the queries and the copied-rows check's samples",
    )  # fmt: skip
    ev.set_defaults(run=_command("_evaluate"))
    _add_read_options(ev)

    schema = commands.add_parser("schema", help="draft a schema for review")
    schema_commands = schema.add_subparsers(dest="schema_command", required=True)
    infer = schema_commands.add_parser(
        "infer", help="draft a schema from the data (NOT public until you review it)"
    )
    infer.add_argument("input", help="table (CSV or Parquet)")
    infer.add_argument("-o", "--output", help="write the draft here instead of to stdout")
    _add_read_options(infer)
    infer.set_defaults(run=_command("_schema_infer"))

    audit = commands.add_parser(
        "audit",
        help="empirical privacy audit of every noisy step, on generated tables (reads no data)",
    )
    audit.add_argument(
        "--epsilon", type=float, nargs="+", default=[1.0, 4.0], help="claimed epsilons to audit"
    )
    audit.add_argument("--delta", type=float, default=1e-6)
    audit.add_argument("--mode", choices=["debug", "release", "both"], default="both")
    audit.add_argument("--trials", type=_count(100), default=20_000, help="debug-mode runs")
    audit.add_argument(
        "--release-trials", type=_count(100), default=2_000, help="release-mode runs (slower)"
    )
    audit.add_argument("--seed", type=int, default=1, help="debug mode's noise seed")
    _max_rows_option(
        audit,
        "audit the person-level guarantee: neighbours differ in one whole person, who "
        "holds more than K rows, with every step calibrated for at most K rows per person",
    )
    audit.set_defaults(run=_command("_audit"))

    plan = commands.add_parser(
        "plan", help="noise per step for a budget, from public inputs only (reads no data)"
    )
    plan.add_argument("--epsilon", type=_privacy_number("epsilon"), required=True)
    plan.add_argument("--delta", type=_privacy_number("delta"), default=1e-9)
    plan.add_argument("--columns", type=_count(1), required=True, help="number of columns")
    plan.add_argument(
        "--private-categories", type=_count(0), default=0,
        help="columns whose categories will be estimated privately",
    )  # fmt: skip
    plan.add_argument(
        "--private-ranges", type=_count(0), default=0,
        help="numeric columns whose bounds will be estimated privately",
    )  # fmt: skip
    plan.add_argument(
        "--private-structure", type=_count(0), default=0,
        help="declared columns whose whole-number flag or date format is decided privately",
    )  # fmt: skip
    plan.add_argument(
        "--undeclared", type=_count(0), default=0,
        help="columns with nothing declared (no schema): kind and domain decided privately",
    )  # fmt: skip
    _max_rows_option(
        plan, "the noise of a person-level guarantee with at most K rows per person", default=1
    )
    plan.set_defaults(run=_command("_plan"))

    studio = commands.add_parser(
        "studio",
        help="open the dashboard (this machine only, no usage statistics, nothing fetched "
        "from the internet)",
        description="Serve the PrivSyn Studio dashboard with the project's settings, from any "
        "folder: on 127.0.0.1 only, headless, no usage statistics, no IP detection, XSRF "
        "protection on. Ctrl-C stops it.",
    )
    studio.add_argument("--port", type=_port, default=8501, help="port to serve on (default 8501)")
    studio.add_argument(
        "--address",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1: this machine only); any address "
        "beyond loopback needs --allow-remote",
    )
    studio.add_argument(
        "--allow-remote",
        action="store_true",
        help="let --address serve beyond this machine: anyone who reaches it can load tables "
        "and spend their budget (there is no login)",
    )
    studio.add_argument("--no-browser", action="store_true", help="do not open a browser window")
    studio.set_defaults(run=_studio)

    runs = commands.add_parser("runs", help="finished runs and the budget each dataset spent")
    runs_commands = runs.add_subparsers(dest="runs_command", required=True)
    listing = runs_commands.add_parser("list", help="list recorded runs")
    listing.add_argument("table", nargs="?", help="only the runs on this table")
    listing.add_argument(
        "--delta", type=_privacy_number("delta"), default=1e-9,
        help="the delta at which each dataset's total rho is stated as epsilon (default 1e-9); "
        "the delta its thresholded releases spent is added to it",
    )  # fmt: skip
    _add_read_options(listing)
    listing.set_defaults(run=_command("_runs_list"))
    show = runs_commands.add_parser("show", help="one run's configuration and ledger")
    show.add_argument("id", type=_count(1))
    show.set_defaults(run=_command("_runs_show"))
    export = runs_commands.add_parser(
        "export", help="write a recorded run's release bundle again (spends nothing)"
    )
    export.add_argument("id", type=_count(1))
    export.add_argument("-o", "--output", required=True, help="the release bundle (.zip)")
    export.set_defaults(run=_command("_runs_export"))
    return parser


def _block_options(parser: argparse.ArgumentParser) -> None:
    """``--workers`` and ``--block-rows`` (:mod:`privsyn_core.generation.blocks`); their
    defaults are the engine's, so the parser imports none of it."""
    parser.add_argument(
        "--workers",
        type=_count(1),
        default=None,
        help="processes that make the rows' blocks at once (default: every core this process "
        "may use); the rows are the same for any number",
    )
    parser.add_argument(
        "--block-rows",
        type=_count(1),
        default=None,
        help="rows per block: more rows are made as independent blocks, each GUM with its own "
        "seed, and written as each is done (default 100000); memory grows with workers times "
        "this, not with --rows",
    )


def _add_read_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("reading CSV files")
    group.add_argument(
        "--delimiter",
        help="column separator (default: the one the header row uses most; comma without a header)",
    )
    group.add_argument(
        "--encoding",
        help="text encoding of the whole file (default: UTF-8, each value that is not valid "
        "UTF-8 read as Windows-1252)",
    )
    group.add_argument(
        "--no-header", action="store_true", help="the file has no header row (give --names)"
    )
    group.add_argument("--names", help="comma-separated column names")
    group.add_argument(
        "--na", action="append", help="a value that means missing, e.g. --na '?' (repeatable)"
    )


def _csv_escape_option(parser: argparse.ArgumentParser) -> None:
    """``--csv-escape-formulas``: off by default, because the CSV is data (see
    :mod:`privsyn_core.release.csv_cells`)."""
    parser.add_argument(
        "--csv-escape-formulas",
        action="store_true",
        help="for a CSV to open in a spreadsheet: write a ' before text cells that start with "
        "=, +, -, @, tab or carriage return, so that none runs as a formula (numbers are never "
        "changed; by default cells are written verbatim and a warning names the columns)",
    )


def _one_line(error: BaseException) -> str:
    """An error's message on one line: a library's message (pyarrow's, pandas') may hold
    line breaks, and the CLI promises one line per error. Control characters (from a column
    name or a file name in the message) are escaped, never sent to the terminal."""
    return printable(" ".join(str(error).split()))


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exit_:  # usage errors and --help, as a status rather than an exit
        return int(exit_.code or 0)
    try:
        return args.run(args)
    except (UsageError, InputError, BudgetExceededError) as exc:
        print(f"privsyn: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except SynthesisCancelled as exc:
        print(f"privsyn: {_one_line(exc)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("privsyn: interrupted; no output written", file=sys.stderr)
        return 130
    except Exception as exc:  # a bug: still one line, and a distinct status
        print(
            f"privsyn: internal error ({type(exc).__name__}: {_one_line(exc)}); no output "
            "written. Please report it with the command you ran.",
            file=sys.stderr,
        )
        return 70


if __name__ == "__main__":
    sys.exit(main())
