"""Tests for the ``privsyn`` command line (privsyn_core.cli).

Most tests call ``main`` in-process on a small planted table (600 rows: ``b`` copies ``a``
in ~90% of rows) with few GUM iterations; one test runs the real Adult table and one runs
the module as a separate process to see the real exit status.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from privsyn_core.cli import main

ROOT = Path(__file__).resolve().parents[1]
ADULT_CSV = ROOT / "assets" / "adult-coded.csv"
ADULT_DOMAIN = ROOT / "assets" / "adult-coded-domain.json"

# Columns deliberately not in alphabetical order, one of them categorical by name.
COLOURS = ["red", "green", "blue"]
DOMAIN = {"zeta": 3, "a": 4, "b": 4, "colour": COLOURS}
EPSILON = "2"  # with 600 rows no value is rare enough to be merged by the 1-way filter
FAST = ["--iterations", "5"]


def planted_table(n: int = 600, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 4, n)
    b = np.where(rng.random(n) < 0.9, a, rng.integers(0, 4, n))
    return pd.DataFrame(
        {
            "zeta": rng.integers(0, 3, n),
            "a": a,
            "b": b,
            "colour": np.array(COLOURS)[rng.integers(0, 3, n)],
        }
    )


@pytest.fixture
def inputs(tmp_path: Path) -> tuple[Path, Path]:
    """``(table.csv, domain.json)`` written in ``tmp_path``."""
    csv = tmp_path / "table.csv"
    planted_table().to_csv(csv, index=False)
    domain = tmp_path / "domain.json"
    domain.write_text(json.dumps(DOMAIN))
    return csv, domain


def synthesize_argv(csv: Path, domain: Path, out: Path, *extra: str) -> list[str]:
    return [
        "synthesize",
        str(csv),
        "-o",
        str(out),
        "--epsilon",
        EPSILON,
        "--domain",
        str(domain),
        *FAST,
        *extra,
    ]


def files_under(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


def assert_clean_failure(
    status: int, capsys: pytest.CaptureFixture[str], folder: Path, before: set[str]
) -> str:
    """Status 2, nothing on stdout, one ``privsyn: error:`` line on stderr, and no file
    (output or ``.part``) added to ``folder``. Returns the error line."""
    out, err = capsys.readouterr()
    assert status == 2
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("privsyn: error: ")
    after = files_under(folder)
    assert after == before, f"left behind: {sorted(after - before)}"
    assert not [name for name in after if name.endswith(".part")]
    return lines[0]


# --------------------------------------------------------------------------------------------
# synthesize: success
# --------------------------------------------------------------------------------------------


def test_synthesize_writes_columns_in_order_with_codes_in_the_domain(inputs, tmp_path, capsys):
    csv, domain = inputs
    out = tmp_path / "synthetic.csv"
    assert main(synthesize_argv(csv, domain, out, "--seed", "3")) == 0

    synthetic = pd.read_csv(out)
    assert list(synthetic.columns) == ["zeta", "a", "b", "colour"]
    for name in ("zeta", "a", "b"):
        assert pd.api.types.is_integer_dtype(synthetic[name])
        assert synthetic[name].between(0, DOMAIN[name] - 1).all(), name
    assert set(synthetic["colour"]) <= set(COLOURS)
    # the noisy total, close to the 600 real rows
    assert abs(len(synthetic) - 600) <= 60
    # the planted a-b dependency survives (independent columns would agree ~25% of the time)
    assert (synthetic["a"] == synthetic["b"]).mean() > 0.6
    assert not [n for n in files_under(tmp_path) if n.endswith(".part")]

    out_text, err = capsys.readouterr()
    assert out_text == ""
    assert f"wrote {len(synthetic)} synthetic rows to {out}" in err


def test_a_run_records_its_table_by_its_columns_for_history(inputs, tmp_path):
    """History names a table by its columns: a command-line run stores how many it had."""
    from privsyn_core.release.registry import Registry, file_fingerprint

    csv, domain = inputs
    assert main(synthesize_argv(csv, domain, tmp_path / "s.csv", "--seed", "1", "-q")) == 0
    (table,) = Registry().tables(file_fingerprint(csv))
    assert table.columns == len(pd.read_csv(csv, nrows=0).columns) == 4
    assert table.name == csv.name and table.rows is None  # the CLI counts no rows


def test_quiet_run_prints_nothing(inputs, tmp_path, capsys):
    csv, domain = inputs
    assert main(synthesize_argv(csv, domain, tmp_path / "s.csv", "--seed", "1", "-q")) == 0
    assert capsys.readouterr() == ("", "")


def test_same_seed_same_file_different_seed_different_file(inputs, tmp_path):
    csv, domain = inputs
    paths = {name: tmp_path / f"{name}.csv" for name in ("first", "again", "other")}
    seeds = {"first": "7", "again": "7", "other": "8"}
    for name, path in paths.items():
        assert main(synthesize_argv(csv, domain, path, "--seed", seeds[name], "-q")) == 0
    assert paths["first"].read_bytes() == paths["again"].read_bytes()
    assert paths["first"].read_bytes() != paths["other"].read_bytes()


def test_rows_sets_the_row_count(inputs, tmp_path):
    csv, domain = inputs
    out = tmp_path / "s.csv"
    assert main(synthesize_argv(csv, domain, out, "--seed", "0", "--rows", "123", "-q")) == 0
    synthetic = pd.read_csv(out)
    assert len(synthetic) == 123
    assert list(synthetic.columns) == ["zeta", "a", "b", "colour"]


def test_existing_output_is_replaced_on_success(inputs, tmp_path):
    csv, domain = inputs
    out = tmp_path / "s.csv"
    out.write_text("stale\n")
    assert main(synthesize_argv(csv, domain, out, "--seed", "0", "--rows", "50", "-q")) == 0
    assert len(pd.read_csv(out)) == 50


def test_interrupted_write_leaves_neither_output_nor_part_file(
    inputs, tmp_path, capsys, monkeypatch
):
    csv, domain = inputs
    out = tmp_path / "s.csv"
    out.write_text("previous run\n")
    real_to_csv = pd.DataFrame.to_csv

    def half_written(self, path=None, *args, **kwargs):
        if path is None:  # the release bundle's copy, in memory, made before the output
            return real_to_csv(self, path, *args, **kwargs)
        real_to_csv(self.head(3), path, *args, **kwargs)  # the temporary file now exists
        raise KeyboardInterrupt

    monkeypatch.setattr(pd.DataFrame, "to_csv", half_written)
    before = files_under(tmp_path)
    assert main(synthesize_argv(csv, domain, out, "--seed", "0", "-q")) == 130
    assert "no output written" in capsys.readouterr().err
    assert files_under(tmp_path) == before
    assert out.read_text() == "previous run\n"  # the old output is untouched


@pytest.mark.slow
def test_synthesize_adult(tmp_path, capsys):
    out = tmp_path / "adult-synthetic.csv"
    argv = [
        "synthesize",
        str(ADULT_CSV),
        "-o",
        str(out),
        "--epsilon",
        "1",
        "--domain",
        str(ADULT_DOMAIN),
        "--seed",
        "0",
        "--iterations",
        "3",
        "-q",
    ]
    assert main(argv) == 0
    domain = json.loads(ADULT_DOMAIN.read_text())
    real_columns = list(pd.read_csv(ADULT_CSV, nrows=0).columns)
    synthetic = pd.read_csv(out)
    assert list(synthetic.columns) == real_columns
    for name, size in domain.items():
        assert pd.api.types.is_integer_dtype(synthetic[name]), name
        assert synthetic[name].between(0, size - 1).all(), name
    assert abs(len(synthetic) - 48_842) <= 500


# --------------------------------------------------------------------------------------------
# synthesize: errors the user can fix
# --------------------------------------------------------------------------------------------


def test_missing_input_file(inputs, tmp_path, capsys):
    _, domain = inputs
    before = files_under(tmp_path)
    status = main(synthesize_argv(tmp_path / "nope.csv", domain, tmp_path / "s.csv"))
    line = assert_clean_failure(status, capsys, tmp_path, before)
    assert "nope.csv" in line and "no such file" in line


@pytest.mark.parametrize(
    ("content", "expected"),
    [("", "is empty"), ("zeta,a,b,colour\n", "no rows")],
    ids=["zero-bytes", "header-only"],
)
def test_empty_input_file(inputs, tmp_path, capsys, content, expected):
    _, domain = inputs
    empty = tmp_path / "empty.csv"
    empty.write_text(content)
    before = files_under(tmp_path)
    status = main(synthesize_argv(empty, domain, tmp_path / "s.csv"))
    line = assert_clean_failure(status, capsys, tmp_path, before)
    assert expected in line


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (None, "no such file"),
        ('{"zeta": 3, "a": 4,', "not valid JSON"),
        ("[3, 4, 4]", "must map each column"),
        ("null", "must map each column"),
    ],
    ids=["missing", "invalid-json", "list", "null"],
)
def test_bad_domain_file(inputs, tmp_path, capsys, content, expected):
    csv, _ = inputs
    domain = tmp_path / "bad-domain.json"
    if content is not None:
        domain.write_text(content)
    before = files_under(tmp_path)
    status = main(synthesize_argv(csv, domain, tmp_path / "s.csv"))
    line = assert_clean_failure(status, capsys, tmp_path, before)
    assert "bad-domain.json" in line
    assert expected in line


def test_value_outside_the_domain(inputs, tmp_path, capsys):
    csv, domain = inputs
    table = planted_table()
    table.loc[17, "b"] = 9
    table.to_csv(csv, index=False)
    before = files_under(tmp_path)
    status = main(synthesize_argv(csv, domain, tmp_path / "s.csv"))
    line = assert_clean_failure(status, capsys, tmp_path, before)
    assert "'b'" in line and "9" in line and "0..3" in line


def test_category_outside_the_domain(inputs, tmp_path, capsys):
    csv, domain = inputs
    table = planted_table()
    table.loc[5, "colour"] = "mauve"
    table.to_csv(csv, index=False)
    before = files_under(tmp_path)
    status = main(synthesize_argv(csv, domain, tmp_path / "s.csv"))
    line = assert_clean_failure(status, capsys, tmp_path, before)
    assert "'colour'" in line and "'mauve'" in line


def test_column_missing_from_the_domain(inputs, tmp_path, capsys):
    csv, domain = inputs
    domain.write_text(json.dumps({k: v for k, v in DOMAIN.items() if k != "zeta"}))
    before = files_under(tmp_path)
    status = main(synthesize_argv(csv, domain, tmp_path / "s.csv"))
    line = assert_clean_failure(status, capsys, tmp_path, before)
    assert "'zeta'" in line


@pytest.mark.parametrize("epsilon", ["0", "-1", "nan", "inf"])
def test_epsilon_must_be_positive_and_finite(inputs, tmp_path, capsys, epsilon):
    csv, domain = inputs
    argv = synthesize_argv(csv, domain, tmp_path / "s.csv")
    argv[argv.index("--epsilon") + 1] = epsilon
    before = files_under(tmp_path)
    line = assert_clean_failure(main(argv), capsys, tmp_path, before)
    assert "epsilon" in line


@pytest.mark.parametrize("delta", ["1", "1.5", "0"])
def test_delta_must_lie_in_the_open_unit_interval(inputs, tmp_path, capsys, delta):
    csv, domain = inputs
    before = files_under(tmp_path)
    status = main(synthesize_argv(csv, domain, tmp_path / "s.csv", "--delta", delta))
    line = assert_clean_failure(status, capsys, tmp_path, before)
    assert "delta" in line


@pytest.mark.parametrize("rows", ["0", "-5"])
def test_rows_must_be_positive(inputs, tmp_path, capsys, rows):
    csv, domain = inputs
    before = files_under(tmp_path)
    status = main(synthesize_argv(csv, domain, tmp_path / "s.csv", "--rows", rows))
    line = assert_clean_failure(status, capsys, tmp_path, before)
    assert rows in line


def test_output_folder_does_not_exist(inputs, tmp_path, capsys):
    csv, domain = inputs
    before = files_under(tmp_path)
    status = main(synthesize_argv(csv, domain, tmp_path / "missing" / "s.csv"))
    line = assert_clean_failure(status, capsys, tmp_path, before)
    assert "missing" in line and "does not exist" in line
    assert not (tmp_path / "missing").exists()


# --------------------------------------------------------------------------------------------
# evaluate
# --------------------------------------------------------------------------------------------


@pytest.fixture
def real_and_synthetic(tmp_path: Path) -> tuple[Path, Path]:
    real, synthetic = tmp_path / "real.csv", tmp_path / "syn.csv"
    planted_table(600, seed=0).to_csv(real, index=False)
    planted_table(400, seed=1).to_csv(synthetic, index=False)
    return real, synthetic


METRIC = r"(\d+\.\d{4})"


@pytest.mark.slow
def test_evaluate_with_label_prints_three_metrics_and_baselines(real_and_synthetic, capsys):
    real, synthetic = real_and_synthetic
    assert main(["evaluate", str(real), str(synthetic), "--label", "b", "--seed", "0"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    l1 = re.search(r"2-way marginal L1.*?: +" + METRIC, out)
    rq = re.search(r"range query error.*?: +" + METRIC, out)
    svm = re.search(
        r"SVM misclassification on 'b': "
        + METRIC
        + r" +\(non-private SVM: "
        + METRIC
        + r", majority class: "
        + METRIC
        + r"\)",
        out,
    )
    assert l1 and rq and svm, out
    # same generator, same planted structure: small but non-zero distances
    assert 0 < float(l1[1]) < 0.5
    assert 0 < float(rq[1]) < 0.2
    values = [float(v) for v in svm.groups()]
    assert all(0 <= v <= 1 for v in values)
    # b is predictable from a: the non-private SVM beats always guessing the majority class
    assert values[1] < values[2]


def test_evaluate_without_label(real_and_synthetic, capsys):
    real, synthetic = real_and_synthetic
    assert main(["evaluate", str(real), str(synthetic)]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert re.search(r"2-way marginal L1.*?: +" + METRIC, out)
    assert re.search(r"range query error.*?: +" + METRIC, out)
    assert re.search(r"SVM misclassification: +n/a", out)


def test_evaluate_same_table_scores_zero(real_and_synthetic, capsys):
    real, _ = real_and_synthetic
    assert main(["evaluate", str(real), str(real)]) == 0
    out = capsys.readouterr().out
    assert re.search(r"2-way marginal L1.*?: +0\.0000", out)
    assert re.search(r"range query error.*?: +0\.0000", out)


def test_evaluate_unknown_label(real_and_synthetic, tmp_path, capsys):
    real, synthetic = real_and_synthetic
    before = files_under(tmp_path)
    status = main(["evaluate", str(real), str(synthetic), "--label", "salary"])
    line = assert_clean_failure(status, capsys, tmp_path, before)
    assert "'salary'" in line


def test_evaluate_missing_synthetic_file(real_and_synthetic, tmp_path, capsys):
    real, _ = real_and_synthetic
    before = files_under(tmp_path)
    status = main(["evaluate", str(real), str(tmp_path / "gone.csv")])
    line = assert_clean_failure(status, capsys, tmp_path, before)
    assert "gone.csv" in line


def people(n: int, seed: int) -> pd.DataFrame:
    """Rows that rarely repeat (a measured weight), so a copied row stands out."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "age": rng.integers(18, 80, n),
            "kg": rng.normal(75, 12, n).round(1),
            "town": np.array(COLOURS)[rng.integers(0, 3, n)],
        }
    )


