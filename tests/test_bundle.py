import hashlib
import io
import json
import re
import sqlite3
import zipfile
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd
import pytest
from conftest import edited_bundle

from privsyn_core import FittedModel, GumSettings, PrivSyn, PrivSynConfig, synthesize
from privsyn_core.cli import main
from privsyn_core.errors import InputError
from privsyn_core.privacy.conversion import epsilon_from_rho, rho_from_epsilon_delta
from privsyn_core.privacy.ledger import noise_rho, recomputed
from privsyn_core.release.bundle import (
    BundleError,
    bundle_bytes,
    load_model,
    model_bytes,
    save_model,
)
from privsyn_core.release.pricing import ledger_from_json
from privsyn_core.release.registry import Registry

SECRET = "Zebediah-Quux-4417"
EXTREME = 987654321.0


def people(n: int, rng: np.random.Generator) -> pd.DataFrame:
    """A raw table of ``n`` people: a city, a whole-number age and an income to the cent."""
    return pd.DataFrame(
        {
            "city": rng.choice(["north", "south", "east"], n),
            "age": rng.integers(18, 80, n),
            "income": rng.normal(50_000, 10_000, n).round(2),
        }
    )


@pytest.fixture(scope="module")
def planted() -> pd.DataFrame:
    table = people(5000, np.random.default_rng(0))
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
        "versions.json", "model.json", "convergence.json", "report.html", "manifest.json",
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


@pytest.mark.slow
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


@pytest.mark.slow
def test_debug_runs_are_marked_and_raw_domain_runs_cannot_be_bundled(planted):
    debug = synthesize(planted, 4.0, 1e-9, rng=np.random.default_rng(1))
    manifest = json.loads(files_of(bundle_bytes(debug))["manifest.json"])
    assert manifest["for_release"] is False and "not for release" in manifest["randomness"]
    raw = synthesize(planted, 4.0, 1e-9, raw_domains=True, rng=np.random.default_rng(1))
    with pytest.raises(InputError, match="cannot be bundled"):
        bundle_bytes(raw)


def test_excluded_columns_are_named_without_their_reasons(planted):
    from privsyn_core.data.schema import ColumnSchema, Kind, infer_schema

    table = planted.assign(id=[f"row-{i}" for i in range(len(planted))], note="same")
    schema = infer_schema(table.drop(index=[17, 42]))  # a draft: its reasons quote counts
    # keep the planted city value private: estimate city's categories instead of declaring them
    private_city = schema.with_column(ColumnSchema("city", Kind.CATEGORICAL))
    result = synthesize(table, 4.0, 1e-9, schema=private_city)
    released = json.loads(files_of(bundle_bytes(result))["schema.json"])
    excluded = [c for c in released if "excluded" in c]
    assert excluded == [{"name": "note", "excluded": True}]  # constant: "one value" in the draft
    # the draft's identifier is released as one, by name alone
    ids = [c for c in released if c.get("kind") == "identifier"]
    assert [c["name"] for c in ids] == ["id"]
    assert "distinct" not in json.dumps(released) and "one value" not in json.dumps(released)


# --- a bundle's price is recomputed from its noise, and a price that disagrees is refused ---

EDITED = "the bundle was edited after it was written"
FIX = "'privsyn runs export'"
FAST = PrivSynConfig(gum=GumSettings(iterations=5, patience=None))


@pytest.fixture(scope="module")
def small_model() -> FittedModel:
    """Epsilon 1 on a small raw table (debug seed): every step records a measurement
    (structure, categories, range, 1-way, InDif, marginals)."""
    table = people(1500, np.random.default_rng(3))
    return PrivSyn(1.0, 1e-9, config=FAST).fit(table, rng=np.random.default_rng(0))


def rehashed(data: bytes, name: str, edit: Callable[[Any], Any]) -> bytes:
    """``data`` (a bundle) with the JSON file ``name`` edited and its SHA-256 in the manifest
    updated, as anyone can: the checksums still hold."""

    def edited(content: bytes) -> bytes:
        value = json.loads(content)
        return json.dumps(edit(value) or value).encode()

    return edited_bundle(data, name, edited)


def first(entries: list[dict], step: str) -> dict:
    return next(e for e in entries if e["step"] == step)


def consistent_reprice(ledger: dict) -> dict:
    """The ledger with its first marginal measured at twice the sigma (a quarter of the rho),
    every total and conversion rewritten to match: only marginals.json still disagrees."""
    parsed = ledger_from_json(ledger)
    entries = list(parsed.entries)
    k = next(i for i, e in enumerate(entries) if e.step == "marginal")
    entries[k] = replace(entries[k], sigma=2 * entries[k].sigma, rho=entries[k].rho / 4)
    return replace(parsed, entries=tuple(entries)).to_json()


def budget_below_spend(ledger: dict) -> None:
    ledger["budget_rho"] = ledger["spent_rho"] / 2
    ledger["epsilon"] = epsilon_from_rho(ledger["budget_rho"], 1e-9 - ledger["reserved_delta"])


