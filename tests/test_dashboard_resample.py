""" "Sample again" on the Results and History pages: a new table from a stored release, with
rows and seed chosen on the page, a download, and no spend (the registry is unchanged)."""

from __future__ import annotations

import io
import json
import sqlite3
import zipfile

import pandas as pd
import pytest
from test_dashboard_app import _clear_caches, app, go, run_once  # noqa: F401 - fixture

from privsyn_core.release.registry import Registry

# slow as a whole: each test runs a synthesis through the dashboard first (AppTest, 5 s or more)
pytestmark = pytest.mark.slow


def spend_record() -> tuple[list, float]:
    registry = Registry()
    runs = registry.runs()
    return runs, registry.budget(runs[0].fingerprint).spent.rho


def draw(at, key: str, rows: int, seed: int):
    at.number_input(key=f"{key}_rows").set_value(rows)
    at.number_input(key=f"{key}_seed").set_value(seed).run()
    at.button(key=f"{key}_go").click().run()
    assert not at.exception, [e.value for e in at.exception]
    return at.session_state["resampled"][key][1]


def test_results_samples_again_from_the_run_with_no_spend():
    at = run_once(app())
    finished = at.session_state["finished"]
    before = spend_record()
    go(at, "results")
    assert any("No new privacy spend" in c.value for c in at.caption)
    table = draw(at, "results_resample", 500, 3)
    assert len(table) == 500 and list(table.columns) == list(finished.result.synthetic.columns)
    assert any("privacy spent: none" in s.value for s in at.success)
    labels = [b.label for b in at.get("download_button")]
    assert "Download the new table (500 rows, CSV)" in labels
    again = draw(at, "results_resample", 500, 3)
    pd.testing.assert_frame_equal(table, again)  # the same seed, the same table
    other = draw(at, "results_resample", 500, 4)
    assert not other.equals(table)
    assert spend_record() == before


def test_history_samples_a_stored_release_again_with_no_spend():
    at = run_once(app())
    model = at.session_state["finished"].result.model
    before = spend_record()
    go(at, "history")
    assert any("No new privacy spend" in c.value for c in at.caption)
    table = draw(at, "history_resample", 300, 1)
    # the registry's stored bundle samples exactly as the model the run kept in memory
    pd.testing.assert_frame_equal(table, model.sample(300, seed=1))
    labels = [b.label for b in at.get("download_button")]
    assert "Download the new table (300 rows, CSV)" in labels
    assert spend_record() == before


def test_sample_again_draws_only_rows_that_satisfy_a_condition():
    at = run_once(app())
    before = spend_record()
    go(at, "results")
    at.text_input(key="results_resample_where").set_value("sex=Female, age=30..40")
    table = draw(at, "results_resample", 400, 2)
    assert len(table) == 400 and set(table["sex"]) == {"Female"}
    assert table["age"].between(30, 40).all()
    assert any("all where sex=Female, age=30..40" in s.value for s in at.success)
    model = at.session_state["finished"].result.model
    expected = model.sample(400, seed=2, where=["sex=Female", "age=30..40"])
    pd.testing.assert_frame_equal(table, expected)
    # a refused condition: one error line, and no table from before is shown
    at.text_input(key="results_resample_where").set_value("sex=Femal")
    at.button(key="results_resample_go").click().run()
    assert not at.exception
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and "has no category 'Femal'" in errors[0], errors
    assert "\n" not in errors[0] and not at.success
    assert spend_record() == before


def test_history_says_why_an_old_release_cannot_be_sampled_again():
    at = run_once(app())
    registry = Registry()
    run = registry.runs()[0]
    with zipfile.ZipFile(io.BytesIO(registry.bundle(run.id))) as archive:
        files = {name: archive.read(name) for name in archive.namelist()}
    manifest = json.loads(files["manifest.json"])
    manifest["version"] = 1  # as written before bundles held the fitted model
    files["manifest.json"] = json.dumps(manifest).encode()
    old = io.BytesIO()
    with zipfile.ZipFile(old, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    with sqlite3.connect(registry.path) as db:
        db.execute("UPDATE runs SET bundle = ? WHERE id = ?", (old.getvalue(), run.id))
    go(at, "history")
    assert any("cannot be sampled again" in i.value for i in at.info), [i.value for i in at.info]
    assert "history_resample_go" not in [b.key for b in at.button]
