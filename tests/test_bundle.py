import hashlib
import io
import json
import sqlite3
import zipfile

import numpy as np
import pandas as pd
import pytest

from privsyn_core import synthesize
from privsyn_core.cli import main
from privsyn_core.errors import InputError
from privsyn_core.release.bundle import bundle_bytes
from privsyn_core.release.registry import Registry

SECRET = "Zebediah-Quux-4417"
EXTREME = 987654321.0


@pytest.fixture(scope="module")
def planted() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    n = 5000
    table = pd.DataFrame(
        {
            "city": rng.choice(["north", "south", "east"], n),
            "age": rng.integers(18, 80, n),
            "income": rng.normal(50_000, 10_000, n).round(2),
        }
    )
    table.loc[17, "city"] = SECRET
    table.loc[42, "income"] = EXTREME
    return table


def files_of(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def test_bundle_holds_the_dp_products_with_a_verifiable_manifest(planted):
    result = synthesize(planted, 4.0, 1e-9)
    files = files_of(bundle_bytes(result))
    assert set(files) == {
        "synthetic.csv", "marginals.json", "schema.json", "ledger.json", "config.json",
        "versions.json", "model.json", "manifest.json",
    }  # fmt: skip
    manifest = json.loads(files["manifest.json"])
    assert manifest["randomness"] == "release" and manifest["for_release"] is True
    for name, digest in manifest["files"].items():
        assert hashlib.sha256(files[name]).hexdigest() == digest
    marginals = json.loads(files["marginals.json"])
    assert {tuple(m["attributes"]) for m in marginals} >= {("city",), ("age",), ("income",)}
    assert all(len(m["noisy_counts"]) == np.prod(m["shape"]) for m in marginals)
    ledger = json.loads(files["ledger.json"])
    assert ledger["spent_rho"] == pytest.approx(ledger["budget_rho"])
    synthetic = pd.read_csv(io.BytesIO(files["synthetic.csv"]))
    assert list(synthetic.columns) == list(planted.columns)


def test_a_planted_unique_value_and_outlier_never_reach_the_bundle_or_registry(planted, tmp_path):
    source = tmp_path / "planted.csv"
    planted.to_csv(source, index=False)
    bundle = tmp_path / "release.zip"
    argv = [
        "synthesize", str(source), "--epsilon", "4", "--iterations", "10", "-q",
        "-o", str(tmp_path / "syn.csv"), "--bundle", str(bundle),
    ]  # fmt: skip
    assert main(argv) == 0
    files = files_of(bundle.read_bytes())
    for name, data in files.items():
        text = data.decode()
        assert SECRET not in text, name
        assert "987654321" not in text, name
    registry = Registry()
    dump = "\n".join(sqlite3.connect(registry.path).iterdump())
    assert SECRET not in dump and "987654321" not in dump
    stored = registry.bundle(registry.runs()[-1].id)
    assert stored == bundle.read_bytes()  # the release can be re-downloaded without a rerun


def test_debug_runs_are_marked_and_raw_domain_runs_cannot_be_bundled(planted):
    debug = synthesize(planted, 4.0, 1e-9, rng=np.random.default_rng(1))
    manifest = json.loads(files_of(bundle_bytes(debug))["manifest.json"])
    assert manifest["for_release"] is False and "not for release" in manifest["randomness"]
    raw = synthesize(planted, 4.0, 1e-9, raw_domains=True, rng=np.random.default_rng(1))
    with pytest.raises(InputError, match="cannot be bundled"):
        bundle_bytes(raw)


def test_excluded_columns_are_named_without_their_reasons(planted):
    from privsyn_core.data.schema import ColumnSchema, Kind, infer_schema

    table = planted.assign(id=[f"row-{i}" for i in range(len(planted))])
    schema = infer_schema(table.drop(index=[17, 42]))  # a draft: its reasons quote counts
    # keep the planted city value private: estimate city's categories instead of declaring them
    private_city = schema.with_column(ColumnSchema("city", Kind.CATEGORICAL))
    result = synthesize(table, 4.0, 1e-9, schema=private_city)
    released = json.loads(files_of(bundle_bytes(result))["schema.json"])
    excluded = [c for c in released if "excluded" in c]
    assert excluded == [{"name": "id", "excluded": True}]
    assert "distinct" not in json.dumps(released)
