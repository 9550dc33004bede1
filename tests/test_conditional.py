"""Conditional samples (``privsyn_core/generation/conditional.py``): ``model.sample(n,
where=...)`` and ``privsyn generate --where``. Conditions are parsed and refused in one line
before anything is drawn; every row satisfies them; the rows follow the model's own
conditional distribution; the same seed gives the same rows; nothing is spent."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import planted_pair
from test_generate_cli import raw_csv, release  # noqa: F401 - fixture

from privsyn_core.cli import main
from privsyn_core.errors import InputError
from privsyn_core.generation import conditional
from privsyn_core.generation.conditional import parse_where, probability, resolve, split_where
from privsyn_core.model import PrivSyn
from privsyn_core.privacy.ledger import PrivacyLedger
from privsyn_core.release.registry import Registry, file_fingerprint


@pytest.fixture(scope="module")
def raw_model():
    """A raw table (a category, whole numbers, decimals, dates) fitted in debug mode."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        table = pd.read_csv(raw_csv(Path(folder)), dtype=str, keep_default_na=False)
    return PrivSyn(2.0, 1e-9).fit(table, rng=np.random.default_rng(0))


@pytest.fixture(scope="module")
def copied():
    """A planted table where b copies a except in 10% of rows (then b is uniform): given
    a = v1, b = v1 with probability 0.9 + 0.1 / 4 = 0.925."""
    table = planted_pair(20_000, 0.1, np.random.default_rng(1)).astype(str)
    table = "v" + table
    return PrivSyn(20.0, 1e-9).fit(table, rng=np.random.default_rng(2))


def test_where_texts_are_parsed_into_columns_and_values():
    assert parse_where(["sex=Female", "age>=30", "age<40", "age=30..40", "income=>50K"]) == [
        ("sex", "Female"),
        ("age", ">=30"),
        ("age", "<40"),
        ("age", "30..40"),
        ("income", ">50K"),
    ]


@pytest.mark.parametrize(
    ("where", "says"),
    [
        ({"town": "north"}, "condition on 'town': no such column"),
        ({"city": "west"}, "column 'city' has no category 'west'; its released categories"),
        ({"city": "north|west"}, "no category 'west'"),
        ({"age": "30..x"}, "'x' is not a number; a range reads age=30..40"),
        ({"age": ".."}, "the range has no end"),
        ({"age": "40..30"}, "the range is empty (40 > 30)"),
        ({"age": ">=abc"}, "'abc' is not a number"),
        ({"age": "200..300"}, "selects nothing: no released value lies in the range"),
        ({"joined": "2030-01-01.."}, "selects nothing"),
        ({"joined": "yesterday..tomorrow"}, "is not a date"),
        (["city"], "is not COLUMN=VALUE"),
        (["=north"], "is not COLUMN=VALUE"),
        (["age>=50", "age<30"], "selects nothing"),
        (["city=north", "city=south"], "no category satisfies all of it"),
    ],
)
def test_conditions_are_refused_in_one_line_before_any_draw(raw_model, monkeypatch, where, says):
    def no_draw(*args, **kwargs):
        raise AssertionError("drew rows for a refused condition")

    monkeypatch.setattr(type(raw_model), "generate_blocks", no_draw)
    with pytest.raises(InputError) as refused:
        raw_model.sample(100, where=where, seed=0)
    assert says in str(refused.value) and "\n" not in str(refused.value)


def test_a_condition_needing_too_many_draws_is_refused_with_the_estimate(raw_model, monkeypatch):
    monkeypatch.setattr(conditional, "MAX_DRAWS", 50_000)
    p = probability(raw_model, resolve(raw_model, {"city": "north", "age": "30..40"}))
    with pytest.raises(InputError, match=r"probability about 0\.\d+ under the release's model"):
        raw_model.sample(int(50_000 * p) + 100, where={"city": "north", "age": "30..40"})
    assert 0.02 < p < 0.15  # a third of cities times about a sixth of ages


@pytest.mark.slow
def test_every_row_satisfies_every_condition(raw_model):
    where = {"city": ["north", "east"], "age": "30..40", "income": ">20000.5"}
    table = raw_model.sample(3000, where=where, seed=4)
    assert len(table) == 3000
    assert set(table["city"]) == {"north", "east"}
    assert table["age"].between(30, 40).all() and {30, 40} <= set(table["age"])
    assert (table["income"] > 20000.5).all()  # partly covered bins: rows past the end dropped
    dates = raw_model.sample(2000, where=["joined=2020-03-01..2020-06-30", "age<25"], seed=1)
    joined = pd.to_datetime(dates["joined"], format="%Y-%m-%d")
    assert joined.between("2020-03-01", "2020-06-30").all() and (dates["age"] < 25).all()


