"""AppTest flows for each dashboard page (in-process; no browser)."""

from __future__ import annotations

import hashlib
import io
import json
import math
import re
import sqlite3
import time
import zipfile

import numpy as np
import pandas as pd
import pytest
import streamlit as st
from conftest import ROOT, only_slot_held
from streamlit.testing.v1 import AppTest

from dashboard import charts, worker
from dashboard.views import history_runs, learn_game
from privsyn_core.config import PrivSynConfig
from privsyn_core.data.schema import ColumnSchema, Kind
from privsyn_core.dependency_report import dependency_report
from privsyn_core.privacy.budget import Budget
from privsyn_core.privacy.conversion import rho_from_epsilon_delta
from privsyn_core.privacy.ledger import ROW, PrivacyLedger, PrivacyUnit
from privsyn_core.release.registry import Registry, Reservation, file_fingerprint

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


def run_and_wait(at: AppTest, timeout: float = 120) -> AppTest:
    """Click Run and rerun the script until the background run has ended (the browser's
    polling fragment does this in a real session)."""
    at.button(key="run").click().run()
    deadline = time.monotonic() + timeout
    while at.session_state["run_state"] == "running" and time.monotonic() < deadline:
        time.sleep(0.2)
        at.run()
    assert at.session_state["run_state"] != "running", "the run ended in time"
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


@pytest.mark.slow
def test_privacy_page_previews_noise_without_data_and_rejects_bad_delta():
    at = go(app(), "privacy")
    plan = at.session_state["epsilon"]
    assert plan == 1.0
    frames = at.dataframe
    assert any("sigma" in f.value.columns for f in frames)
    # which method the default selection will run on the sample's 15 columns, and why
    assert any(
        "Selection on 15 columns: narrow table (15 attributes < 30): DenseMarg" in c.value
        for c in at.caption
    ), [c.value for c in at.caption]
    at.text_input(key="delta_text").set_value("two").run()
    assert at.error and "delta" in at.error[0].value
    # the command line's rule: no privacy at delta >= 1, none worth the name above 1e-3
    for careless in ("1", "2", "0", "0.01", "nan", "-1e-9"):
        at.text_input(key="delta_text").set_value(careless).run()
        assert not at.exception, careless
        message = at.error[0].value
        assert "delta" in message and "1/n^2" in message and "reserved" not in message, message
    at.text_input(key="delta_text").set_value("1e-9").run()
    assert not at.error


@pytest.mark.slow
def test_run_marginals_and_results_flow_on_the_sample():
    at = go(app(), "run")
    at.number_input(key="iterations").set_value(10).run()
    at.text_input(key="seed_text").set_value("3").run()
    run_and_wait(at)
    assert not at.exception, [e.value for e in at.exception]
    finished = at.session_state["finished"]
    assert finished is not None and finished.result.n_records > 30_000
    assert at.session_state["run_state"] == "done"
    specs = [c.proto.spec for c in at.get("plotly_chart")]
    assert specs, "the convergence chart is drawn"

    go(at, "marginals")
    # the default selection on Adult's columns: DenseMarg, and the page says why
    assert any(
        m.value.startswith("Selection: narrow table (") and "< 30): DenseMarg" in m.value
        for m in at.markdown
    ), [m.value for m in at.markdown]
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


def game_chart(at: AppTest) -> dict | None:
    """The distinguishing game's figure (JSON), or None when the page shows none."""
    charts = [c for c in at.get("plotly_chart") if "learn_game_chart" in c.proto.id]
    return json.loads(charts[0].proto.spec) if charts else None


def play_game(at: AppTest, *, epsilon: float = 1.0, broken: bool = False) -> AppTest:
    at.slider(key="learn_game_eps").set_value(epsilon)
    at.slider(key="learn_game_trials").set_value(1000)
    at.toggle(key="learn_game_broken").set_value(broken)
    at.button(key="learn_game_play").click().run()
    assert not at.exception, [e.value for e in at.exception]
    return at


@pytest.mark.slow
def test_learn_page_plays_the_distinguishing_game_once_and_keeps_it():
    at = go(app(), "learn")
    assert game_chart(at) is None and "Play the game" in at.info[0].value
    play_game(at)
    played = at.session_state["learn_game"]
    assert played.inputs == learn_game.GameInputs(1.0, 1000, False, 0)
    one_way = played.results[0]
    assert one_way.mechanism == "1-way marginals" and one_way.trials == 1000
    names = [t["name"] for t in game_chart(at)["data"] if t["type"] == "histogram"]
    assert names == ["D: without the extra person", "D': with the extra person"]
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["claimed epsilon"] == "1.00"
    assert metrics["measured epsilon ≥"] == f"{one_way.epsilon_lower_bound:.2f}"
    assert metrics["measured separation"] == f"{one_way.mu_estimate:.2f}"
    low, high = one_way.mu_range
    assert metrics["range of the measurement"] == f"{low:.2f} to {high:.2f}"
    assert at.success[0].value == f"**{learn_game.verdict(one_way).headline}** " + (
        learn_game.verdict(one_way).reason
    )
    assert "No leak shown." in at.success[0].value
    assert any("generated tables, no private data" in m.value for m in at.markdown)

    # reruns and a change of step reuse the stored play: nothing is run again
    at.run()
    at.radio(key="learn_game_step").set_value("InDif scores").run()
    assert at.session_state["learn_game"] is played
    assert "InDif scores: 333 runs" in at.subheader[-1].value
    # a changed setting shows no stale game, and keeps the old one until the next play
    at.slider(key="learn_game_eps").set_value(2.0).run()
    assert game_chart(at) is None and "settings changed" in at.info[0].value
    assert at.session_state["learn_game"] is played


