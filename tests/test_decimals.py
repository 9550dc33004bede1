"""Output that looks like the input: whole numbers stay whole (also when blanks made pandas
read them as floats), and numbers carry the column's precision: declared in the schema
(``decimals``), or, undeclared, the decimals the structure step counted privately (a tenth
of the narrowest bin when it counts none)."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

from privsyn_core.cli import main
from privsyn_core.data.codecs import MAX_DEFAULT_DECIMALS, BinnedCodec, default_decimals
from privsyn_core.data.schema import ColumnSchema, Kind, Schema
from privsyn_core.errors import InputError

#: a number with more decimals than ``n`` (as text)
LONG = {n: re.compile(rf"\d\.\d{{{n + 1},}}") for n in range(4)}


def _decimals(text: str) -> int:
    return len(text.split(".")[1]) if "." in text else 0


# --- schema ------------------------------------------------------------------------------


def test_decimals_round_trip_through_json():
    schema = Schema(
        (
            ColumnSchema("score", Kind.NUMERIC, lower=0.0, upper=100.0, decimals=2),
            ColumnSchema("undeclared", decimals=1),
            ColumnSchema("age", Kind.NUMERIC, integer=True, decimals=0),
            ColumnSchema("city"),
        )
    )
    text = schema.dumps()
    assert json.loads(text)["columns"][0]["decimals"] == 2
    assert "decimals" not in json.loads(text)["columns"][3]  # undeclared stays absent
    again = Schema.from_json(json.loads(text))
    assert again == schema
    assert [c.decimals for c in again.columns] == [2, 1, 0, None]


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"decimals": -1}, "'decimals' must be a whole number from 0 to 15, got -1"),
        ({"decimals": 16}, "'decimals' must be a whole number from 0 to 15, got 16"),
        ({"decimals": 1.5}, "'decimals' must be a whole number"),
        ({"decimals": "2"}, "'decimals' must be a whole number"),
        ({"decimals": True}, "'decimals' must be a whole number"),
        ({"kind": "categorical", "decimals": 2}, "applies to numeric columns only"),
        ({"kind": "datetime", "decimals": 2}, "applies to numeric columns only"),
        ({"kind": "numeric", "integer": True, "decimals": 2}, "set 'decimals' to 0"),
    ],
)
def test_a_bad_decimals_declaration_is_named_with_its_fix(entry, message):
    with pytest.raises(InputError, match=re.escape(message)):
        Schema.from_json({"columns": [{"name": "x", **entry}]})


# --- default precision -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("edges", "expected"),
    [
        ((0.0, 1.0), 1),  # step 0.1 = w / 10
        ((0.0, 0.5, 3.0), 2),  # the narrowest bin decides: 0.5 / 10 = 0.05 -> 0.01
        ((0.0, 2.7), 1),
        ((0.0, 10.0), 0),
        ((3000.0, 4000.0, 6500.0), 0),  # wide bins: whole numbers, never negative decimals
        ((0.0, 0.001), 4),
        ((0.0, 1e-30), MAX_DEFAULT_DECIMALS),
    ],
)
def test_default_precision_is_a_tenth_of_the_narrowest_bin(edges, expected):
    assert default_decimals(edges) == expected
    assert BinnedCodec("x", edges).precision == expected


def test_whole_number_codecs_have_precision_zero_whatever_is_declared():
    assert BinnedCodec("x", (0.0, 0.5, 1.0), integer=True, decimals=None).precision == 0


# --- decoding ----------------------------------------------------------------------------


@pytest.mark.parametrize("decimals", [None, 0, 1, 2, 3])
def test_decoded_values_stay_in_their_bin_with_at_most_the_precision(decimals):
    edges = (-3.7, 0.0, 0.35, 2.0, 17.125, 400.0)
    codec = BinnedCodec("x", edges, missing=True, decimals=decimals)
    codes = np.random.default_rng(1).integers(0, codec.size, 5000)
    values = codec.decode(codes, np.random.default_rng(2))
    present = codes < codec.bins
    assert values[~present].isna().all() and values[present].notna().all()
    places = codec.precision
    text = values[present].astype(float).map(repr)
    assert text.map(_decimals).max() <= max(places, 1)  # repr(3.0) is "3.0"
    assert np.allclose(values[present].astype(float).round(places), values[present].astype(float))
    if places >= 2:  # every bin holds a grid point: values re-encode into their own bin
        assert np.array_equal(codec.encode(values)[present], codes[present])
    # the draw spreads over the bin rather than piling on one value
    inside = values[codes == 4].astype(float)
    assert inside.nunique() > 50 if places >= 1 else inside.nunique() > 20


def test_zero_decimals_decode_to_whole_numbers_typed_as_integers():
    codec = BinnedCodec("x", (0.0, 10.5, 99.9), decimals=0, missing=True)
    values = codec.decode(np.array([0, 1, 2, 0]), np.random.default_rng(0))
    assert str(values.dtype) == "Int64"
    assert values.iloc[2] is pd.NA
    assert 0 <= values.iloc[0] <= 10 and 11 <= values.iloc[1] <= 99
    assert str(BinnedCodec("x", (0.0, 10.5), decimals=0).decode(
        np.array([0]), np.random.default_rng(0)).dtype) == "int64"  # fmt: skip


def test_a_bin_narrower_than_the_declared_precision_gives_its_rounded_midpoint():
    # [0.5, 0.9) holds no whole number: the declared precision wins over the bin
    codec = BinnedCodec("x", (0.0, 0.5, 0.9), decimals=0)
    values = codec.decode(np.array([1, 1, 1]), np.random.default_rng(0))
    assert values.tolist() == [1, 1, 1]


# --- end to end: CLI output text ----------------------------------------------------------


def _blanks_csv(path, n: int = 3000) -> None:
    """Ages with blanks (pandas reads them as floats), scores with 2 decimals and blanks,
    prices with 3 decimals, a text column."""
    rng = np.random.default_rng(3)
    age = pd.array(rng.integers(18, 80, n), dtype="Int64")
    age[rng.random(n) < 0.2] = pd.NA
    score = np.round(rng.normal(50, 12, n), 2)
    score[rng.random(n) < 0.1] = np.nan
    price = np.round(rng.gamma(2.0, 3.0, n), 3)
    city = rng.choice(["Lyon", "Oslo", "Quito"], n)
    frame = pd.DataFrame({"age": age, "score": score, "price": price, "city": city})
    frame.to_csv(path, index=False)
    ages = [line.split(",")[0] for line in path.read_text().splitlines()[1:]]
    assert "" in ages and all(re.fullmatch(r"\d*", a) for a in ages)  # as a person writes them
    assert pd.read_csv(path)["age"].dtype == float  # ... and as pandas reads them: floats


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The CLI on the blanks table, undeclared and with a schema declaring only decimals, on
    numpy and DuckDB: the output file's text for each."""
    folder = tmp_path_factory.mktemp("decimals")
    csv, schema = folder / "blanks.csv", folder / "schema.json"
    _blanks_csv(csv)
    schema.write_text(json.dumps({"columns": [
        {"name": "age"}, {"name": "score", "decimals": 2}, {"name": "price", "decimals": 0},
        {"name": "city"},
    ]}))  # fmt: skip
    texts = {}
    for declared in (False, True):
        for engine in ("numpy", "duckdb"):
            out = folder / f"{engine}-{declared}.csv"
            argv = [
                "synthesize", str(csv), "-o", str(out), "--epsilon", "2", "--seed", "5",
                "--iterations", "10", "-q", "--no-registry", "--engine", engine,
            ]  # fmt: skip
            if declared:
                argv += ["--schema", str(schema)]
            assert main(argv) == 0
            texts[engine, declared] = out.read_text()
    return texts


