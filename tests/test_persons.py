"""A person-level guarantee: at most K rows per person, sensitivities times K, no person column
in anything released (privsyn_core/measuring/persons.py and the pipeline's use of it)."""

from __future__ import annotations

import json
import math
from collections import Counter

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_spark_counter import spark as spark  # the fixture: one local[2] session

from privsyn_core.data.schema import ColumnSchema, Schema
from privsyn_core.errors import InputError
from privsyn_core.measuring.counters.sql_encoding import duckdb_table, spark_table
from privsyn_core.measuring.indif import indif_sigma
from privsyn_core.measuring.persons import bounded, kept_rows
from privsyn_core.measuring.private_domain import categories_from_counts
from privsyn_core.pipeline import synthesize
from privsyn_core.privacy.ledger import (
    ROW,
    FailedAfterSpending,
    PrivacyUnit,
    gaussian_sigma,
    noise_rho,
)
from privsyn_core.privacy.noise import SecureNoise, SeededNoise


def people_table(persons: int = 120, most: int = 9, seed: int = 0) -> pd.DataFrame:
    """``persons`` people with 1 to ``most`` rows each, a person column ``pid`` first."""
    rng = np.random.default_rng(seed)
    pid = np.repeat(np.arange(persons), rng.integers(1, most + 1, persons))
    n = pid.size
    return pd.DataFrame(
        {
            "pid": pid,
            "sex": rng.choice(["F", "M"], n),
            "city": rng.choice(["a", "b", "c", "d"], n),
            "grade": rng.choice(["x", "y", "z"], n),
        }
    )


#: every column declared: no domain estimate, so each step's rho is the same for every K
DECLARED = Schema(
    (
        ColumnSchema("sex", kind="categorical", categories=("F", "M"), missing=False),
        ColumnSchema("city", kind="categorical", categories=("a", "b", "c", "d"), missing=False),
        ColumnSchema("grade", kind="categorical", categories=("x", "y", "z"), missing=False),
    )
)


def test_kept_rows_keeps_at_most_k_of_each_person_and_all_of_the_small_ones():
    table = people_table()
    sizes = table["pid"].value_counts()
    keep = kept_rows(table["pid"], 3, np.random.default_rng(1))
    kept = table["pid"].iloc[keep].value_counts()
    assert (kept <= 3).all()
    assert (kept == np.minimum(sizes.loc[kept.index], 3)).all()
    assert set(kept.index) == set(sizes.index)  # nobody disappears
    assert np.all(np.diff(keep) > 0)  # in the table's order


@pytest.mark.slow
def test_kept_rows_chooses_at_random_among_a_persons_rows():
    people = pd.Series([0] * 10)
    seen = np.zeros(10)
    rng = np.random.default_rng(2)
    for _ in range(2000):
        seen[kept_rows(people, 2, rng)] += 1
    assert seen.min() > 300  # each of the 10 rows kept about 400 times in 2000 draws


def test_rows_without_a_person_are_one_person():
    people = pd.Series([None, None, None, 1, 1, np.nan])
    keep = kept_rows(people, 2, np.random.default_rng(0))
    assert len(keep) == 4  # two of the four missing ones, both of person 1


@pytest.mark.slow
def test_duckdb_keeps_at_most_k_rows_per_person_in_sql_without_the_person_column(tmp_path):
    table = people_table()
    table.loc[:4, "pid"] = None
    path = tmp_path / "people.csv"
    table.to_csv(path, index=False)
    raw = duckdb_table(path)
    unit = PrivacyUnit("pid", 3)
    out = bounded(raw, unit, SeededNoise(np.random.default_rng(0)))
    assert out.names == ("sex", "city", "grade")
    expected = int(np.minimum(table["pid"].value_counts(dropna=False), 3).sum())
    assert out.run(f"SELECT count(*) FROM {out.source}")[0][0] == expected
    # the same rows for every count: kept once
    assert out.class_counts("sex").sum() == expected == out.class_counts("city").sum()