@pytest.mark.slow
def test_breaking_the_noise_in_the_game_is_caught_by_the_audit():
    at = play_game(go(app(), "learn"), epsilon=4.0, broken=True)
    result = at.session_state["learn_game"].results[0]
    assert result.violates_claim
    assert result.claimed_epsilon == pytest.approx(4.0)
    assert at.error and "Leak caught." in at.error[0].value
    metrics = {m.label: float(m.value.split()[0]) for m in at.metric if "epsilon" in m.label}
    # the best possible attack on the broken code exceeds what it claims
    assert metrics["best possible epsilon"] > metrics["claimed epsilon"] == 4.0
    # InDif's neighbours cannot reach its bound: with 1000 runs (seed 0) the leak goes unseen,
    # and the page says so instead of reporting a success
    at.radio(key="learn_game_step").set_value("InDif scores").run()
    assert not at.session_state["learn_game"].results[1].violates_claim
    assert not at.success and not at.error
    assert "this game missed the leak" in at.warning[0].value


def test_the_game_chart_overlays_both_sides_on_shared_bins():
    on_d, on_neighbour = np.array([0.0, 1.0, 1.0, 2.0]), np.array([1.0, 2.0, 3.0, 3.0])
    figure = charts.distinguishing_game(on_d, on_neighbour, bins=3)
    assert figure.layout.barmode == "overlay"
    first, second = figure.data
    assert list(first.x) == list(on_d) and list(second.x) == list(on_neighbour)
    assert first.xbins == second.xbins
    assert (first.xbins.start, first.xbins.size) == (0.0, 1.0)
    assert first.xbins.end > 3.0  # the largest value gets a bin of its own
    assert charts.distinguishing_game(np.empty(0), np.empty(0)).data == ()


@pytest.mark.slow
def test_a_malicious_column_name_is_shown_as_text(tmp_path):
    name = "<img src=x onerror=alert(1)>"
    rows = "\n".join(f"{i % 3},{(i * 7) % 5},{'ab'[i % 2]}" for i in range(6000))
    data = f"{name},b,c\n{rows}\n".encode()
    at = app()
    at.file_uploader(key="upload").set_value(("evil.csv", data, "text/csv")).run()
    assert not at.exception
    go(at, "run")
    at.number_input(key="iterations").set_value(5).run()
    run_and_wait(at)
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


@pytest.mark.slow
def test_runs_without_a_seed_are_releases_and_seeded_runs_are_marked():
    at = go(app(), "run")
    at.number_input(key="iterations").set_value(5).run()
    run_and_wait(at)
    assert at.session_state["finished"].result.ledger.randomness == "release"
    at.text_input(key="seed_text").set_value("7").run()
    run_and_wait(at)
    assert at.session_state["finished"].result.ledger.randomness != "release"
    assert any("NOT for release" in w.value for w in at.warning)
    go(at, "results")
    labels = [b.label for b in at.get("download_button")]
    assert "Download run 2's bundle (debug, NOT for release)" in labels
    assert any("NOT for release" in w.value for w in at.warning)
    bundle = at.session_state["finished"].bundle
    assert json.loads(bundle_files(bundle)["manifest.json"])["for_release"] is False


# --- run registry: recording, lifetime budget, History --------------------------------------


@pytest.mark.slow
def test_a_finished_runs_caption_keeps_its_own_iteration_cap():
    """GUM stops early on the sample (its plateau and noise-floor stops); the caption names
    the cap the run had, not the one the sidebar shows after it."""
    at = go(app(), "run")
    at.number_input(key="iterations").set_value(300).run()
    at.text_input(key="seed_text").set_value("3").run()
    run_and_wait(at)
    assert at.session_state["run_state"] == "done"
    assert len(at.session_state["finished"].result.history) < 300
    at.number_input(key="iterations").set_value(20).run()
    captions = [c.value for c in at.caption if "of at most" in c.value]
    assert len(captions) == 1 and "of at most 300 iterations" in captions[0], captions


def run_once(at: AppTest, iterations: int = 5) -> AppTest:
    go(at, "run")
    at.number_input(key="iterations").set_value(iterations).run()
    run_and_wait(at)
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


@pytest.mark.slow
def test_a_dashboard_run_is_recorded_with_its_bundle_and_offered_for_download():
    at = run_once(app())
    finished = at.session_state["finished"]
    recorded = Registry().runs()
    assert len(recorded) == 1
    run = recorded[0]
    assert run.id == finished.run_id and run.has_bundle
    # the sample file's bytes: the key the command line uses for the same file, so the file
    # spends from one budget whichever front end reads it
    assert run.fingerprint == file_fingerprint(ROOT / "privsyn_core" / "samples" / "adult.csv")
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


@pytest.mark.slow
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
    assert next(m for m in at.metric if m.label == "lifetime budget").value == "none"
    thresholds = next(m for m in at.metric if m.label == "delta spent, all runs").value
    assert thresholds == f"{ledger.spent_delta:.2g}" and ledger.spent_delta > 0
    labels = [b.label for b in at.get("download_button")]
    assert labels == ["Download the release bundle of run 1"]
    assert any("spends no privacy budget" in c.value for c in at.caption)
    # one run at the session's (epsilon, delta): the composed guarantee is that same pair
    delta = float(at.session_state["delta_text"])
    composed = f"(epsilon {at.session_state['epsilon']:.4g}, delta {delta:g})-DP"
    assert any(composed in c.value for c in at.caption), [c.value for c in at.caption]


def record_run(unit: PrivacyUnit) -> int:
    """A run on the bundled sample recorded in the registry with ``unit`` in its ledger, as a
    command-line run with those settings records it (nothing measured: no dashboard run)."""
    sample = file_fingerprint(ROOT / "privsyn_core" / "samples" / "adult.csv")
    ledger = PrivacyLedger(budget_rho=0.1, epsilon=1.0, delta=1e-9, unit=unit)
    reservation = Registry().reserve(sample, "adult.csv", Budget(0.1), "test")
    run_id = reservation.spend(ledger, {"epsilon": 1.0})
    reservation.return_unspent()
    return run_id


