"""Spark counting in local mode: the same exact counts as the in-memory backend."""

from __future__ import annotations

import json
from itertools import combinations

import numpy as np
import pandas as pd
import pytest
from conftest import ROOT
from glob_names import GLOB_NAMES, ROWS, beside_decoys, write_table

from privsyn_core.data.table import encode_table
from privsyn_core.errors import InputError
from privsyn_core.measuring.counters import ArrayCounter
from privsyn_core.measuring.counters.spark_counter import SparkCounter, spark_frame
from privsyn_core.spark_session import spark_session

ADULT = ROOT / "assets" / "adult-coded.csv"
SIZES = json.loads((ROOT / "assets" / "adult-coded-domain.json").read_text())


@pytest.fixture(scope="module")
def spark():
    session = spark_session("local[2]")
    yield session
    session.stop()


def test_counts_equal_the_in_memory_backend_on_adult_from_a_file_and_a_dataframe(spark, tmp_path):
    table = pd.read_csv(ADULT)
    parquet = tmp_path / "adult.parquet"
    table.to_parquet(parquet)
    records, declared, _ = encode_table(table, {c: SIZES[c] for c in table.columns})
    expected_counter = ArrayCounter(records, declared)
    names = declared.attributes
    sets = [(a,) for a in names] + list(combinations(names, 2)) + [names[:3]]
    expected = expected_counter.count(sets)
    for source in (str(parquet), spark.read.parquet(str(parquet))):
        counter = SparkCounter.for_source(source, SIZES, spark=spark)
        assert counter.domain == declared
        for ours, theirs in zip(counter.count(sets), expected, strict=True):
            assert ours.shape == theirs.shape and np.array_equal(ours.values, theirs.values)


def test_a_value_outside_the_declared_codes_is_named(spark):
    frame = spark.createDataFrame([("0", "1"), ("1", "0"), ("7", "1")], ["a", "b"])
    with pytest.raises(InputError) as info:
        SparkCounter.for_source(frame, {"a": 3, "b": 2}, spark=spark)
    assert "'a'" in str(info.value) and "'7'" in str(info.value)


def test_the_cli_on_spark_writes_the_same_table_and_ledger_as_in_memory(spark, tmp_path, capsys):
    from privsyn_core.cli import main

    domain = ROOT / "assets" / "adult-coded-domain.json"
    outputs = {}
    for engine in ("numpy", "spark"):
        out, ledger = tmp_path / f"{engine}.csv", tmp_path / f"{engine}.json"
        argv = [
            "synthesize", str(ADULT), "--domain", str(domain), "--epsilon", "1", "--seed", "3",
            "--iterations", "5", "-q", "--no-registry", "--engine", engine, "-o", str(out),
            "--ledger", str(ledger), "--spark-master", "local[2]",
        ]  # fmt: skip
        assert main(argv) == 0, capsys.readouterr().err
        outputs[engine] = (out.read_bytes(), json.loads(ledger.read_text()))
    assert outputs["numpy"] == outputs["spark"]


def test_partial_counts_of_many_partitions_some_empty_sum_to_the_in_memory_counts(spark):
    rng = np.random.default_rng(5)
    sizes = {"a": 3, "b": 70, "c": 5, "d": 300}  # b and d need 7 and 9 bits of a packed word
    records = np.stack([rng.integers(0, k, 2_000) for k in sizes.values()])
    table = pd.DataFrame({name: records[i] for i, name in enumerate(sizes)})
    # hash-partitioned on a 3-valued column into 8 partitions: at most 3 hold rows
    frame = spark.createDataFrame(table).repartition(8, "a")
    lengths = frame.rdd.glom().map(len).collect()
    assert len(lengths) == 8 and lengths.count(0) >= 5 and sum(lengths) == 2_000
    counter = SparkCounter.for_source(frame, sizes, spark=spark)
    counter.max_cells = 1_000  # one set (a, b, c, d) alone beyond it, the others in 3 scans
    expected = ArrayCounter(records, counter.domain)
    sets = [("a",), ("d",), ("b", "a"), ("a", "b", "c", "d"), ("c", "d"), (), ("d",)]
    for ours, theirs in zip(counter.count(sets), expected.count(sets), strict=True):
        assert ours.attributes == theirs.attributes and ours.shape == theirs.shape
        assert np.array_equal(ours.values, theirs.values)


