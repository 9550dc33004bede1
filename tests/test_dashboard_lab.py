"""The Lab page in AppTest: cost shown before the click, a second click to confirm the spend
(issue 41), the comparison in the background with progress and Cancel, shared measurements
recorded, charts, owner-only labelling, refusals (issue 12)."""

from __future__ import annotations

import json
import math
import time
from dataclasses import replace
from functools import partial

import numpy as np
import pytest
import streamlit as st
from conftest import ROOT, only_slot_held, planted_pair
from streamlit.testing.v1 import AppTest

from dashboard import records
from dashboard.views import lab_jobs
from privsyn_core.config import PrivSynConfig
from privsyn_core.generation.gum_settings import STRATEGY_NAMES, GumSettings
from privsyn_core.lab import LabArm, plan_lab, run_lab
from privsyn_core.privacy.budget import Budget
from privsyn_core.privacy.conversion import epsilon_from_rho, rho_from_epsilon_delta
from privsyn_core.privacy.ledger import BudgetExceededError, PrivacyLedger
from privsyn_core.release.registry import Registry, file_fingerprint

APP = str(ROOT / "dashboard" / "app.py")
SAMPLE = ROOT / "privsyn_core" / "samples" / "adult.csv"


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


def until_done(at: AppTest, timeout: float = 600) -> AppTest:
    """Rerun the page until the background comparison has ended (the browser's polling
    fragment does this in a real session)."""
    deadline = time.monotonic() + timeout
    while at.session_state["lab_job"] is not None and time.monotonic() < deadline:
        time.sleep(0.2)
        at.run()
    assert at.session_state["lab_job"] is None, "the comparison ended in time"
    assert not at.exception, [e.value for e in at.exception]
    return at


def confirmed(at: AppTest) -> AppTest:
    """Run the comparison: the first click asks, the second spends."""
    at.button(key="lab_run").click().run()
    assert not at.exception, [e.value for e in at.exception]
    return at.button(key="lab_confirm").click().run()


@pytest.mark.slow
def test_the_cost_is_stated_before_anything_runs():
    at = lab_page()
    assert at.selectbox(key="lab_preset").value == "GUM vs MCF"
    info = at.info[0].value
    assert "3 measurements of the table" in info  # one per seed: GUM and MCF share it
    assert "GUM and MCF share one" in info
    rho = 3 * rho_from_epsilon_delta(1.0, 1e-9)
    assert f"up to rho {rho:.3g}" in info
    assert any("no lifetime budget set" in c.value for c in at.caption)
    assert Registry().runs() == []


@pytest.mark.slow
def test_the_raw_domain_shortcut_of_runs_is_not_taken_and_the_page_says_so():
    at = lab_page()
    assert not any("raw-domain shortcut" in c.value for c in at.caption)
    at.session_state["raw_domains"] = True
    at.number_input(key="lab_seeds").set_value(1).run()
    assert any("raw-domain shortcut" in c.value for c in at.caption)
    confirmed(at)
    until_done(at)
    assert not at.error, [e.value for e in at.error]
    result = at.session_state["lab_result"][2]
    assert result.ledgers and all(not ledger.not_private for ledger in result.ledgers)


@pytest.mark.slow
def test_a_comparison_runs_records_its_measurements_and_draws_both_charts():
    at = lab_page()
    at.number_input(key="lab_seeds").set_value(2).run()
    at.selectbox(key="lab_label").set_value("income").run()
    confirmed(at)
    assert at.session_state["lab_job"] is not None
    until_done(at)
    assert not at.error, [e.value for e in at.error]
    runs = Registry().runs()
    assert len(runs) == 2 and all(r.config["outcome"] == "lab: GUM vs MCF" for r in runs)
    preset, label, result, ids = at.session_state["lab_result"]
    assert (preset, label) == ("GUM vs MCF", "income") and list(ids) == [r.id for r in runs]
    assert sum(r.rho for r in runs) == pytest.approx(result.spent_rho)
    assert result.spent.rho == pytest.approx(result.spent_rho)
    assert result.spent.delta == pytest.approx(sum(ledger.spent_delta for ledger in result.ledgers))
    for run in runs:  # each is a whole run's spend (the raw sample reserves part of delta)
        assert run.rho <= PrivacyLedger.from_epsilon_delta(1.0, 1e-9).budget_rho
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    assert len(specs) == 2
    convergence, fidelity = specs
    assert {t["name"] for t in convergence["data"] if t.get("showlegend", True)} == {"GUM", "MCF"}
    titles = [a["text"] for a in fidelity["layout"]["annotations"]]
    assert titles == ["2-way L1", "3-way range error", "SVM misclassification"]
    assert any("Owner-only" in w.value and "never exported" in w.value for w in at.warning)
    assert any("DP post-processing" in m.value for m in at.markdown)
    table = at.table[0].value  # static: no toolbar to download the owner-only scores
    assert list(table.index) == ["GUM", "MCF"]
    assert table["2-way L1"].str.fullmatch(r"0\.\d+ ± 0\.\d+").all(), table["2-way L1"]
    assert not at.get("arrow_data_frame") and not at.dataframe
    assert json.loads(at.get("plotly_chart")[1].proto.config)["displayModeBar"] is False