def dp_badges(at: AppTest) -> list[str]:
    """The units the page's "DP release" badges state, in page order."""
    found = (re.search(r"DP release, ([^\]]+)\]", m.value) for m in at.markdown)
    return [match.group(1) for match in found if match]


def test_history_badges_state_each_recorded_runs_own_privacy_unit():
    """The session's own setting is per row; the runs listed say what their records hold."""
    person = PrivacyUnit("pid", 3)
    record_run(ROW)
    record_run(person)
    at = go(app(), "history")
    assert frame(at, "noise")["privacy unit"].tolist() == [person.words, ROW.words]
    # runs, lifetime budget and the two runs compared: both units, in the order recorded; the
    # download of the newest run (the person-level one, picked by default): its own unit only
    both = [ROW.words, person.words]
    assert dp_badges(at) == [*both, *both, *both, person.words]


def test_a_run_record_without_a_privacy_unit_is_per_row():
    """Ledgers recorded before person-level guarantees existed hold no unit: per row."""
    run_id = record_run(person := PrivacyUnit("pid", 2))
    run = next(r for r in Registry().runs() if r.id == run_id)
    assert history_runs.unit(run) == person
    del run.ledger["privacy_unit"]
    assert history_runs.unit(run) == ROW
    assert history_runs.units([run, run]) == [ROW]


@pytest.mark.slow
def test_a_lifetime_budget_below_the_spend_refuses_the_next_run_readably():
    at = run_once(app())
    spent = at.session_state["finished"].result.ledger.spent_rho
    go(at, "history")
    at.radio(key="lifetime_unit").set_value("rho and delta (zCDP)").run()
    at.number_input(key="lifetime_rho").set_value(round(spent / 2, 6)).run()
    at.button(key="set_lifetime").click().run()
    assert not at.exception
    dataset = file_fingerprint(ROOT / "privsyn_core" / "samples" / "adult.csv")
    assert Registry().budget(dataset).lifetime.rho == pytest.approx(spent / 2, abs=1e-6)
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
    assert Registry().budget(dataset).lifetime is None
    run_once(at)
    assert at.session_state["run_state"] == "done" and len(Registry().runs()) == 2


@pytest.mark.slow
def test_a_lifetime_whose_delta_cannot_hold_a_runs_thresholds_refuses_it():
    """The lifetime set as the (epsilon, delta) the whole history keeps: half its delta for
    thresholded releases. A run at delta 1e-9 may spend 5e-10 on them, more than 3e-10."""
    at = go(app(), "history")
    at.text_input(key="lifetime_delta").set_value("6e-10").run()
    assert any("delta up to 3e-10 for thresholded releases" in c.value for c in at.caption)
    at.button(key="set_lifetime").click().run()
    dataset = file_fingerprint(ROOT / "privsyn_core" / "samples" / "adult.csv")
    lifetime = Registry().budget(dataset).lifetime
    assert lifetime.delta == pytest.approx(3e-10)
    assert lifetime.rho == pytest.approx(rho_from_epsilon_delta(5.0, 3e-10))
    run_once(at)
    assert at.session_state["run_state"] == "refused"
    message = at.error[0].value
    assert "delta 5e-10 > 3e-10" in message and "rho" not in message.split("would exceed it")[1]
    assert Registry().runs() == []


@pytest.mark.slow
def test_a_run_near_the_lifetime_budget_warns():
    at = go(app(), "history")
    budget = rho_from_epsilon_delta(1.0, 1e-9)
    at.radio(key="lifetime_unit").set_value("rho and delta (zCDP)").run()
    at.number_input(key="lifetime_rho").set_value(round(budget * 1.1, 6)).run()
    at.button(key="set_lifetime").click().run()
    run_once(at)
    assert at.session_state["run_state"] == "done"
    assert at.session_state["finished"].budget_warnings
    assert any(w.value.startswith("Lifetime budget:") for w in at.warning)


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
def test_the_epsilon_set_on_privacy_is_the_one_run_after_visiting_other_pages():
    at = go(app(), "privacy")
    at.number_input(key="epsilon").set_value(0.5).run()
    go(at, "data")
    run_once(at)
    assert at.session_state["finished"].result.ledger.epsilon == 0.5
    assert Registry().runs()[0].epsilon == 0.5


@pytest.mark.slow
def test_history_shows_budget_held_by_a_run_that_has_not_recorded_its_spend():
    sample = file_fingerprint(ROOT / "privsyn_core" / "samples" / "adult.csv")
    rho = rho_from_epsilon_delta(1.0, 1e-9)
    Registry().set_lifetime_budget(sample, "adult.csv", Budget(3 * rho, math.inf))
    Registry().reserve(
        sample, "adult.csv", Budget(rho), "privsyn synthesize, epsilon 1, delta 1e-09"
    )
    at = go(app(), "history")
    assert any("held by runs that reserved their cost" in w.value for w in at.warning)
    held = frame(at, "rho held")
    assert list(held["by"]) == ["privsyn synthesize, epsilon 1, delta 1e-09"]
    assert held["rho held"][0] == pytest.approx(rho)
    assert held["state"][0].startswith("in progress")  # this process holds it
    assert at.metric[0].label == "rho spent or held, all runs"
    assert float(at.metric[0].value) == pytest.approx(rho, rel=1e-3)


