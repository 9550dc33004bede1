"""The release as data and as a page (issue 26, items 3 and 5): ``privsyn marginals`` writes
the noisy marginals of a bundle as labelled CSV files, and the bundle's ``report.html`` (also
``privsyn report``) says what the release is from its DP content alone."""

import io
import json
import re
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import edited_bundle

from privsyn_core import PrivSynConfig, synthesize
from privsyn_core.cli import main
from privsyn_core.data.atomic import write_folder_atomically
from privsyn_core.release.bundle import BundleError, bundle_bytes, load_model, load_release
from privsyn_core.release.marginal_files import marginal_files
from privsyn_core.release.report import release_report

HOSTILE = "<script>alert(1)</script>"
SECRET = "Zebediah-Quux-4417"
ROWS = 4817


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    city = rng.choice(["north", "south", "=HYPERLINK(1)"], ROWS)
    frame = pd.DataFrame(
        {
            "city": city,
            HOSTILE: np.where(
                city == "north", rng.integers(18, 40, ROWS), rng.integers(30, 80, ROWS)
            ),
            "../income": rng.normal(50_000, 10_000, ROWS).round(2),
        }
    )
    frame.loc[17, "city"] = SECRET
    return frame


@pytest.fixture(scope="module")
def bundle(table: pd.DataFrame, tmp_path_factory: pytest.TempPathFactory) -> Path:
    # no appending: the tree-shaped selection of three columns would leave GUM nothing to
    # iterate, and the report's convergence curve is part of what is tested
    config = PrivSynConfig(append_attributes=False)
    result = synthesize(table, 4.0, 1e-9, config=config, rng=np.random.default_rng(1))
    path = tmp_path_factory.mktemp("release") / "release.zip"
    path.write_bytes(bundle_bytes(result))
    return path


def members(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def test_marginals_round_trip_the_models_counts_labelled_as_a_dp_release(bundle, tmp_path, capsys):
    out = tmp_path / "marginals"
    assert main(["marginals", str(bundle), "-o", str(out)]) == 0
    assert "differentially private release" in capsys.readouterr().err
    model = load_model(bundle)
    readme = (out / "README.txt").read_text()
    assert readme.startswith("DIFFERENTIALLY PRIVATE RELEASE")
    assert "NOT FOR RELEASE" in readme  # a seeded run: debug noise
    assert f"rho {model.ledger.spent_rho:.6g}" in readme
    index = pd.read_csv(out / "index.csv")
    assert set(index["release"]) == {"differentially private"}
    assert all(name.startswith("dp-") for name in index["file"])
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [*index["file"], "README.txt", "index.csv"]
    )
    d = len(model.engine)
    consistent = (*model.one_way, *model.marginals)
    for row in index.itertuples():
        frame = pd.read_csv(out / row.file, keep_default_na=False)
        number = row.number - 1
        if row.stage == "noisy":
            table, measured = model.noisy[number].table, model.noisy[number]
            assert row.sigma == pytest.approx(measured.sigma)
            assert row.values == ("released values" if number < d else "merged values")
        else:
            table = consistent[number]
        assert json.loads(row.columns) == list(table.attributes)
        assert list(frame.columns[:-1]) == list(table.attributes)
        assert frame.iloc[:, -1].to_numpy() == pytest.approx(table.values, rel=1e-12, abs=1e-9)
    # values decoded as the synthetic table writes them: categories, bins, whole-number ranges
    city = pd.read_csv(out / "dp-noisy-01-city.csv", keep_default_na=False)
    assert {"north", "south"} <= set(city["city"]) and SECRET not in set(city["city"])
    income = pd.read_csv(out / index["file"][2])["../income"].dropna()  # and a missing code
    assert income.str.fullmatch(r"\[[-0-9.]+, [-0-9.]+\)").all()
    ages = pd.read_csv(out / index["file"][1], dtype=str).dropna()
    assert ages[HOSTILE].str.fullmatch(r"\d+( to \d+)?").all()


def test_marginal_file_names_are_safe_whatever_the_column_names(bundle):
    files, found = marginal_files(load_model(bundle), "release.zip")
    for name in files:
        assert re.fullmatch(r"[A-Za-z0-9_.-]+", name) and not name.startswith(".")
    assert "dp-noisy-02-script_alert_1_script.csv" in files
    # a category a spreadsheet would run: named in the warning, verbatim unless asked
    assert found and "=HYPERLINK(1)" in files["dp-noisy-01-city.csv"].decode()
    escaped, _ = marginal_files(load_model(bundle), "release.zip", escape_formulas=True)
    assert "'=HYPERLINK(1)" in escaped["dp-noisy-01-city.csv"].decode()


