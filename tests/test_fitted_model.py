"""Measure once, sample many: ``PrivSyn(...).fit(table)`` then ``model.sample(n, seed=...)``.

The fitted model is the private boundary as a value: these tests check that it samples with
the table gone, that a sample spends nothing, that seeds reproduce, that ``synthesize`` is the
same pieces, and that the model survives the release bundle (and a bad bundle is refused
with a reason).
"""

import gc
import io
import json
import zipfile
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from conftest import edited_bundle

from privsyn_core import FittedModel, GumSettings, PrivSyn, PrivSynConfig, synthesize
from privsyn_core.errors import InputError
from privsyn_core.generation.fitted_data import SamplingSettings
from privsyn_core.privacy.ledger import recomputed
from privsyn_core.release.bundle import BundleError, load_model, model_bytes, save_model

FAST = PrivSynConfig(gum=GumSettings(iterations=20, patience=None))
SECRET = "Zebediah-Quux-4417"


def raw_table(n: int = 4000, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    city = rng.choice(["north", "south", "east"], n)
    age = rng.integers(18, 80, n)
    income = (age * 900 + rng.normal(0, 5000, n)).round(2)
    day = pd.Timestamp("2020-01-01") + pd.to_timedelta(rng.integers(0, 700, n), unit="D")
    table = pd.DataFrame(
        {
            "city": city,
            "age": age.astype(object),
            "income": income.astype(object),
            "joined": day.strftime("%Y-%m-%d"),
        }
    )
    table.loc[rng.choice(n, 40, replace=False), "income"] = None
    table.loc[17, "city"] = SECRET
    return table


@pytest.fixture(scope="module")
def raw_model() -> FittedModel:
    return PrivSyn(4.0, 1e-9, config=FAST).fit(raw_table(), rng=np.random.default_rng(0))


@pytest.fixture(scope="module")
def coded_model() -> FittedModel:
    rng = np.random.default_rng(1)
    n = 3000
    a = rng.integers(0, 4, n)
    table = pd.DataFrame(
        {
            "a": a,
            "b": np.where(rng.random(n) < 0.8, a, rng.integers(0, 4, n)),
            "colour": pd.Categorical(rng.choice(["red", "blue"], n), categories=["red", "blue"]),
            "size": rng.choice(["S", "M", "L"], n),
        }
    )
    domain = {"a": 4, "b": 4, "colour": ["red", "blue"], "size": ["S", "M", "L", "XL"]}
    return PrivSyn(3.0, 1e-9, domain=domain, config=FAST).fit(table, rng=rng)


@pytest.mark.slow
def test_the_same_seed_gives_the_same_table_and_another_seed_another(raw_model):
    first = raw_model.sample(500, seed=7)
    pd.testing.assert_frame_equal(first, raw_model.sample(500, seed=7))
    assert not first.equals(raw_model.sample(500, seed=8))
    rng_drawn = raw_model.sample(500, rng=np.random.default_rng(7))
    pd.testing.assert_frame_equal(first, rng_drawn)
    with pytest.raises(InputError, match="not both"):
        raw_model.sample(5, seed=1, rng=np.random.default_rng(1))


def test_samples_of_any_size_and_settings_spend_nothing(raw_model):
    before = raw_model.ledger
    small = raw_model.generate(10, seed=1)
    no_appending = SamplingSettings(
        GumSettings(iterations=3, patience=None, noise_floor=None), False
    )
    large = raw_model.generate(20_000, seed=1, settings=no_appending)
    initial = raw_model.generate(50, seed=1, gum=GumSettings(iterations=0))
    assert (len(small.table), len(large.table), len(initial.table)) == (10, 20_000, 50)
    assert len(large.history) == 3 and initial.history == ()
    assert large.settings == no_appending and large.appended == ()
    assert small.settings == raw_model.defaults
    assert raw_model.ledger is before and before.spent_rho == pytest.approx(before.budget_rho)
    assert list(large.table.columns) == ["city", "age", "income", "joined"]
    default = raw_model.sample(seed=2)
    assert len(default) == raw_model.default_rows
    assert abs(raw_model.default_rows - 4000) < 300  # the noisy total, not the true count


@pytest.mark.slow
def test_sampling_needs_only_the_model_not_the_table():
    table = raw_table(2000, seed=3)
    model = PrivSyn(4.0, 1e-9, config=FAST).fit(table, rng=np.random.default_rng(3))
    gone = [pd.DataFrame]  # weakrefs to DataFrames are not allowed; check the fields instead
    del table
    gc.collect()
    assert len(model.sample(300, seed=0)) == 300
    for value in vars(model).values():
        assert not isinstance(value, gone[0]), "a fitted model holds no table"


@pytest.mark.slow
def test_synthesize_is_fit_then_sample_with_the_same_generator():
    table = raw_table(2000, seed=4)
    once = synthesize(table, 4.0, 1e-9, config=FAST, rng=np.random.default_rng(11))
    rng = np.random.default_rng(11)
    model = PrivSyn(4.0, 1e-9, config=FAST).fit(table, rng=rng)
    pd.testing.assert_frame_equal(once.synthetic, model.sample(once.n_records, rng=rng))
    assert once.model is not None and once.model.ledger == model.ledger


def test_more_iterations_bring_a_sample_closer_to_its_marginals(coded_model):
    gum = GumSettings(iterations=30, patience=None, initial="independent")
    settings = SamplingSettings(replace(gum, iterations=0), False)
    none = coded_model.generate(3000, seed=5, settings=settings)
    some = coded_model.generate(3000, seed=5, settings=SamplingSettings(gum, False))
    assert some.history[-1].mean_error < 0.5 * some.history[0].mean_error
    # from independent columns the planted a == b agreement (about 0.85) appears only once
    # GUM has run; drawn along the tree of measured pairs, it is there from the start
    tree = coded_model.generate(3000, seed=5, settings=SamplingSettings(GumSettings(0), False))
    agreement = [float(np.mean(s.table["a"] == s.table["b"])) for s in (none, some, tree)]
    assert agreement[0] < 0.4 < 0.7 < min(agreement[1:])


@pytest.mark.parametrize("which", ["raw_model", "coded_model"])
@pytest.mark.slow
def test_a_model_saved_to_a_bundle_samples_the_same_tables(which, request, tmp_path):
    model = request.getfixturevalue(which)
    path = tmp_path / "release.zip"
    PrivSyn.save(model, path, synthetic=model.sample(100, seed=0))
    loaded = PrivSyn.load(path)
    assert loaded.ledger == recomputed(model.ledger) and loaded.engine == model.engine
    assert loaded.columns == model.columns and loaded.default_rows == model.default_rows
    for seed in (0, 1):
        pd.testing.assert_frame_equal(loaded.sample(400, seed=seed), model.sample(400, seed=seed))
    resaved = tmp_path / "again.zip"
    save_model(loaded, resaved)
    pd.testing.assert_frame_equal(load_model(resaved).sample(50, seed=3), model.sample(50, seed=3))


def test_the_bundle_holds_no_row_of_the_table(raw_model):
    with zipfile.ZipFile(io.BytesIO(model_bytes(raw_model))) as archive:
        assert "synthetic.csv" not in archive.namelist()  # a model saved without a sample
        for name in archive.namelist():
            assert SECRET not in archive.read(name).decode(), name


_rewrite = edited_bundle


def _json_edit(change):
    def edit(content: bytes) -> bytes:
        value = json.loads(content)
        change(value)
        return json.dumps(value).encode()

    return edit


def _shrink_marginal(model: dict) -> None:
    model["marginals"][0]["values"] = model["marginals"][0]["values"][:-1]


def _wrong_decoder(model: dict) -> None:
    model["columns"][0]["name"] = "someone else"


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("missing", "no such file"),
        ("not a zip", "not a zip file"),
        ("foreign zip", "no manifest.json"),
        ("version 1", "version 1 release bundle.*cannot be sampled again"),
        ("version 9", "newer than this PrivSyn Studio"),
        ("edited", "does not match its SHA-256"),
        ("short marginal", "malformed model.*needs"),
        ("wrong decoder", "malformed model.*name different columns"),
        ("no model", "holds no fitted model"),
    ],
)
def test_a_bad_or_old_bundle_is_refused_with_a_reason(case, message, coded_model, tmp_path):
    good = model_bytes(coded_model)
    path = tmp_path / "release.zip"
    if case == "not a zip":
        path.write_bytes(b"PK but not really a zip file")
    elif case == "foreign zip":
        path.write_bytes(_rewrite(good, "model.json", lambda b: b, rehash=False))
        with zipfile.ZipFile(path, "w") as archive:
            archive.writestr("readme.txt", "hello")
    elif case in ("version 1", "version 9", "no model"):
        change = {
            "version 1": lambda m: m.update(version=1),
            "version 9": lambda m: m.update(version=9),
            "no model": lambda m: m.update(model=None),
        }[case]
        path.write_bytes(_rewrite(good, "manifest.json", _json_edit(change)))
    elif case == "edited":
        path.write_bytes(_rewrite(good, "model.json", lambda b: b.replace(b"1", b"2"), False))
    elif case == "short marginal":
        path.write_bytes(_rewrite(good, "model.json", _json_edit(_shrink_marginal)))
    elif case == "wrong decoder":
        path.write_bytes(_rewrite(good, "model.json", _json_edit(_wrong_decoder)))
    with pytest.raises(BundleError, match=message):
        load_model(path)