@pytest.mark.slow
def test_history_shows_the_current_tables_runs_unless_asked_for_all():
    at = run_once(app())
    rows = "\n".join(f"{i % 3},{(i * 7) % 5},{'ab'[i % 2]}" for i in range(6000))
    data = f"a,b,c\n{rows}\n".encode()
    go(at, "data").file_uploader(key="upload").set_value(("small.csv", data, "text/csv")).run()
    run_once(at)
    go(at, "history")
    runs = frame(at, "noise")
    assert list(runs["id"]) == [2]
    assert any(m.value.startswith("**small\\.csv · 3 columns · 6,000 rows") for m in at.markdown)
    spent = next(m for m in at.metric if m.label == "rho spent, all runs").value
    assert spent == f"{at.session_state['finished'].result.ledger.spent_rho:.4g}"
    at.toggle(key="history_all").set_value(True).run()
    # one table of runs per table, each under its name: the one in use first
    assert [list(f.value["id"]) for f in at.dataframe if "noise" in f.value.columns] == [[2], [1]]
    named = [m.value.split(" · ")[0] for m in at.markdown if " · " in m.value]
    assert named[:2] == ["**small\\.csv", "**UCI Adult sample \\(bundled adult\\.csv\\)"]


@pytest.mark.slow
def test_a_result_the_registry_cannot_record_is_discarded_and_its_reservation_kept(monkeypatch):
    def broken(*args, **kwargs):
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(Reservation, "record_result", broken)
    at = run_once(app())
    assert at.session_state["finished"] is None
    assert at.session_state["run_state"] == "failed"
    message = at.error[0].value
    assert "not recorded" in message and "disk I/O error" in message and "discarded" in message
    assert not Registry().runs()
    # what the run measured is not on the record, so its whole reservation stays counted
    (held,) = Registry().held()
    assert at.session_state["epsilon"] == 1.0
    assert held.rho == pytest.approx(
        rho_from_epsilon_delta(1.0, float(at.session_state["delta_text"]))
    )


@pytest.mark.slow
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


@pytest.mark.slow
def test_data_page_says_where_each_structural_choice_comes_from():
    """Before a run: declared, estimated privately, or (demo switch) read off the data. After
    a run: the choices the run made, from its DP measurements."""
    at = app()
    plan = frame(at, "whole numbers / date format").set_index("column")
    assert plan.loc["age", "kind"] == "private estimate"
    assert plan.loc["age", "domain"] == "private estimate"
    assert plan.loc["age", "may be missing"] == "private estimate"
    at.toggle(key="raw_domains").set_value(True).run()
    plan = frame(at, "whole numbers / date format").set_index("column")
    assert plan.loc["age", "kind"] == "raw data, not private"
    at.toggle(key="raw_domains").set_value(False).run()
    schema = at.session_state["schema"]
    at.session_state["schema"] = schema.with_column(
        ColumnSchema("age", Kind.NUMERIC, integer=True, lower=17, upper=90)
    )
    at.run()
    plan = frame(at, "whole numbers / date format").set_index("column")
    assert plan.loc["age", "kind"] == "numeric (declared)"
    assert plan.loc["age", "whole numbers / date format"] == "whole numbers: yes (declared)"
    assert plan.loc["age", "domain"] == "declared"
    run_once(at)
    go(at, "data")
    decided = frame(at, "choice")
    rows = {(r.column, r.choice): (r.value, r.source) for r in decided.itertuples()}
    assert rows[("age", "kind")] == ("numeric", "declared")
    assert rows[("workclass", "kind")] == ("categorical", "private estimate")
    assert rows[("hours-per-week", "whole numbers")] == ("yes", "private estimate")
    ledger = at.session_state["finished"].result.ledger
    structure = [e.attributes[0] for e in ledger.entries if e.step == "structure"]
    assert "age" not in structure and "workclass" in structure


@pytest.mark.slow
def test_declared_decimals_show_in_the_plan_and_bound_the_output():
    """The column editor's ``decimals`` (set here through the schema it edits): the plan
    says it is declared, the run's choices say where each column's precision came from,
    and the synthetic column carries no more decimals."""
    at = app()
    plan = frame(at, "whole numbers / date format").set_index("column")
    assert plan.loc["fnlwgt", "decimals"] == "with the kind: private estimate"
    hours = ColumnSchema(
        "hours-per-week", Kind.NUMERIC, integer=False, lower=1, upper=99, bins=20, decimals=1
    )
    at.session_state["schema"] = at.session_state["schema"].with_column(hours)
    at.run()
    plan = frame(at, "whole numbers / date format").set_index("column")
    assert plan.loc["hours-per-week", "decimals"] == "1 (declared)"
    run_once(at)
    go(at, "data")
    rows = {(r.column, r.choice): (r.value, r.source) for r in frame(at, "choice").itertuples()}
    assert rows[("hours-per-week", "decimals")] == ("1", "declared")
    assert rows[("fnlwgt", "decimals")] == ("0 (whole numbers)", "private estimate")
    synthetic = at.session_state["finished"].result.synthetic
    written = synthetic["hours-per-week"].dropna().map(repr)
    assert written.str.fullmatch(r"\d+\.\d").all() and written.nunique() > 50
    assert str(synthetic["fnlwgt"].dtype) in ("Int64", "int64")


# --- background runs: Cancel, the server-wide cap, a table on disk ------------------------------


@pytest.mark.slow
def test_cancel_stops_the_background_run_and_records_its_spend():
    at = go(app(), "run")
    at.number_input(key="iterations").set_value(500).run()
    at.checkbox(key="stop_at_plateau").uncheck().run()
    at.button(key="run").click().run()
    assert at.session_state["run_state"] == "running"
    job = at.session_state["job"]
    deadline = time.monotonic() + 120
    while not job.progress.snapshot().history and time.monotonic() < deadline:
        time.sleep(0.1)
    assert job.progress.snapshot().history, "GUM started"
    at.run()  # the page meanwhile: still the run in progress, with its Cancel button
    assert at.button(key="run").disabled
    at.button(key="cancel").click().run()
    job.thread.join(timeout=60)
    at.run()
    assert at.session_state["run_state"] == "cancelled" and at.session_state["job"] is None
    (run,) = Registry().runs()
    assert run.config["outcome"] == "cancelled" and run.rho > 0 and not run.has_bundle
    assert any(f"Its spend is recorded as run {run.id}" in w.value for w in at.warning)
    assert len(at.session_state["partial_history"]) < 500
    assert at.session_state["finished"] is None