def copied_rows_section(out: str) -> str:
    start = out.index("Copied rows")
    return out[start:]


def test_evaluate_warns_about_a_synthesizer_that_copies_rows(tmp_path, capsys):
    real, copying, fresh = tmp_path / "real.csv", tmp_path / "copy.csv", tmp_path / "fresh.csv"
    table = people(1000, seed=0)
    table.to_csv(real, index=False)
    table.sample(n=1000, replace=True, random_state=1).to_csv(copying, index=False)
    people(1000, seed=2).to_csv(fresh, index=False)

    assert main(["evaluate", str(real), str(copying)]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert out.index("Fidelity") < out.index("Copied rows")  # after the fidelity measures
    section = copied_rows_section(out)
    assert "owner-only" in section.splitlines()[0]
    assert "identical to one of the 1,000 real rows: 100.0%" in section
    assert "split at random into a reference half of 500" in section
    assert "verdict: Warning:" in section

    assert main(["evaluate", str(real), str(fresh)]) == 0
    section = copied_rows_section(capsys.readouterr().out)
    assert "verdict: No sign of copied rows" in section


def test_evaluate_holdout_compares_with_rows_the_synthesizer_never_saw(tmp_path, capsys):
    real, copying, holdout = tmp_path / "real.csv", tmp_path / "copy.csv", tmp_path / "hold.csv"
    table = people(800, seed=3)
    table.to_csv(real, index=False)
    table.sample(n=600, replace=True, random_state=4).to_csv(copying, index=False)
    people(300, seed=5).to_csv(holdout, index=False)
    assert main(["evaluate", str(real), str(copying), "--holdout", str(holdout)]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    section = copied_rows_section(out)
    assert "the 300 held-out real rows you gave" in section
    assert "compared with all 800 real rows" in section
    copies = re.search(r"exact copies \(of all rows\) +(\S+%) +(\S+%)", section)
    assert copies and copies[1] == "100.0%", section
    assert "verdict: Warning:" in section


def test_evaluate_refuses_the_real_table_as_its_own_holdout(real_and_synthetic, tmp_path, capsys):
    real, synthetic = real_and_synthetic
    before = files_under(tmp_path)
    status = main(["evaluate", str(real), str(synthetic), "--holdout", str(real)])
    line = assert_clean_failure(status, capsys, tmp_path, before)
    assert "is the real table itself" in line and "--holdout" in line


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (None, "gone.csv"),
        ("zeta,a,b\n1,2,3\n", "missing from the held-out table: 'colour'"),
        ("zeta,a,b,colour\n", "gone.csv has a header but no rows"),
    ],
)
def test_evaluate_bad_holdout_is_one_line(real_and_synthetic, tmp_path, capsys, content, words):
    real, synthetic = real_and_synthetic
    holdout = tmp_path / "gone.csv"
    if content is not None:
        holdout.write_text(content)
    before = files_under(tmp_path)
    status = main(["evaluate", str(real), str(synthetic), "--holdout", str(holdout)])
    line = assert_clean_failure(status, capsys, tmp_path, before)
    assert words in line, line