@pytest.mark.slow
def test_spark_keeps_at_most_k_rows_per_person_in_sql(spark):
    table = people_table(persons=40)
    raw = spark_table(spark.createDataFrame(table), spark=spark)
    out = bounded(raw, PrivacyUnit("pid", 2), SecureNoise(PrivacyUnit("pid", 2)))
    assert out.names == ("sex", "city", "grade")
    expected = int(np.minimum(table["pid"].value_counts(), 2).sum())
    assert out.run(f"SELECT count(*) FROM {out.source}")[0][0] == expected


def coded_people(persons: int = 120) -> pd.DataFrame:
    """:func:`people_table` pre-coded: every column but ``pid`` a code."""
    table = people_table(persons)
    values = {"sex": ["F", "M"], "city": ["a", "b", "c", "d"], "grade": ["x", "y", "z"]}
    codes = {c: table[c].map({v: i for i, v in enumerate(vs)}) for c, vs in values.items()}
    return table.assign(**codes)


CODED_SIZES = {"sex": 2, "city": 4, "grade": 3}


@pytest.mark.slow
def test_a_precoded_file_on_duckdb_counts_only_the_rows_each_person_keeps(tmp_path):
    """The pre-coded path on DuckDB reads the bounded table, not the file: its counts hold
    at most K rows of each person, and a run prices every step for K rows."""
    table = coded_people()
    path = tmp_path / "coded.csv"
    table.to_csv(path, index=False)
    unit = PrivacyUnit("pid", 2)
    raw = bounded(duckdb_table(path), unit, SeededNoise(np.random.default_rng(0)))
    (sex,) = raw.coded(CODED_SIZES).count([("sex",)])
    expected = int(np.minimum(table["pid"].value_counts(), 2).sum())
    assert sex.values.sum() == expected < len(table)
    # a bad code in the kept rows is named, as in the file
    bad = table.assign(city=table["city"].where(table.index != 0, 9))
    bad.to_csv(path, index=False)
    with pytest.raises(InputError, match="column 'city' holds"):
        bounded(duckdb_table(path), PrivacyUnit("pid", 1000), SecureNoise()).coded(CODED_SIZES)
    table.to_csv(path, index=False)
    run = synthesize(
        path, 2.0, 1e-9, engine="duckdb", domain=CODED_SIZES, rng=np.random.default_rng(1),
        person="pid", max_rows_per_person=2,
    )  # fmt: skip
    assert run.ledger.unit == unit and "pid" not in run.synthetic.columns
    assert {e.sensitivity for e in run.ledger.entries if e.step != "indif"} == {2.0}


@pytest.mark.slow
def test_a_precoded_frame_on_spark_counts_only_the_rows_each_person_keeps(spark):
    table = coded_people(persons=40)
    raw = spark_table(spark.createDataFrame(table), spark=spark)
    unit = PrivacyUnit("pid", 2)
    out = bounded(raw, unit, SecureNoise(unit))
    (sex,) = out.coded(CODED_SIZES).count([("sex",)])
    assert sex.values.sum() == int(np.minimum(table["pid"].value_counts(), 2).sum())


def test_a_missing_person_column_is_refused_before_anything_is_read(tmp_path):
    table = people_table()
    with pytest.raises(InputError, match="person column 'who' is not in the table"):
        synthesize(table, 1.0, 1e-9, rng=np.random.default_rng(0), person="who",
                   max_rows_per_person=2)  # fmt: skip
    path = tmp_path / "people.csv"
    table.to_csv(path, index=False)
    with pytest.raises(InputError, match="person column 'who' is not in the table"):
        synthesize(path, 1.0, 1e-9, engine="duckdb", person="who", max_rows_per_person=2)


@pytest.mark.parametrize(
    ("person", "k", "message"),
    [
        ("pid", 0, "at least 1"),
        ("pid", 2.5, "whole number"),
        ("pid", True, "whole number"),
        ("pid", None, "needs max_rows_per_person"),
        (None, 3, "needs the person column"),
        ("", 3, "column name"),
    ],
)
def test_a_unit_that_is_not_one_is_refused(person, k, message):
    with pytest.raises(InputError, match=message):
        synthesize(people_table(), 1.0, 1e-9, person=person, max_rows_per_person=k)