@pytest.mark.slow
def test_other_pages_work_during_a_run_and_show_it_in_the_sidebar():
    at = go(app(), "run")
    at.number_input(key="iterations").set_value(500).run()
    at.checkbox(key="stop_at_plateau").uncheck().run()
    at.button(key="run").click().run()
    job = at.session_state["job"]
    try:
        go(at, "privacy")
        assert at.title[0].value == "Privacy budget"
        assert any("A synthesis of" in c.value and "is running" in c.value for c in at.caption)
        at.number_input(key="epsilon").set_value(2.0).run()  # does not touch the running run
        assert not at.exception and job.request.epsilon == 1.0
        go(at, "data")
        assert at.button(key="use_sample").disabled  # no new table under a running run
        go(at, "run")
        assert at.number_input(key="iterations").value == 500
    finally:
        job.cancel()
        job.thread.join(timeout=120)
    at.run()
    assert at.session_state["run_state"] == "cancelled"


@pytest.mark.slow
def test_a_run_past_the_servers_cap_waits_in_line_and_cancel_takes_it_out(monkeypatch):
    with only_slot_held(monkeypatch):
        at = go(app(), "run")
        at.button(key="run").click().run()
        job = at.session_state["job"]
        assert job is not None and at.session_state["run_state"] == "running"
        assert job.progress.snapshot().ahead == 0
        assert any("Waiting for a free slot" in i.value for i in at.info)
        assert any("Your run is next in line" in i.value for i in at.info)
        go(at, "privacy")  # the sidebar of the other pages says it waits
        assert any("is waiting for a free slot" in c.value for c in at.caption)
        go(at, "run")
        at.button(key="cancel").click().run()
        job.thread.join(timeout=10)
        at.run()
        assert at.session_state["run_state"] == "cancelled" and at.session_state["job"] is None
        assert any("while it waited for a free slot" in w.value for w in at.warning)
        assert any("nothing was spent" in w.value for w in at.warning)
        # a full line refuses the start and says so
        monkeypatch.setenv(worker.MAX_WAITING_VARIABLE, "0")
        at.button(key="run").click().run()
        assert at.session_state["job"] is None
        assert any("The server is busy" in w.value for w in at.warning)
        monkeypatch.delenv(worker.MAX_WAITING_VARIABLE)
        assert not Registry().runs()
        # in line again: it starts by itself when the other run ends
        at.button(key="run").click().run()
        assert at.session_state["job"].progress.snapshot().ahead == 0
    deadline = time.monotonic() + 120
    while at.session_state["run_state"] == "running" and time.monotonic() < deadline:
        time.sleep(0.2)
        at.run()
    assert at.session_state["run_state"] == "done"
    assert len(Registry().runs()) == 1


def test_cancel_of_a_waiting_run_shows_in_the_clicks_own_rerun(monkeypatch):
    """No poll and no worker thread between the click and the page saying so (issue 24: under
    load, Cancel of a waiting run showed no effect for minutes)."""
    with only_slot_held(monkeypatch):
        at = go(app(), "run")
        at.button(key="run").click().run()
        job = at.session_state["job"]
        assert job.progress.snapshot().ahead == 0
        assert any("Waiting for a free slot" in i.value for i in at.info)
        at.button(key="cancel").click().run()
        assert at.session_state["run_state"] == "cancelled" and at.session_state["job"] is None
        assert any("while it waited for a free slot" in w.value for w in at.warning)
        assert worker.SLOTS.waiting == 0
    job.thread.join(timeout=10)
    assert not job.thread.is_alive() and not Registry().runs()


def coded_adult_file(tmp_path, rows: int = 4000):
    table = pd.read_csv(ROOT / "assets" / "adult-coded.csv").head(rows)
    path = tmp_path / "adult-coded.parquet"
    table.to_parquet(path, index=False)
    return path, table


@pytest.mark.slow
def test_a_table_on_disk_shows_columns_and_size_only_and_runs_on_duckdb(tmp_path):
    path, table = coded_adult_file(tmp_path)
    at = app()
    for bad, why in [
        ("", "type the path"),
        ("relative/file.csv", "not a full path"),
        (str(tmp_path / "absent.csv"), "there is no file"),
        (str(tmp_path), "is a folder"),
        (str(ROOT / "pyproject.toml"), "not a CSV"),
    ]:
        at.text_input(key="disk_path").set_value(bad).run()
        at.button(key="use_disk").click().run()
        assert not at.exception
        assert any(why in e.value for e in at.error), (bad, [e.value for e in at.error])
        assert at.session_state["disk"] is None
    at.text_input(key="disk_path").set_value(str(path)).run()
    at.button(key="use_disk").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state["table"] is None
    caption = next(c.value for c in at.caption if "file on disk" in c.value)
    assert "Parquet" in caption and f"{len(table.columns)} columns" in caption
    assert "KB" in caption
    shown = " ".join(
        [c.value for c in at.caption] + [m.value for m in at.markdown] + [i.value for i in at.info]
    )
    assert f"{len(table):,}" not in shown and str(len(table)) not in shown  # no row count
    # no rows: no table on the page has the file's columns (a preview would); one lists them
    tables = [d.value for d in at.dataframe]
    assert not any(set(t.columns) & set(table.columns) for t in tables)
    (names,) = [t for t in tables if list(t.columns) == ["column"]]
    assert list(names["column"]) == list(table.columns)
    at.radio(key="disk_mode").set_value(at.radio(key="disk_mode").options[1]).run()
    tables = [d.value for d in at.dataframe]
    assert [list(t.columns) for t in tables] == [["column"], ["column", "codes"]]

    go(at, "run")
    assert at.button(key="run").disabled  # numbers of codes still open
    go(at, "data")
    domain = (ROOT / "assets" / "adult-coded-domain.json").read_bytes()
    at.file_uploader(key="disk_domain").set_value(("domain.json", domain, "application/json"))
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert all(at.session_state["disk_codes"].values())
    assert any("ready to run" in s.value for s in at.success)

    go(at, "run")
    at.number_input(key="iterations").set_value(5).run()
    run_and_wait(at)
    assert not at.exception, [e.value for e in at.exception]
    finished = at.session_state["finished"]
    assert finished is not None, [e.value for e in at.error]
    assert list(finished.result.synthetic.columns) == list(table.columns)
    (run,) = Registry().runs()
    assert run.fingerprint == file_fingerprint(path) and run.config["engine"] == "duckdb"
    assert run.has_bundle and run.name == path.name
    go(at, "results")  # no in-memory table to compare with: said plainly
    assert any("file on disk" in i.value for i in at.info)
    go(at, "history")
    assert list(frame(at, "noise")["id"]) == [run.id]


