"""Rows made on Spark (``local[2]``): the same rows as the local blocks, only the DP model
sent to the tasks, nothing spent, and the command line end to end (issue 23)."""

from __future__ import annotations

import io
import json
import zipfile
from dataclasses import fields, replace
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import ROOT
from test_generate_cli import raw_csv

from privsyn_core.cli import main
from privsyn_core.errors import InputError
from privsyn_core.generation.blocks import BlockSeeds
from privsyn_core.generation.fitted import FittedModel
from privsyn_core.generation.fitted_data import SamplingSettings
from privsyn_core.generation.spark_blocks import _BlockTask, output_schema, sample_spark, spark_rows
from privsyn_core.model import PrivSyn
from privsyn_core.release.bundle import load_model, model_bytes, save_model
from privsyn_core.spark_session import spark_session

ADULT = ROOT / "assets" / "adult-coded.csv"
ADULT_DOMAIN = ROOT / "assets" / "adult-coded-domain.json"


@pytest.fixture(scope="module")
def spark():
    session = spark_session("local[2]")
    yield session
    session.stop()


def mixed_table(folder: Path, n: int = 2_000) -> pd.DataFrame:
    """Text, whole numbers, decimals with blanks and dates: every type a decoder makes."""
    return pd.read_csv(raw_csv(folder, n))


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> FittedModel:
    table = mixed_table(tmp_path_factory.mktemp("mixed"))
    fitted = PrivSyn(2.0, 1e-6).fit(table, rng=np.random.default_rng(0))
    quick = replace(fitted.defaults.gum, iterations=4)
    return replace(fitted, defaults=replace(fitted.defaults, gum=quick, block_rows=400))


def read_in_file_order(folder: Path) -> pa.Table:
    """A Spark Parquet folder's parts in part-number order (the blocks' order)."""
    parts = sorted(p for p in folder.iterdir() if p.name.startswith("part-"))
    return pa.concat_tables([pq.read_table(p) for p in parts])


def as_written(frame: pd.DataFrame, schema: pa.Schema) -> pa.Table:
    return pa.Table.from_pandas(frame, schema=schema, preserve_index=False)


@pytest.mark.parametrize("rows", [1_500, 300])  # four blocks; one block (the run's own rng)
def test_spark_makes_the_rows_the_local_blocks_make(spark, model, tmp_path, rows):
    folder = tmp_path / "out.parquet"
    sample_spark(model, rows, spark, seed=7).write.parquet(str(folder))
    local = pd.concat(list(model.sample_blocks(rows, seed=7, workers=1)), ignore_index=True)
    got = read_in_file_order(folder)
    schema = output_schema(model)
    assert got.num_rows == rows
    assert got.cast(schema).equals(as_written(local, schema))


@pytest.mark.parametrize("rows", [1_000, 250])  # three blocks of rejection; one block
def test_spark_makes_the_conditional_rows_the_local_blocks_make(spark, model, tmp_path, rows):
    """Each task makes its blocks by rejection from the blocks' own seeds: the rows that
    match are the local conditional sample's, row for row, and all of them match."""
    where = {"city": "north|east", "age": "30..50"}
    folder = tmp_path / "out.parquet"
    sample_spark(model, rows, spark, seed=3, where=where).write.parquet(str(folder))
    local = model.sample(rows, seed=3, where=where, workers=1)
    got = read_in_file_order(folder)
    schema = output_schema(model)
    assert got.num_rows == rows
    assert got.cast(schema).equals(as_written(local, schema))
    made = got.to_pandas()
    assert set(made["city"]) == {"north", "east"} and made["age"].between(30, 50).all()


def test_only_the_release_bundle_and_public_settings_reach_the_tasks(spark, model, monkeypatch):
    import privsyn_core.generation.spark_blocks as module

    made: list[_BlockTask] = []
    monkeypatch.setattr(module, "_BlockTask", lambda *a: made.append(_BlockTask(*a)) or made[-1])
    spark_rows(model.generate_blocks(1_000, seed=3).plan, spark)
    (shipped,) = made  # what every task gets: these fields, nothing else
    assert {f.name for f in fields(shipped)} == {
        "bundle", "key", "settings", "sizes", "seeds", "threads", "schema", "stats", "where",
    }  # fmt: skip
    bundle = shipped.bundle.value  # the one broadcast
    assert files_of(bundle) == files_of(model_bytes(model))  # a release bundle's files ...
    assert not [n for n in files_of(bundle) if "synthetic" in n]  # ... without synthetic rows
    decoded = load_model(bundle)  # checked and decodable: the model itself
    for theirs, ours in zip(decoded.marginals, model.marginals, strict=True):
        assert theirs.attributes == ours.attributes and np.array_equal(theirs.values, ours.values)
    assert isinstance(shipped.settings, SamplingSettings) and shipped.sizes == (1_000, 3)
    assert isinstance(shipped.seeds, BlockSeeds) and shipped.seeds.single is None
    assert shipped.where == ()
    # a conditional sample adds its conditions: released values and weights per code
    made.clear()
    spark_rows(model.generate_where(1_000, {"city": "north"}, seed=3).plan, spark)
    (shipped,) = made
    assert [(c.column, c.labels) for c in shipped.where] == [("city", frozenset({"north"}))]


