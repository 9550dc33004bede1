"""The Lab page in AppTest: cost shown before the click, shared measurements recorded, charts,
owner-only labelling, refusals (issue 12)."""

from __future__ import annotations

import json

import pytest
import streamlit as st
from conftest import ROOT
from streamlit.testing.v1 import AppTest

from dashboard import worker
from privsyn_core.privacy.ledger import PrivacyLedger, rho_from_epsilon_delta
from privsyn_core.release.registry import Registry, file_fingerprint

APP = str(ROOT / "dashboard" / "app.py")


@pytest.fixture(autouse=True)
def _clear_caches():
    st.cache_data.clear()
    st.cache_resource.clear()


def lab_page(iterations: int = 8) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=300)
    at.run()
    at.session_state["iterations"] = iterations
    at.switch_page("views/lab.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_the_cost_is_stated_before_anything_runs():
    at = lab_page()
    assert at.selectbox(key="lab_preset").value == "GUM vs MCF"
    info = at.info[0].value
    assert "3 measurements of the table" in info  # one per seed: GUM and MCF share it
    assert "GUM and MCF share one" in info
    rho = 3 * rho_from_epsilon_delta(1.0, 1e-9)
    assert f"up to rho {rho:.3g}" in info
    assert Registry().runs() == []


def test_a_comparison_runs_records_its_measurements_and_draws_both_charts():
    at = lab_page()
    at.number_input(key="lab_seeds").set_value(2).run()
    at.selectbox(key="lab_label").set_value("income").run()
    at.button(key="lab_run").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    runs = Registry().runs()
    assert len(runs) == 2 and all(r.config["outcome"] == "lab: GUM vs MCF" for r in runs)
    preset, label, result, ids = at.session_state["lab_result"]
    assert (preset, label) == ("GUM vs MCF", "income") and list(ids) == [r.id for r in runs]
    assert sum(r.rho for r in runs) == pytest.approx(result.spent_rho)
    for run in runs:  # each is a whole run's spend (the raw sample reserves part of delta)
        assert run.rho <= PrivacyLedger.from_epsilon_delta(1.0, 1e-9).budget_rho
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    assert len(specs) == 2
    convergence, fidelity = specs
    assert {t["name"] for t in convergence["data"] if t.get("showlegend", True)} == {"GUM", "MCF"}
    titles = [a["text"] for a in fidelity["layout"]["annotations"]]
    assert titles == ["2-way L1", "3-way range error", "SVM misclassification"]
    assert any("Owner-only" in w.value and "never exported" in w.value for w in at.warning)
    table = at.dataframe[0].value
    assert list(table["configuration"]) == ["GUM", "MCF"]
    assert table["2-way L1"].str.contains("±").all()


def test_identical_custom_configurations_are_refused_readably():
    at = lab_page()
    at.selectbox(key="lab_preset").set_value("Custom").run()
    at.number_input(key="lab_count").set_value(2).run()
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and "are the same configuration" in errors[0]
    assert not [b for b in at.button if b.key == "lab_run"]


def test_a_busy_server_refuses_the_comparison_and_nothing_is_spent(monkeypatch):
    at = lab_page()
    monkeypatch.setattr(worker.SLOTS, "try_take", lambda: False)
    at.button(key="lab_run").click().run()
    assert any("limit of" in w.value and "Nothing was measured" in w.value for w in at.warning)
    assert Registry().runs() == []


def test_a_comparison_past_the_lifetime_budget_is_refused_before_it_measures():
    at = lab_page()
    sample = file_fingerprint(ROOT / "privsyn_core" / "samples" / "adult.csv")
    Registry().set_lifetime_budget(sample, "adult", 0.01)
    at.button(key="lab_run").click().run()
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and "Run refused" in errors[0]
    assert Registry().runs() == []


def test_custom_configurations_that_differ_after_measuring_share_a_measurement():
    at = lab_page()
    at.selectbox(key="lab_preset").set_value("Custom").run()
    at.number_input(key="lab_count").set_value(3).run()
    at.selectbox(key="lab_synthesis_1").set_value("mcf").run()
    at.selectbox(key="lab_noise_2").set_value("equal_laplace").run()
    assert not at.error, [e.value for e in at.error]
    info = at.info[0].value
    assert "6 measurements of the table" in info and "config 1 and config 2 share one" in info
    assert at.selectbox(key="lab_consistency_0").format_func(True) == "on"


def test_the_custom_editor_starts_from_the_engines_defaults():
    at = lab_page()
    at.selectbox(key="lab_preset").set_value("Custom").run()
    box = at.selectbox(key="lab_strategy_0")
    assert box.value == "S3" and box.format_func("S5") == "S5: half half plus duplicate"
    assert at.selectbox(key="lab_selection_0").value == "densemarg"
