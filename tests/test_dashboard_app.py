"""AppTest flows for each dashboard page (in-process; no browser)."""

from __future__ import annotations

import hashlib
import io
import json
import re
import zipfile

import pytest
import streamlit as st
from conftest import ROOT
from streamlit.testing.v1 import AppTest

from privsyn_core.privacy import BudgetExceededError, rho_from_epsilon_delta
from privsyn_core.registry import Registry, fingerprint

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
    go(at, "results")
    labels = [b.label for b in at.get("download_button")]
    assert "Download run 2's bundle (debug, NOT for release)" in labels
    assert any("NOT for release" in w.value for w in at.warning)
    bundle = at.session_state["finished"].bundle
    assert json.loads(bundle_files(bundle)["manifest.json"])["for_release"] is False


# --- run registry: recording, lifetime budget, History --------------------------------------


def run_once(at: AppTest, iterations: int = 5) -> AppTest:
    go(at, "run")
    at.number_input(key="iterations").set_value(iterations).run()
    at.button(key="run").click().run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def bundle_files(bundle: bytes) -> dict[str, bytes]:
    """The bundle's files, after checking every one against the manifest's SHA-256."""
    with zipfile.ZipFile(io.BytesIO(bundle)) as archive:
        files = {name: archive.read(name) for name in archive.namelist()}
    manifest = json.loads(files["manifest.json"])
    assert set(manifest["files"]) == set(files) - {"manifest.json"}
    for name, digest in manifest["files"].items():
        assert hashlib.sha256(files[name]).hexdigest() == digest, name
    return files


def frame(at: AppTest, column: str):
    """The page's one table with ``column`` (AppTest keeps no key for a plain dataframe)."""
    matches = [f.value for f in at.dataframe if column in f.value.columns]
    assert len(matches) == 1, f"{len(matches)} tables with a column {column!r}"
    return matches[0]


def marginal_labels(ledger: dict) -> list[str]:
    return [" x ".join(m["attributes"]) for m in ledger["measurements"] if m["step"] == "marginal"]


def test_a_dashboard_run_is_recorded_with_its_bundle_and_offered_for_download():
    at = run_once(app())
    finished = at.session_state["finished"]
    recorded = Registry().runs()
    assert len(recorded) == 1
    run = recorded[0]
    assert run.id == finished.run_id and run.has_bundle
    assert run.fingerprint == fingerprint(at.session_state["table"])
    assert run.name == at.session_state["table_name"]
    assert run.rho == pytest.approx(finished.result.ledger.spent_rho)
    assert run.config["epsilon"] == 1.0 and run.config["seed_given"] is False
    assert run.ledger == json.loads(json.dumps(finished.result.ledger.to_json()))
    assert Registry().bundle(run.id) == finished.bundle  # the session holds the registry's bytes
    files = bundle_files(finished.bundle)
    assert json.loads(files["manifest.json"])["for_release"] is True
    assert any(f"Recorded as run {run.id}" in s.value for s in at.success)

    go(at, "results")
    labels = [b.label for b in at.get("download_button")]
    assert f"Download the release bundle of run {run.id}" in labels
    assert "Download the synthetic CSV" in labels


def test_history_lists_the_run_and_its_spend_matches_the_ledger():
    at = run_once(app())
    ledger = at.session_state["finished"].result.ledger
    go(at, "history")
    runs = frame(at, "noise")
    assert list(runs["id"]) == [1]
    assert runs["marginals"][0] == len(marginal_labels(ledger.to_json())) > 0
    assert runs["rho"][0] == pytest.approx(ledger.spent_rho)
    spent = next(m for m in at.metric if m.label == "rho spent, all runs")
    assert spent.value == f"{ledger.spent_rho:.4g}"
    assert next(m for m in at.metric if m.label == "lifetime budget (rho)").value == "none"
    labels = [b.label for b in at.get("download_button")]
    assert labels == ["Download the release bundle of run 1"]
    assert any("spends no privacy budget" in c.value for c in at.caption)


def test_a_lifetime_budget_below_the_spend_refuses_the_next_run_readably():
    at = run_once(app())
    spent = at.session_state["finished"].result.ledger.spent_rho
    go(at, "history")
    at.radio(key="lifetime_unit").set_value("rho (zCDP)").run()
    at.number_input(key="lifetime_rho").set_value(round(spent / 2, 6)).run()
    at.button(key="set_lifetime").click().run()
    assert not at.exception
    dataset = fingerprint(at.session_state["table"])
    assert Registry().budget(dataset).lifetime_rho == pytest.approx(spent / 2, abs=1e-6)
    assert any("already spent" in s.value for s in at.success)
    assert at.get("progress")[0].proto.value == 100

    run_once(at)
    assert at.session_state["run_state"] == "refused"
    assert not at.exception
    message = at.error[0].value
    assert "Run refused" in message and "lifetime privacy budget" in message
    assert "History page" in message and "Traceback" not in message
    assert len(Registry().runs()) == 1  # nothing ran, nothing was recorded

    go(at, "history")
    at.button(key="clear_lifetime").click().run()
    assert Registry().budget(dataset).lifetime_rho is None
    run_once(at)
    assert at.session_state["run_state"] == "done" and len(Registry().runs()) == 2