TAMPERED = [
    ("ledger epsilon", "ledger.json", lambda d: d.update(epsilon=0.01), "says epsilon 0.01"),
    (
        "ledger spent epsilon",
        "ledger.json",
        lambda d: d.update(spent_epsilon=0.01),
        "says epsilon spent 0.01",
    ),
    (
        "ledger rho of one entry",
        "ledger.json",
        lambda d: first(d["measurements"], "marginal").update(rho=1e-6),
        "charges rho 1e-06 for the marginal measurement",
    ),
    (
        "ledger sigma only",
        "ledger.json",
        lambda d: first(d["measurements"], "indif").update(sigma=1e6),
        "but its noise (sigma 1e+06",
    ),
    (
        "ledger re-priced, marginals not",
        "ledger.json",
        consistent_reprice,
        "that no measurement in its ledger paid for",
    ),
    (
        "marginals sigma only",
        "marginals.json",
        lambda d: d[-1].update(sigma=d[-1]["sigma"] * 2),
        "marginals.json says rho",
    ),
    (
        "marginals sigma and rho",
        "marginals.json",
        lambda d: d[0].update(sigma=d[0]["sigma"] * 2, rho=d[0]["rho"] / 4),
        "that no measurement in its ledger paid for",
    ),
    (
        "marginal left out",
        "marginals.json",
        lambda d: d[:-1],
        "noisy marginals and its model is fitted to",
    ),
    ("budget below spend", "ledger.json", budget_below_spend, "more than that"),
    (
        "NaN rho",
        "ledger.json",
        lambda d: first(d["measurements"], "structure").update(rho=float("nan")),
        "not a positive number",
    ),
    (
        "negative sigma",
        "ledger.json",
        lambda d: first(d["measurements"], "one_way").update(sigma=-1.0),
        "not a positive number",
    ),
]


@pytest.mark.parametrize(
    ("name", "file", "edit", "says"), TAMPERED, ids=[case[0] for case in TAMPERED]
)
def test_a_bundle_whose_price_was_edited_and_rehashed_is_refused(
    name, file, edit, says, small_model, tmp_path
):
    path = tmp_path / "r.zip"
    path.write_bytes(rehashed(model_bytes(small_model), file, edit))
    with pytest.raises(BundleError) as refused:
        load_model(path)
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: its "), message
    assert says in message and EDITED in message and FIX in message, message
    if name == "ledger epsilon":  # names what the noise means
        assert "mean epsilon 1 (rho" in message, message


def test_a_bundle_without_its_marginals_cannot_have_its_price_checked(small_model, tmp_path):
    files = files_of(model_bytes(small_model))
    del files["marginals.json"]
    manifest = json.loads(files["manifest.json"])
    del manifest["files"]["marginals.json"]
    files["manifest.json"] = json.dumps(manifest).encode()
    path = tmp_path / "r.zip"
    with zipfile.ZipFile(path, "w") as archive:
        for n, content in files.items():
            archive.writestr(n, content)
    with pytest.raises(BundleError, match=r"holds no marginals\.json.*price cannot be checked"):
        load_model(path)


def test_an_untouched_bundle_prints_the_price_its_noise_means(small_model, tmp_path, capsys):
    reported = small_model.ledger.spent_epsilon()
    assert reported == pytest.approx(1.0)
    path = tmp_path / "r.zip"
    path.write_bytes(model_bytes(small_model))
    loaded = load_model(path).ledger
    assert loaded == recomputed(small_model.ledger)
    assert loaded.epsilon == pytest.approx(reported, rel=1e-9)
    assert loaded.spent_rho == pytest.approx(small_model.ledger.spent_rho, rel=1e-9)
    assert [e.rho for e in loaded.entries] == pytest.approx(
        [e.rho for e in small_model.ledger.entries], rel=1e-9
    )
    out = tmp_path / "more.csv"
    assert main(["generate", str(path), "-o", str(out), "--rows", "50", "--seed", "0"]) == 0
    assert re.search(r"the release cost epsilon=1\b", capsys.readouterr().err)


def test_a_stated_budget_above_the_spend_prints_the_spend(small_model, tmp_path, capsys):
    """A ledger may state a budget larger than its measurements spent (that claims no less
    than the noise means); the price printed is what was spent, not the budget."""

    def larger_budget(ledger: dict) -> None:
        delta = ledger["delta"] - ledger["reserved_delta"]
        ledger.update(epsilon=2.0, budget_rho=rho_from_epsilon_delta(2.0, delta))
        ledger["conversions"]["rho_from_epsilon_delta"].update(
            epsilon=2.0, rho=ledger["budget_rho"]
        )

    path = tmp_path / "r.zip"
    path.write_bytes(rehashed(model_bytes(small_model), "ledger.json", larger_budget))
    assert load_model(path).ledger.epsilon == pytest.approx(1.0, rel=1e-9)
    out = tmp_path / "more.csv"
    assert main(["generate", str(path), "-o", str(out), "--rows", "50", "--seed", "0"]) == 0
    assert re.search(r"the release cost epsilon=1\b", capsys.readouterr().err)


