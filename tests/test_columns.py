"""From raw tables to codecs and back, and synthesize() with schemas and private domains."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from privsyn_core import GumSettings, PrivSynConfig, synthesize
from privsyn_core.data.codecs import BinnedCodec, CategoryCodec
from privsyn_core.data.column_structure import StructureChoice, schema_from_dtypes
from privsyn_core.data.columns import (
    check_schema_matches,
    decode_columns,
    encode_columns,
    open_parts,
    prepare_columns,
)
from privsyn_core.data.schema import ColumnSchema, Kind, Provenance, Schema, infer_schema
from privsyn_core.errors import InputError
from privsyn_core.measuring.domain_split import FIRST_RANGE_SHARE, DomainSplit
from privsyn_core.measuring.identifiers import IDENTIFIER_RESERVE

DATA = Path(__file__).resolve().parent / "data"
FAST = PrivSynConfig(gum=GumSettings(iterations=20))
ADULT_NAMES = [
    "age",
    "workclass",
    "fnlwgt",
    "education",
    "education-num",
    "marital-status",
    "occupation",
    "relationship",
    "race",
    "sex",
    "capital-gain",
    "capital-loss",
    "hours-per-week",
    "native-country",
    "income",
]
SECRET = "Zzyzx-Secret-Island"


def run(table, epsilon=20.0, delta=1e-5, seed=0, **kwargs):
    return synthesize(table, epsilon, delta, rng=np.random.default_rng(seed), config=FAST, **kwargs)


def objects(column: pd.Series) -> list:
    """Values as plain objects, None where missing (whatever the dtype's missing marker)."""
    return [None if pd.isna(v) else v for v in column.astype(object)]


def family(dtype) -> str:
    if pd.api.types.is_bool_dtype(dtype):
        return "bool"
    if pd.api.types.is_integer_dtype(dtype):
        return "integer"
    if pd.api.types.is_float_dtype(dtype):
        return "float"
    if pd.api.types.is_datetime64_any_dtype(dtype):
        return "datetime"
    if pd.api.types.is_string_dtype(dtype) or pd.api.types.is_object_dtype(dtype):
        return "text"
    return str(dtype)


@pytest.fixture(scope="module")
def penguins() -> pd.DataFrame:
    return pd.read_csv(DATA / "penguins.csv")


@pytest.fixture(scope="module")
def adult_raw() -> pd.DataFrame:
    table = pd.read_csv(
        DATA / "adult.data",
        header=None,
        names=ADULT_NAMES,
        sep=r",\s*",
        engine="python",
        na_values="?",
    )
    return table.sample(3000, random_state=0).reset_index(drop=True)


@pytest.fixture(scope="module")
def planted(penguins) -> pd.DataFrame:
    """Penguins with one made-up island and one absurd bill depth (each in one row)."""
    table = penguins.copy()
    table.loc[5, "island"] = SECRET
    table.loc[7, "bill_depth_mm"] = 1e9
    return table


@pytest.fixture(scope="module")
def penguins_private(penguins):
    return run(penguins)


# ---------------------------------------------------------------- schema helpers


def test_schema_from_dtypes_reads_kinds_from_dtypes_only():
    table = pd.DataFrame(
        {
            "text": ["a", "b"],
            "obj": pd.Series(["1", "2"], dtype=object),
            "int": [1, 2],
            "float": [1.5, 2.5],
            "flag": [True, False],
            "cat": pd.Categorical(["x", "y"]),
            "when": pd.to_datetime(["2020-01-01", "2020-01-02"]),
        }
    )
    schema = schema_from_dtypes(table)
    assert schema.names() == tuple(table.columns)
    assert {c.name: c.kind for c in schema.columns} == {
        "text": Kind.CATEGORICAL,
        "obj": Kind.CATEGORICAL,
        "int": Kind.NUMERIC,
        "float": Kind.NUMERIC,
        "flag": Kind.CATEGORICAL,
        "cat": Kind.CATEGORICAL,
        "when": Kind.DATETIME,
    }
    # kinds only: nothing read off the values
    assert not any(c.has_domain or c.missing is not None for c in schema.columns)


def test_columns_needing_estimates():
    schema = Schema(
        (
            ColumnSchema("a", "categorical"),
            ColumnSchema("b", "categorical", categories=("x",)),
            ColumnSchema("c", "numeric", lower=0),
            ColumnSchema("d", "numeric", lower=0, upper=1),
            ColumnSchema("e", "datetime"),
            ColumnSchema("f", "numeric", edges=(0, 1)),
            ColumnSchema("g", "categorical", exclude=True),
        )
    )
    parts = open_parts(schema)
    assert parts.categories == ("a",)
    assert parts.ranges == ("c", "e")
    # numeric without "integer", datetime without a format: their structure is measured
    assert parts.structure == ("c", "d", "e", "f")
    assert parts.undecided == ()
    undeclared = open_parts(Schema((ColumnSchema("x"), ColumnSchema("y", exclude=True))))
    assert (undeclared.structure, undeclared.undecided) == (("x",), ("x",))
    assert undeclared.domain_estimates == 1 and undeclared.possible_category_estimates == 1


def test_check_schema_matches_names_the_column():
    table = pd.DataFrame({"a": [1], "b": [2]})
    with pytest.raises(InputError, match="'ghost'"):
        check_schema_matches(
            table, Schema((*schema_from_dtypes(table).columns, ColumnSchema("ghost", "numeric")))
        )
    with pytest.raises(InputError, match="'b'"):
        check_schema_matches(table, Schema((ColumnSchema("a", "numeric"),)))
    check_schema_matches(table, schema_from_dtypes(table))


# ---------------------------------------------------------------- prepare / encode / decode


def test_declared_schema_costs_nothing_and_round_trips_codes(penguins):
    schema = infer_schema(penguins)
    prepared = prepare_columns(
        penguins,
        schema,
        rho_per_estimate=0.1,
        delta_for_thresholds=1e-6,
        rng=np.random.default_rng(0),
    )
    assert prepared.measurements == ()
    assert prepared.end_to_end_dp
    assert prepared.excluded == ()
    assert all(p.provenance is Provenance.DECLARED for p in prepared.columns)
    species = prepared.columns[0].codec
    assert isinstance(species, CategoryCodec)
    assert species.categories == ("Adelie", "Chinstrap", "Gentoo")
    assert not species.other and not species.missing  # declared "missing": false
    records = encode_columns(penguins, prepared)
    assert records.shape == (8, len(penguins)) and records.dtype == np.uint8
    decoded = decode_columns(records, prepared, np.random.default_rng(1))
    assert list(decoded.columns) == list(penguins.columns)
    for name in ("species", "island", "sex", "year"):
        assert objects(decoded[name]) == objects(penguins[name]), name
    assert np.array_equal(encode_columns(decoded, prepared), records)


def test_private_preparation_charges_structure_and_domain_entries_per_column(penguins):
    schema = schema_from_dtypes(penguins)  # kinds declared; whole numbers left open
    prepared = prepare_columns(
        penguins,
        schema,
        rho_per_structure=0.01,
        rho_per_estimate=0.05,
        delta_for_thresholds=3e-7,
        rng=np.random.default_rng(0),
    )
    assert prepared.end_to_end_dp
    domain = [m for m in prepared.measurements if m.step == "domain"]
    structure = [m for m in prepared.measurements if m.step == "structure"]
    checks = [m for m in prepared.measurements if m.step == "identifier"]
    # ranges first, in column order, then the categories (a category weighs 3 ranges); at
    # this budget every range finds its bounds, so the ranges' reserve goes to the categories
    categorical = ["species", "island", "sex"]
    numeric = [n for n in penguins.columns if n not in categorical]
    assert [m.attributes[0] for m in domain] == numeric + categorical + categorical
    # IDENTIFIER_RESERVE of the budget is kept for identifier checks; no column looks like an id
    # (every category column released values, no range holds about as many numbers as rows)
    assert not checks and not prepared.identifiers
    split = DomainSplit((1 - IDENTIFIER_RESERVE) * 0.05 * 8, ranges=5, categories=3)
    assert all(m.rho == pytest.approx(split.range_first) for m in domain[:5])
    assert all(m.rho == pytest.approx(split.category_first(0)) for m in domain[5:8])
    # every category column released values: each gets a second estimate
    assert [m.attributes[0] for m in domain[8:]] == categorical
    assert all(m.rho == pytest.approx(split.category_second(0, 0)) for m in domain[8:])
    assert math.fsum(m.rho for m in domain) == pytest.approx((1 - IDENTIFIER_RESERVE) * 0.05 * 8)
    assert split.category_first(0) > 3 * split.range_first  # weight 3, and the reserve
    assert [m.attributes[0] for m in structure] == [
        c.name for c in schema.columns if c.kind is Kind.NUMERIC
    ]
    assert all(m.rho == 0.01 and m.sensitivity == 1.0 for m in structure)
    category_entries = [m for m in prepared.measurements if m.delta > 0]
    assert [m.attributes[0] for m in category_entries] == categorical + categorical
    first_delta = split.category_first_delta(3e-7)
    assert all(m.delta == pytest.approx(first_delta) for m in category_entries[:3])
    # the whole reservation is spent, over both estimates
    assert math.fsum(m.delta for m in category_entries) == pytest.approx(3e-7)
    assert all(p.provenance is Provenance.PRIVATE for p in prepared.columns)
    island = next(p for p in prepared.columns if p.codec.name == "island")
    assert island.codec.other and island.codec.missing
    assert "3 categories released" in island.note
    mass = next(p for p in prepared.columns if p.codec.name == "body_mass_g")
    assert isinstance(mass.codec, BinnedCodec) and "estimated privately" in mass.note
    choices = {(c.name, c.provenance) for c in mass.choices}
    assert ("kind", Provenance.DECLARED) in choices
    assert ("whole numbers", Provenance.PRIVATE) in choices
    assert mass.codec.integer  # body mass is in whole grams


@pytest.mark.slow
def test_planted_unique_category_is_never_a_private_candidate(planted):
    schema = schema_from_dtypes(planted)
    for seed in range(20):
        prepared = prepare_columns(
            planted,
            schema,
            rho_per_structure=0.05,
            rho_per_estimate=0.05,
            delta_for_thresholds=1e-6,
            rng=np.random.default_rng(seed),
        )
        island = next(p.codec for p in prepared.columns if p.codec.name == "island")
        assert island.categories == ("Biscoe", "Dream", "Torgersen")
        depth = next(p.codec for p in prepared.columns if p.codec.name == "bill_depth_mm")
        assert depth.edges[-1] < 1000
    raw = prepare_columns(
        planted,
        schema,
        rho_per_estimate=0.05,
        delta_for_thresholds=1e-6,
        rng=np.random.default_rng(0),
        raw_domains=True,
    )
    assert not raw.end_to_end_dp and raw.measurements == ()
    island = next(p for p in raw.columns if p.codec.name == "island")
    assert SECRET in island.codec.categories
    assert island.provenance is Provenance.RAW


def test_schema_exclusion_is_reported_with_its_reason(penguins):
    table = penguins.assign(pid=[f"P{i:04d}" for i in range(len(penguins))])
    schema = infer_schema(table).with_column(ColumnSchema("year", exclude=True, reason="why"))
    prepared = prepare_columns(
        table,
        schema,
        rho_per_estimate=0.1,
        delta_for_thresholds=1e-6,
        rng=np.random.default_rng(0),
    )
    assert prepared.excluded == (("year", "why"),)
    # the draft declares pid an identifier: not modelled, written as fresh ids in its place
    assert [(i.name, i.position) for i in prepared.identifiers] == [("pid", 7)]  # year left out
    assert "pid" not in [p.codec.name for p in prepared.columns]
    assert not [m for m in prepared.measurements if "pid" in m.attributes]


# ---------------------------------------------------------------- end to end


@pytest.mark.slow
def test_penguins_round_trip_with_private_domains(penguins, penguins_private):
    result = penguins_private
    out = result.synthetic
    assert list(out.columns) == list(penguins.columns)
    # kinds and whole numbers decided privately: flipper length and mass are whole numbers
    # although pandas reads them as floats (they have blanks)
    families = {name: family(out[name].dtype) for name in penguins.columns}
    assert families == {
        "species": "text", "island": "text", "bill_length_mm": "float",
        "bill_depth_mm": "float", "flipper_length_mm": "integer", "body_mass_g": "integer",
        "sex": "text", "year": "integer",
    }  # fmt: skip
    assert set(out["species"].dropna()) <= {"Adelie", "Chinstrap", "Gentoo", "(other)"}
    # 344 rows and 60-200-cell marginals: GUM's integer fit is coarse, so a loose tolerance
    # here; the adult test below checks missing rates tightly on 3,000 rows
    assert abs(out["sex"].isna().mean() - penguins["sex"].isna().mean()) < 0.06
    assert abs(len(out) - len(penguins)) < 30
    assert [p.codec.name for p in result.columns] == list(penguins.columns)
    assert all(p.provenance is Provenance.PRIVATE for p in result.columns)
    assert result.excluded == ()
    assert result.end_to_end_dp and result.ledger.not_private == ()


@pytest.mark.slow
def test_adult_round_trip_with_private_domains(adult_raw):
    result = run(adult_raw)
    out = result.synthetic
    assert list(out.columns) == ADULT_NAMES
    for name in ADULT_NAMES:
        assert family(out[name].dtype) == family(adult_raw[name].dtype), name
    assert set(out["income"].dropna()) <= {"<=50K", ">50K", "(other)"}
    assert out["age"].dropna().between(0, 120).all()
    assert abs(out["age"].mean() - adult_raw["age"].mean()) < 3
    rich = (out["income"] == ">50K").mean()
    assert abs(rich - (adult_raw["income"] == ">50K").mean()) < 0.05
    for name in ("workclass", "occupation", "native-country"):
        real_rate = adult_raw[name].isna().mean()
        assert real_rate > 0.01
        assert abs(out[name].isna().mean() - real_rate) < 0.02, name
    assert result.end_to_end_dp


@pytest.mark.slow
def test_planted_unique_category_and_outlier_do_not_reach_the_output(planted):
    result = run(planted)
    out = result.synthetic
    assert SECRET not in set(out["island"].dropna())
    island = next(p.codec for p in result.columns if p.codec.name == "island")
    assert SECRET not in island.categories
    assert out["bill_depth_mm"].max() < 1000
    # with raw domains the same data leak both
    raw = run(planted, raw_domains=True)
    island = next(p.codec for p in raw.columns if p.codec.name == "island")
    assert SECRET in island.categories
    depth = next(p.codec for p in raw.columns if p.codec.name == "bill_depth_mm")
    assert depth.edges[-1] == 1e9


def test_ledger_pays_for_private_structure_and_domains(penguins, penguins_private):
    ledger = penguins_private.ledger
    steps = ledger.spent_by_step()
    assert ledger.spent_rho == pytest.approx(ledger.budget_rho, rel=1e-9)
    # the domain share pays for the estimates; the share kept for identifier checks is
    # unspent (no column looks like an id) and goes to PrivSyn's own steps
    domains = steps["domain"]
    assert "identifier" not in steps
    assert domains == pytest.approx(
        (1 - IDENTIFIER_RESERVE) * FAST.domain_share * ledger.budget_rho, rel=1e-9
    )
    assert steps["structure"] == pytest.approx(FAST.structure_share * ledger.budget_rho, rel=1e-9)
    rest = ledger.budget_rho - domains - steps["structure"]
    assert steps["one_way"] == pytest.approx(FAST.one_way_share * rest, rel=1e-9)
    structure = [e.attributes[0] for e in ledger.entries if e.step == "structure"]
    assert sorted(structure) == sorted(penguins.columns)
    # a domain entry per column, and a second one per category column (each released values)
    # and per column of numbers with decimals (the release of its frequent values)
    domain = [e.attributes[0] for e in ledger.entries if e.step == "domain"]
    assert sorted(set(domain)) == sorted(penguins.columns)
    twice = ["bill_depth_mm", "bill_length_mm", "island", "sex", "species"]
    assert sorted(n for n in set(domain) if domain.count(n) == 2) == twice
    values = [e.attributes[0] for e in ledger.entries if "values of a number" in e.mechanism]
    assert sorted(values) == ["bill_depth_mm", "bill_length_mm"]
    assert ledger.reserved_delta == pytest.approx(FAST.threshold_delta_share * 1e-5)
    assert ledger.spent_delta == pytest.approx(ledger.reserved_delta, rel=1e-9)
    assert ledger.spent_delta > 0


def test_domain_budget_the_ranges_leave_unspent_goes_to_privsyns_steps(penguins):
    """Numbers only, at a budget where every range finds its bounds at first: the quarter of
    the ranges' share kept for second estimates is not spent on domains but by PrivSyn."""
    table = penguins[["bill_length_mm", "bill_depth_mm", "flipper_length_mm", "body_mass_g"]]
    ledger = run(table).ledger
    steps = ledger.spent_by_step()
    domain = [e for e in ledger.entries if e.step == "domain"]
    # one range estimate a column (no second estimates), and the release of the values of the
    # two with decimals, from their ranges' own share
    values = [e for e in domain if "values of a number column" in e.mechanism]
    assert len(domain) == 6 and len(values) == 2
    # of the share not kept for identifier checks (none looks like an id), the ranges leave
    # a quarter
    assert "identifier" not in steps
    assert steps["domain"] == pytest.approx(
        FIRST_RANGE_SHARE * (1 - IDENTIFIER_RESERVE) * FAST.domain_share * ledger.budget_rho,
        rel=1e-9,
    )
    assert ledger.spent_rho == pytest.approx(ledger.budget_rho, rel=1e-9)
    rest = ledger.budget_rho - steps["domain"] - steps["structure"]
    assert steps["one_way"] == pytest.approx(FAST.one_way_share * rest, rel=1e-9)


@pytest.mark.slow
def test_fully_declared_schema_spends_nothing_on_domains(penguins):
    schema = infer_schema(penguins)
    assert all(c.has_domain for c in schema.columns)
    result = run(penguins, schema=schema)
    assert "domain" not in result.ledger.spent_by_step()
    assert result.ledger.spent_rho == pytest.approx(result.ledger.budget_rho, rel=1e-9)
    assert result.ledger.reserved_delta == 0.0
    assert all(p.provenance is Provenance.DECLARED for p in result.columns)
    assert result.end_to_end_dp
    out = result.synthetic
    assert set(out["species"]) <= {"Adelie", "Chinstrap", "Gentoo"}
    assert set(out["year"]) <= {2007, 2008, 2009}
    assert out["body_mass_g"].dropna().between(2700, 6300).all()


@pytest.mark.slow
def test_partly_declared_schema_pays_only_for_the_open_column(penguins):
    schema = infer_schema(penguins)
    schema = schema.with_column(ColumnSchema("island", Kind.CATEGORICAL, missing=False))
    result = run(penguins, schema=schema)
    domain = [e for e in result.ledger.entries if e.step == "domain"]
    # a first and a second category estimate (DomainSplit), both of the open column
    assert [e.attributes for e in domain] == [("island",), ("island",)]
    provenance = {p.codec.name: p.provenance for p in result.columns}
    assert provenance.pop("island") is Provenance.PRIVATE
    assert set(provenance.values()) == {Provenance.DECLARED}


@pytest.mark.slow
def test_raw_domains_are_flagged_as_not_private(penguins):
    result = run(penguins, raw_domains=True)
    assert result.end_to_end_dp is False
    assert result.ledger.not_private == tuple(penguins.columns)
    assert "domain" not in result.ledger.spent_by_step()
    assert "structure" not in result.ledger.spent_by_step()
    assert all(p.provenance is Provenance.RAW for p in result.columns)
    kinds = {p.codec.name: p.choices[0] for p in result.columns}
    assert kinds["island"] == StructureChoice("kind", "categorical", Provenance.RAW)
    # only the undeclared columns are read off the data
    schema = infer_schema(penguins).with_column(ColumnSchema("body_mass_g", Kind.NUMERIC))
    partly = run(penguins, schema=schema, raw_domains=True)
    assert partly.end_to_end_dp is False
    assert partly.ledger.not_private == ("body_mass_g",)


@pytest.mark.slow
def test_an_identifier_column_releases_nothing_and_comes_back_as_fresh_ids(penguins):
    thrice = pd.concat([penguins] * 3, ignore_index=True)  # enough rows to tell an id
    table = thrice.assign(pid=[f"P{i:04d}" for i in range(len(thrice))])
    result = run(table)
    assert result.excluded == () and result.identifiers == ("pid",)
    assert result.synthetic["pid"].tolist() == list(range(1, len(result.synthetic) + 1))
    # at a budget too small to tell an id from free text, it is left out instead
    small = run(table, epsilon=1.0)
    assert [name for name, _ in small.excluded] == ["pid"] and not small.identifiers
    assert "frequent enough" in small.excluded[0][1]


def test_datetime_column_comes_back_in_its_own_range():
    rng = np.random.default_rng(0)
    days = pd.Timestamp("2020-01-01") + pd.to_timedelta(rng.integers(0, 366, 2000), unit="D")
    table = pd.DataFrame({"visit": days, "ward": rng.choice(["a", "b", "c"], 2000)})
    result = run(table)
    visit = next(c for c in result.columns if c.codec.name == "visit")
    assert ("date format", "%Y-%m-%d", Provenance.PRIVATE) in {
        (c.name, c.value, c.provenance) for c in visit.choices
    }
    # the format was decided privately, so the dates come back as text in that format
    text = result.synthetic["visit"].dropna()
    assert text.str.fullmatch(r"\d{4}-\d{2}-\d{2}").all()
    visits = pd.to_datetime(text, format="%Y-%m-%d")
    assert visits.min() >= pd.Timestamp("2019-01-01")
    assert visits.max() < pd.Timestamp("2022-01-01")


# ---------------------------------------------------------------- errors


def error_message(table, schema) -> str:
    with pytest.raises(InputError) as info:
        run(table, epsilon=1.0, schema=schema)
    return str(info.value)


def test_schema_naming_a_column_the_table_lacks(penguins):
    schema = Schema((*infer_schema(penguins).columns, ColumnSchema("wingspan", "numeric")))
    assert "wingspan" in error_message(penguins, schema)


def test_table_column_missing_from_the_schema(penguins):
    schema = Schema(infer_schema(penguins).columns[:-1])
    message = error_message(penguins, schema)
    assert "'year'" in message and "exclude" in message


def test_value_not_among_declared_categories(penguins):
    table = penguins.assign(species=penguins["species"].replace("Gentoo", "Dodo"))
    schema = infer_schema(penguins)
    message = error_message(table, schema)
    assert "species" in message and "Dodo" in message


def test_text_in_a_numeric_column(penguins):
    mass = penguins["body_mass_g"].astype(object)
    mass.iloc[3] = "heavy"
    message = error_message(penguins.assign(body_mass_g=mass), infer_schema(penguins))
    assert "body_mass_g" in message and "heavy" in message


def test_non_date_in_a_datetime_column():
    dates = [f"2020-01-{d:02d}" for d in range(1, 29)] * 5
    dates[17] = "sometime in spring"
    table = pd.DataFrame({"visit": dates, "ward": ["a", "b"] * 70})
    schema = Schema(
        (
            ColumnSchema("visit", "datetime", datetime_format="%Y-%m-%d"),
            ColumnSchema("ward", "categorical"),
        )
    )
    message = error_message(table, schema)
    assert "visit" in message and "sometime in spring" in message


def test_missing_value_in_a_column_declared_without_missing(penguins):
    schema = infer_schema(penguins.dropna())
    message = error_message(penguins, schema)
    assert "bill_length_mm" in message and '"missing": true' in message


def test_integer_columns_get_whole_number_edges_and_a_missing_code_unless_declared():
    table = pd.DataFrame({"a": np.arange(200) % 10, "b": ["x", "y"] * 100})
    for missing in (None, False):
        schema = Schema(
            (
                ColumnSchema("a", Kind.NUMERIC, edges=(0, 2.5, 10), missing=missing),
                ColumnSchema("b", Kind.CATEGORICAL, categories=("x", "y")),
            )
        )
        prepared = prepare_columns(
            table,
            schema,
            rho_per_structure=1.0,
            rho_per_estimate=1.0,
            delta_for_thresholds=1e-6,
            rng=np.random.default_rng(0),
        )
        codec = prepared.columns[0].codec
        assert codec.integer  # decided from the noisy counts: no decimals
        assert codec.edges == (0.0, 3.0, 10.0)
        # the dtype says nothing: an undeclared "missing" always gets a code (its rate is
        # measured privately), a declared one decides
        assert codec.missing is (missing is None)
        decoded = codec.decode(np.ones(50, dtype=np.int64), np.random.default_rng(0))
        assert decoded.between(3, 9).all()


def test_declared_lower_bound_above_the_private_upper_bound_names_the_column():
    table = pd.DataFrame({"a": np.random.default_rng(0).uniform(0, 100, 2000)})
    schema = Schema((ColumnSchema("a", Kind.NUMERIC, lower=1000.0, integer=False),))
    with pytest.raises(InputError, match="'a'"):
        prepare_columns(
            table,
            schema,
            rho_per_estimate=1.0,
            delta_for_thresholds=1e-6,
            rng=np.random.default_rng(0),
        )


def test_without_a_schema_each_column_states_why_it_got_its_kind(penguins_private):
    notes = {c.codec.name: c.note for c in penguins_private.columns}
    assert "-> categorical" in notes["species"]
    assert "of values are numbers -> numeric, whole numbers" in notes["year"]
    assert "of values are numbers -> numeric" in notes["bill_length_mm"]
    assert "numeric, 1 decimal" in notes["bill_length_mm"]
    choices = {c.codec.name: {(ch.name, ch.value, ch.provenance) for ch in c.choices}
               for c in penguins_private.columns}  # fmt: skip
    assert ("decimals", "1 (counted with the kinds)", Provenance.PRIVATE) in choices[
        "bill_length_mm"
    ]
    assert ("decimals", "0 (whole numbers)", Provenance.PRIVATE) in choices["body_mass_g"]


def test_a_table_of_only_identifiers_gets_a_clear_error():
    table = pd.DataFrame({"id": [f"person-{i}" for i in range(500)]})
    with pytest.raises(InputError, match="no column is left to synthesise"):
        synthesize(table, 1.0, 1e-6, rng=np.random.default_rng(0), config=FAST)


def test_a_budget_too_small_to_release_anything_says_to_raise_epsilon():
    table = pd.DataFrame({"colour": ["red", "blue"] * 50})
    with pytest.raises(InputError, match="larger epsilon"):
        synthesize(table, 1e-4, 1e-6, rng=np.random.default_rng(0), config=FAST)


def test_a_numeric_column_left_out_says_its_range_could_not_be_estimated():
    rng = np.random.default_rng(0)
    size = np.full(600, np.nan)
    size[:15] = rng.normal(50, 10, 15)  # too few values to outweigh the noise
    table = pd.DataFrame({"size": size, "kind": ["a", "b"] * 300})
    preparation = prepare_columns(
        table, schema_from_dtypes(table), rho_per_structure=1.0, rho_per_estimate=1e-3,
        delta_for_thresholds=1e-9, rng=rng, raw_domains=False,
    )  # fmt: skip
    reasons = dict(preparation.excluded)
    assert "range could not be estimated privately" in reasons["size"]
    assert "bounds" in reasons["size"]


def test_declared_decimals_settle_whole_numbers_that_the_noisy_counts_would_decide():
    # whole values: the noisy class counts say "whole numbers", but the owner declared one
    # decimal; before, the two collided into a schema error after the budget was spent
    table = pd.DataFrame({"a": np.arange(400) % 10})
    schema = Schema((ColumnSchema("a", Kind.NUMERIC, lower=0.0, upper=10.0, decimals=1),))
    prepared = prepare_columns(
        table,
        schema,
        rho_per_structure=1.0,
        rho_per_estimate=1.0,
        delta_for_thresholds=1e-6,
        rng=np.random.default_rng(0),
    )
    column = prepared.columns[0]
    assert not column.codec.integer
    whole = next(c for c in column.choices if c.name == "whole numbers")
    assert (whole.value, whole.provenance) == ("no", Provenance.DECLARED)


def test_a_second_category_estimate_reads_the_exact_counts_once(penguins):
    """Each category column gets a first and a second estimate here (all three release
    values); the table is asked for each column's value counts once (on DuckDB or Spark
    each ask is a scan)."""
    from privsyn_core.measuring.counters import FrameTable

    asked: list[str] = []

    class Counting(FrameTable):
        def value_counts(self, name: str):
            asked.append(name)
            return super().value_counts(name)

    table = Counting(penguins)
    prepared = prepare_columns(
        table,
        schema_from_dtypes(penguins),
        rho_per_structure=0.01,
        rho_per_estimate=0.05,
        delta_for_thresholds=3e-7,
        rng=np.random.default_rng(0),
    )
    domain = [m.attributes[0] for m in prepared.measurements if m.delta > 0]
    assert sorted(domain) == sorted(["species", "island", "sex"] * 2)
    assert sorted(asked) == ["island", "sex", "species"]


def test_a_column_of_few_decimal_values_draws_only_released_values():
    """log(family size): 6 values written with full floats, a kind left to the structure
    step: its frequent values are released as categories are, and they are the column."""
    rng = np.random.default_rng(0)
    n = 6000
    sizes = rng.choice([1, 2, 3, 4, 5, 6], n, p=[0.1, 0.15, 0.25, 0.25, 0.15, 0.1])
    table = pd.DataFrame({"lfam": np.log(sizes), "group": rng.choice(["a", "b"], n)})
    result = synthesize(table, 2.0, 1e-7, rng=np.random.default_rng(1), config=FAST)
    column = next(c for c in result.columns if c.codec.name == "lfam")
    assert "frequent values released" in column.note
    values = [m for m in result.ledger.entries if m.attributes == ("lfam",) and m.delta > 0]
    assert values and all("values of a number column" in m.mechanism for m in values)
    drawn = result.synthetic["lfam"].dropna().to_numpy(dtype=float)
    assert np.isin(np.round(drawn, 9), np.round(np.log(np.arange(1, 7)), 9)).mean() >= 0.99
    real_share = np.mean(table["lfam"] == np.log(3))
    assert np.mean(np.isclose(drawn, np.log(3))) == pytest.approx(real_share, abs=0.03)
