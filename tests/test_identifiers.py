"""Row ids: found by a DP count of distinct values (measuring/identifiers.py), not modelled,
written as fresh ids 1..n unique over the whole sample (generation/identifiers.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from privsyn_core import PrivSynConfig, synthesize
from privsyn_core.data.columns import prepare_columns
from privsyn_core.data.schema import ColumnSchema, Schema
from privsyn_core.errors import InputError
from privsyn_core.generation.fitted_data import SamplingSettings
from privsyn_core.generation.gum_settings import GumSettings
from privsyn_core.generation.identifiers import Identifier, with_identifiers
from privsyn_core.measuring.identifiers import MIN_SIGMAS, laid_out_as_ids, noisy_distinct
from privsyn_core.privacy.ledger import PrivacyLedger, noise_rho, verified
from privsyn_core.release.bundle import load_model, save_model

FAST = PrivSynConfig(gum=GumSettings(iterations=10))


def table(n: int = 4000, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    colour = rng.choice(["red", "green", "blue"], n)
    return pd.DataFrame(
        {
            "case": np.arange(1001, 1001 + n).astype(str),
            "colour": colour,
            "name": [f"n{v:06d}" for v in rng.permutation(n)],
            "size": np.where(colour == "red", rng.integers(1, 4, n), rng.integers(3, 9, n)),
            # unique whole numbers spread far wider than ids are: data, not an id
            "stamp": rng.choice(10**9, n, replace=False) + 10**9,
        }
    )


def test_the_noisy_share_of_distinct_values_decides():
    rng = np.random.default_rng(0)
    unique = noisy_distinct("id", 5000, 5000, 0.01, rng)
    assert unique.unique and unique.measurement.step == "identifier"
    assert not noisy_distinct("colour", 3, 5000, 0.01, rng).unique
    assert not noisy_distinct("score", 4000, 5000, 0.01, rng).unique  # 80% distinct
    # a share of a handful of rows means nothing: too few present values for the noise
    sigma = unique.measurement.sigma
    assert not noisy_distinct("tiny", 5, 5, 0.01, rng).unique
    assert MIN_SIGMAS * sigma > 5
    assert laid_out_as_ids(1.0, 5000.0, 4990.0) and not laid_out_as_ids(1.0, 10**9, 5000.0)


def test_the_check_is_priced_as_a_pair_of_counts_of_sensitivity_sqrt_2():
    count = noisy_distinct("id", 100, 100, 0.02, np.random.default_rng(0))
    m = count.measurement
    assert m.sensitivity == pytest.approx(np.sqrt(2))
    assert noise_rho(m) == pytest.approx(0.02)
    ledger = PrivacyLedger.from_epsilon_delta(1.0, 1e-6).charge(m)
    assert verified(ledger).entries[0].rho == pytest.approx(0.02)


def test_ids_are_found_privately_and_written_anew():
    real = table()
    result = synthesize(real, 4.0, 1e-7, rng=np.random.default_rng(1), config=FAST)
    assert set(result.identifiers) == {"case", "name"}
    out = result.synthetic
    assert list(out.columns) == list(real.columns)  # every id in its place
    for name in ("case", "name"):
        assert out[name].is_unique and out[name].min() == 1
        assert out[name].max() == len(out)
    # an id is never measured beyond the preparation that finds it (its kind, the domain
    # estimate that points to it, the check): no 1-way marginal, InDif score or marginal
    prepared = ("structure", "identifier", "domain")
    measured = {a for e in result.ledger.entries if e.step not in prepared for a in e.attributes}
    assert not measured & {"case", "name"}
    # only the columns the estimates point to are checked: text that released no category,
    # whole numbers about as many as the rows
    checked = [e.attributes[0] for e in result.ledger.entries if e.step == "identifier"]
    assert sorted(checked) == ["case", "name"]
    assert {"stamp", "size", "colour"} <= {c.codec.name for c in result.columns}


def test_a_declared_identifier_costs_nothing_and_a_declared_non_identifier_is_data():
    real = table(1500)
    schema = Schema.undeclared(real.columns).with_column(ColumnSchema("name", identifier=False))
    schema = schema.with_column(ColumnSchema("colour", identifier=True))
    prepared = prepare_columns(
        real, schema, rho_per_structure=0.01, rho_per_estimate=0.05,
        delta_for_thresholds=1e-6, rng=np.random.default_rng(0),
    )  # fmt: skip
    checked = [m.attributes[0] for m in prepared.measurements if m.step == "identifier"]
    assert checked == ["case"]  # name is declared data: left out (no category), never an id
    assert [i.name for i in prepared.identifiers] == ["case", "colour"]
    assert not [m for m in prepared.measurements if "colour" in m.attributes]
    assert [name for name, _ in prepared.excluded] == ["name"]


@pytest.mark.slow
def test_fresh_ids_are_unique_over_blocks_workers_and_a_bundle(tmp_path):
    real = table(3000)
    result = synthesize(real, 4.0, 1e-7, rng=np.random.default_rng(2), config=FAST)
    save_model(result.model, tmp_path / "release.zip")
    model = load_model(tmp_path / "release.zip")
    assert model.identifiers == result.model.identifiers
    settings = SamplingSettings(gum=GumSettings(iterations=3), block_rows=1000)
    sample = model.generate(5500, seed=3, settings=settings, workers=2).table
    assert list(sample.columns) == list(real.columns)
    assert sample["case"].tolist() == list(range(1, 5501))
    blocks = list(model.sample_blocks(2500, seed=3, settings=settings))
    assert pd.concat(blocks)["name"].tolist() == list(range(1, 2501))
    kept = model.sample(400, seed=4, where={"colour": "red"})
    assert kept["case"].tolist() == list(range(1, 401)) and (kept["colour"] == "red").all()
    with pytest.raises(InputError, match="row id"):
        model.sample(10, seed=4, where={"case": "5"})


def test_with_identifiers_places_and_renumbers():
    frame = pd.DataFrame({"a": [5, 6], "b": [7, 8]})
    out = with_identifiers(frame, (Identifier("id", 0), Identifier("row", 3)), first_row=10)
    assert list(out.columns) == ["id", "a", "b", "row"]
    assert out["id"].tolist() == [11, 12] and out["row"].tolist() == [11, 12]
    again = with_identifiers(out, (Identifier("id", 0), Identifier("row", 3)))
    assert again["id"].tolist() == [1, 2] and list(again.columns) == list(out.columns)


@pytest.mark.slow
def test_a_row_id_of_a_few_thousand_rows_is_found_at_epsilon_1():
    """Ids 1 to 5,574 (medexp's rownames) at the default budget: the DP range may end a
    doubling beyond the next power of two ([256, 16383]: 2.9 numbers per row), and the
    column is still checked, and written anew, in every seed; the other columns are kept."""
    assert laid_out_as_ids(256.0, 16383.0, 5574.0)
    real = table(5574).drop(columns=["name"]).assign(case=lambda t: np.arange(1, len(t) + 1))
    found = [
        synthesize(real, 1.0, 1e-9, rng=np.random.default_rng(seed), config=FAST).identifiers
        for seed in range(8)
    ]
    assert all(set(ids) == {"case"} for ids in found), found
