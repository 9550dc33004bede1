"""The paper lab's comparisons (privsyn_core/lab.py): sharing, accounting, reproducibility."""

from __future__ import annotations

import math
from dataclasses import fields, make_dataclass, replace

import numpy as np
import pandas as pd
import pytest
from conftest import planted_pair

import privsyn_core.lab as lab
from privsyn_core import GumSettings, PrivSynConfig
from privsyn_core.errors import InputError
from privsyn_core.lab import (
    GENERATION_FIELDS,
    LabArm,
    LabCancelled,
    LabProgress,
    measurement_settings,
    plan_lab,
    run_lab,
)
from privsyn_core.privacy.ledger import FailedAfterSpending, PrivacyLedger

DOMAIN = {"a": 4, "b": 4, "noise0": 3, "noise1": 3}
QUICK = GumSettings(iterations=15, patience=None, noise_floor=None)
GUM = LabArm("GUM", PrivSynConfig(gum=QUICK))
MCF = LabArm("MCF", PrivSynConfig(gum=QUICK, synthesis="mcf"))
S5 = LabArm(
    "S5",
    PrivSynConfig(gum=GumSettings(iterations=15, patience=None, noise_floor=None, strategy="S5")),
)
LAPLACE = LabArm("equal Laplace", PrivSynConfig(gum=QUICK, noise="equal_laplace"))


def whole(arm: LabArm) -> LabArm:
    """``arm`` with every attribute in GUM (the planted table's marginals can all be appended
    instead, leaving GUM nothing to iterate on)."""
    return LabArm(arm.name, replace(arm.config, append_attributes=False))


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    return planted_pair(3000, flip=0.1, rng=np.random.default_rng(0))


def run(table, arms, seeds=2, **kwargs):
    """A comparison with reproducible noise (``rng=None``: release-grade noise)."""
    kwargs.setdefault("rng", np.random.default_rng(0))
    return run_lab(table, 1.0, 1e-9, plan_lab(arms, seeds), domain=DOMAIN, **kwargs)


def test_arms_differing_in_generation_only_share_a_measurement():
    plan = plan_lab([GUM, MCF, S5, LAPLACE], seeds=3)
    assert plan.groups == ((0, 1, 2), (3,))
    assert plan.measurements == 6


def test_every_field_outside_the_generation_list_counts_as_measurement():
    base = PrivSynConfig()
    changed = {
        "one_way_share": 0.2, "indif_share": 0.05, "connect_isolated": True, "gamma": 100,
        "selection": "all_pairs", "noise": "equal_gaussian", "target": "a", "target_weight": 2.0,
        "filter_low_counts": False, "threshold_sigmas": 2.0, "domain_share": 0.2,
        "structure_share": 0.05, "threshold_delta_share": 0.3, "privbayes_degree": 3,
        "conversion": "paper", "indif_margin": 0.5, "tree_first_margin": 2.0,
    }  # fmt: skip
    for name, value in changed.items():
        assert measurement_settings(PrivSynConfig(**{name: value})) != measurement_settings(base)
    for name in GENERATION_FIELDS:
        assert name in {f.name for f in fields(PrivSynConfig)}


def test_a_field_added_to_the_config_later_counts_as_measurement():
    """Fields other engineers add to PrivSynConfig are not in the generation list, so arms
    differing in them get their own measurements (no sharing by mistake)."""
    later = make_dataclass("Later", [("future", int, 0)], bases=(PrivSynConfig,), frozen=True)
    first, second = later(gum=QUICK), later(gum=QUICK, future=1)
    assert measurement_settings(first) != measurement_settings(second)
    plan = plan_lab([LabArm("now", first), LabArm("later", second)], seeds=2)
    assert plan.groups == ((0,), (1,)) and plan.measurements == 4


@pytest.mark.slow
def test_measure_runs_once_per_group_and_seed(table, monkeypatch):
    calls = []
    real = lab.measure

    def counting(*args, **kwargs):
        calls.append(kwargs["config"])
        return real(*args, **kwargs)

    monkeypatch.setattr(lab, "measure", counting)
    result = run(table, [GUM, MCF, LAPLACE], seeds=2)
    assert len(calls) == 4  # (GUM, MCF) and (equal Laplace), twice
    assert len(result.runs) == 6
    by_arm = {(r.arm, r.seed): r.measurement for r in result.runs}
    assert by_arm[("GUM", 0)] == by_arm[("MCF", 0)] != by_arm[("equal Laplace", 0)]
    assert by_arm[("GUM", 0)] != by_arm[("GUM", 1)]  # every seed is a fresh measurement