def test_a_row_count_below_one_or_beyond_memory_is_refused_before_work(coded_model):
    for rows in (0, -3):
        with pytest.raises(InputError, match="at least 1"):
            coded_model.sample(rows, seed=0)
    with pytest.raises(InputError, match=r"memory|too large|does not fit"):
        coded_model.sample(10**15, seed=0)
    with pytest.raises(InputError, match="whole number"):
        coded_model.sample(2.5, seed=0)  # type: ignore[arg-type]


@pytest.mark.slow
def test_a_duckdb_fit_of_a_file_samples_as_the_in_memory_fit(tmp_path):
    path = tmp_path / "table.csv"
    raw_table(1500, seed=6).to_csv(path, index=False)
    models = {
        engine: PrivSyn(4.0, 1e-9, engine=engine, config=FAST).fit(
            str(path), rng=np.random.default_rng(2)
        )
        for engine in ("numpy", "duckdb")
    }
    assert models["numpy"].ledger == models["duckdb"].ledger
    pd.testing.assert_frame_equal(
        models["numpy"].sample(300, seed=1), models["duckdb"].sample(300, seed=1)
    )


def test_the_guard_replaces_a_table_that_independent_columns_beat_and_keeps_a_good_one():
    """Issue 22: never worse than the cheapest model, judged on DP outputs only."""
    from types import SimpleNamespace

    from privsyn_core.domain import Domain
    from privsyn_core.generation.guard import guard
    from privsyn_core.generation.records import fill_record_major, record_major
    from privsyn_core.generation.target_scores import GumTarget
    from privsyn_core.marginals import MarginalTable

    n, names = 4000, ["a", "b", "c"]
    uniform = np.full(4, n / 4)
    model = SimpleNamespace(
        engine=Domain(tuple(names), (4, 4, 4)),
        one_way=tuple(MarginalTable((a,), (4,), uniform.copy()) for a in names),
    )
    target = GumTarget(("a", "b"), (0, 1), (4, 4), np.full(16, 1 / 16))
    rng = np.random.default_rng(0)

    collapsed = record_major(3, n, np.dtype(np.uint8))
    fill_record_major(collapsed, np.zeros((3, n), dtype=np.uint8))  # every row the same
    assert guard([(names, collapsed, [target])], [None], model, rng) == names
    assert len(np.unique(collapsed[0])) == 4  # now independent columns

    good = record_major(3, n, np.dtype(np.uint8))
    cells = np.repeat(np.arange(16), n // 16)
    columns = np.stack([cells // 4, cells % 4, rng.integers(0, 4, n)]).astype(np.uint8)
    fill_record_major(good, columns)  # meets the (a, b) target exactly
    before = good.copy()
    assert guard([(names, good, [target])], [None], model, rng) == []
    np.testing.assert_array_equal(good, before)


def with_and_without_the_rules(
    model: FittedModel, n: int
) -> tuple[tuple[pd.DataFrame, pd.DataFrame], list[str]]:
    """``n`` rows with the model's own settings and with ``independence_threshold`` and
    ``quasi_independence`` None (neither generation/independence.py nor
    quasi_independence.py), seed 1 both, and the GUM stage's summary of each."""
    from privsyn_core import StageFinished

    summaries: list[str] = []

    def listen(event: object) -> bool:
        if isinstance(event, StageFinished) and event.stage.value == "gum":
            summaries.append(event.summary)
        return True

    on = model.generate(n, seed=1, on_progress=listen).table
    off_settings = replace(model.defaults, independence_threshold=None, quasi_independence=None)
    off = model.generate(n, seed=1, settings=off_settings, on_progress=listen).table
    return (on, off), summaries


def test_a_measured_pair_within_its_noise_is_drawn_as_independent():
    """generation/independence.py end to end: c is independent of b, so the measured (b, c)
    marginal is noise and is drawn as the product of its margins; the (a, b) pair, strongly
    dependent, is drawn as measured. Off (None), nothing is replaced."""
    rng = np.random.default_rng(5)
    n = 4000
    a = rng.integers(0, 4, n)
    table = pd.DataFrame(
        {
            "a": a,
            "b": np.where(rng.random(n) < 0.8, a, rng.integers(0, 4, n)),
            "c": rng.integers(0, 3, n),
        }
    )
    config = replace(FAST, selection="given", marginals=(("a", "b"), ("b", "c")))
    model = PrivSyn(1.0, 1e-9, domain={"a": 4, "b": 4, "c": 3}, config=config).fit(
        table, rng=np.random.default_rng(0)
    )
    (on, off), summaries = with_and_without_the_rules(model, n)
    assert "1 measured pair drawn as independent" in summaries[0]
    assert "drawn as independent" not in summaries[1]

    def dependence(frame: pd.DataFrame, x: str, y: str) -> float:
        joint = pd.crosstab(frame[x], frame[y]).to_numpy() / len(frame)
        return float(np.abs(joint - np.outer(joint.sum(1), joint.sum(0))).sum())

    # a and b stay as dependent as the real table (1.2 of L1 from independence); b and c
    # come out independent with the test, and carry the measurement's noise without it
    assert dependence(on, "a", "b") > 1.0 and dependence(off, "a", "b") > 1.0
    assert dependence(on, "b", "c") < 0.005 < 0.01 < dependence(off, "b", "c")


def test_a_bundle_keeps_the_independence_threshold_and_an_old_one_draws_every_pair(
    coded_model, tmp_path
):
    good = model_bytes(coded_model)
    assert load_model(_write(tmp_path / "a.zip", good)).defaults.independence_threshold == 2

    def drop(model: dict) -> None:
        del model["sampling"]["independence_threshold"]

    old = _rewrite(good, "model.json", _json_edit(drop))
    assert load_model(_write(tmp_path / "b.zip", old)).defaults.independence_threshold is None

    def spoil(model: dict) -> None:
        model["sampling"]["independence_threshold"] = "lots"

    bad = _rewrite(good, "model.json", _json_edit(spoil))
    with pytest.raises((BundleError, InputError), match="independence_threshold"):
        load_model(_write(tmp_path / "c.zip", bad))


def test_quasi_independence_has_its_own_setting_and_an_old_bundle_keeps_its_own(
    coded_model, tmp_path
):
    """The quasi-independence rule is switched by its own setting, not by the independence
    rule's threshold; a bundle from before the setting reads it as it was sampled then (the
    threshold as its penalty, None when the threshold is None)."""
    assert coded_model.defaults.quasi_independence == 2.0
    good = model_bytes(coded_model)
    assert load_model(_write(tmp_path / "a.zip", good)).defaults.quasi_independence == 2.0

    def off(model: dict) -> None:
        model["sampling"]["quasi_independence"] = None

    loaded = load_model(_write(tmp_path / "b.zip", _rewrite(good, "model.json", _json_edit(off))))
    assert loaded.defaults.quasi_independence is None
    assert loaded.defaults.independence_threshold == 2.0

    def before(threshold: float | None):
        def edit(model: dict) -> None:
            del model["sampling"]["quasi_independence"]
            model["sampling"]["independence_threshold"] = threshold

        return edit

    for k, threshold in enumerate((3.0, None)):
        old = _rewrite(good, "model.json", _json_edit(before(threshold)))
        settings = load_model(_write(tmp_path / f"old{k}.zip", old)).defaults
        assert settings.quasi_independence == threshold

    with pytest.raises(InputError, match="quasi_independence"):
        SamplingSettings(quasi_independence=-1.0)


def _write(path, content: bytes):
    path.write_bytes(content)
    return path


@pytest.mark.slow
def test_a_quasi_independent_pair_is_drawn_from_its_fit():
    """generation/quasi_independence.py end to end: b copies a (20 values) with probability
    0.6, else is uniform, so (a, b) is independent but for its diagonal. At epsilon 0.5 its
    measured marginal (noise about 20 rows a cell, off-diagonal cells about 60 rows) is
    drawn from the quasi-independent fit, which averages the off-diagonal noise away: the
    synthetic (a, b) marginal lands at about half the L1 distance of the one drawn as
    measured. The table is wide (30 columns, 27 of them independent fillers measured alone),
    as the rule asks; the same three columns alone, a narrow table, are drawn as measured.
    With both rules off (None), neither replaces anything."""
    rng = np.random.default_rng(7)
    n = 60_000
    a = rng.integers(0, 20, n)
    b = np.where(rng.random(n) < 0.6, a, rng.integers(0, 20, n))
    columns = {"a": a, "b": b, "c": rng.integers(0, 5, n)}
    columns |= {f"f{k:02d}": rng.integers(0, 3, n) for k in range(27)}
    table = pd.DataFrame(columns)
    domain = {"a": 20, "b": 20, "c": 5} | {f"f{k:02d}": 3 for k in range(27)}
    config = replace(PrivSynConfig(), selection="given", marginals=(("a", "b"), ("b", "c")))
    model = PrivSyn(0.5, 1e-9, domain=domain, config=config).fit(
        table, rng=np.random.default_rng(0)
    )
    (on, off), summaries = with_and_without_the_rules(model, n)
    assert "1 measured pair drawn as quasi-independent" in summaries[0]
    assert "quasi-independent" not in summaries[1]

    def distance(frame: pd.DataFrame) -> float:
        cells = frame["a"].to_numpy() * 20 + frame["b"].to_numpy()
        real = np.bincount(a * 20 + b, minlength=400) / n
        return float(np.abs(np.bincount(cells, minlength=400) / len(frame) - real).sum())

    assert distance(on) < 0.7 * distance(off)
    narrow = PrivSyn(0.5, 1e-9, domain={"a": 20, "b": 20, "c": 5}, config=config).fit(
        table[["a", "b", "c"]], rng=np.random.default_rng(0)
    )
    (_, _), summaries = with_and_without_the_rules(narrow, n)
    assert "quasi-independent" not in summaries[0]