def test_a_person_column_in_the_schema_or_domain_is_refused():
    table = people_table()
    schema = Schema.undeclared(table.columns)
    with pytest.raises(InputError, match="in the schema: it is never synthesised"):
        synthesize(table, 1.0, 1e-9, schema=schema, person="pid", max_rows_per_person=2)
    domain = {"pid": 200, "sex": ["F", "M"]}
    with pytest.raises(InputError, match="in the domain"):
        synthesize(table, 1.0, 1e-9, domain=domain, person="pid", max_rows_per_person=2)


def test_unit_scales_every_sensitivity_by_k():
    unit = PrivacyUnit("pid", 5)
    assert unit.sigma(0.3) == pytest.approx(5 * gaussian_sigma(0.3))
    assert unit.sigma(0.3, 4.0) == pytest.approx(5 * ROW.sigma(0.3, 4.0))
    assert indif_sigma(6, 0.2, unit) == pytest.approx(5 * indif_sigma(6, 0.2))
    assert indif_sigma(6, 0.2) == pytest.approx(math.sqrt(8 * 15 / 0.2))
    assert ROW.words == "per row"
    assert unit.words == "per person (pid), at most 5 rows"
    assert PrivacyUnit("pid", 1).words == "per person (pid), at most 1 row"
    assert PrivacyUnit.from_json(json.loads(json.dumps(unit.to_json()))) == unit


def test_category_threshold_covers_every_value_a_person_may_hold_alone():
    counts = np.array([50.0, 3.0])
    per_row = categories_from_counts("c", ["a", "b"], counts, 0.5, 1e-6, SeededNoise(
        np.random.default_rng(0)))  # fmt: skip
    unit = PrivacyUnit("pid", 4)
    per_person = categories_from_counts(
        "c", ["a", "b"], counts, 0.5, 1e-6, SeededNoise(np.random.default_rng(0), unit=unit)
    )
    assert per_person.measurement.sigma == pytest.approx(4 * per_row.measurement.sigma)
    z = SeededNoise(np.random.default_rng(0)).tail_quantile(1e-6 / 4)
    assert per_person.threshold == pytest.approx(4 + per_person.measurement.sigma * z)


@pytest.mark.parametrize("selection", ["densemarg", "privbayes"])
def test_every_measurement_of_a_run_is_k_times_noisier_for_the_same_rho(selection):
    from privsyn_core.config import PrivSynConfig

    config = PrivSynConfig(selection=selection)
    table = people_table(persons=400)
    runs = {
        k: synthesize(
            table,
            2.0,
            1e-9,
            rng=np.random.default_rng(3),
            person="pid",
            max_rows_per_person=k,
            config=config,
            schema=DECLARED,
        )
        for k in (1, 3)
    }
    one, three = runs[1].ledger, runs[3].ledger
    per_row = {"indif": 4.0, "privbayes": 4.0}
    for entry in three.entries:
        assert entry.sensitivity == 3 * per_row.get(entry.step, 1.0)
        assert noise_rho(entry) == pytest.approx(entry.rho)  # the ledger prices its own noise
    # the same measurement at the same rho: three times the noise
    alike = {(e.step, e.attributes, round(e.rho, 12)): e for e in one.entries}
    pairs = [(alike[k], e) for e in three.entries if (k := (e.step, e.attributes,
             round(e.rho, 12))) in alike]  # fmt: skip
    assert len(pairs) == len(three.entries) == len(one.entries)
    for a, b in pairs:
        assert b.sigma == pytest.approx(3 * a.sigma)
    assert three.unit == PrivacyUnit("pid", 3)
    for result in runs.values():
        assert "pid" not in result.synthetic.columns
        assert all("pid" not in m.attributes for m in result.noisy_marginals)
        assert all("pid" not in e.attributes for e in result.ledger.entries)


