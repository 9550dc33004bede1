"""``privsyn generate RELEASE.zip --rows N -o OUT.csv``: more rows from a release, for free.

It reads the bundle and nothing else: the run registry's runs and totals are the same before
and after, and it works with the registry unusable. Its output has the rows asked for and the
release's columns and types. (Refusals, one line each with no file left behind, are cases of
``tests/test_hostile_input.py``.)
"""

import io
import zipfile
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import privsyn_core.release.registry as registry_module
from privsyn_core.cli import main
from privsyn_core.generation import sample_blocks
from privsyn_core.generation.mrf import MrfSettings
from privsyn_core.model import PrivSyn
from privsyn_core.release.bundle import load_model, save_model
from privsyn_core.release.registry import Registry, file_fingerprint


def raw_csv(folder: Path, n: int = 3000) -> Path:
    rng = np.random.default_rng(0)
    age = rng.integers(18, 80, n)
    table = pd.DataFrame(
        {
            "city": rng.choice(["north", "south", "east"], n),
            "age": age,
            "income": (age * 900 + rng.normal(0, 5000, n)).round(2),
            "joined": (
                pd.Timestamp("2020-01-01") + pd.to_timedelta(rng.integers(0, 700, n), unit="D")
            ).strftime("%Y-%m-%d"),
        }
    )
    table.loc[rng.choice(n, 30, replace=False), "income"] = None
    path = folder / "private.csv"
    table.to_csv(path, index=False)
    return path


@pytest.fixture
def release(tmp_path: Path) -> tuple[Path, Path]:
    """A raw table synthesised once through the CLI (recorded in the registry) with its
    bundle; returns (table, bundle)."""
    table = raw_csv(tmp_path)
    bundle = tmp_path / "release.zip"
    argv = [
        "synthesize", str(table), "--epsilon", "2", "--iterations", "10", "-q",
        "-o", str(tmp_path / "first.csv"), "--bundle", str(bundle),
    ]  # fmt: skip
    assert main(argv) == 0
    return table, bundle


@pytest.mark.slow
def test_generate_spends_nothing_and_leaves_the_registry_as_it_was(release, tmp_path, capsys):
    table, bundle = release
    registry = Registry()
    dataset = file_fingerprint(table)
    runs_before = registry.runs()
    spent_before = registry.budget(dataset).spent.rho
    assert len(runs_before) == 1 and spent_before > 0
    capsys.readouterr()
    for seed in ("1", "2"):
        out = tmp_path / f"more-{seed}.csv"
        assert (
            main(["generate", str(bundle), "--rows", "5000", "-o", str(out), "--seed", seed]) == 0
        )
    err = capsys.readouterr().err
    assert "spent no privacy budget" in err and "5000 synthetic rows" in err
    assert registry.runs() == runs_before
    assert registry.budget(dataset).spent.rho == spent_before


@pytest.mark.slow
def test_generate_reads_only_the_bundle(release, tmp_path, monkeypatch):
    table, bundle = release
    table.unlink()  # the private table is gone

    def no_registry(*args, **kwargs):
        raise AssertionError("generate opened the run registry")

    monkeypatch.setattr(registry_module.Registry, "__init__", no_registry)
    out = tmp_path / "more.csv"
    assert main(["generate", str(bundle), "-o", str(out), "-q"]) == 0
    assert out.is_file()


@pytest.mark.slow
def test_the_output_has_the_rows_asked_for_and_the_release_columns_and_types(release, tmp_path):
    _, bundle = release
    with zipfile.ZipFile(bundle) as archive:
        released = pd.read_csv(io.BytesIO(archive.read("synthetic.csv")))
    for rows in ("1", "777", "20000"):
        out = tmp_path / f"out-{rows}.csv"
        argv = ["generate", str(bundle), "--rows", rows, "-o", str(out), "--seed", "0", "-q"]
        assert main(argv) == 0
        sample = pd.read_csv(out)
        assert len(sample) == int(rows)
        assert list(sample.columns) == list(released.columns)
        if int(rows) > 100:  # enough rows for every column to show its type
            # missing cells are measured privately on every column (this real table has
            # none in most): a few may come out, and make an integer column a float one
            numeric = {c: pd.api.types.is_numeric_dtype(t) for c, t in sample.dtypes.items()}
            assert numeric == {
                c: pd.api.types.is_numeric_dtype(t) for c, t in released.dtypes.items()
            }
            joined = sample["joined"]
            assert pd.to_datetime(joined.dropna(), format="%Y-%m-%d").notna().all()
            assert joined.isna().mean() < 0.05, "the real column has no missing value"