# --------------------------------------------------------------------------------------------
# The module run as a program
# --------------------------------------------------------------------------------------------


def with_this_checkout() -> dict[str, str]:
    """The environment for a child Python that imports this checkout's package."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def run_module(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "privsyn_core.cli", *args],
        cwd=cwd,
        env=with_this_checkout(),
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.slow
def test_module_exit_status(inputs, tmp_path):
    csv, domain = inputs
    before = files_under(tmp_path)
    failed = run_module(
        *synthesize_argv(tmp_path / "nope.csv", domain, tmp_path / "s.csv"), cwd=tmp_path
    )
    assert failed.returncode == 2
    assert failed.stdout == ""
    assert failed.stderr.splitlines() == [
        f"privsyn: error: cannot read {tmp_path / 'nope.csv'}: no such file"
    ]
    assert files_under(tmp_path) == before

    out = tmp_path / "s.csv"
    done = run_module(*synthesize_argv(csv, domain, out, "--seed", "0", "-q"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert list(pd.read_csv(out).columns) == ["zeta", "a", "b", "colour"]


#: libraries a local synthesis never needs, each a tenth of a second or more of every run
#: when imported (issue 23: privsyn synthesize on adult-coded within 1.5 s): statistics for
#: opt-in steps, the other engines, the dashboard, the progress bar without a terminal, the
#: graphs only the dashboard draws (the engine's own are privsyn_core/selection/forest.py)
NOT_FOR_A_LOCAL_RUN = (
    "scipy",
    "duckdb",
    "pyspark",
    "streamlit",
    "tqdm",
    "sklearn",
    "numba",
    "networkx",
)


def imported_but_not_needed(argv: list[str], cwd: Path) -> list[str]:
    """Runs ``privsyn argv`` in a fresh process: the libraries of :data:`NOT_FOR_A_LOCAL_RUN`
    it imported."""
    code = (
        "import json, sys\n"
        "from privsyn_core.cli import main\n"
        f"status = main({argv!r})\n"
        f"print(json.dumps(sorted(m for m in {NOT_FOR_A_LOCAL_RUN!r} if m in sys.modules)))\n"
        "sys.exit(status)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=cwd,
        env=with_this_checkout(),
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.slow
def test_a_local_synthesis_imports_no_library_it_does_not_use(inputs, tmp_path):
    csv, domain = inputs
    argv = synthesize_argv(csv, domain, tmp_path / "s.csv", "--seed", "0")
    assert imported_but_not_needed(argv, tmp_path) == []


@pytest.mark.slow
def test_the_timed_adult_run_imports_no_library_it_does_not_use(tmp_path):
    """The run benchmarks/cli_speed.py times: adult-coded with every default (GUM's tree,
    the dependency selection, the registry's release bundle)."""
    argv = [
        "synthesize",
        str(ADULT_CSV),
        "--domain",
        str(ADULT_DOMAIN),
        "--epsilon",
        "1",
        "--seed",
        "0",
        "-o",
        str(tmp_path / "s.csv"),
    ]
    assert imported_but_not_needed(argv, tmp_path) == []


# --------------------------------------------------------------------------------------------


def test_output_path_is_an_existing_folder(inputs, tmp_path, capsys):
    csv, domain = inputs
    folder = tmp_path / "results"
    folder.mkdir()
    before = files_under(tmp_path)
    status = main(synthesize_argv(csv, domain, folder))
    line = assert_clean_failure(status, capsys, tmp_path, before)
    assert "results" in line


@pytest.mark.slow
def test_audit_checks_every_step_and_fails_on_a_leak(capsys, monkeypatch):
    import numpy as np

    from privsyn_core import cli
    from privsyn_core.privacy import audit
    from privsyn_core.privacy.audit import AUDIT_DOMAIN, Neighbours, audit_marginal
    from privsyn_core.privacy.noise import SeededNoise

    argv = ["audit", "--epsilon", "4", "--mode", "debug", "--trials", "1000"]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    for step in ("1-way marginals", "InDif scores", "marginal a x b"):
        assert step in out
    assert "no step leaks more than it claims" in out and "LEAKS" not in out

    def leaky_engine(epsilon, delta, noise, trials, rng, **options):
        records = np.stack([rng.integers(0, s, size=200) for s in AUDIT_DOMAIN.sizes])
        neighbours = Neighbours(AUDIT_DOMAIN, records, np.array([1, 2, 0]))
        noise = SeededNoise(np.random.default_rng(3))
        # measured at 25 times the rho it claims: a fifth of the noise
        return [audit_marginal(neighbours, ("a",), 0.25, noise, delta, trials, claimed_rho=0.01)]

    monkeypatch.setattr(audit, "audit_engine", leaky_engine)
    assert cli.main(argv) == 1
    captured = capsys.readouterr()
    assert "LEAKS BEYOND ITS CLAIM" in captured.out
    assert "leaks more than its ledger claims" in captured.err


def test_block_rows_help_states_the_engines_default():
    """The parser does not import the engine (start-up time), so it spells the default
    block size out: it must say the engine's."""
    from privsyn_core.cli import build_parser
    from privsyn_core.generation.blocks import DEFAULT_BLOCK_ROWS

    sub = next(a for a in build_parser()._actions if a.dest == "command")
    for name in ("synthesize", "generate"):
        option = next(a for a in sub.choices[name]._actions if a.dest == "block_rows")
        assert f"(default {DEFAULT_BLOCK_ROWS})" in option.help, name


def test_the_parsers_synthesis_choices_are_the_engines():
    from privsyn_core.cli import _SYNTHESES
    from privsyn_core.config import SYNTHESIS_METHODS

    assert _SYNTHESES == SYNTHESIS_METHODS


def test_the_parsers_starting_tables_are_the_engines():
    from privsyn_core.cli import _INITIALS
    from privsyn_core.generation.initial import INITIALS

    assert _INITIALS == INITIALS


@pytest.mark.slow
def test_synthesis_picks_the_method_and_auto_is_gum_on_a_narrow_table(
    inputs, tmp_path, capsys, monkeypatch
):
    import privsyn_core.synthesize_command as steps

    csv, domain = inputs
    asked: list[str] = []

    def recording(**fields):
        asked.append(fields["synthesis"])
        return steps.PrivSynConfig.__wrapped__(**fields)

    recording.__wrapped__ = steps.PrivSynConfig  # type: ignore[attr-defined]
    monkeypatch.setattr(steps, "PrivSynConfig", recording)
    paths = {name: tmp_path / f"{name}.csv" for name in ("auto", "gum", "mrf")}
    for name, path in paths.items():
        extra = () if name == "auto" else ("--synthesis", name)
        assert main(synthesize_argv(csv, domain, path, "--seed", "5", "-q", *extra)) == 0
    assert asked == ["auto", "gum", "mrf"]
    # four columns: auto is GUM, run for run
    assert paths["auto"].read_bytes() == paths["gum"].read_bytes()
    before = files_under(tmp_path)
    capsys.readouterr()
    status = main(synthesize_argv(csv, domain, tmp_path / "x.csv", "--synthesis", "ipf"))
    assert "invalid choice: 'ipf'" in assert_clean_failure(status, capsys, tmp_path, before)


@pytest.mark.slow
def test_independence_threshold_reaches_the_release_and_generate_can_change_it(
    inputs, tmp_path, capsys
):
    """``--independence-threshold`` sets the engine's rule (generation/independence.py): kept
    in the release bundle, and changed for a new sample by ``generate``."""
    from privsyn_core.generation.independence import DEFAULT_THRESHOLD
    from privsyn_core.release.bundle import load_model

    csv, domain = inputs
    bundles = {}
    for name, extra in {"default": (), "off": ("--independence-threshold", "off")}.items():
        bundle = tmp_path / f"{name}.zip"
        argv = synthesize_argv(csv, domain, tmp_path / f"{name}.csv", "--seed", "3", "-q")
        assert main([*argv, "--bundle", str(bundle), *extra]) == 0
        bundles[name] = bundle
    assert load_model(bundles["default"]).defaults.independence_threshold == DEFAULT_THRESHOLD
    assert load_model(bundles["off"]).defaults.independence_threshold is None
    # a huge threshold draws every measured pair as independent: another table
    drawn = {}
    for value in ("off", "1e6"):
        out = tmp_path / f"generated-{value}.csv"
        argv = ["generate", str(bundles["off"]), "-o", str(out), "--rows", "2000", "--seed", "1"]
        assert main([*argv, "-q", "--independence-threshold", value]) == 0
        drawn[value] = pd.read_csv(out)
    assert not drawn["off"].equals(drawn["1e6"])
    # the parser spells the engine's default out (it imports no engine module)
    from privsyn_core.cli import _INDEPENDENCE

    assert f"default {DEFAULT_THRESHOLD:g}" in _INDEPENDENCE
    capsys.readouterr()
    before = files_under(tmp_path)
    for bad in ("-1", "nan", "inf", "two"):
        argv = synthesize_argv(csv, domain, tmp_path / "x.csv", "--independence-threshold", bad)
        line = assert_clean_failure(main(argv), capsys, tmp_path, before)
        assert "--independence-threshold" in line and "'off'" in line, line


def test_the_pair_rule_options_set_only_what_was_given():
    from argparse import Namespace

    from privsyn_core.cli import build_parser
    from privsyn_core.command_inputs import pair_rule_options

    parse = build_parser().parse_args
    base = ["synthesize", "in.csv", "-o", "out.csv", "--epsilon", "1"]
    assert pair_rule_options(parse(base)) == {}
    given = parse([*base, "--independence-threshold", "off", "--quasi-independence", "3"])
    assert pair_rule_options(given) == {"independence_threshold": None, "quasi_independence": 3.0}
    both = Namespace(independence_threshold=1.5, quasi_independence="off")
    assert pair_rule_options(both) == {"independence_threshold": 1.5, "quasi_independence": None}