@pytest.mark.slow
def test_progress_names_the_step_and_the_gum_iteration_and_cancel_records_the_spend():
    at = lab_page(iterations=500)
    at.session_state["stop_at_plateau"] = False
    at.run()
    confirmed(at)
    job = at.session_state["lab_job"]
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        progress = job.tracker.snapshot().progress
        if progress is not None and progress.gum is not None and progress.gum.iteration > 2:
            break
        time.sleep(0.1)
    at.run()  # the page meanwhile: the comparison in progress, with its Cancel button
    assert at.button(key="lab_run").disabled
    bars = [b.proto.text for b in at.get("progress")]
    assert any(t.startswith("Step 2 of 9: seed 1 of 3, generating 'GUM'") for t in bars), bars
    assert any("iteration" in t and "of at most 500" in t for t in bars), bars
    at.button(key="lab_cancel").click().run()
    job.thread.join(timeout=120)
    until_done(at)
    (run,) = Registry().runs()
    assert run.config["outcome"] == "lab: GUM vs MCF" and run.rho > 0  # measured before Cancel
    warnings = [w.value for w in at.warning]
    assert any(
        "The last comparison was cancelled" in w and f"recorded as run {run.id}" in w
        for w in warnings
    ), warnings
    assert at.session_state.get("lab_result") is None


@pytest.mark.slow
def test_identical_custom_configurations_are_refused_readably():
    at = lab_page()
    at.selectbox(key="lab_preset").set_value("Custom").run()
    at.number_input(key="lab_count").set_value(2).run()
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and "are the same configuration" in errors[0]
    assert not [b for b in at.button if b.key == "lab_run"]


@pytest.mark.slow
def test_a_table_too_small_for_the_budget_gives_one_readable_error_and_records_the_spend():
    at = lab_page()
    at.session_state["epsilon"] = 1e-4
    at.run()
    confirmed(at)
    until_done(at)
    errors = [e.value for e in at.error]
    assert len(errors) == 1, errors
    assert "failed after spending" in errors[0] and "no column is left" in errors[0]
    # Release-grade noise: an earlier seed's measurement may keep a column and be recorded
    # before a later one fails, so the message names every recorded spend.
    runs = sorted(Registry().runs(), key=lambda r: r.id)
    assert runs and all(r.rho > 0 for r in runs)
    named = ", ".join(str(r.id) for r in runs)
    assert f"recorded as {'run' if len(runs) == 1 else 'runs'} {named} " in errors[0], errors[0]
    assert not at.get("plotly_chart")


@pytest.mark.slow
def test_a_comparison_past_the_servers_cap_waits_in_line_and_cancel_takes_it_out(monkeypatch):
    with only_slot_held(monkeypatch):
        at = lab_page()
        confirmed(at)
        job = at.session_state["lab_job"]
        assert job.tracker.snapshot().ahead == 0
        assert any("Waiting for a free slot" in i.value for i in at.info)
        at.button(key="lab_cancel").click().run()
        job.thread.join(timeout=10)
        until_done(at)
        warnings = [w.value for w in at.warning]
        assert any("waited for a free slot, never started and spent nothing" in w for w in warnings)
        assert Registry().runs() == []


@pytest.mark.slow
def test_a_comparison_past_the_lifetime_budget_is_refused_before_it_measures():
    at = lab_page()
    Registry().set_lifetime_budget(file_fingerprint(SAMPLE), "adult", Budget(0.01, math.inf))
    at.run()
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and "Run refused" in errors[0]
    assert at.button(key="lab_run").disabled
    assert Registry().runs() == []


def quick_request(table, dataset: str, seeds: int = 2) -> lab_jobs.LabRequest:
    quick = GumSettings(iterations=5, patience=None)
    gum = PrivSynConfig(gum=quick)
    plan = plan_lab([LabArm("GUM", gum), LabArm("MCF", replace(gum, synthesis="mcf"))], seeds)
    domain = {"a": 4, "b": 4, "noise0": 3, "noise1": 3}
    compare = partial(run_lab, table, 1.0, 1e-9, plan, domain=domain, rng=np.random.default_rng(0))
    return lab_jobs.LabRequest(compare, lambda: dataset, "planted", "test", None, 1.0, 1e-9, plan)