@pytest.mark.slow
def test_the_spend_is_every_measurements_full_budget_and_nothing_more(table):
    seen: list[PrivacyLedger] = []
    plan = plan_lab([GUM, MCF, LAPLACE], seeds=2)
    result = run_lab(table, 1.0, 1e-9, plan, domain=DOMAIN, on_measured=seen.append)
    assert list(result.ledgers) == seen and len(seen) == plan.measurements
    per_run = PrivacyLedger.from_epsilon_delta(1.0, 1e-9).budget_rho
    for ledger in seen:
        assert ledger.spent_rho == pytest.approx(per_run, rel=1e-9)
    assert result.spent_rho == pytest.approx(plan.budget(1.0, 1e-9).rho, rel=1e-9)
    assert result.spent_rho == pytest.approx(4 * per_run, rel=1e-9)


@pytest.mark.slow
def test_a_comparison_is_reproducible_and_its_seed_matters(table):
    first = run(table, [GUM, LAPLACE], rng=np.random.default_rng(5)).frame()
    again = run(table, [GUM, LAPLACE], rng=np.random.default_rng(5)).frame()
    other = run(table, [GUM, LAPLACE], rng=np.random.default_rng(6)).frame()
    columns = ["2-way L1", "3-way range error", "iterations", "marginals"]
    pd.testing.assert_frame_equal(first[columns], again[columns])
    assert not first["2-way L1"].equals(other["2-way L1"])


@pytest.mark.slow
def test_convergence_is_recorded_per_iteration_and_falls(table):
    # from the paper's independent columns: drawn along the tree of measured pairs, this
    # planted table starts at its targets and GUM has nothing left to fall from
    independent = [
        LabArm(a.name, replace(a.config, gum=replace(a.config.gum, initial="independent")))
        for a in (whole(GUM), whole(S5))
    ]
    result = run(table, independent, seeds=1)
    for r in result.runs:
        assert len(r.errors) == 15
        assert r.errors[-1] < r.errors[0]
        assert all(math.isfinite(e) for e in r.errors)


@pytest.mark.slow
def test_the_paper_lab_finding_weighted_gaussian_beats_equal_laplace_here(table):
    """A comparison that should come out one way: on the planted pair the equal-Laplace split
    is noisier (sections 6.4), over 3 seeds, by a margin."""
    weighted = LabArm("weighted", PrivSynConfig(gum=QUICK))
    frame = run(table, [weighted, LAPLACE], seeds=3).frame()
    means = frame.groupby("configuration")["2-way L1"].mean()
    assert means["weighted"] < means["equal Laplace"]


def test_the_label_adds_the_svm_score(table):
    frame = run(table, [GUM, MCF], seeds=1, label="b").frame()
    assert frame["SVM misclassification"].between(0, 1).all()
    assert run(table, [GUM, MCF], seeds=1).frame()["SVM misclassification"].isna().all()


@pytest.mark.parametrize(
    ("arms", "seeds", "message"),
    [
        ([GUM], 3, "2 to 4 configurations, got 1"),
        ([GUM, MCF, S5, LAPLACE, LabArm("x", PrivSynConfig(gamma=7))], 3, "got 5"),
        ([GUM, LabArm("GUM", PrivSynConfig(synthesis="mcf"))], 3, "its own name"),
        ([GUM, LabArm(" ", PrivSynConfig(synthesis="mcf"))], 3, "its own name"),
        ([GUM, LabArm("again", GUM.config)], 3, "'GUM' and 'again' are the same configuration"),
        ([GUM, MCF], 0, "seeds must be a whole number from 1 to 10, got 0"),
        ([GUM, MCF], 11, "got 11"),
        ([GUM, MCF], True, "got True"),
    ],
)
def test_a_bad_comparison_is_refused_before_anything_is_spent(arms, seeds, message):
    with pytest.raises(InputError, match=message):
        plan_lab(arms, seeds)


def test_an_unknown_label_is_refused_before_anything_is_spent(table):
    seen = []
    with pytest.raises(InputError, match="'income' is not a column"):
        run(table, [GUM, MCF], label="income", on_measured=seen.append)
    assert not seen


