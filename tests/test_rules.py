"""Rules a schema declares (data/rules.py) hold exactly in every synthetic row, on every
engine and in every sample of a release (generation/rules.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from privsyn_core import PrivSynConfig, synthesize
from privsyn_core.data.rules import Determines, Never
from privsyn_core.data.schema import ColumnSchema, Schema
from privsyn_core.errors import InputError
from privsyn_core.generation.fitted_data import SamplingSettings
from privsyn_core.generation.gum_settings import GumSettings
from privsyn_core.release.bundle import load_model, save_model
from privsyn_core.release.changes import changes

FAST = PrivSynConfig(gum=GumSettings(iterations=10))
LEVELS = {"primary": 6, "secondary": 12, "college": 14, "degree": 16}


def table(n: int = 6000, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    level = rng.choice(list(LEVELS), n, p=[0.2, 0.4, 0.25, 0.15])
    role = rng.choice(["husband", "wife", "child"], n, p=[0.4, 0.4, 0.2])
    sex = np.where(role == "husband", "M", np.where(role == "wife", "F", rng.choice(["M", "F"], n)))
    return pd.DataFrame(
        {
            "level": level,
            # the years of school of a level, but for a few rows that write it otherwise
            "years": [LEVELS[v] if rng.random() > 0.05 else rng.integers(5, 17) for v in level],
            "role": role,
            "sex": sex,
            "noise": rng.integers(0, 3, n),
        }
    )


RULES = [
    {"determines": ["level", "years"]},
    {"never": {"role": "husband", "sex": "F"}},
    {"never": {"role": "wife", "sex": "M"}},
]


def ruled(real: pd.DataFrame, rules=RULES) -> Schema:
    return Schema.from_json({"columns": [{"name": c} for c in real.columns], "rules": rules})


def kept(synthetic: pd.DataFrame) -> None:
    assert synthetic.groupby("level")["years"].nunique().max() == 1
    assert not ((synthetic["role"] == "husband") & (synthetic["sex"] == "F")).any()
    assert not ((synthetic["role"] == "wife") & (synthetic["sex"] == "M")).any()


def test_rules_are_read_written_and_refused_in_one_line():
    schema = ruled(table(50))
    assert schema.rules == (
        Determines("level", "years"),
        Never((("role", "husband"), ("sex", "F"))),
        Never((("role", "wife"), ("sex", "M"))),
    )
    assert Schema.from_json(schema.to_json()) == schema
    columns = [{"name": "a"}, {"name": "b"}]
    for rules, says in (
        ({"never": {}}, "must be a list"),
        ([{"determines": ["a"]}], "two different column names"),
        ([{"determines": ["a", "a"]}], "two different column names"),
        ([{"never": {"a": 1}}], "2 to 8 columns"),
        ([{"never": {"a": [1], "b": 2}}], "must be text, a finite number"),
        ([{"sometimes": {"a": 1, "b": 2}}], "unknown rule 'sometimes'"),
        ([{"never": {"a": 1, "zz": 2}}], "names column 'zz'"),
    ):
        with pytest.raises(InputError, match=says):
            Schema.from_json({"columns": columns, "rules": rules})
    excluded = [{"name": "a", "exclude": True}, {"name": "b"}]
    with pytest.raises(InputError, match="not a synthesised column"):
        Schema.from_json({"columns": excluded, "rules": [{"determines": ["a", "b"]}]})


@pytest.mark.slow
def test_declared_rules_hold_in_every_row_and_the_pair_is_measured():
    real = table()
    result = synthesize(real, 1.0, 1e-7, schema=ruled(real), rng=np.random.default_rng(1))
    kept(result.synthetic)
    # the mapping is the release's: each level's commonest number of years
    assert result.synthetic.groupby("level")["years"].first().to_dict() == LEVELS
    pairs = {frozenset(m.attributes) for m in result.marginals}
    assert frozenset(("level", "years")) in pairs
    said = [c.text for c in changes(result.model, result.excluded, result.dropped_rules)]
    assert "each level goes with one years: kept in every row" in said


@pytest.mark.slow
def test_the_rules_travel_with_the_release_to_every_sample(tmp_path):
    real = table()
    result = synthesize(real, 1.0, 1e-7, schema=ruled(real), rng=np.random.default_rng(2))
    save_model(result.model, tmp_path / "release.zip")
    model = load_model(tmp_path / "release.zip")
    assert model.rules == result.model.rules
    settings = SamplingSettings(gum=GumSettings(iterations=3), block_rows=2000)
    kept(model.generate(7000, seed=3, settings=settings, workers=2).table)
    kept(model.sample(500, seed=4, where={"role": "child"}))


@pytest.mark.slow
def test_rules_hold_when_the_table_is_counted_on_duckdb(tmp_path):
    real = table(3000)
    path = tmp_path / "t.csv"
    real.to_csv(path, index=False)
    result = synthesize(
        path, 1.0, 1e-7, schema=ruled(real), engine="duckdb", config=FAST,
        rng=np.random.default_rng(5),
    )  # fmt: skip
    kept(result.synthetic)


def test_a_rule_whose_column_is_not_synthesised_is_said_not_kept():
    real = table(3000)
    # declared: refused at once (a row id or a left-out column cannot keep a rule)
    with pytest.raises(InputError, match="not a synthesised column"):
        ruled(real).with_column(ColumnSchema("years", identifier=True))
    # a column left out by its estimate drops the rule, which the release says
    rare = real.assign(code=[f"c{i}" for i in range(len(real))])
    rules = [{"determines": ["level", "code"]}, *RULES[1:]]
    result = synthesize(
        rare, 1.0, 1e-7, schema=ruled(rare, rules), config=FAST, rng=np.random.default_rng(6)
    )
    assert "code" not in [c.codec.name for c in result.columns]
    assert result.dropped_rules == (("each level goes with one code", "code is not synthesised"),)
    said = [c.text for c in changes(result.model, result.excluded, result.dropped_rules)]
    assert any("NOT kept, because code is not synthesised" in text for text in said)
