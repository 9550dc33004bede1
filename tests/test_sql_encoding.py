"""Raw tables read and encoded in SQL (DuckDB): the same exact aggregates as in memory, hence
the same ledger and, in debug mode, the same synthetic table."""

from __future__ import annotations

import json
from itertools import combinations

import numpy as np
import pandas as pd
import pytest
from conftest import ROOT
from glob_names import GLOB_NAMES, ROWS, GlobName, beside_decoys, write_table

from privsyn_core import synthesize
from privsyn_core.data.codecs import BinnedCodec, CategoryCodec
from privsyn_core.data.io import file_columns, read_table
from privsyn_core.data.schema import Schema
from privsyn_core.errors import TableError
from privsyn_core.measuring.counters import FrameTable
from privsyn_core.measuring.counters.sql_encoding import duckdb_table, sql_table
from privsyn_core.measuring.private_domain import _grid_edges
from privsyn_core.release.registry import Registry, bytes_fingerprint, file_fingerprint

ADULT = ROOT / "privsyn_core" / "samples" / "adult.csv"

#: values that test every reading rule: blanks and missing spellings (with spaces around),
#: numbers in every notation (with 1 to 5 or more decimals) and some that are not numbers,
#: dates of all seven classes and invalid ones, text with Unicode spaces
TRICKY = [
    "", " ", "NA", " NA", "NA ", "null", "N/A", "nan", "None", "-", "?",
    " 1.0 ", "1", "-0", "+.5", "5.", ".5", "1e5", "1E-3", "-2.5e+2", "1e999", "1,000", "inf",
    "0x10", "12%", "\u0663", "32.50", "-0.25", "1.25e1", "1.5e-3", "0.000125e2",
    "0.30000000000000004", "123.4567800",
    "2020-01-05", "2020-1-5", "2019-02-29", "2020-02-29", "2020-00-10", "0001-01-01",
    "2020-01-05 7:30", "2020-01-05T23:59:59", "2020-01-05 24:00", "2020-01-05 23:60",
    "2020-01-05 23:59:60", "2020-01-05T10:00:00Z",
    "2020/02/03", "2020/13/03", "31/12/2020", "12/31/2020", "05/06/2020", "1/2/2020",
    "2016/01/01 00:47:36", "2016/1/5 7:05:09", "2016/01/01 24:00:00", "2016/02/30 10:00:00",
    "2016/01/01 23:59:60", "2016/01/01 10:00",
    "13/13/2020", "text", "\u00a0x\u00a0", "\tcat", "a b",
]  # fmt: skip