def raw_people(persons: int, wide: bool, seed: int = 0) -> pd.DataFrame:
    """People as an analyst's raw CSV holds them, nothing declared: a row id, an age, an
    amount that is zero for most rows, text categories; ``wide`` adds 28 coded answers that
    depend on each other in a chain (31 modelled columns: tree-first's pooled pairs)."""
    rng = np.random.default_rng(seed)
    pid = np.repeat(np.arange(persons), rng.integers(1, 6, persons))
    n = pid.size
    table = pd.DataFrame(
        {
            "pid": pid,
            "row": np.arange(1, n + 1),
            "age": rng.integers(18, 90, n),
            "amount": np.where(rng.random(n) < 0.8, 0.0, rng.lognormal(8, 1, n).round(2)),
            "city": rng.choice(["north", "south", "east"], n),
        }
    )
    if wide:
        answer = rng.integers(0, 3, n)
        for i in range(28):
            answer = np.where(rng.random(n) < 0.7, answer, rng.integers(0, 3, n))
            table[f"q{i}"] = answer
    return table


@settings(max_examples=6, deadline=None, derandomize=True, database=None)
@given(k=st.integers(1, 4), wide=st.booleans(), selection=st.sampled_from(["auto", "privbayes"]))
@pytest.mark.slow
def test_every_noise_drawn_is_the_ledgers_and_k_times_the_per_row_one(k, wide, selection):
    """Every step of a raw-table run, the structure, range, category and id estimates
    included, and tree-first's pooled pairs on a wide table: each noise the run draws is one
    its ledger records, every entry records K times its step's per-row sensitivity, and its
    rho is what that noise buys. A step calibrated per row under a person-level unit would
    draw noise its ledger does not hold, or record a price its noise contradicts."""
    from privsyn_core.config import PrivSynConfig
    from privsyn_core.generation.gum_settings import GumSettings
    from privsyn_core.privacy.ledger import per_row_sensitivity

    drawn: list[tuple[str, float]] = []
    add, choose = SeededNoise.add, SeededNoise.choose

    def recorded_add(self, values, sigma, *, integer):
        drawn.append(("gaussian", float(sigma)))
        return add(self, values, sigma, integer=integer)

    def recorded_choose(self, scores, scale):
        if np.ptp(scores) > 0:  # a choice among equal scores (PrivBayes's first) reads nothing
            drawn.append(("exponential", float(scale)))
        return choose(self, scores, scale)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(SeededNoise, "add", recorded_add)
        patch.setattr(SeededNoise, "choose", recorded_choose)
        config = PrivSynConfig(selection=selection, gum=GumSettings(iterations=2))
        result = synthesize(
            raw_people(3000, wide), 4.0, 1e-9, rng=np.random.default_rng(k), person="pid",
            max_rows_per_person=k, config=config,
        )  # fmt: skip
    ledger = result.ledger
    assert ledger.unit == PrivacyUnit("pid", k)
    steps = {e.step for e in ledger.entries}
    assert {"structure", "domain", "one_way", "marginal"} <= steps, steps
    if wide and selection == "auto":  # tree-first: its tree's pairs measured again, pooled
        assert "indif" in steps and len(result.synthetic.columns) >= 30
        pairs = Counter(e.attributes for e in ledger.entries if e.step == "marginal")
        assert any(times == 2 for times in pairs.values())
    for entry in ledger.entries:
        assert entry.sensitivity == pytest.approx(k * per_row_sensitivity(entry.step)), entry
        assert noise_rho(entry) == pytest.approx(entry.rho, rel=1e-9), entry
    recorded = {round(e.sigma, 9) for e in ledger.entries}
    assert {round(sigma, 9) for _, sigma in drawn} <= recorded
    assert recorded <= {round(sigma, 9) for _, sigma in drawn}  # nothing priced but not drawn