@pytest.mark.parametrize(
    ("config", "seeded"),
    [
        (FAST, True),
        (replace(FAST, selection="privbayes"), True),
        (replace(FAST, noise="equal_laplace"), True),
        (replace(FAST, selection="all_pairs", consistency=False), True),
        (FAST, False),
        (replace(FAST, selection="privbayes", noise="equal_laplace"), False),
    ],
    ids=[
        "auto",
        "privbayes",
        "equal laplace",
        "all pairs, no consistency",
        "release noise",
        "release noise, privbayes, laplace",
    ],
)
def test_every_mechanism_the_pipeline_records_is_priced_as_it_was_charged(config, seeded):
    """:func:`noise_rho` reads each producer's calibration backwards: a producer whose rule
    changes fails here, not in a user's bundle."""
    rng = np.random.default_rng(5)
    n = 3000
    table = pd.DataFrame(
        {
            "a": rng.choice(["x", "y"], n),
            "b": rng.integers(0, 9, n),
            "c": rng.normal(50, 10, n).round(1),
        }
    )
    model = PrivSyn(1.0, 1e-9, config=config).fit(table, rng=rng if seeded else None)
    selecting = {"auto": {"indif"}, "privbayes": {"privbayes"}}.get(config.selection, set())
    steps = {e.step for e in model.ledger.entries}
    assert {"structure", "domain", "one_way", "marginal", *selecting} <= steps, steps
    for entry in model.ledger.entries:
        assert noise_rho(entry) == pytest.approx(entry.rho, rel=1e-12), entry
    assert load_model(model_bytes(model)).ledger == recomputed(model.ledger)


def test_the_noisy_indif_scores_travel_with_the_model_priced_by_the_ledger(small_model, tmp_path):
    """GUM judges unmeasured pairs by the InDif scores, so a loaded model must carry them,
    with the sigma the ledger paid for; scores no InDif measurement paid for are refused."""
    assert small_model.dependence is not None
    path = tmp_path / "release.zip"
    save_model(small_model, path)
    loaded = load_model(path)
    np.testing.assert_allclose(loaded.dependence.scores, small_model.dependence.scores)
    paid = next(e for e in loaded.ledger.entries if e.step == "indif")
    assert loaded.dependence.sigma == paid.sigma == small_model.dependence.sigma

    def older(model: dict) -> None:
        model.pop("indif")

    old = tmp_path / "older.zip"
    old.write_bytes(rehashed(path.read_bytes(), "model.json", older))
    assert load_model(old).dependence is None  # bundles from before the scores

    def unpaid(ledger: dict) -> None:  # the InDif spend booked as another step
        first(ledger["measurements"], "indif")["step"] = "structure"

    forged = tmp_path / "forged.zip"
    forged.write_bytes(rehashed(path.read_bytes(), "ledger.json", unpaid))
    with pytest.raises(InputError, match="was edited"):
        load_model(forged)

    def wrong_count(model: dict) -> None:
        model["indif"] = model["indif"][:-1]

    short = tmp_path / "short.zip"
    short.write_bytes(rehashed(path.read_bytes(), "model.json", wrong_count))
    with pytest.raises(InputError, match="InDif scores"):
        load_model(short)


def wide_themes(rows: int = 3000, seed: int = 8) -> pd.DataFrame:
    """32 columns in eight themes of four: wide enough for tree-first selection, whose tree
    pairs measured again are pooled with their first measurement."""
    rng = np.random.default_rng(seed)
    columns = {}
    for theme in range(8):
        latent = rng.integers(0, 4, rows)
        for q in range(4):
            keep = rng.random(rows) < 0.75
            columns[f"t{theme}_q{q}"] = np.where(keep, latent, rng.integers(0, 4, rows))
    return pd.DataFrame(columns)


@pytest.mark.slow
def test_a_model_with_pooled_measurements_loads_and_a_lost_half_is_refused(tmp_path):
    """A marginal measured twice and pooled by inverse variance is paid for by both
    measurements: the bundle loads (it once read as edited), and a ledger that keeps only
    one of them, repriced to match, is refused."""
    model = PrivSyn(1.0, 1e-9, config=FAST).fit(wide_themes(), rng=np.random.default_rng(2))
    marginal_steps = [e.attributes for e in model.ledger.entries if e.step == "marginal"]
    twice = {a for a in marginal_steps if marginal_steps.count(a) == 2}
    assert twice, "tree-first measured some tree pair again"
    assert load_model(model_bytes(model)).ledger == recomputed(model.ledger)

    def one_half_lost(ledger: dict) -> dict:
        parsed = ledger_from_json(ledger)
        pair = sorted(twice)[0]
        k = max(i for i, e in enumerate(parsed.entries) if e.attributes == pair)
        kept = tuple(e for i, e in enumerate(parsed.entries) if i != k)
        return replace(parsed, entries=kept).to_json()

    path = tmp_path / "r.zip"
    save_model(model, path)
    path.write_bytes(rehashed(path.read_bytes(), "ledger.json", one_half_lost))
    with pytest.raises(BundleError, match="that no measurement in its ledger paid for"):
        load_model(path)