@pytest.mark.slow
def test_a_disk_file_with_a_value_outside_its_codes_is_a_readable_error(tmp_path):
    path, _ = coded_adult_file(tmp_path, rows=500)
    at = app()
    at.text_input(key="disk_path").set_value(str(path)).run()
    at.button(key="use_disk").click().run()
    at.radio(key="disk_mode").set_value(at.radio(key="disk_mode").options[1]).run()
    codes = json.loads((ROOT / "assets" / "adult-coded-domain.json").read_text())
    codes["sex"] = 1  # the file has codes 0 and 1
    at.file_uploader(key="disk_domain").set_value(
        ("domain.json", json.dumps(codes).encode(), "application/json")
    )
    at.run()
    go(at, "run")
    run_and_wait(at)
    assert at.session_state["run_state"] in ("failed", "refused")
    assert any("sex" in e.value for e in at.error), [e.value for e in at.error]
    assert not Registry().runs()  # nothing was measured, nothing spent


@pytest.mark.slow
def test_a_raw_csv_on_disk_is_encoded_with_the_schema_and_counted_on_duckdb(tmp_path):
    path = tmp_path / "adult-part.csv"
    sample = ROOT / "privsyn_core" / "samples" / "adult.csv"
    path.write_text("".join(sample.open().readlines()[:3001]))
    at = app()
    at.text_input(key="disk_path").set_value(str(path)).run()
    at.button(key="use_disk").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state["disk"].columns == tuple(at.session_state["schema"].names())
    editor = at.get("arrow_data_editor") or at.get("data_editor")
    assert editor, "the schema editor is shown for a raw file"
    go(at, "run")
    at.number_input(key="iterations").set_value(5).run()
    run_and_wait(at)
    finished = at.session_state["finished"]
    assert finished is not None, [e.value for e in at.error]
    assert finished.result.end_to_end_dp
    kept = list(finished.result.synthetic.columns)
    left_out = [name for name, _ in finished.result.excluded]
    assert kept and sorted(kept + left_out) == sorted(at.session_state["disk"].columns)
    (run,) = Registry().runs()
    assert run.config["engine"] == "duckdb" and run.fingerprint == file_fingerprint(path)


@pytest.mark.slow
def test_a_disk_file_swapped_for_a_link_after_the_check_is_refused_by_the_run(
    tmp_path, monkeypatch
):
    """The Data page checks the path; the run opens the file again later. A file swapped in
    between for a link to a file outside PRIVSYN_DISK_ROOT is refused by the run, which checks
    the file it opened: nothing is read from outside, measured or spent."""
    root, elsewhere = tmp_path / "root", tmp_path / "elsewhere"
    root.mkdir()
    elsewhere.mkdir()
    monkeypatch.setenv("PRIVSYN_DISK_ROOT", str(root))
    sample = (ROOT / "privsyn_core" / "samples" / "adult.csv").open().readlines()
    path, secret = root / "adult-part.csv", elsewhere / "secret.csv"
    path.write_text("".join(sample[:6]))  # the checked file: 5 rows
    secret.write_text("".join(sample[:2998]))  # 2,997 rows outside the root
    at = app()
    at.text_input(key="disk_path").set_value(str(path)).run()
    at.button(key="use_disk").click().run()
    assert at.session_state["disk"] is not None, [e.value for e in at.error]
    path.unlink()
    path.symlink_to(secret)
    go(at, "run")
    at.number_input(key="iterations").set_value(5).run()
    run_and_wait(at)
    assert at.session_state["run_state"] == "refused" and at.session_state["finished"] is None
    (message,) = [e.value for e in at.error]
    assert "outside" in message and str(secret) in message and str(root.resolve()) in message
    assert not Registry().runs()  # nothing measured, nothing spent


@pytest.mark.slow
def test_a_hard_link_in_the_disk_root_to_a_file_outside_is_refused(tmp_path, monkeypatch):
    root, elsewhere = tmp_path / "root", tmp_path / "elsewhere"
    root.mkdir()
    elsewhere.mkdir()
    monkeypatch.setenv("PRIVSYN_DISK_ROOT", str(root))
    secret = elsewhere / "secret.csv"
    secret.write_text((ROOT / "privsyn_core" / "samples" / "adult.csv").read_text())
    (root / "adult.csv").hardlink_to(secret)
    at = app()
    at.text_input(key="disk_path").set_value(str(root / "adult.csv")).run()
    at.button(key="use_disk").click().run()
    assert at.session_state["disk"] is None
    (message,) = [e.value for e in at.error]
    assert "hard links" in message and "copy the file into" in message


# --- small tables: the reviewed-schema path ---------------------------------------------------


