"""AppTest flows for each dashboard page (in-process; no browser)."""

from __future__ import annotations

import re

import pytest
import streamlit as st
from conftest import ROOT
from streamlit.testing.v1 import AppTest

APP = str(ROOT / "dashboard" / "app.py")


@pytest.fixture(autouse=True)
def _clear_caches():
    st.cache_data.clear()
    st.cache_resource.clear()


def app() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    assert not at.exception, at.exception
    return at


def assert_offline(page: str) -> None:
    """No tag in the page loads anything from another origin."""
    assert not re.search(r"<(script|link)[^>]+(src|href)=[\"']?(https?:)?//", page), page[:300]


def go(at: AppTest, page: str) -> AppTest:
    at.switch_page(f"views/{page}.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_data_page_preloads_the_sample_and_lists_every_column():
    at = app()
    assert at.title[0].value == "Data"
    assert at.session_state["table"].shape == (32561, 15)
    editor = at.get("arrow_data_editor") or at.get("data_editor")
    assert editor, "the schema editor is shown"
    assert "income" in at.session_state["schema"].names()


def test_privacy_page_previews_noise_without_data_and_rejects_bad_delta():
    at = go(app(), "privacy")
    plan = at.session_state["epsilon"]
    assert plan == 1.0
    frames = at.dataframe
    assert any("sigma" in f.value.columns for f in frames)
    at.text_input(key="delta_text").set_value("two").run()
    assert at.error and "delta" in at.error[0].value


def test_run_marginals_and_results_flow_on_the_sample():
    at = go(app(), "run")
    at.number_input(key="iterations").set_value(10).run()
    at.text_input(key="seed_text").set_value("3").run()
    at.button(key="run").click().run()
    assert not at.exception, [e.value for e in at.exception]
    finished = at.session_state["finished"]
    assert finished is not None and finished.result.n_records > 30_000
    assert at.session_state["run_state"] == "done"
    specs = [c.proto.spec for c in at.get("plotly_chart")]
    assert specs, "the convergence chart is drawn"

    go(at, "marginals")
    charts = at.get("plotly_chart")
    assert charts and '"type":"heatmap"' in charts[0].proto.spec.replace(" ", "")
    frames = at.get("iframe")
    assert frames and "mynetwork" in frames[0].proto.srcdoc
    assert_offline(frames[0].proto.srcdoc)

    go(at, "results")
    assert at.get("download_button")
    assert at.session_state["finished"] is finished  # results survive page switches


def test_uploading_a_broken_file_shows_a_message_not_a_traceback():
    at = app()
    at.file_uploader(key="upload").set_value(("broken.csv", b"\x00\x01\x02", "text/csv")).run()
    assert not at.exception
    assert at.error and "broken.csv" in at.error[0].value


def test_learn_page_reproduces_the_papers_indif_example():
    at = go(app(), "learn")
    assert any("0.08 n" in m.value for m in at.metric)


def test_a_malicious_column_name_is_shown_as_text(tmp_path):
    name = "<img src=x onerror=alert(1)>"
    rows = "\n".join(f"{i % 3},{(i * 7) % 5},{'ab'[i % 2]}" for i in range(6000))
    data = f"{name},b,c\n{rows}\n".encode()
    at = app()
    at.file_uploader(key="upload").set_value(("evil.csv", data, "text/csv")).run()
    assert not at.exception
    go(at, "run")
    at.number_input(key="iterations").set_value(5).run()
    at.button(key="run").click().run()
    assert at.session_state["finished"] is not None
    go(at, "marginals")
    srcdoc = at.get("iframe")[0].proto.srcdoc
    assert name not in srcdoc
    # the label is there, escaped (pyvis then writes "&" as \u0026 inside its JSON)
    assert re.search(r"(&|\\u0026)lt;img src=x onerror=alert\(1\)(&|\\u0026)gt;", srcdoc)
    spec = at.get("plotly_chart")[0].proto.spec
    assert name not in spec


def test_an_interrupted_run_is_reported_as_cancelled():
    at = go(app(), "run")
    at.session_state["run_state"] = "running"  # what a click during a run leaves behind
    at.run()
    assert at.session_state["run_state"] == "cancelled"
    assert any("cancelled" in w.value for w in at.warning)


def test_runs_without_a_seed_are_releases_and_seeded_runs_are_marked():
    at = go(app(), "run")
    at.number_input(key="iterations").set_value(5).run()
    at.button(key="run").click().run()
    assert at.session_state["finished"].result.ledger.randomness == "release"
    at.text_input(key="seed_text").set_value("7").run()
    at.button(key="run").click().run()
    assert at.session_state["finished"].result.ledger.randomness != "release"
    assert any("NOT for release" in w.value for w in at.warning)