def test_a_measurement_that_fails_after_spending_reports_its_ledger():
    rng = np.random.default_rng(0)
    table = pd.DataFrame({"id": [f"p{i}" for i in range(800)], "x": rng.integers(0, 3, 800)})
    arms = [
        LabArm("plain", PrivSynConfig(target="id")),
        LabArm("mcf", PrivSynConfig(target="id", synthesis="mcf")),
    ]
    seen: list[PrivacyLedger] = []
    with pytest.raises(FailedAfterSpending):
        run_lab(table, 1.0, 1e-9, plan_lab(arms, 1), on_measured=seen.append)
    assert len(seen) == 1 and seen[0].spent_rho > 0


def test_a_comparison_without_a_generator_measures_in_release_mode(table):
    result = run(table, [GUM, MCF], seeds=1, rng=None)
    assert [ledger.randomness for ledger in result.ledgers] == ["release"]
    seeded = run(table, [GUM, MCF], seeds=1, rng=np.random.default_rng(0))
    assert seeded.ledgers[0].randomness.startswith("debug")


@pytest.mark.slow
def test_progress_names_the_seed_the_arm_and_the_gum_iteration(table):
    seen: list[LabProgress] = []
    run(table, [whole(GUM), LAPLACE], seeds=2, on_progress=seen.append)
    steps = list(dict.fromkeys(p.step for p in seen))
    assert steps == [
        "seed 1 of 2, measuring the table for 'GUM'",
        "seed 1 of 2, generating 'GUM'",
        "seed 1 of 2, measuring the table for 'equal Laplace'",
        "seed 1 of 2, generating 'equal Laplace'",
        "seed 2 of 2, measuring the table for 'GUM'",
        "seed 2 of 2, generating 'GUM'",
        "seed 2 of 2, measuring the table for 'equal Laplace'",
        "seed 2 of 2, generating 'equal Laplace'",
        "done",
    ]
    iterations = [p for p in seen if p.gum is not None and p.arm == "GUM" and p.seed == 1]
    assert [p.gum.iteration for p in iterations][:3] == [0, 1, 2]
    assert "iteration 1 of at most 15, mean L1" in iterations[0].text
    fractions = [p.fraction for p in seen]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0


def test_a_stop_before_the_first_measurement_spends_nothing(table):
    seen: list[PrivacyLedger] = []
    with pytest.raises(LabCancelled) as stopped:
        run(table, [GUM, MCF], on_progress=lambda p: False, on_measured=seen.append)
    assert stopped.value.ledgers == () and stopped.value.spent_rho == 0 and not seen


def test_a_stop_during_gum_keeps_what_was_measured(table):
    seen: list[PrivacyLedger] = []

    def until_mcf(progress: LabProgress) -> bool:
        return not (progress.arm == "MCF" and progress.gum is not None)

    with pytest.raises(LabCancelled) as stopped:
        run(table, [whole(GUM), whole(MCF)], on_progress=until_mcf, on_measured=seen.append)
    assert list(stopped.value.ledgers) == seen and len(seen) == 1
    assert stopped.value.spent_rho == pytest.approx(seen[0].spent_rho)


def test_a_stop_during_a_measurement_reports_its_partial_spend(table):
    seen: list[PrivacyLedger] = []
    events = []

    def mid_measurement(progress: LabProgress) -> bool:
        """Stop at the measurement's sixth event: after the 1-way marginals, before InDif."""
        events.append(progress)
        return len(events) < 6

    with pytest.raises(LabCancelled) as stopped:
        run(table, [GUM, MCF], on_progress=mid_measurement, on_measured=seen.append)
    full = PrivacyLedger.from_epsilon_delta(1.0, 1e-9).budget_rho
    assert events[-1].measuring and events[-1].gum is None
    assert len(seen) == 1 and 0 < seen[0].spent_rho < full
    assert stopped.value.ledgers == tuple(seen)


def test_independent_columns_share_the_measurement_and_lose_the_pair(table):
    """The Lab's baseline arm costs nothing more (synthesis is post-processing) and, on a
    table whose one pair depends strongly, comes out farther from the real pairs than GUM."""
    baseline = LabArm("independent columns", PrivSynConfig(gum=QUICK, synthesis="independent"))
    plan = plan_lab([GUM, baseline], seeds=2)
    assert plan.groups == ((0, 1),) and plan.measurements == 2
    frame = run(table, [GUM, baseline]).frame()
    l1 = frame.groupby("configuration")["2-way L1"].mean()
    assert l1["independent columns"] > 1.5 * l1["GUM"]