def test_the_same_seed_and_conditions_give_the_same_rows(raw_model):
    where = {"city": "south", "age": ">=50"}
    first = raw_model.sample(1500, where=where, seed=9)
    pd.testing.assert_frame_equal(first, raw_model.sample(1500, where=where, seed=9))
    assert not first.equals(raw_model.sample(1500, where=where, seed=10))
    # the same rows whatever the number of workers, streamed or whole
    streamed = raw_model.sample_blocks(1500, where=where, seed=9, workers=2)
    pd.testing.assert_frame_equal(first, pd.concat(list(streamed), ignore_index=True))


@pytest.mark.slow
def test_the_conditional_distribution_is_the_models(copied):
    """b copies a: given a = v1, b = v1 in about 92.5% of rows (a sample that ignored the
    condition, or kept it only in a's column, would give about 25%)."""
    table = copied.sample(4000, where={"a": "v1"}, seed=0)
    assert (table["a"] == "v1").all()
    share = (table["b"] == "v1").mean()
    assert abs(share - 0.925) < 0.03, share
    # the same as the model's own unconditioned sample filtered the same way
    plain = copied.sample(40_000, seed=1)
    assert abs(share - (plain.loc[plain["a"] == "v1", "b"] == "v1").mean()) < 0.03
    # and the noise columns stay independent of the condition
    assert table["noise0"].value_counts(normalize=True).min() > 0.28


def test_sampling_with_conditions_spends_nothing(copied, monkeypatch):
    """Conditional sampling is post-processing: it charges no ledger (every measurement
    does, so a charge raises here) and the model's ledger stays the fit's."""

    def charged(*_: object) -> None:
        raise AssertionError("sampling charged a ledger")

    monkeypatch.setattr(PrivacyLedger, "charge", charged)
    monkeypatch.setattr(PrivacyLedger, "charge_all", charged)
    spent = copied.ledger.spent
    table = copied.sample(500, where={"a": "v2", "b": "v2|v3"}, seed=0)
    assert len(table) == 500 and set(table["a"]) == {"v2"}
    assert copied.ledger.spent == spent


@pytest.mark.slow
def test_generate_where_given_twice_end_to_end(release, tmp_path, capsys):  # noqa: F811
    table, bundle = release
    registry = Registry()
    runs, spent = registry.runs(), registry.budget(file_fingerprint(table)).spent.rho
    out = tmp_path / "women.csv"
    argv = ["generate", str(bundle), "--rows", "2000", "--where", "city=north",
            "--where", "age=30..40", "--seed", "5", "-o", str(out)]  # fmt: skip
    capsys.readouterr()
    assert main(argv) == 0
    assert "2000 synthetic rows where city=north; age=30..40" in capsys.readouterr().err
    sample = pd.read_csv(out)
    assert len(sample) == 2000 and set(sample["city"]) == {"north"}
    assert sample["age"].between(30, 40).all()
    again = tmp_path / "again.csv"
    assert main([*argv[:-1], str(again), "-q"]) == 0
    assert again.read_bytes() == out.read_bytes()
    assert registry.runs() == runs
    assert registry.budget(file_fingerprint(table)).spent.rho == spent
    # refused in one line, exit 2, no file
    for bad in ("city=west", "age=30..x", "wage>3"):
        refused = tmp_path / "refused.csv"
        capsys.readouterr()
        argv = ["generate", str(bundle), "--rows", "10", "--where", bad, "-o", str(refused)]
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("privsyn: error: condition") and err.count("\n") == 1, err
        assert not refused.exists()


def test_a_line_of_conditions_splits_at_commas_between_conditions():
    assert split_where("sex=Female, age=30..40; race=White|Black") == [
        "sex=Female",
        "age=30..40",
        "race=White|Black",
    ]
    assert split_where("job=Sales, marketing, age>=30") == ["job=Sales, marketing", "age>=30"]
    assert split_where(" , ") == [] and split_where("sex=Female, ") == ["sex=Female"]