def test_a_dataframe_with_no_rows_counts_zeros(spark):
    frame = spark.createDataFrame([(1, 0)], "a INT, b INT").filter("a > 5")
    (table,) = SparkCounter.for_source(frame, {"a": 2, "b": 3}, spark=spark).count([("a", "b")])
    assert table.shape == (2, 3) and not table.values.any()


@pytest.mark.parametrize(
    ("rows", "schema", "named"),
    [
        ([(0, 1), (-1, 0)], "a INT, b INT", ["'a'", "'-1'"]),
        ([(0, 1), (1, 2)], "a INT, b INT", ["'b'", "'2'"]),
        ([("0", "1"), ("1.5", "0")], "a STRING, b STRING", ["'a'", "'1.5'"]),
        ([(0.0, 1), (1.0, 0), (0.5, 1)], "a DOUBLE, b INT", ["'a'", "'0.5'"]),
        ([(0, 1), (None, 0)], "a INT, b INT", ["'a'", "missing"]),
    ],
)
def test_values_that_are_not_codes_are_refused_naming_the_column(spark, rows, schema, named):
    frame = spark.createDataFrame(rows, schema)
    with pytest.raises(InputError) as info:
        SparkCounter.for_source(frame, {"a": 2, "b": 2}, spark=spark)
    assert all(part in str(info.value) for part in named), str(info.value)


@pytest.mark.slow
def test_the_counting_function_runs_where_this_package_cannot_be_imported(tmp_path):
    """Executors need NumPy and PyArrow, not privsyn_core: the function Spark ships is
    unpickled and run in a Python where importing the package fails."""
    import subprocess
    import sys

    from pyspark import cloudpickle

    from privsyn_core.measuring.counters.spark_counter import _packing, _partition_counter

    layout = _packing([3, 70])
    shipped = tmp_path / "function.pickle"
    shipped.write_bytes(cloudpickle.dumps(_partition_counter(layout, [(3, 70)], [[0, 1]], 4)))
    a, b = np.array([0, 2, 2, 1, 2]), np.array([69, 0, 0, 5, 1])
    words = a | (b << layout[1][1])
    script = f"""
import pickle, sys
import numpy as np, pyarrow as pa
sys.modules["privsyn_core"] = None  # any import of the package fails
count = pickle.loads(open({str(shipped)!r}, "rb").read())
batch = pa.RecordBatch.from_arrays([pa.array({words.tolist()}, pa.int64())], names=["w0"])
(out,) = count(iter([batch.slice(0, 2), batch.slice(2, 3)]))
print(out.column(1)[0].as_py(), np.frombuffer(out.column(2)[0].as_py(), "<i8").tolist())
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, check=False
    )
    assert done.returncode == 0, done.stderr
    expected = np.bincount(a * 70 + b, minlength=210)
    nonzero = np.flatnonzero(expected)
    assert done.stdout.split(" ", 1) == [
        "True",
        str(np.concatenate([nonzero, expected[nonzero]]).tolist()) + "\n",
    ]


def test_raw_values_read_in_spark_as_in_memory(spark, tmp_path):
    """Value classes, value counts and grid histograms of a raw CSV file in Spark SQL equal
    the in-memory reading (the same tricky values as the DuckDB tests)."""
    from test_sql_encoding import TRICKY, _csv

    from privsyn_core.data.codecs import BinnedCodec
    from privsyn_core.data.io import read_table
    from privsyn_core.measuring.counters import FrameTable
    from privsyn_core.measuring.counters.sql_encoding import spark_table
    from privsyn_core.measuring.private_domain import _grid_edges

    path = tmp_path / "tricky.csv"
    _csv(path, {"v": TRICKY, "w": list(reversed(TRICKY))})
    sql, memory = spark_table(str(path), spark=spark), FrameTable(read_table(path))
    for name in ("v", "w"):
        assert np.array_equal(sql.class_counts(name), memory.class_counts(name))
        assert sql.value_counts(name)[0] == memory.value_counts(name)[0]
    for datetime, fmt in ((False, None), (True, "%d/%m/%Y")):
        codec = BinnedCodec(
            "v", (0.0, 1.0), missing=True, datetime=datetime, datetime_format=fmt,
            unparsed="missing",
        )  # fmt: skip
        ours, theirs = sql.numbers(codec), memory.numbers(codec)
        assert ours.bounds() == theirs.bounds()
        low, high = theirs.bounds()
        for edges in (_grid_edges(), np.linspace(low, high, 9)):
            assert np.array_equal(ours.histogram(edges, True), theirs.histogram(edges, True))
            assert np.array_equal(ours.histogram(edges, False), theirs.histogram(edges, False))


def test_a_raw_table_gives_the_same_ledger_and_table_on_spark_as_in_memory(spark, tmp_path):
    """A raw CSV file (missing values, rare categories, values on and beyond bin edges,
    dates) synthesised in debug mode: numpy, and Spark from the path and from a Spark
    DataFrame, give the same ledger and the same table (DuckDB: tests/test_sql_encoding.py)."""
    from test_sql_encoding import RAW_SCHEMA, _raw_table

    from privsyn_core import synthesize
    from privsyn_core.data.io import read_table

    path = tmp_path / "raw.csv"
    _raw_table(1500, np.random.default_rng(7)).to_csv(path, index=False)
    # a DataFrame handed over is not a CSV file: its strings are values ("NA" is text), so
    # it is built from the table as read in memory, missing values as nulls
    table = read_table(path)
    frame = spark.createDataFrame(
        [tuple(None if pd.isna(v) else v for v in row) for row in table.itertuples(index=False)],
        "city string, age string, income string, joined string, when string",
    )
    runs = {
        name: synthesize(
            source, 2.0, 1e-9, engine=engine, schema=RAW_SCHEMA, spark=spark,
            rng=np.random.default_rng(5),
        )
        for name, engine, source in (
            ("numpy", "numpy", path),
            ("spark", "spark", str(path)),
            ("spark frame", "spark", frame),
        )
    }  # fmt: skip
    expected = runs.pop("numpy")
    for name, run in runs.items():
        assert run.ledger.to_json() == expected.ledger.to_json(), name
        pd.testing.assert_frame_equal(run.synthetic, expected.synthetic, obj=name)


@pytest.mark.slow
def test_spark_submit_runs_the_command_line_on_its_own_master(tmp_path, capsys):
    """The cluster command of docs/engines-and-scale.md: spark-submit launches
    ``privsyn_core/__main__.py``, which keeps spark-submit's ``--master`` and writes what the
    in-memory engine writes."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    import privsyn_core
    from privsyn_core.cli import main

    domain = ROOT / "assets" / "adult-coded-domain.json"
    common = [
        "synthesize", str(ADULT), "--domain", str(domain), "--epsilon", "1", "--seed", "3",
        "--iterations", "5", "-q", "--no-registry",
    ]  # fmt: skip
    assert main([*common, "-o", str(tmp_path / "numpy.csv")]) == 0, capsys.readouterr().err
    submit = Path(sys.executable).with_name("spark-submit")
    entry = Path(privsyn_core.__file__).with_name("__main__.py")
    python = {"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    done = subprocess.run(
        [str(submit), "--master", "local[1]", "--conf", "spark.ui.enabled=false", str(entry),
         *common, "--engine", "spark", "-o", str(tmp_path / "spark.csv")],
        env={**os.environ, **python}, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "spark.csv").read_bytes() == (tmp_path / "numpy.csv").read_bytes()