@pytest.mark.slow
def test_the_same_seed_and_settings_give_the_same_file(adult, tmp_path):
    """On Adult, whose marginal graph leaves GUM work to do (on a small table every
    attribute may be appended, and GUM's settings then change nothing)."""
    table, domain = adult
    bundle = tmp_path / "adult.zip"
    model = PrivSyn(1.0, 1e-9, domain=domain).fit(table, rng=np.random.default_rng(0))
    save_model(model, bundle)
    outputs = []
    for name, extra in [
        ("a", ["--seed", "4"]),
        ("b", ["--seed", "4"]),
        ("c", ["--seed", "5"]),
        ("d", ["--seed", "4", "--iterations", "0"]),
        ("e", ["--seed", "4", "--strategy", "duplicate", "--decay", "0.5"]),
    ]:
        out = tmp_path / f"{name}.csv"
        assert main(["generate", str(bundle), "--rows", "2000", "-o", str(out), "-q", *extra]) == 0
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1]
    assert len(set(outputs)) == 4  # another seed, or other GUM settings, another table


@pytest.mark.slow
def test_a_runs_export_bundle_samples_like_the_bundle_written_by_synthesize(release, tmp_path):
    _, bundle = release
    exported = tmp_path / "exported.zip"
    assert main(["runs", "export", "1", "-o", str(exported)]) == 0
    outs = [tmp_path / "x.csv", tmp_path / "y.csv"]
    for source, out in zip((bundle, exported), outs, strict=True):
        assert main(["generate", str(source), "--rows", "300", "-o", str(out), "-q"]) == 0
    assert len(pd.read_csv(outs[1])) == 300


# Blocks, workers and streamed output (issue 23)


@pytest.fixture(scope="module")
def adult_bundle(tmp_path_factory) -> Path:
    table = pd.read_csv(Path(__file__).resolve().parent.parent / "assets" / "adult-coded.csv")
    domain = {
        c: int(table[c].max()) + 1 for c in table.columns
    }  # public enough for a test: the file's own codes
    bundle = tmp_path_factory.mktemp("adult") / "adult.zip"
    model = PrivSyn(1.0, 1e-9, domain=domain).fit(table, rng=np.random.default_rng(0))
    save_model(model, bundle)
    return bundle


def generated(bundle: Path, out: Path, *extra: str) -> Path:
    argv = ["generate", str(bundle), "-o", str(out), "-q", "--seed", "3", *extra]
    assert main(argv) == 0
    return out


@pytest.mark.slow
def test_blocks_written_as_made_are_the_in_memory_sample_on_any_worker_count(
    adult_bundle, tmp_path
):
    blocks = ["--rows", "5000", "--block-rows", "2000", "--iterations", "5"]
    one = generated(adult_bundle, tmp_path / "one.csv", *blocks, "--workers", "1")
    two = generated(adult_bundle, tmp_path / "two.csv", *blocks, "--workers", "2")
    assert one.read_bytes() == two.read_bytes()
    model = load_model(adult_bundle)
    settings = replace(
        model.defaults, gum=replace(model.defaults.gum, iterations=5), block_rows=2000
    )
    memory = model.generate(5000, seed=3, settings=settings, workers=1).table
    assert one.read_text() == memory.to_csv(index=False)
    parquet = generated(adult_bundle, tmp_path / "two.parquet", *blocks, "--workers", "2")
    pd.testing.assert_frame_equal(pd.read_parquet(parquet), memory)
    other = generated(adult_bundle, tmp_path / "other.csv", "--rows", "5000", "--iterations", "5")
    assert other.read_bytes() != one.read_bytes()  # another block size, other rows


def test_a_failure_mid_stream_leaves_no_file_and_the_old_one_as_it_was(
    adult_bundle, tmp_path, monkeypatch, capsys
):
    calls = []
    draw = sample_blocks._BlockDraw.__call__

    def second_fails(self, rows, rng):
        calls.append(rows)
        if len(calls) == 2:
            raise RuntimeError("block 2 failed")
        return draw(self, rows, rng)

    monkeypatch.setattr(sample_blocks._BlockDraw, "__call__", second_fails)
    for name in ("out.csv", "out.parquet"):
        calls.clear()
        out = tmp_path / name
        out.write_text("the previous table")
        argv = ["generate", str(adult_bundle), "-o", str(out), "-q", "--rows", "3000",
                "--block-rows", "1000", "--workers", "1", "--iterations", "2"]  # fmt: skip
        assert main(argv) == 70
        assert "block 2 failed" in capsys.readouterr().err
        assert out.read_text() == "the previous table"
        assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".part")] == []