def finished(job: lab_jobs.LabJob) -> lab_jobs.LabOutcome:
    job.thread.join(timeout=120)
    outcome = job.tracker.snapshot().outcome
    assert outcome is not None
    return outcome


@pytest.mark.slow
def test_the_worker_records_every_measurement_and_the_total_is_measurements_times_rho():
    table = planted_pair(2000, flip=0.1, rng=np.random.default_rng(1))
    request = quick_request(table, "planted", seeds=3)
    outcome = finished(lab_jobs.start(request))
    assert isinstance(outcome, lab_jobs.LabDone)
    runs = Registry().runs()
    assert [r.id for r in runs] == list(outcome.run_ids) and len(runs) == 3
    per_measurement = PrivacyLedger.from_epsilon_delta(1.0, 1e-9).budget_rho
    assert Registry().budget("planted").spent.rho == pytest.approx(3 * per_measurement)
    assert request.plan.budget(1.0, 1e-9).rho == pytest.approx(3 * per_measurement)


def test_the_worker_refuses_a_comparison_the_budget_cannot_take_and_holds_what_it_reserved():
    table = planted_pair(2000, flip=0.1, rng=np.random.default_rng(1))
    per_measurement = PrivacyLedger.from_epsilon_delta(1.0, 1e-9).budget_rho
    Registry().set_lifetime_budget("small", "planted", Budget(1.5 * per_measurement, math.inf))
    outcome = finished(lab_jobs.start(quick_request(table, "small")))
    assert isinstance(outcome, lab_jobs.LabStopped) and outcome.kind == "refused"
    assert "Run refused" in outcome.message and Registry().runs() == []
    assert Registry().held() == []  # a refused comparison holds nothing
    # another session tries to reserve between this comparison's measurements: the
    # comparison's reservation holds its whole cost, so the other run is the one refused
    Registry().set_lifetime_budget("shared", "planted", Budget(2.5 * per_measurement, math.inf))
    request = quick_request(table, "shared")
    others: list[str] = []

    def reserve_meanwhile(*, on_progress, on_measured):
        def measured(ledger):
            on_measured(ledger)
            assert Registry().budget("shared").committed.rho == pytest.approx(2 * per_measurement)
            try:
                Registry().reserve("shared", "other", Budget(per_measurement), "another session")
            except BudgetExceededError as exc:
                others.append(str(exc))

        return request.compare(on_progress=on_progress, on_measured=measured)

    outcome = finished(lab_jobs.start(replace(request, compare=reserve_meanwhile)))
    assert isinstance(outcome, lab_jobs.LabDone), outcome
    assert len(others) == 2 and "lifetime budget" in others[0] and "held by runs" in others[0]
    assert Registry().budget("shared").spent.rho == pytest.approx(2 * per_measurement)
    assert Registry().held() == []  # the comparison gave back what it did not spend (nothing)


@pytest.mark.slow
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


def test_the_custom_editor_starts_from_the_engines_defaults_and_explains_each_option():
    at = lab_page()
    at.selectbox(key="lab_preset").set_value("Custom").run()
    engine = PrivSynConfig()
    paper_name = {long: short for short, long in STRATEGY_NAMES.items()}
    box = at.selectbox(key="lab_strategy_0")
    assert box.value == paper_name[engine.gum.strategy]
    assert box.format_func("S5") == "S5: half half plus duplicate"
    assert at.selectbox(key="lab_selection_0").value == engine.selection
    assert at.selectbox(key="lab_decay_schedule_0").value == engine.gum.decay_schedule
    assert "appendix I" in box.help and "section 4.3" in at.selectbox(key="lab_consistency_0").help


def no_job(at: AppTest) -> bool:
    return "lab_job" not in at.session_state or at.session_state["lab_job"] is None