def test_spark_reads_the_file_named_never_what_its_name_matches_as_a_pattern(spark, tmp_path):
    """One test for every name (a Spark session is slow): Hadoop's FileSystem globs what
    DuckDB does and ``{a,b}``, and reads a backslash as an escape."""
    read = {}
    for i, case in enumerate(GLOB_NAMES):
        for suffix in (".csv", ".parquet"):
            path = beside_decoys(tmp_path / f"{i}{suffix}", case, suffix, decoy_column="w")
            try:
                frame, _ = spark_frame(path, spark=spark)
                read[case.name, suffix] = sorted(frame.groupBy("v").count().collect())
            except Exception as exc:  # a refusal is reported with the rest
                read[case.name, suffix] = type(exc).__name__
    wrong = {key: got for key, got in read.items() if got != [("x", ROWS)]}
    assert not wrong


def test_spark_reads_a_folder_of_parts_whose_name_holds_a_pattern(spark, tmp_path):
    for i, (name, decoy) in enumerate((("p*", "p1"), ("p{1,2}", "p2"), ("p[1]", "p1"))):
        named, other = tmp_path / str(i) / name / "t", tmp_path / str(i) / decoy / "t"
        for folder, value in ((named, "x"), (other, "DECOY")):
            folder.mkdir(parents=True)
            write_table(folder / "part-0.parquet", value, ROWS)
        frame, csv = spark_frame(named, spark=spark)
        assert (csv, sorted(frame.groupBy("v").count().collect())) == (False, [("x", ROWS)])