def _columns(text: str) -> dict[str, list[str]]:
    lines = text.splitlines()
    header = lines[0].split(",")
    cells = [line.split(",") for line in lines[1:]]
    return {name: [row[i] for row in cells] for i, name in enumerate(header)}


@pytest.mark.parametrize("declared", [False, True], ids=["undeclared", "decimals declared"])
@pytest.mark.slow
def test_ages_read_as_floats_because_of_blanks_come_back_whole(runs, declared):
    ages = _columns(runs["numpy", declared])["age"]
    assert "" in ages  # the blanks are kept
    present = [a for a in ages if a]
    assert len(present) > 1000
    assert all(re.fullmatch(r"\d+", a) for a in present), [a for a in present if "." in a][:5]


@pytest.mark.slow
def test_undeclared_numbers_carry_the_decimals_of_the_input_not_noise(runs):
    """score has 2 decimals, price 3: the structure step counts them privately."""
    text = runs["numpy", False]
    assert not LONG[3].search(text), LONG[3].search(text)
    columns = _columns(text)
    for name, places in (("score", 2), ("price", 3)):
        present = [v for v in columns[name] if v]
        assert max(_decimals(v) for v in present) == places, name
        assert len(set(present)) > 50  # still spread inside the bins


@pytest.mark.slow
def test_declared_decimals_are_the_most_decimals_written(runs):
    """Declared decimals win over the counted ones: price has 3 decimals, declared 0."""
    columns = _columns(runs["numpy", True])
    scores = [v for v in columns["score"] if v]
    assert max(_decimals(v) for v in scores) == 2
    prices = columns["price"]
    assert all(re.fullmatch(r"\d+", p) for p in prices)  # 0 decimals: whole, no ".0"