def test_the_ledger_says_per_person():
    result = synthesize(
        people_table(), 2.0, 1e-9, rng=np.random.default_rng(0), person="pid",
        max_rows_per_person=2, schema=DECLARED,
    )  # fmt: skip
    record = result.ledger.to_json()
    assert record["privacy_unit"] == {
        "person": "pid",
        "rows_per_person": 2,
        "words": "per person (pid), at most 2 rows",
    }
    assert "pid" not in json.dumps(record["measurements"])


def test_privsyn_fit_takes_the_person_as_synthesize_does():
    """``PrivSyn.fit(person=, max_rows_per_person=)`` measures what ``synthesize`` measures
    with the same seed: the same unit, the same ledger, and no person column in a sample."""
    from privsyn_core.model import PrivSyn

    table = people_table()
    model = PrivSyn(2.0, 1e-9, schema=DECLARED).fit(
        table, rng=np.random.default_rng(0), person="pid", max_rows_per_person=2
    )
    result = synthesize(
        table, 2.0, 1e-9, rng=np.random.default_rng(0), person="pid",
        max_rows_per_person=2, schema=DECLARED,
    )  # fmt: skip
    assert model.ledger.unit == PrivacyUnit("pid", 2)
    assert model.ledger.to_json() == result.ledger.to_json()
    assert "pid" not in model.sample(50, seed=1).columns
    with pytest.raises(InputError, match="needs max_rows_per_person"):
        PrivSyn(2.0, 1e-9).fit(table, person="pid")


# --------------------------------------------------------------------------------------------
# front ends: the CLI, the bundle, the planner, the audit
# --------------------------------------------------------------------------------------------

FAST = ["--iterations", "5", "--no-registry", "--seed", "1"]


def _one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("privsyn: error: ")
    return lines[0]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--person", "who", "--max-rows-per-person", "2"], "person column 'who' is not in"),
        (["--person", "pid", "--max-rows-per-person", "0"], "must be at least 1"),
        (["--person", "pid", "--max-rows-per-person", "2.5"], "expected a whole number"),
        (["--person", "pid"], "needs max_rows_per_person"),
        (["--max-rows-per-person", "3"], "needs the person column"),
    ],
)
def test_cli_refuses_a_unit_in_one_line_and_writes_nothing(tmp_path, capsys, extra, message):
    from privsyn_core.cli import main

    source = tmp_path / "people.csv"
    people_table().to_csv(source, index=False)
    out = tmp_path / "out.csv"
    args = ["synthesize", str(source), "-o", str(out), "--epsilon", "2", *FAST, *extra]
    assert main(args) == 2
    assert message in _one_error_line(capsys)
    assert not out.exists()


def test_cli_refuses_a_person_column_the_schema_synthesises(tmp_path, capsys):
    from privsyn_core.cli import main

    source = tmp_path / "people.csv"
    people_table().to_csv(source, index=False)
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(Schema.undeclared(["pid", "sex"]).to_json()))
    args = ["synthesize", str(source), "-o", str(tmp_path / "o.csv"), "--epsilon", "2",
            "--schema", str(schema), "--person", "pid", "--max-rows-per-person", "2",
            *FAST]  # fmt: skip
    assert main(args) == 2
    assert "in the schema: it is never synthesised" in _one_error_line(capsys)


def test_cli_run_bundle_and_report_say_per_person_and_hold_no_person_column(tmp_path, capsys):
    from privsyn_core.cli import main
    from privsyn_core.release.bundle import load_release

    source = tmp_path / "people.csv"
    people_table(persons=300).to_csv(source, index=False)
    out, bundle = tmp_path / "out.csv", tmp_path / "release.zip"
    args = ["synthesize", str(source), "-o", str(out), "--epsilon", "4", "--bundle", str(bundle),
            "--person", "pid", "--max-rows-per-person", "3", *FAST]  # fmt: skip
    assert main(args) == 0
    assert "guarantee per person (pid), at most 3 rows" in capsys.readouterr().err
    assert "pid" not in pd.read_csv(out).columns
    import zipfile

    with zipfile.ZipFile(bundle) as archive:
        names = archive.namelist()
        manifest = json.loads(archive.read("manifest.json"))
        ledger = json.loads(archive.read("ledger.json"))
        report = archive.read("report.html").decode()  # every bundle has its report
        everything = b"".join(archive.read(n) for n in names if n.endswith((".json", ".csv")))
    assert manifest["privacy_unit"] == "per person (pid), at most 3 rows"
    assert ledger["privacy_unit"]["rows_per_person"] == 3
    assert b'"pid"' not in everything.replace(b'"person": "pid"', b"")
    assert "per person (pid), at most 3 rows" in report
    release = load_release(bundle)
    assert release.model.ledger.unit == PrivacyUnit("pid", 3)