def files_of(bundle: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(bundle)) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def test_a_model_that_is_not_dp_is_not_sent(spark, tmp_path):
    table = mixed_table(tmp_path, 500)
    fitted = PrivSyn(1.0, 1e-6, raw_domains=True).fit(table, rng=np.random.default_rng(0))
    with pytest.raises(InputError, match="raw"):
        sample_spark(fitted, 100, spark, seed=1)


def bundle_of(folder: Path) -> Path:
    table = pd.read_csv(ADULT)
    domain = json.loads(ADULT_DOMAIN.read_text())
    path = folder / "adult.zip"
    save_model(PrivSyn(1.0, 1e-9, domain=domain).fit(table, rng=np.random.default_rng(0)), path)
    return path


def test_generate_on_spark_writes_the_local_rows_and_spends_nothing(spark, tmp_path, capsys):
    bundle = bundle_of(tmp_path)
    before = bundle.read_bytes()
    common = ["--rows", "1200", "--block-rows", "500", "--seed", "5", "--iterations", "3", "-q"]
    local, on_spark = tmp_path / "local.parquet", tmp_path / "spark.parquet"
    assert main(["generate", str(bundle), *common, "-o", str(local)]) == 0
    argv = ["generate", str(bundle), *common, "--engine", "spark", "--spark-master", "local[2]"]
    for _ in range(2):  # the second run replaces the first run's folder
        assert main([*argv, "-o", str(on_spark)]) == 0, capsys.readouterr().err
    assert on_spark.is_dir() and (on_spark / "_SUCCESS").exists()
    assert read_in_file_order(on_spark).to_pandas().equals(pd.read_parquet(local))
    assert bundle.read_bytes() == before  # read only
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary left
    # a conditional sample too: the local rows, every one matching
    where = ["--where", "sex=1", "--where", "age=20|21|22"]
    local, on_spark = tmp_path / "local-where.parquet", tmp_path / "spark-where.parquet"
    assert main(["generate", str(bundle), *common, *where, "-o", str(local)]) == 0
    assert main([*argv, *where, "-o", str(on_spark)]) == 0, capsys.readouterr().err
    made = read_in_file_order(on_spark).to_pandas()
    assert made.equals(pd.read_parquet(local)) and len(made) == 1200
    assert (made["sex"] == 1).all() and made["age"].between(20, 22).all()


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["-o", "out.csv"], "Parquet"),
        (["-o", "out.parquet", "--workers", "2"], "--workers"),
    ],
)
def test_generate_on_spark_refuses_what_it_cannot_do(tmp_path, capsys, extra, said):
    extra = [str(tmp_path / a) if a.startswith("out.") else a for a in extra]
    argv = ["generate", str(tmp_path / "none.zip"), "--engine", "spark", *extra]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert said in err and len(err.strip().splitlines()) == 1, err
    assert not list(tmp_path.iterdir())


def test_a_folder_that_is_not_an_earlier_output_is_never_replaced(tmp_path, capsys):
    kept = tmp_path / "mine.parquet"
    kept.mkdir()
    (kept / "notes.txt").write_text("mine")
    argv = ["generate", str(tmp_path / "none.zip"), "--engine", "spark", "-o", str(kept)]
    assert main(argv) == 2
    assert "notes.txt" in capsys.readouterr().err and (kept / "notes.txt").exists()


def test_synthesize_on_spark_writes_through_spark_with_the_same_rows_and_ledger(
    spark, tmp_path, capsys
):
    outputs = {}
    for engine in ("numpy", "spark"):
        out, ledger = tmp_path / f"{engine}.parquet", tmp_path / f"{engine}.json"
        bundle = tmp_path / f"{engine}.zip"
        argv = [
            "synthesize", str(ADULT), "--domain", str(ADULT_DOMAIN), "--epsilon", "1",
            "--seed", "3", "--iterations", "3", "--rows", "1100", "--block-rows", "400", "-q",
            "--no-registry", "--engine", engine, "-o", str(out), "--ledger", str(ledger),
            "--spark-master", "local[2]", "--bundle", str(bundle),
        ]  # fmt: skip
        assert main(argv) == 0, capsys.readouterr().err
        table = read_in_file_order(out).to_pandas() if out.is_dir() else pd.read_parquet(out)
        outputs[engine] = (table, json.loads(ledger.read_text()), load_model(bundle).ledger)
    assert (tmp_path / "spark.parquet").is_dir()  # Spark wrote it: a folder of parts
    assert outputs["numpy"][0].equals(outputs["spark"][0])
    assert outputs["numpy"][1] == outputs["spark"][1]  # generation spent nothing more
    assert outputs["numpy"][2].spent_rho == outputs["spark"][2].spent_rho


def test_synthesize_on_spark_refuses_raw_domains_before_spending(tmp_path, capsys):
    table = raw_csv(tmp_path, 200)
    argv = [
        "synthesize", str(table), "--epsilon", "1", "--engine", "spark", "--raw-domains",
        "--no-registry", "-o", str(tmp_path / "out.parquet"),
    ]  # fmt: skip
    assert main(argv) == 2
    assert "--raw-domains" in capsys.readouterr().err
    assert not (tmp_path / "out.parquet").exists()