def _csv(path, columns: dict[str, list[str]]) -> None:
    names = list(columns)
    rows = zip(*columns.values(), strict=True)
    lines = [",".join(names)] + [",".join(_cell(v) for v in row) for row in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _cell(value: str) -> str:
    return f'"{value}"' if ("," in value or '"' in value) else value


@pytest.fixture(scope="module")
def tricky(tmp_path_factory):
    path = tmp_path_factory.mktemp("tricky") / "tricky.csv"
    _csv(path, {"v": TRICKY, "w": list(reversed(TRICKY))})
    return path


def test_value_classes_and_value_counts_agree_with_pandas_on_tricky_values(tricky):
    sql, memory = duckdb_table(tricky), FrameTable(read_table(tricky))
    for name in ("v", "w"):
        assert np.array_equal(sql.class_counts(name), memory.class_counts(name))
        values, counts = sql.value_counts(name)
        expected_values, expected_counts = memory.value_counts(name)
        assert values == expected_values and np.array_equal(counts, expected_counts)
    # every class occurs, so the test covers each rule
    assert (sql.class_counts("v") > 0).all(), sql.class_counts("v")


@pytest.mark.slow
def test_each_tricky_value_reads_alone_as_in_pandas(tmp_path):
    """One value per file: a disagreement names the value."""
    for i, value in enumerate(TRICKY):
        path = tmp_path / f"{i}.csv"
        _csv(path, {"v": [value, "z"], "k": ["1", "2"]})
        sql, memory = duckdb_table(path), FrameTable(read_table(path))
        assert np.array_equal(sql.class_counts("v"), memory.class_counts("v")), repr(value)


@pytest.mark.slow
def test_the_documented_differences_from_pandas_csv_reading(tmp_path):
    """A quoted cell with leading spaces before a missing spelling is missing in SQL, text in
    pandas; a blank line of a one-column file is a missing value in SQL, skipped by pandas.
    (In files of two or more columns both skip blank lines.)"""
    quoted = tmp_path / "quoted.csv"
    quoted.write_text('v,k\n"  NA",1\nx,2\n')
    assert duckdb_table(quoted).class_counts("v")[0] == 1
    assert FrameTable(read_table(quoted)).class_counts("v")[0] == 0
    blank = tmp_path / "blank.csv"
    blank.write_text("v\n1\n\n2\n")
    assert duckdb_table(blank).class_counts("v").sum() == 3
    assert FrameTable(read_table(blank)).class_counts("v").sum() == 2
    wide = tmp_path / "wide.csv"
    wide.write_text("v,k\n1,2\n\n3,4\n")
    assert duckdb_table(wide).class_counts("v").sum() == 2


@pytest.mark.parametrize(
    ("datetime", "fmt"),
    [
        (False, None),
        (True, "%d/%m/%Y"),
        (True, "%m/%d/%Y"),
        (True, "%Y-%m-%d"),
        (True, "%Y/%m/%d %H:%M:%S"),
    ],
)
@pytest.mark.slow
def test_numbers_and_dates_fall_in_the_same_cells(tricky, datetime, fmt):
    sql, memory = duckdb_table(tricky), FrameTable(read_table(tricky))
    codec = BinnedCodec(
        "v", (0.0, 1.0), missing=True, datetime=datetime, datetime_format=fmt, unparsed="missing"
    )
    ours, theirs = sql.numbers(codec), memory.numbers(codec)
    assert ours.bounds() == theirs.bounds()
    low, high = theirs.bounds()
    grids = [_grid_edges(), np.linspace(low, high, 9), np.array([-1.0, 0.0, 1.0, 5.0, 1e5])]
    if datetime:  # edges exactly on the dates present
        seconds = np.unique(memory.numbers(codec).values[~np.isnan(memory.numbers(codec).values)])
        grids.append(seconds)
    for edges in grids:
        for clip in (True, False):
            assert np.array_equal(ours.histogram(edges, clip), theirs.histogram(edges, clip))


def _raw_table(n: int, rng: np.random.Generator) -> pd.DataFrame:
    """Text categories with missing values and rare ones (out of the released domain), whole
    numbers on and beyond declared bin edges, decimals, ISO and slashed dates."""
    city = rng.choice(
        ["Paris", "Lyon", " Lille", "NA", "", "Nice"], n, p=[0.4, 0.3, 0.1, 0.1, 0.05, 0.05]
    )
    city = np.where(rng.random(n) < 0.01, [f"rare{i}" for i in range(n)], city)
    age = rng.integers(10, 100, n).astype(str)
    age[:4] = ["18", "90", "120", "5"]  # on the declared edges and beyond
    income = np.round(rng.gamma(2.0, 1500.0, n), 2).astype(str)
    income[rng.random(n) < 0.05] = ""
    days = rng.integers(0, 3000, n)
    joined = (np.datetime64("2015-01-01") + days).astype(str)
    slashed = pd.to_datetime(joined).strftime("%d/%m/%Y").to_numpy()
    when = np.where(rng.random(n) < 0.5, joined, slashed)
    when[rng.random(n) < 0.02] = "unknown"
    return pd.DataFrame(
        {"city": city, "age": age, "income": income, "joined": joined, "when": when}
    )


@pytest.fixture(scope="module")
def raw(tmp_path_factory):
    path = tmp_path_factory.mktemp("raw") / "raw.csv"
    _raw_table(3000, np.random.default_rng(7)).to_csv(path, index=False)
    return path


RAW_SCHEMA = Schema.from_json(
    {
        "columns": [
            {"name": "city"},
            {"name": "age", "kind": "numeric", "integer": True, "lower": 18, "upper": 90,
             "bins": 8, "missing": False},
            {"name": "income"},
            {"name": "joined", "kind": "datetime", "datetime_format": "%Y-%m-%d"},
            {"name": "when"},
        ]
    }
)  # fmt: skip


@pytest.mark.parametrize("schema", [None, RAW_SCHEMA], ids=["undeclared", "schema"])
@pytest.mark.slow
def test_a_raw_file_gives_the_same_ledger_and_table_on_duckdb(raw, schema):
    results = {
        engine: synthesize(
            raw, 2.0, 1e-9, engine=engine, schema=schema, rng=np.random.default_rng(11),
            config=None,
        )
        for engine in ("numpy", "duckdb")
    }  # fmt: skip
    numpy_run, duckdb_run = results["numpy"], results["duckdb"]
    assert numpy_run.ledger.to_json() == duckdb_run.ledger.to_json()
    assert [c.codec for c in numpy_run.columns] == [c.codec for c in duckdb_run.columns]
    pd.testing.assert_frame_equal(numpy_run.synthetic, duckdb_run.synthetic)
    # the run used every kind of codec it is meant to test
    codecs = [c.codec for c in duckdb_run.columns]
    assert any(isinstance(c, CategoryCodec) and c.other for c in codecs)
    assert any(isinstance(c, BinnedCodec) and c.datetime for c in codecs)


@pytest.mark.slow
def test_exact_counts_of_the_encoded_raw_table_equal_in_memory(raw):
    memory, sql = FrameTable(read_table(raw)), duckdb_table(raw)
    codecs = [
        CategoryCodec("city", ("Lille", "Lyon", "Paris"), other=True, missing=True),
        BinnedCodec("age", (18.0, 30.0, 50.0, 90.0), integer=True),
        BinnedCodec("income", (0.0, 1000.0, 2000.0, 5000.0), missing=True, unparsed="missing"),
        BinnedCodec("joined", (1.42e9, 1.45e9, 1.5e9, 1.6e9), datetime=True,
                    datetime_format="%Y-%m-%d"),
        BinnedCodec("when", (1.42e9, 1.45e9, 1.5e9, 1.6e9), missing=True, datetime=True,
                    datetime_format="%d/%m/%Y", unparsed="missing"),
    ]  # fmt: skip
    ours, theirs = sql.encoded(codecs, np.dtype(np.uint8)), memory.encoded(codecs, np.uint8)
    assert ours.domain == theirs.domain
    names = ours.domain.attributes
    sets = [(a,) for a in names] + list(combinations(names, 2)) + [names[:3]]
    for mine, expected in zip(ours.count(sets), theirs.count(sets), strict=True):
        assert np.array_equal(mine.values, expected.values), mine.attributes


@pytest.mark.slow
def test_a_value_a_declared_codec_refuses_is_named(raw):
    sql = duckdb_table(raw)
    with pytest.raises(TableError, match="'city' holds values not among"):
        sql.encoded([CategoryCodec("city", ("Paris",), missing=True)], np.dtype(np.uint8))
    with pytest.raises(TableError, match="'income' has a missing value"):
        sql.encoded([BinnedCodec("income", (0.0, 1.0), unparsed="missing")], np.dtype(np.uint8))
    with pytest.raises(TableError, match="'when' is declared datetime but holds 'unknown'"):
        sql.numbers(BinnedCodec("when", (0.0, 1.0), datetime=True, missing=True))


@pytest.mark.slow
def test_adult_raw_and_as_parquet_counts_equal_in_memory(tmp_path):
    """The raw Adult CSV, and the same table typed (integers, text) in Parquet."""
    parquet = tmp_path / "adult.parquet"
    pd.read_csv(ADULT).to_parquet(parquet)
    for path in (ADULT, parquet):
        memory, sql = FrameTable(read_table(path)), duckdb_table(path)
        assert sql.names == memory.names
        for name in sql.names:
            assert np.array_equal(sql.class_counts(name), memory.class_counts(name)), name
            assert sql.value_counts(name)[0] == memory.value_counts(name)[0], name
            assert np.array_equal(sql.value_counts(name)[1], memory.value_counts(name)[1])


def test_typed_floats_in_parquet_count_the_same_decimals_in_sql_and_in_memory(tmp_path):
    """A double reads as its shortest text in both (``0.1 + 0.2`` has 17 decimals)."""
    values = [32.5, 0.25, 1.5e-7, 0.1 + 0.2, 44.0, np.nan, 123.456, 3e-5, -0.0625, 2.5e-300]
    path = tmp_path / "floats.parquet"
    pd.DataFrame({"x": values, "k": range(len(values))}).to_parquet(path)
    sql, memory = duckdb_table(path), FrameTable(read_table(path))
    assert np.array_equal(sql.class_counts("x"), memory.class_counts("x"))
    # missing, whole (44), 1, 2, 3, 4 and more decimals (1.5e-7, 0.1 + 0.2, 3e-5, 2.5e-300)
    assert sql.class_counts("x")[:7].tolist() == [1, 1, 1, 1, 1, 1, 4]


@pytest.mark.slow
def test_the_cli_on_duckdb_synthesises_a_raw_file_like_numpy_and_fingerprints_it_alike(
    raw, tmp_path, capsys
):
    from privsyn_core.cli import main

    outputs = {}
    for engine in ("numpy", "duckdb"):
        out, ledger = tmp_path / f"{engine}.csv", tmp_path / f"{engine}.json"
        argv = [
            "synthesize", str(raw), "--epsilon", "2", "--seed", "3", "--iterations", "5",
            "-q", "--engine", engine, "-o", str(out), "--ledger", str(ledger),
        ]  # fmt: skip
        assert main(argv) == 0, capsys.readouterr().err
        outputs[engine] = (out.read_bytes(), json.loads(ledger.read_text()))
    assert outputs["numpy"] == outputs["duckdb"]
    # one dataset, two runs: the budget of the same file is counted once, whatever the engine
    runs = Registry().runs(file_fingerprint(raw))
    assert len(runs) == 2
    assert bytes_fingerprint(raw.read_bytes()) == file_fingerprint(raw)


def test_file_columns_reads_the_header_not_the_rows(raw, tmp_path):
    described = file_columns(raw)
    assert described.columns == ("city", "age", "income", "joined", "when")
    assert described.size_bytes == raw.stat().st_size and described.format == "csv"
    parquet = tmp_path / "t.parquet"
    pd.DataFrame({"a b": [1], "c": ["x"]}).to_parquet(parquet)
    assert file_columns(parquet).columns == ("a b", "c")


def test_the_sql_constants_are_pandas_and_python_rules():
    """The missing spellings are pandas' own, the whitespace is what ``str.strip`` removes."""
    from pandas._libs.parsers import STR_NA_VALUES

    from privsyn_core.measuring.counters.sql_encoding import CSV_MISSING, WHITESPACE

    assert set(CSV_MISSING) == set(STR_NA_VALUES)
    assert set(WHITESPACE) == {chr(i) for i in range(0x110000) if chr(i).isspace()}


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
@pytest.mark.parametrize("case", GLOB_NAMES, ids=GlobName.id)
@pytest.mark.slow
def test_duckdb_reads_the_file_named_never_what_its_name_matches_as_a_pattern(
    case, suffix, tmp_path
):
    path = beside_decoys(tmp_path, case, suffix)
    table = sql_table(path, "duckdb")
    assert table.columns == ("v", "n")
    assert table.run(f"SELECT v, count(*) FROM {table.source} GROUP BY v") == [("x", ROWS)]


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
@pytest.mark.slow
def test_file_columns_reads_the_header_of_the_file_named(suffix, tmp_path):
    for i, case in enumerate(GLOB_NAMES):
        folder = tmp_path / str(i)
        path = beside_decoys(folder, case, suffix, decoy_column="w")
        assert file_columns(path).columns == ("v", "n"), case.name


def test_duckdb_takes_no_column_from_a_folder_named_like_a_partition(tmp_path):
    """DuckDB would add ``year`` from ``year=2020/`` (Hive partitioning); pandas does not."""
    for suffix in (".csv", ".parquet"):
        path = tmp_path / "year=2020" / f"t{suffix}"
        write_table(path, "x", ROWS)
        assert file_columns(path).columns == ("v", "n")
        assert duckdb_table(path).columns == ("v", "n")


def test_duckdb_reads_a_relative_name_with_a_leading_tilde_from_the_working_folder(
    tmp_path, monkeypatch
):
    """DuckDB reads a leading ``~`` as the home folder."""
    monkeypatch.chdir(tmp_path)
    write_table(tmp_path / "~g.csv", "x", ROWS)
    table = duckdb_table("~g.csv")
    assert table.run(f"SELECT v, count(*) FROM {table.source} GROUP BY v") == [("x", ROWS)]
