"""The public schema: JSON v1 round trip, validation errors, and the inferred draft."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from privsyn_core.data.schema import (
    DRAFT_WARNING,
    SCHEMA_VERSION,
    ColumnSchema,
    Kind,
    Provenance,
    Schema,
    detect_kind,
    infer_schema,
)
from privsyn_core.errors import InputError

DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture(scope="module")
def penguins() -> pd.DataFrame:
    return pd.read_csv(DATA / "penguins.csv")


def full_schema() -> Schema:
    """Every field of ColumnSchema set on at least one column."""
    return Schema(
        (
            ColumnSchema(
                "age",
                Kind.NUMERIC,
                lower=17,
                upper=90,
                bins=74,
                integer=True,
                missing=False,
                reason="integer with 73 distinct values -> numeric",
            ),
            ColumnSchema(
                "workclass",
                "categorical",
                categories=("Private", "State-gov", 7, 2.5, True),
                missing=True,
            ),
            ColumnSchema("score", Kind.NUMERIC, edges=(0, 1.5, 10), integer=False),
            ColumnSchema(
                "visit",
                Kind.DATETIME,
                lower=1.5e9,
                upper=1.6e9,
                bins=12,
                datetime_format="%Y-%m-%d",
                missing=True,
            ),
            ColumnSchema("pid", Kind.CATEGORICAL, exclude=True, reason="looks like an identifier"),
        )
    )


def all_fields(schema: Schema) -> list[dict]:
    # asdict includes ``reason``, which equality ignores (compare=False)
    return [dataclasses.asdict(c) for c in schema.columns]


def test_to_json_from_json_round_trip_preserves_every_field():
    schema = full_schema()
    data = schema.to_json()
    assert data["version"] == SCHEMA_VERSION
    # the dict is plain JSON
    again = Schema.from_json(json.loads(json.dumps(data)))
    assert again == schema
    assert all_fields(again) == all_fields(schema)
    assert again.names() == ("age", "workclass", "score", "visit", "pid")
    assert again["workclass"].categories == ("Private", "State-gov", 7, 2.5, True)
    assert again["score"].edges == (0.0, 1.5, 10.0)
    assert again["visit"].datetime_format == "%Y-%m-%d"
    assert again["pid"].exclude is True
    assert again["pid"].reason == "looks like an identifier"
    assert again["age"].reason.startswith("integer with 73")
    assert [c.name for c in again.included()] == ["age", "workclass", "score", "visit"]


def test_to_json_leaves_out_undeclared_keys():
    entry = ColumnSchema("x", "numeric").to_json()
    assert entry == {"name": "x", "kind": "numeric"}
    entry = ColumnSchema("x", "categorical", exclude=True).to_json()
    assert entry == {"name": "x", "kind": "categorical", "exclude": True}


def test_dumps_and_load_round_trip_through_a_file(tmp_path):
    schema = full_schema()
    path = tmp_path / "schema.json"
    path.write_text(schema.dumps())
    loaded = Schema.load(path)
    assert loaded == schema
    assert all_fields(loaded) == all_fields(schema)
    # also as a str path
    assert Schema.load(str(path)) == schema


def test_dumps_writes_numpy_scalars_as_plain_json(tmp_path):
    schema = Schema(
        (
            ColumnSchema("x", "numeric", lower=np.float64(1.5), upper=np.int64(5)),
            ColumnSchema("c", "categorical", categories=(np.int64(1), np.int64(2))),
        )
    )
    text = schema.dumps()
    data = json.loads(text)
    assert data["columns"][0]["lower"] == 1.5
    assert data["columns"][0]["upper"] == 5
    assert data["columns"][1]["categories"] == [1, 2]
    path = tmp_path / "s.json"
    path.write_text(text)
    assert Schema.load(path) == schema


def test_load_of_invalid_json_names_the_file(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('{"version": 1, "columns": [')
    with pytest.raises(InputError, match=r"broken\.json"):
        Schema.load(path)


def schema_json(*columns: dict, version: int = 1) -> dict:
    return {"version": version, "columns": list(columns)}


@pytest.mark.parametrize(
    ("data", "needles"),
    [
        (schema_json({"name": "flipper", "kind": "number"}), ["flipper", "number"]),
        (
            schema_json({"name": "flipper", "kind": "numeric", "colour": "red"}),
            ["flipper", "colour"],
        ),
        (
            schema_json(
                {"name": "flipper", "kind": "numeric"}, {"name": "flipper", "kind": "numeric"}
            ),
            ["flipper", "more than once"],
        ),
        (
            schema_json(
                {"name": "island", "kind": "categorical", "categories": ["Dream", "Dream"]}
            ),
            ["island", "twice"],
        ),
        (
            schema_json({"name": "island", "kind": "categorical", "categories": []}),
            ["island", "empty"],
        ),
        (
            schema_json({"name": "flipper", "kind": "numeric", "lower": 230, "upper": 170}),
            ["flipper", "230", "170"],
        ),
        (
            schema_json({"name": "flipper", "kind": "numeric", "edges": [0, 5, 5, 9]}),
            ["flipper", "increasing"],
        ),
        (
            schema_json({"name": "flipper", "kind": "numeric", "edges": [9, 5]}),
            ["flipper", "increasing"],
        ),
        (
            schema_json({"name": "flipper", "kind": "numeric", "edges": [5]}),
            ["flipper", "at least two"],
        ),
        (schema_json({"name": "flipper", "kind": "numeric", "bins": 0}), ["flipper", "bins"]),
        (schema_json({"name": "flipper", "kind": "numeric"}, version=2), ["version", "2"]),
        (schema_json({"kind": "numeric"}), ["column 0", "name"]),
        (schema_json({"name": "flipper", "lower": 1}), ["flipper", "lower", "kind"]),
        ({"version": 1}, ["columns"]),
        ([], ["columns"]),
    ],
)
def test_invalid_schema_json_raises_input_error_naming_the_culprit(data, needles):
    with pytest.raises(InputError) as info:
        Schema.from_json(data)
    message = str(info.value)
    for needle in needles:
        assert needle in message, (needle, message)


@pytest.mark.parametrize(
    "entry",
    [
        # a string is not a list of categories (it is split into characters today)
        {"categories": "abc", "kind": "categorical"},
        {"bins": "ten"},
        {"lower": "low", "upper": 5},
        {"edges": ["x", 1]},
        # JSON strings are not booleans: "false" would exclude the column
        {"exclude": "false"},
    ],
    ids=["categories-string", "bins-string", "lower-string", "edges-string", "exclude-string"],
)
def test_wrongly_typed_values_raise_input_error_naming_the_column(entry):
    column = {"name": "flipper", "kind": "numeric", **entry}
    with pytest.raises(InputError, match="flipper"):
        Schema.from_json(schema_json(column))


def test_kind_and_provenance_values():
    assert [k.value for k in Kind] == ["categorical", "numeric", "datetime"]
    assert Provenance.DECLARED == "declared"
    assert Provenance.PRIVATE == "private estimate"
    assert Provenance.RAW == "raw data, not private"
    assert ColumnSchema("x", "datetime").kind is Kind.DATETIME


def test_has_domain():
    assert ColumnSchema("c", "categorical", categories=("a",)).has_domain
    assert not ColumnSchema("c", "categorical").has_domain
    assert ColumnSchema("x", "numeric", lower=0, upper=1).has_domain
    assert ColumnSchema("x", "numeric", edges=(0, 1)).has_domain
    assert not ColumnSchema("x", "numeric", lower=0).has_domain
    assert not ColumnSchema("x", "datetime", upper=0).has_domain


def test_with_column_replaces_one_column_in_place():
    schema = full_schema()
    new = ColumnSchema("score", Kind.NUMERIC, lower=0, upper=1)
    changed = schema.with_column(new)
    assert changed.names() == schema.names()
    assert changed["score"] == new
    assert changed["age"] == schema["age"]
    with pytest.raises(KeyError):
        schema["nope"]


# ---------------------------------------------------------------- inference


def test_infer_schema_on_penguins_gives_kinds_with_reasons(penguins):
    schema = infer_schema(penguins)
    assert schema.names() == tuple(penguins.columns)
    kinds = {c.name: c.kind for c in schema.columns}
    assert kinds == {
        "species": Kind.CATEGORICAL,
        "island": Kind.CATEGORICAL,
        "bill_length_mm": Kind.NUMERIC,
        "bill_depth_mm": Kind.NUMERIC,
        "flipper_length_mm": Kind.NUMERIC,
        "body_mass_g": Kind.NUMERIC,
        "sex": Kind.CATEGORICAL,
        "year": Kind.CATEGORICAL,
    }
    assert "text with 3 distinct values" in schema["species"].reason
    assert "categorical" in schema["species"].reason
    assert schema["species"].categories == ("Adelie", "Chinstrap", "Gentoo")
    assert schema["sex"].categories == ("female", "male")
    year = schema["year"]
    assert year.reason.startswith("integer with 3 distinct values")
    assert year.reason.endswith("-> categorical")
    assert year.categories == (2007, 2008, 2009)
    assert all(type(v) is int for v in year.categories)
    mass = schema["body_mass_g"]
    assert "numeric" in mass.reason
    assert (mass.lower, mass.upper) == (2700.0, 6300.0)
    assert mass.integer is True
    assert schema["bill_length_mm"].integer is False
    assert (schema["bill_length_mm"].lower, schema["bill_length_mm"].upper) == (32.1, 59.6)
    assert not any(c.exclude for c in schema.columns)
    assert all(c.reason for c in schema.columns)
    assert "NOT public" in DRAFT_WARNING


def test_infer_schema_missing_flags_match_the_data(penguins):
    schema = infer_schema(penguins)
    for name in penguins.columns:
        assert schema[name].missing is bool(penguins[name].isna().any()), name
    assert schema["sex"].missing is True
    assert schema["species"].missing is False


def test_inferred_penguins_schema_survives_json(penguins, tmp_path):
    schema = infer_schema(penguins)
    path = tmp_path / "penguins.schema.json"
    path.write_text(schema.dumps())
    loaded = Schema.load(path)
    assert loaded == schema
    assert all_fields(loaded) == all_fields(schema)


def test_infer_schema_marks_identifiers_and_excludes_constant_columns(penguins):
    table = penguins.copy()
    table["pid"] = [f"P{i:04d}" for i in range(len(table))]
    table["colony"] = "Palmer"
    schema = infer_schema(table)
    pid, colony = schema["pid"], schema["colony"]
    assert pid.identifier and not pid.exclude and "identifier" in pid.reason
    assert "344 distinct values" in pid.reason
    assert colony.exclude and "constant" in colony.reason
    # nothing read off an identifier or an excluded column
    assert pid.categories is None and colony.categories is None
    assert [c.name for c in schema.included()] == [*penguins.columns, "pid"]
    # the reasons and the flag survive the JSON form
    again = Schema.from_json(json.loads(schema.dumps()))
    assert again["pid"].reason == pid.reason and again["pid"].identifier


def test_id_share_governs_the_identifier_rule():
    values = [f"v{i}" for i in range(90)] + ["v0"] * 10  # 90 distinct in 100 rows
    table = pd.DataFrame({"code": values})
    assert not infer_schema(table)["code"].identifier
    assert infer_schema(table, id_share=0.9)["code"].identifier


def test_identifier_must_be_true_false_or_absent():
    with pytest.raises(InputError, match="'identifier' must be true, false or absent"):
        ColumnSchema("uid", identifier="yes")


def test_integer_bins_follow_the_range():
    table = pd.DataFrame({"short": np.arange(100) % 25 + 10, "long": np.arange(100) * 7})
    schema = infer_schema(table)
    assert schema["short"].kind is Kind.NUMERIC
    assert schema["short"].bins == 25  # one bin per value
    assert schema["long"].bins == 32
    assert infer_schema(table, categorical_limit=30)["short"].kind is Kind.CATEGORICAL


def test_infer_schema_on_text_dates_declares_format_and_bounds_in_seconds():
    days = pd.date_range("2020-01-01", periods=60, freq="D")
    table = pd.DataFrame({"visit": days.strftime("%Y-%m-%d")})
    column = infer_schema(table)["visit"]
    assert column.kind is Kind.DATETIME
    assert column.datetime_format == "%Y-%m-%d"
    assert column.lower == pd.Timestamp("2020-01-01").timestamp()
    assert column.upper == pd.Timestamp("2020-02-29").timestamp()


def test_infer_schema_on_datetime64_gives_bounds_in_seconds():
    days = pd.Series(pd.date_range("2021-03-01", periods=40, freq="D"))
    column = infer_schema(pd.DataFrame({"visit": days}))["visit"]
    assert column.kind is Kind.DATETIME
    assert column.datetime_format is None
    assert column.lower == pd.Timestamp("2021-03-01").timestamp()
    assert column.upper == pd.Timestamp("2021-04-09").timestamp()


@pytest.mark.parametrize(
    ("values", "kind", "words"),
    [
        (pd.Series([True, False, True]), Kind.CATEGORICAL, "boolean"),
        (pd.Series(["a", "b"], dtype="category"), Kind.CATEGORICAL, "categorical column type"),
        (pd.Series(pd.date_range("2020-01-01", periods=3)), Kind.DATETIME, "datetime column type"),
        (pd.Series(np.arange(30)), Kind.NUMERIC, "integer with 30 distinct values -> numeric"),
        (pd.Series([1.0, 2.0, np.nan]), Kind.CATEGORICAL, "whole numbers with 2 distinct"),
        (pd.Series([1.5, 2.0, 3.0]), Kind.NUMERIC, "numbers with 3 distinct values"),
        (pd.Series(["1", "2", "3"]), Kind.CATEGORICAL, "numbers written as text"),
        (pd.Series([str(i) for i in range(40)]), Kind.NUMERIC, "numbers written as text"),
        (pd.Series(["2020-01-01", "2020-02-03"]), Kind.DATETIME, "parses as dates"),
        (pd.Series(["x", None, "y", "x"]), Kind.CATEGORICAL, "text with 2 distinct values"),
    ],
)
def test_detect_kind(values, kind, words):
    found, reason = detect_kind(values)
    assert found is kind
    assert words in reason


def test_loading_a_missing_schema_file_says_so(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        Schema.load(tmp_path / "nope.json")


def test_null_fields_are_undeclared_and_bounds_stay_within_two_to_the_62():
    """Absent and null mean the same (undeclared); a bound past 2^62 (the private range's
    reach; whole numbers are written as 64-bit integers) is refused naming column and field."""
    nulls = {"name": "flipper", "kind": "numeric", "lower": None, "upper": None, "bins": None}
    assert Schema.from_json(schema_json(nulls)).columns[0].lower is None
    for bound in (2.0**63, 1e30, -1.7e308):
        column = {"name": "flipper", "kind": "numeric", "lower": -1, "upper": abs(bound)}
        with pytest.raises(InputError, match="schema column 'flipper': the field upper is"):
            Schema.from_json(schema_json(column))
    fits = {"name": "flipper", "kind": "numeric", "lower": -(2.0**62), "upper": 2.0**62}
    assert Schema.from_json(schema_json(fits)).columns[0].upper == 2.0**62
    with pytest.raises(InputError, match="2\\^62"):  # built in code, not read from a file
        ColumnSchema("flipper", "numeric", lower=0, upper=1e30)