@pytest.mark.slow
def test_penguins_at_epsilon_1_keeps_its_columns_through_the_reviewed_draft():
    """Left open, penguins' 344 rows cannot clear the category threshold at epsilon 1 (the
    Privacy page says so before anything is spent); drafting a schema, ticking its lines and
    running keeps the columns, and nothing is spent on the declared domains."""
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    data = (ROOT / "tests" / "data" / "penguins.csv").read_bytes()
    at.file_uploader(key="upload").set_value(("penguins.csv", data, "text/csv")).run()
    assert not at.exception and at.session_state["table"].shape == (344, 8)
    go(at, "privacy")
    label = "records a category needs, at most: kept half the time"
    needed = [m for m in at.metric if m.label == label]
    assert needed and int(needed[0].value.replace(",", "")) > 344
    # and the owner's forecast names the columns a run would lose, before anything is spent
    assert "Likely left out" in at.warning[0].value and "species" in at.warning[0].value
    go(at, "data")
    at.button(key="review_draft_button").click().run()
    assert any("review every line" in e.value for e in at.error)
    assert at.session_state["schema"].included()[0].kind is None, "nothing declared yet"
    boxes = [at.checkbox(key=f"review_ticks_{i}") for i in range(8)]
    for box in boxes[:-1]:
        box.check()
    at.run()  # "year" stays unticked: only ticked lines are declared
    at.button(key="review_apply").click().run()
    assert not at.exception
    schema = at.session_state["schema"]
    assert schema["species"].categories == ("Adelie", "Chinstrap", "Gentoo")
    assert schema["body_mass_g"].lower is not None and schema["body_mass_g"].missing is None
    assert schema["year"].kind is None and schema["year"].categories is None
    declared = [n for n in schema.names() if n != "year"]
    go(at, "privacy")
    assert at.session_state["epsilon"] == 1.0
    run_once(at)
    finished = at.session_state["finished"]
    assert finished is not None, at.session_state["run_message"]
    kept = {c.codec.name for c in finished.result.columns}
    assert set(declared) <= kept
    assert set(finished.result.synthetic.columns) >= set(declared)
    spent_on = {
        a
        for e in finished.result.ledger.entries
        if e.step in ("domain", "structure")
        for a in e.attributes
    }
    assert not spent_on & set(declared)
    assert "year" in spent_on, "the unticked column is still estimated privately"


def test_the_drafted_lines_are_shown_as_text_not_markdown():
    """Column names and values in the review's checkbox labels cannot load an image or link."""
    from dashboard.review import literal

    evil = "![x](http://127.0.0.2/a.png) *b* [l](http://e)"
    escaped = literal(evil)
    assert "![" not in escaped and "](" not in escaped and "*b*" not in escaped
    assert re.sub(r"\\(.)", r"\1", escaped) == evil


@pytest.mark.slow
def test_a_prediction_target_chosen_on_privacy_weights_the_runs_budget_and_is_recorded():
    at = go(app(), "privacy")
    box = at.selectbox(key="target")
    assert box.options[0] == "none" and "income" in box.options
    box.set_value("income").run()
    at = go(at, "run")
    at.number_input(key="iterations").set_value(5).run()
    at.text_input(key="seed_text").set_value("1").run()
    run_and_wait(at)
    assert not at.exception, [e.value for e in at.exception]
    marginals = at.session_state["finished"].result.marginals
    weight = PrivSynConfig().target_weight
    expected = np.array(
        [((weight if "income" in m.attributes else 1) * m.cells) ** (2 / 3) for m in marginals]
    )
    rho = np.array([m.rho for m in marginals])
    assert any("income" in m.attributes for m in marginals)
    np.testing.assert_allclose(rho / rho.sum(), expected / expected.sum(), rtol=1e-9)
    assert Registry().runs()[0].config["target"] == "income"


@pytest.mark.slow
def test_a_target_of_an_earlier_table_is_dropped_when_the_table_changes():
    at = go(app(), "privacy")
    at.selectbox(key="target").set_value("income").run()
    at.session_state["schema"] = at.session_state["schema"].__class__(
        tuple(c for c in at.session_state["schema"].columns if c.name != "income")
    )
    at = go(at, "privacy")
    assert at.session_state["target"] is None
    assert "income" not in at.selectbox(key="target").options


@pytest.mark.slow
def test_privacy_page_forecasts_which_columns_a_run_would_lose_for_the_owner():
    """Before a run, the owner sees which columns this budget is likely to leave out and why
    (the engine's forecast), with the way to keep them; column names are shown as text."""
    at = go(app(), "privacy")
    # the Adult sample at epsilon 1: every column kept
    assert any("all 15 columns are kept" in s.value for s in at.success)
    # ... and the ones a run changes are listed with the change (rare categories merged)
    changed = at.table[0].value
    assert r"native\-country" in changed.index  # escaped: st.table renders markdown
    assert "rare values merged into" in changed.loc[r"native\-country", "what it changes"]
    assert "of its 41 values hold that many" in changed.loc[r"native\-country", "why"]
    assert set(changed["outlook"]) == {"kept, changed"}
    rng = np.random.default_rng(0)
    rows = 3000
    table = pd.DataFrame(
        {
            "**user**": [f"u{i:05d}" for i in range(rows)],
            "colour": rng.choice(["red", "green", "blue"], rows),
            "amount": (10 ** rng.uniform(1, 4, rows)).round(2),
        }
    )
    go(at, "data").file_uploader(key="upload").set_value(
        ("ids.csv", table.to_csv(index=False).encode(), "text/csv")
    ).run()
    go(at, "privacy")
    warning = at.warning[0].value
    assert "Likely left out: 1 of 3 columns" in warning and r"\*\*user\*\*" in warning
    shown = at.table[0].value
    # the user ids are lost; the amounts, beyond the private range in some runs, changed
    assert list(shown.index) == [r"\*\*user\*\*", "amount"]
    assert "beyond the private range" in shown.loc["amount", "what it changes"]
    assert "identifier?" in shown.loc[r"\*\*user\*\*", "why"]
    assert any("declare what you would publish anyway" in i.value.lower() for i in at.info)
    # kept in the session: the same settings do not simulate again, new ones do
    forecast = at.session_state["forecast"]
    at.run()
    assert at.session_state["forecast"] is forecast
    at.number_input(key="epsilon").set_value(50.0).run()
    assert at.session_state["forecast"] is not forecast
    assert not at.warning or "user" in at.warning[0].value
    # the demo switch reads domains off the data: nothing to forecast
    go(at, "data").toggle(key="raw_domains").set_value(True).run()
    go(at, "privacy")
    assert any("not end-to-end DP" in c.value for c in at.caption)
    assert not at.table