@pytest.mark.parametrize("declared", [False, True], ids=["undeclared", "decimals declared"])
@pytest.mark.slow
def test_duckdb_writes_the_same_file_as_numpy(runs, declared):
    assert runs["duckdb", declared] == runs["numpy", declared]


@pytest.mark.slow
def test_the_cli_says_which_precision_it_chose(tmp_path, capsys):
    csv = tmp_path / "blanks.csv"
    _blanks_csv(csv)
    argv = ["synthesize", str(csv), "-o", str(tmp_path / "out.csv"), "--epsilon", "2",
            "--seed", "5", "--iterations", "2", "--no-registry"]  # fmt: skip
    assert main(argv) == 0
    err = capsys.readouterr().err
    decided = r"age numeric whole, score numeric \d decimals?, price numeric \d decimals?"
    assert re.search(decided, err), err


# --- penguins: the decimals counted privately, and the drafted schema's ----------------------


def _written_decimals(path) -> dict[str, int]:
    """The most decimals written in each numeric column of a CSV file, as text."""
    table = pd.read_csv(path, dtype=str, keep_default_na=False)
    out = {}
    for name in PENGUIN_NUMBERS:
        present = [v for v in table[name] if v and v != "NA"]
        assert all(re.fullmatch(r"-?\d+(\.\d+)?", v) for v in present), name
        out[name] = max(_decimals(v) for v in present)
    return out


PENGUIN_NUMBERS = (
    "bill_length_mm", "bill_depth_mm", "flipper_length_mm", "body_mass_g", "year"
)  # fmt: skip


@pytest.mark.parametrize(("epsilon", "seed"), [(4, 0), (4, 1), (8, 2)])
def test_penguins_without_a_schema_come_back_with_the_inputs_decimals(tmp_path, epsilon, seed):
    """bill_length_mm and bill_depth_mm have 1 decimal (``32.5``; before the vote, a tenth
    of the narrowest DP bin wrote ``32.49``), the others none."""
    from conftest import ROOT

    source = ROOT / "tests" / "data" / "penguins.csv"
    out = tmp_path / "out.csv"
    argv = ["synthesize", str(source), "-o", str(out), "--epsilon", str(epsilon),
            "--seed", str(seed), "--iterations", "10", "-q", "--no-registry"]  # fmt: skip
    assert main(argv) == 0
    expected = _written_decimals(source)
    assert expected == {"bill_length_mm": 1, "bill_depth_mm": 1, "flipper_length_mm": 0,
                        "body_mass_g": 0, "year": 0}  # fmt: skip
    assert _written_decimals(out) == expected


def test_schema_infer_drafts_the_decimals_and_penguins_come_back_with_them(tmp_path):
    from conftest import ROOT

    source = ROOT / "tests" / "data" / "penguins.csv"
    draft, out = tmp_path / "schema.json", tmp_path / "out.csv"
    assert main(["schema", "infer", str(source), "-o", str(draft)]) == 0
    schema = Schema.load(draft)
    assert schema["bill_length_mm"].decimals == 1 and schema["bill_depth_mm"].decimals == 1
    assert schema["flipper_length_mm"].decimals is None  # whole: "integer": true says it
    argv = ["synthesize", str(source), "--schema", str(draft), "-o", str(out), "--epsilon", "4",
            "--seed", "0", "--iterations", "10", "-q", "--no-registry"]  # fmt: skip
    assert main(argv) == 0
    assert _written_decimals(out) == _written_decimals(source)


def test_the_draft_takes_the_decimals_all_but_one_percent_of_the_numbers_fit():
    from privsyn_core.data.schema import infer_schema

    rng = np.random.default_rng(0)
    table = pd.DataFrame(
        {
            "one": np.round(rng.uniform(0, 100, 1000), 1),
            "outlier": np.append(np.round(rng.uniform(0, 100, 999), 2), 1.23456),
            "full": rng.uniform(0, 1, 1000),  # in full: most have 16-18 decimals, left open
        }
    )
    schema = infer_schema(table)
    assert [schema[c].decimals for c in table.columns] == [1, 2, None]