def test_marginals_refuses_a_folder_with_files_a_file_and_a_bad_bundle(bundle, tmp_path, capsys):
    full = tmp_path / "full"
    full.mkdir()
    (full / "mine.txt").write_text("keep me")
    assert main(["marginals", str(bundle), "-o", str(full)]) == 2
    err = capsys.readouterr().err
    assert "not empty" in err and "new folder name" in err
    assert [p.name for p in full.iterdir()] == ["mine.txt"]
    file = tmp_path / "file.csv"
    file.write_text("x")
    assert main(["marginals", str(bundle), "-o", str(file)]) == 2
    assert "it is a file" in capsys.readouterr().err and file.read_text() == "x"
    assert main(["marginals", str(tmp_path / "none.zip"), "-o", str(tmp_path / "a")]) == 2
    assert "no such file" in capsys.readouterr().err
    assert main(["marginals", str(file), "-o", str(tmp_path / "b")]) == 2
    assert "not a zip file" in capsys.readouterr().err
    assert main(["marginals", str(bundle), "-o", str(tmp_path / "no" / "c")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file.csv", "full"]  # nothing partial
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["marginals", str(bundle), "-o", str(empty), "-q"]) == 0
    assert (empty / "README.txt").is_file()


def test_a_folder_that_fails_half_way_leaves_nothing(tmp_path):
    with pytest.raises(ValueError):
        write_folder_atomically({"a.csv": b"1", "../b.csv": b"2"}, tmp_path / "out")
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "x").write_text("x")
    with pytest.raises(OSError):
        write_folder_atomically({"a.csv": b"1"}, tmp_path / "out")
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["out", "x"]


def test_the_bundle_holds_its_report_and_the_cli_makes_the_same_page(bundle, tmp_path):
    files = members(bundle)
    assert {"report.html", "convergence.json"} <= set(files)
    assert json.loads(files["manifest.json"])["files"]["report.html"]
    out = tmp_path / "report.html"
    assert main(["report", str(bundle), "-o", str(out)]) == 0
    assert out.read_bytes() == files["report.html"]


def test_the_report_has_its_sections_and_only_dp_content(bundle, table):
    page = members(bundle)["report.html"].decode()
    for section in (
        "Privacy budget", "Privacy ledger", "Selected marginals", "Dependency graph",
        "GUM convergence", "Structural choices", "Settings",
    ):  # fmt: skip
        assert f"<h2>{section}</h2>" in page
    assert "<svg" in page and "<polyline" in page  # the graph and the curve, inline
    assert "chosen by <code>auto</code> (narrow table (" in page  # the default, and why
    assert not re.search(r"<script|src=|href=|@import|url\(", page, re.I)  # offline, no JS
    assert HOSTILE not in page and html_escaped(HOSTILE) in page
    model = load_model(bundle)
    assert f"{model.default_rows:,}" in page  # the noisy row count, labelled as such
    if model.default_rows != ROWS:
        assert str(ROWS) not in page and f"{ROWS:,}" not in page  # never the real one
    assert SECRET not in page
    real_max = table["../income"].max()
    assert f"{real_max:.6g}" not in page and str(real_max) not in page


def html_escaped(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def test_old_bundles_without_report_or_convergence_still_load(bundle):
    data = bundle.read_bytes()
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        files = {n: archive.read(n) for n in archive.namelist()}
    for name in ("report.html", "convergence.json"):
        del files[name]
    manifest = json.loads(files["manifest.json"])
    for name in ("report.html", "convergence.json"):
        del manifest["files"][name]
    files["manifest.json"] = json.dumps(manifest).encode()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, content in files.items():
            archive.writestr(name, content)
    release = load_release(buffer.getvalue())
    assert release.convergence is None
    page = release_report(release.model, convergence=release.convergence)
    assert "holds no record of GUM" in page


@pytest.mark.parametrize(
    "convergence, why",
    [
        ({"mean_l1": [0.1, 7.0]}, "numbers from 0 to 2"),
        ({"mean_l1": "0.1"}, "numbers from 0 to 2"),
        ({"mean_l1": [0.1] * 20_002}, "more than the"),
    ],
)
def test_an_edited_convergence_record_is_refused(bundle, convergence, why):
    edited = edited_bundle(
        bundle.read_bytes(), "convergence.json", lambda _: json.dumps(convergence).encode()
    )
    with pytest.raises(BundleError, match=why):
        load_release(edited)
    load_model(bundle)  # the original still loads