def test_a_run_near_the_lifetime_budget_warns():
    at = go(app(), "history")
    budget = rho_from_epsilon_delta(1.0, 1e-9)
    at.radio(key="lifetime_unit").set_value("rho (zCDP)").run()
    at.number_input(key="lifetime_rho").set_value(round(budget * 1.1, 6)).run()
    at.button(key="set_lifetime").click().run()
    run_once(at)
    assert at.session_state["run_state"] == "done"
    assert at.session_state["finished"].budget_warnings
    assert any(w.value.startswith("Lifetime budget:") for w in at.warning)


def test_history_compares_two_runs_side_by_side():
    at = run_once(app())
    first = at.session_state["finished"].result.ledger.to_json()
    go(at, "privacy")
    at.number_input(key="epsilon").set_value(2.0).run()
    run_once(at)
    second = at.session_state["finished"].result.ledger.to_json()
    assert second["epsilon"] == 2.0
    go(at, "history")
    settings = frame(at, "setting").set_index("setting")
    assert list(settings.columns) == ["run 1", "run 2"]
    assert settings.loc["epsilon"].tolist() == ["1.0", "2.0"]
    steps = frame(at, "step").set_index("step")
    assert steps.loc["total", "run 1"] == pytest.approx(first["spent_rho"])
    assert steps.loc["total", "run 2"] == pytest.approx(second["spent_rho"])
    assert steps.loc["marginal", "run 2"] > steps.loc["marginal", "run 1"]
    marginals = frame(at, "marginal").set_index("marginal")
    assert set(marginals.index) == set(marginal_labels(first)) | set(marginal_labels(second))
    assert set(marginals.index[marginals["run 1"]]) == set(marginal_labels(first))


def test_a_raw_domains_run_is_recorded_without_a_bundle_and_says_why():
    at = app()
    at.toggle(key="raw_domains").set_value(True).run()
    run_once(at)
    finished = at.session_state["finished"]
    assert not finished.result.end_to_end_dp and finished.bundle is None
    (run,) = Registry().runs()
    assert not run.has_bundle and run.config["raw_domains"] is True
    go(at, "results")
    assert [b.label for b in at.get("download_button")] == ["Download the synthetic CSV"]
    assert any("has no release bundle" in i.value and "raw data" in i.value for i in at.info)


def test_an_unusable_registry_is_a_readable_error_and_nothing_runs(tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    monkeypatch.setenv("PRIVSYN_REGISTRY", str(blocker / "registry.sqlite3"))
    at = go(app(), "history")
    assert at.error and "run registry" in at.error[0].value
    assert "PRIVSYN_REGISTRY" in at.error[0].value
    run_once(at)
    assert at.session_state["finished"] is None
    assert at.error and "cannot be used" in at.error[0].value


def test_the_epsilon_set_on_privacy_is_the_one_run_after_visiting_other_pages():
    at = go(app(), "privacy")
    at.number_input(key="epsilon").set_value(0.5).run()
    go(at, "data")
    run_once(at)
    assert at.session_state["finished"].result.ledger.epsilon == 0.5
    assert Registry().runs()[0].epsilon == 0.5


def test_history_shows_the_current_tables_runs_unless_asked_for_all():
    at = run_once(app())
    rows = "\n".join(f"{i % 3},{(i * 7) % 5},{'ab'[i % 2]}" for i in range(6000))
    data = f"a,b,c\n{rows}\n".encode()
    go(at, "data").file_uploader(key="upload").set_value(("small.csv", data, "text/csv")).run()
    run_once(at)
    go(at, "history")
    runs = frame(at, "noise")
    assert list(runs["id"]) == [2] and list(runs["table"]) == ["small.csv"]
    spent = next(m for m in at.metric if m.label == "rho spent, all runs").value
    assert spent == f"{at.session_state['finished'].result.ledger.spent_rho:.4g}"
    at.toggle(key="history_all").set_value(True).run()
    runs = frame(at, "noise")
    assert list(runs["id"]) == [2, 1]
    assert list(runs["table"]) == ["small.csv", "UCI Adult sample (assets/adult.csv)"]


def test_a_result_the_registry_refuses_to_record_is_discarded(monkeypatch):
    def refuse(*args, **kwargs):
        raise BudgetExceededError("another run on this table was recorded first")

    monkeypatch.setattr(Registry, "record_result", refuse)
    at = run_once(app())
    assert at.session_state["finished"] is None
    assert at.session_state["run_state"] == "failed"
    message = at.error[0].value
    assert "not recorded" in message and "another run" in message and "discarded" in message
    assert not Registry().runs()


def test_a_run_that_fails_after_spending_records_its_spend():
    at = go(app(), "data")
    data = ("id\n" + "\n".join(f"user-{i}" for i in range(300)) + "\n").encode()
    at.file_uploader(key="upload").set_value(("ids.csv", data, "text/csv")).run()
    run_once(at)
    assert at.session_state["finished"] is None and at.session_state["run_state"] == "failed"
    message = at.error[0].value
    assert "no column is left" in message and "recorded as run 1" in message
    (run,) = Registry().runs()
    assert run.rho > 0 and not run.has_bundle and run.config["outcome"].startswith("failed")
    go(at, "history")
    runs = frame(at, "noise")
    assert list(runs["outcome"]) == ["failed"] and runs["rho"][0] == pytest.approx(run.rho)
    assert any("failed after spending" in i.value for i in at.info)