@pytest.mark.parametrize(
    ("option", "value"),
    [("--workers", "0"), ("--workers", "-2"), ("--workers", "two"), ("--block-rows", "0")],
)
def test_bad_workers_or_block_size_is_one_line_and_status_2(
    adult_bundle, tmp_path, capsys, option, value
):
    out = tmp_path / "out.csv"
    assert main(["generate", str(adult_bundle), "-o", str(out), option, value]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and option in err and not out.exists()


def test_rows_beyond_memory_are_made_in_blocks_and_refused_only_beyond_the_disk(
    adult_bundle, tmp_path, monkeypatch, capsys
):
    """10^11 rows would need terabytes of memory at once; in blocks they need a few blocks'
    memory, and the disk check refuses them after the first block, with no file left."""
    import privsyn_core.data.streamed as streamed

    real = streamed.shutil.disk_usage
    monkeypatch.setattr(streamed.shutil, "disk_usage", lambda path: real(path)._replace(free=10**9))
    out = tmp_path / "huge.csv"
    argv = ["generate", str(adult_bundle), "-o", str(out), "--rows", "100000000000",
            "--block-rows", "1000", "--workers", "1", "--iterations", "1"]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "100,000,000,000 rows need about" in err and "fewer rows" in err
    assert not out.exists() and [p for p in tmp_path.iterdir() if p.name.endswith(".part")] == []


@pytest.mark.slow
def test_synthesize_streams_its_blocks_and_bundles_the_model_without_them(tmp_path):
    table = raw_csv(tmp_path, n=3000)
    out, bundle = tmp_path / "out.parquet", tmp_path / "release.zip"
    argv = ["synthesize", str(table), "--epsilon", "2", "--iterations", "3", "-q",
            "--seed", "1", "--rows", "2500", "--block-rows", "1000", "--workers", "2",
            "--no-registry", "-o", str(out), "--bundle", str(bundle)]  # fmt: skip
    assert main(argv) == 0
    assert len(pd.read_parquet(out)) == 2500
    with zipfile.ZipFile(bundle) as archive:
        assert "synthetic.csv" not in archive.namelist()  # the rows are in -o
    again = tmp_path / "again.parquet"
    assert main([*argv[:-4], "-o", str(again), "--workers", "1"]) == 0
    pd.testing.assert_frame_equal(pd.read_parquet(again), pd.read_parquet(out))
    small = tmp_path / "small.csv"
    argv = ["synthesize", str(table), "--epsilon", "2", "--iterations", "3", "-q",
            "--seed", "1", "--no-registry", "-o", str(small), "--bundle", str(bundle)]  # fmt: skip
    assert main(argv) == 0  # one block: the bundle holds the rows, as before blocks
    with zipfile.ZipFile(bundle) as archive:
        assert archive.read("synthetic.csv") == small.read_bytes()


def test_the_summary_counts_gum_iterations_and_mrf_sweeps_apart():
    from types import SimpleNamespace

    from privsyn_core.commands import _iterations
    from privsyn_core.generation.gum import GumIterationRecord

    gum = [GumIterationRecord(t, 1.0, {}, 0.0) for t in range(6)]
    mrf = [GumIterationRecord(6 + t, 0.1, {}, 0.0, None, "mrf") for t in range(40)]
    one = SimpleNamespace(history=gum, blocks=1, block_iterations=(6,))
    assert _iterations(one) == "6 GUM iterations"
    both = SimpleNamespace(history=gum + mrf, blocks=1, block_iterations=(46,))
    assert _iterations(both) == "6 GUM iterations and 40 MRF sweeps"
    blocks = SimpleNamespace(history=gum + mrf, blocks=3, block_iterations=(46, 45, 44))
    assert _iterations(blocks) == "3 blocks of 44-46 GUM iterations and MRF sweeps"


@pytest.mark.slow
def test_generate_takes_another_synthesis_than_the_releases(release, tmp_path, capsys):
    _, bundle = release
    capsys.readouterr()
    out = tmp_path / "mrf.csv"
    argv = ["generate", str(bundle), "--rows", "800", "-o", str(out), "--seed", "1"]
    assert main([*argv, "--synthesis", "mrf"]) == 0
    assert f"0 GUM iterations and {MrfSettings().sweeps} MRF sweeps" in capsys.readouterr().err
    assert main([*argv[:5], str(tmp_path / "gum.csv"), *argv[6:]]) == 0
    assert "MRF" not in capsys.readouterr().err  # the release's setting: a narrow table, GUM