def test_planner_shows_k_times_the_noise(capsys):
    from privsyn_core.cli import main
    from privsyn_core.privacy.planner import plan_budget

    row = plan_budget(1.0, 1e-9, 6, private_categories=2, private_structure=2)
    person = plan_budget(
        1.0, 1e-9, 6, private_categories=2, private_structure=2, unit=PrivacyUnit("pid", 5)
    )
    assert person.rho == row.rho
    for a, b in zip(row.steps, person.steps, strict=True):
        assert b.rho == pytest.approx(a.rho)
        if a.sigma is not None:
            assert b.sigma == pytest.approx(5 * a.sigma)
    assert main(["plan", "--epsilon", "1", "--columns", "6", "--max-rows-per-person", "5"]) == 0
    assert "at most 5 rows: every sigma is 5 times" in capsys.readouterr().out


@pytest.mark.slow
def test_audit_with_person_level_neighbours_stays_within_the_claim():
    from privsyn_core.privacy.audit import audit_engine

    unit = PrivacyUnit("person", 4)
    results = audit_engine(
        4.0,
        1e-6,
        SeededNoise(np.random.default_rng(5), unit=unit),
        600,
        np.random.default_rng(0),
        indif_candidates=5,
        rows_per_person=4,
    )
    for result in results:
        assert not result.violates_claim, result.mechanism
        assert result.epsilon_lower_bound < result.claimed_epsilon
        assert result.mu_of_neighbours <= result.mu_claimed * (1 + 1e-9)
    one_way = results[0]
    assert one_way.mu_of_neighbours == pytest.approx(one_way.mu_claimed)  # the worst case


@pytest.mark.slow
def test_audit_catches_row_level_noise_under_person_level_neighbours():
    """The noise of one row against a person of 4 rows: the audit must see the leak."""
    from privsyn_core.privacy.audit import AUDIT_DOMAIN, Neighbours, audit_one_way
    from privsyn_core.privacy.conversion import rho_from_epsilon_delta

    rng = np.random.default_rng(0)
    records = np.stack([rng.integers(0, s, size=200) for s in AUDIT_DOMAIN.sizes])
    neighbours = Neighbours(AUDIT_DOMAIN, records, np.array([1, 2, 0])).of_people(4)
    rho = rho_from_epsilon_delta(1.0, 1e-6)
    row_noise = SeededNoise(np.random.default_rng(1))  # per row: a quarter of the noise
    result = audit_one_way(neighbours, rho, row_noise, 1e-6, 2000)
    assert result.violates_claim


@pytest.mark.slow
def test_a_person_column_naming_few_people_says_why_no_column_is_left():
    """Thousands of rows but four 'people' (a column that is not a person id): K rows each
    leave too few rows for any category, and the refusal names that cause, not only the
    budget."""
    rng = np.random.default_rng(3)
    table = pd.DataFrame(
        {
            "region": rng.choice(["n", "s", "e", "w"], 3000),
            "colour": rng.choice(["red", "blue"], 3000),
            "size": rng.choice(["S", "M", "L"], 3000),
        }
    )
    with pytest.raises(FailedAfterSpending) as refused:
        synthesize(table, 1.0, 1e-9, person="region", max_rows_per_person=1, rng=rng)
    message = str(refused.value)
    assert "no column is left" in message
    assert "1 row(s) of each person (column 'region')" in message
    assert refused.value.ledger.spent_rho > 0
