"""Every change a release makes to the table is said, from its DP content alone
(release/changes.py), in the CLI summary, the release report and the Results page."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from privsyn_core import PrivSynConfig, synthesize
from privsyn_core.data.schema import Schema
from privsyn_core.generation.grouping import declared_shares
from privsyn_core.generation.gum_settings import GumSettings
from privsyn_core.release.changes import KINDS, change_lines, changes
from privsyn_core.release.report import release_report

FAST = PrivSynConfig(gum=GumSettings(iterations=10))


@pytest.fixture(scope="module")
def raw() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    n = 6000
    level = rng.choice(["low", "mid", "high"], n, p=[0.3, 0.5, 0.2])
    rare = [f"rare{i}" for i in range(40)]
    job = np.where(rng.random(n) < 0.06, rng.choice(rare, n), rng.choice(["a", "b", "c"], n))
    # 20% non-zero: at 10% (600 rows) the DP range misses the amounts in about 1 seed in 20
    gain = np.where(rng.random(n) < 0.8, 0, np.round(np.exp(rng.normal(8, 0.7, n))))
    return pd.DataFrame(
        {
            "id": np.arange(1, n + 1),
            "level": level,
            "years": pd.Series(level).map({"low": 8, "mid": 12, "high": 16}).to_numpy(),
            "job": job,
            "gain": gain.astype(int),
            "age": np.clip(np.round(rng.normal(40, 12, n)), 17, 90).astype(int),
        }
    )


@pytest.fixture(scope="module")
def result(raw):
    return synthesize(raw, 2.0, 1e-7, rng=np.random.default_rng(1), config=FAST)


def test_every_kind_of_change_is_listed_with_its_size_and_fix(result):
    found = changes(result.model, result.excluded)
    kinds = {c.kind for c in found}
    assert {"identifier", "range", "merged", "combinations"} <= kinds
    by_column = {(c.kind, c.column): c for c in found}
    assert "fresh ids" in by_column[("identifier", "id")].text
    merged = by_column[("merged", "job")]
    assert "(other)" in merged.text and merged.declare["categories"] == ["a", "b", "c"]
    gain = by_column[("range", "gain")]
    assert gain.declare["kind"] == "numeric" and "estimated privately" in gain.text
    # zero is a value of its own: the bounds offered to declare hold it, not only the amounts
    assert "zero kept as a value of its own" in gain.text and gain.declare["lower"] == 0.0
    assert any(c.kind == "combinations" and "years" in c.column for c in found)
    # listed kind by kind, in the order of KINDS
    order = list(KINDS)
    assert [order.index(c.kind) for c in found] == sorted(order.index(c.kind) for c in found)


def test_the_shares_are_the_models_not_the_tables(result, raw):
    """The "(other)" share comes from the consistent 1-way target (DP): it is near the real
    share (6% of rows hold a rare job) but not equal to it, and the same model gives the
    same list whatever table it is shown beside."""
    job = result.model.modelled.index("job")
    shares = declared_shares(result.model.one_way[job].values, result.model.groupings[job])
    codec = result.model.decoders[job]
    assert shares[codec.other_code] == pytest.approx(0.06, abs=0.02)
    assert shares.sum() == pytest.approx(1.0)
    assert changes(result.model, result.excluded) == changes(result.model, result.excluded)


def test_the_report_and_the_summary_say_them(result):
    page = release_report(result.model)
    assert "What the synthetic table changes" in page and "(other)" in page
    lines = change_lines(changes(result.model, result.excluded), most=1)
    assert lines[0].startswith("row ids written anew (1); to avoid:")
    assert any(line.startswith("  ... and") for line in lines)


def test_the_fixes_prefill_the_schema(result, raw):
    schema = Schema.undeclared(raw.columns)
    for change in changes(result.model, result.excluded):
        if change.declare is not None:
            schema = schema.with_declared(change.declare)
    assert schema["id"].identifier is True
    assert schema["job"].categories == ("a", "b", "c")
    assert schema["gain"].lower is not None and schema["gain"].upper > schema["gain"].lower
    assert schema["level"].kind is None  # nothing declared where nothing changed


def test_a_pre_coded_release_says_what_it_keeps_out(adult):
    table, domain = adult
    result = synthesize(
        table.head(8000), 1.0, 1e-9, domain=domain, rng=np.random.default_rng(0), config=FAST
    )
    found = changes(result.model, result.excluded)
    # declared codes: nothing estimated, merged or written anew; only combinations
    assert found and {c.kind for c in found} <= {"combinations", "dropped"}
    assert any(c.column == "marital-status x relationship" for c in found)


def test_a_range_is_said_by_the_bins_that_hold_rows():
    """Zero and the gap above it are offered to the 1-way marginal beside a log-scale
    spread (data/number_bins.py): the change says "zero kept" and "thinning toward zero"
    only where they hold rows."""
    from privsyn_core.data.codecs import BinnedCodec
    from privsyn_core.release.changes import _binned

    edges = (0.0, 1.0, 5793.0, 23167.0, 100000.0, 741459.0, 2965836.0)
    codec = BinnedCodec("fnlwgt", edges, integer=True, points=(0,), rise=(2, 1), fall=(5,))
    empty_below = _binned(codec, np.array([0.0, 0.0, 0.003, 0.5, 0.487, 0.01]))[0]
    assert empty_below.text == (
        "fnlwgt: bounds [23,167, 741,458] estimated privately; 0.3% of rows drawn below "
        "23,167, thinning toward 5793; 1.0% drawn above 741,458, thinning toward 2,965,835"
    )
    assert empty_below.declare["lower"] == 23167  # the editor's number, not the text's
    zeros = _binned(codec, np.array([0.2, 0.002, 0.003, 0.4, 0.385, 0.01]))[0]
    assert zeros.text.startswith("fnlwgt: zero kept as a value of its own; the other")
    assert "0.5% of rows drawn below 23,167, thinning toward zero" in zeros.text
    assert zeros.declare["lower"] == 0.0