def test_unticking_stop_early_runs_every_iteration_asked_for():
    """The Run page's box turns off both of GUM's early stops (the plateau and the noise
    floor), so a teacher can watch all the iterations; ticked, the engine's defaults apply."""
    from dashboard.settings import _gum
    from privsyn_core.generation.gum_settings import GumSettings

    every = _gum(40, stop_early=False)
    assert every.iterations == 40 and every.patience is None and every.noise_floor is None
    defaults = GumSettings()
    early = _gum(40, stop_early=True)
    assert (early.patience, early.noise_floor) == (defaults.patience, defaults.noise_floor)
    assert early.patience is not None and early.noise_floor is not None


@pytest.mark.slow
def test_privacy_page_plans_and_forecasts_for_the_person_unit_the_data_page_set():
    """With a person column and K, the Privacy page's noise is the run's own: every sigma K
    times the per-row one, the person column out of the plan and the forecast (issue 26)."""
    rng = np.random.default_rng(1)
    people = 600
    person = np.repeat(np.arange(people), rng.integers(1, 9, people))
    table = pd.DataFrame(
        {
            "who": [f"p{p:04d}" for p in person],
            "colour": rng.choice(["red", "green", "blue"], len(person)),
            "size": rng.choice(["S", "M", "L", "XL"], len(person)),
        }
    )
    at = app()
    at.file_uploader(key="upload").set_value(
        ("visits.csv", table.to_csv(index=False).encode(), "text/csv")
    ).run()
    go(at, "privacy")
    per_row = at.dataframe[0].value.set_index("step")["sigma"]
    go(at, "data").selectbox(key="person").set_value("who").run()
    at.number_input(key="max_rows_per_person").set_value(4).run()
    go(at, "privacy")
    assert not at.exception, [e.value for e in at.exception]
    per_person = at.dataframe[0].value.set_index("step")["sigma"]
    # one column fewer is planned (the person column), so compare a step whose sigma does
    # not depend on the column count only through the unit: every step's ratio must be 4 when
    # the plan is redone per row on the same two columns
    from privsyn_core.privacy.ledger import PrivacyUnit as Unit
    from privsyn_core.privacy.planner import plan_budget

    def sigmas(unit: Unit) -> pd.Series:
        plan = plan_budget(1.0, 1e-9, 2, private_structure=2, private_undecided=2, unit=unit)
        return pd.DataFrame(plan.as_rows()).set_index("step")["sigma"]

    assert np.allclose(per_person, sigmas(Unit("who", 4)), rtol=1e-6)
    assert np.allclose(sigmas(Unit("who", 4)), 4 * sigmas(ROW), rtol=1e-6)
    assert not np.allclose(per_row, per_person)
    assert any("at most 4 rows" in c.value and "4 times" in c.value for c in at.caption)
    (indif,) = [m.value for m in at.markdown if m.value.startswith("**InDif scores**")]
    assert "*In detail:* sensitivity 16; noise variance 128m" in indif
    forecast = at.session_state["forecast"][1]
    assert "who" not in {c.name for c in forecast.columns}
    assert at.session_state["forecast_counts"][0][1] == Unit("who", 4)


@pytest.mark.slow
def test_marginals_page_says_which_measured_pairs_are_drawn_from_their_quasi_fit():
    """Columns that copy others (60,000 rows, 30 columns: the rule is for wide tables): the
    measured copy pairs are independent but for their diagonal, and the Marginals page says
    how many are drawn from that fit, in a sentence whose verbs agree with the count
    (generation/quasi_independence.py)."""
    rng = np.random.default_rng(3)
    n = 60_000
    region = rng.integers(0, 20, n)
    office = np.where(rng.random(n) < 0.6, region, rng.integers(0, 20, n))
    grade = rng.integers(0, 12, n)
    band = np.where(rng.random(n) < 0.7, grade % 6, rng.integers(0, 6, n))
    columns = {
        "region": [f"R{v:02d}" for v in region],
        "office": [f"O{v:02d}" for v in office],
        "grade": [f"G{v:02d}" for v in grade],
        "band": [f"B{v}" for v in band],
    }
    unit = band
    for k in range(26):  # a chain of copies: each unit copies the one before it
        unit = np.where(rng.random(n) < 0.6, unit % 8, rng.integers(0, 8, n))
        columns[f"unit{k:02d}"] = [f"U{v}" for v in unit]
    frame = pd.DataFrame(columns)
    at = app()
    data = frame.to_csv(index=False).encode()
    at.file_uploader(key="upload").set_value(("staff.csv", data, "text/csv")).run()
    assert not at.exception
    go(at, "run")
    at.text_input(key="seed_text").set_value("3").run()
    run_and_wait(at)
    report = dependency_report(at.session_state["finished"].result)
    assert report.quasi_pairs >= 1
    go(at, "marginals")
    (line,) = [i.value for i in at.info if "independent but for a few cells" in i.value]
    verb = "is" if report.quasi_pairs == 1 else "are"
    assert line.startswith(
        f"{report.quasi_pairs} of the {report.measured_pairs} measured pairs {verb} independent"
    ), line