@pytest.mark.slow
def test_run_asks_first_and_spends_nothing_until_confirmed():
    at = lab_page()
    plan_cost = Budget(3 * rho_from_epsilon_delta(1.0, 1e-9))  # 3 seeds, GUM and MCF share
    at.button(key="lab_run").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert no_job(at) and Registry().runs() == []
    assert Registry().held() == []  # not even reserved
    asked = next(m for m in at.markdown if "will spend" in m.value)
    cost = lab_plan_cost(at)
    epsilon, delta = cost.stated(1e-9)
    assert cost.rho == pytest.approx(plan_cost.rho)
    assert f"will spend up to epsilon {epsilon:.3g} and delta {delta:.2g}" in asked.value
    assert "Cancelling now spends nothing" in asked.value
    assert at.button(key="lab_confirm").label == f"Spend epsilon {epsilon:.3g} and run"
    assert not [b for b in at.button if b.key == "lab_run"]  # the confirm button replaced it
    # cancelling spends nothing and asks again next time
    at.button(key="lab_cancel_confirm").click().run()
    assert not [b for b in at.button if b.key == "lab_confirm"]
    assert no_job(at) and Registry().runs() == []
    # a setting changed after the first click withdraws the question: the spend confirmed
    # is the spend made
    at.button(key="lab_run").click().run()
    at.number_input(key="lab_seeds").set_value(2).run()
    assert not [b for b in at.button if b.key == "lab_confirm"]
    assert at.button(key="lab_run") and Registry().runs() == []


def lab_plan_cost(at: AppTest) -> Budget:
    """The cost of the page's default comparison (GUM vs MCF, the engine's settings) from the
    engine's own plan, for the seeds the page shows."""
    assert at.selectbox(key="lab_preset").value == "GUM vs MCF"
    seeds = int(at.number_input(key="lab_seeds").value)
    gum = PrivSynConfig()
    arms = [LabArm("GUM", gum), LabArm("MCF", replace(gum, synthesis="mcf"))]
    return plan_lab(arms, seeds).budget(1.0, 1e-9)


@pytest.mark.slow
def test_confirming_spends_exactly_the_plan_and_says_what_the_lifetime_keeps(monkeypatch):
    """The confirmed cost is what the worker reserves against the lifetime budget; what the
    measurements spend is recorded against it and stays within it (the Adult sample's open
    columns leave part of each run's budget unspent), the rest is given back."""
    reserved: list[Budget] = []
    keep_books = records.reserve

    def reserve(dataset, name, cost, delta, purpose):
        reserved.append(cost)
        return keep_books(dataset, name, cost, delta, purpose)

    monkeypatch.setattr(lab_jobs.records, "reserve", reserve)
    at = lab_page(iterations=3)
    Registry().set_lifetime_budget(file_fingerprint(SAMPLE), "adult", Budget(1.0, 1e-6))
    at.number_input(key="lab_seeds").set_value(2).run()
    at.button(key="lab_run").click().run()
    cost = lab_plan_cost(at)
    epsilon, _ = cost.stated(1e-9)
    left = [m.value for m in at.markdown if "lifetime budget has about epsilon" in m.value]
    now, after = (
        epsilon_from_rho(b.rho, 1e-9) for b in (Budget(1.0, 1e-6), cost.left_of(Budget(1.0, 1e-6)))
    )
    assert len(left) == 1, left
    assert (
        f"about epsilon {now:.3g} left; after this comparison about epsilon {after:.3g}"
        in (left[0])
    )
    assert reserved == [] and Registry().runs() == []
    at.button(key="lab_confirm").click().run()
    job = at.session_state["lab_job"]
    assert job is not None and job.request.plan.budget(1.0, 1e-9) == cost  # the plan shown
    until_done(at)
    assert not at.error, [e.value for e in at.error]
    assert reserved == [cost]  # exactly the confirmed spend, held before the first measurement
    books = Registry().budget(file_fingerprint(SAMPLE))
    runs = Registry().runs()
    assert len(runs) == 2 and books.spent.rho == pytest.approx(sum(r.rho for r in runs))
    assert 0.9 * cost.rho < books.spent.rho <= cost.rho * (1 + 1e-12)
    assert books.spent.delta <= cost.delta * (1 + 1e-12)
    assert Registry().held() == []  # what was not spent is given back
    assert at.session_state["lab_confirming"] is None  # the next comparison asks again
    assert at.button(key="lab_run") and not [b for b in at.button if b.key == "lab_confirm"]
    assert at.button(key="lab_run").label == "Run the comparison" and epsilon > 0


@pytest.mark.parametrize("target", ["income", None])
@pytest.mark.slow
def test_the_target_stays_chosen_after_a_comparison(target):
    at = lab_page(iterations=3)
    at.number_input(key="lab_seeds").set_value(1).run()
    at.selectbox(key="lab_label").set_value(target).run()
    confirmed(at)
    until_done(at)
    assert at.session_state["lab_result"][1] == target
    box = at.selectbox(key="lab_label")
    assert box.value == target
    # a choice of none comes back from the session as no selection: the box then shows its
    # placeholder, which must be the choice's own words (not "Choose an option")
    assert box.proto.placeholder == "none" == box.format_func(None)
