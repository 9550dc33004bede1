"""The dependency report: noisy InDif in units of its public noise, and what selection took."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from privsyn_core.config import PrivSynConfig
from privsyn_core.dependency_report import (
    WITHIN_NOISE_SIGMAS,
    dependency_report,
    indif_noise_sigma,
)
from privsyn_core.generation.gum_settings import GumSettings
from privsyn_core.measuring.indif import indif_sigma
from privsyn_core.pipeline import synthesize


def wide_table(rows: int, columns: int, seed: int = 0) -> tuple[pd.DataFrame, dict[str, int]]:
    """Each column copies an earlier one for a share of its rows, else draws afresh: a few
    strong dependencies among many pairs whose scores are noise."""
    rng = np.random.default_rng(seed)
    data: dict[str, np.ndarray] = {}
    for j in range(columns):
        fresh = rng.integers(0, 4, rows)
        if data and rng.random() < 0.5:
            parent = data[f"c{int(rng.integers(0, j)):02d}"]
            fresh = np.where(rng.random(rows) < 0.6, parent, fresh)
        data[f"c{j:02d}"] = fresh
    return pd.DataFrame(data), dict.fromkeys(data, 4)


@pytest.fixture(scope="module")
def wide_run():
    table, domain = wide_table(4000, 60)
    config = PrivSynConfig(gum=GumSettings(iterations=2))
    return synthesize(table, 1.0, 1e-8, domain=domain, config=config, rng=np.random.default_rng(1))


@pytest.mark.slow
def test_scores_are_the_noisy_indif_over_the_ledgers_sigma(wide_run):
    report = dependency_report(wide_run)
    (entry,) = [e for e in wide_run.ledger.entries if e.step == "indif"]
    assert report.sigma == indif_noise_sigma(wide_run.ledger) == entry.sigma
    assert report.sigma == pytest.approx(indif_sigma(60, entry.rho))
    expected = wide_run.noisy_indif.to_numpy() / report.sigma
    off = ~np.eye(60, dtype=bool)
    np.testing.assert_allclose(report.scores.to_numpy()[off], expected[off])
    assert np.isnan(np.diag(report.scores.to_numpy())).all()
    assert list(report.scores.columns) == list(wide_run.noisy_indif.columns)


def test_it_counts_candidates_selected_pairs_and_those_within_the_noise(wide_run):
    report = dependency_report(wide_run)
    assert report.candidates == 60 * 59 // 2
    assert report.selected == tuple(s.pair for s in wide_run.selection.steps)
    assert report.isolated_links == wide_run.selection.isolated_links
    within = [p for p in report.selected if report.scores.at[p] < WITHIN_NOISE_SIGMAS]
    assert report.selected_within_noise == len(within)
    # 60 binary-ish columns of 4 values: 16 cells each; the marginal budget over pi rho
    rho = sum(e.rho for e in wide_run.ledger.entries if e.step == "marginal")
    n = wide_run.consistency.total
    assert report.measurable == min(1770, int(np.pi * rho * (0.1 * n / 16) ** 2))
    assert (report.guard is None) == (wide_run.independent == ())


def test_it_counts_the_measured_pairs_drawn_as_independent(wide_run):
    """Half of the 60 columns copy nothing: the tree links them anyway, with marginals that
    are noise, and the report counts those the samples draw as independent."""
    from privsyn_core.generation.independence import noise_pairs

    model = wide_run.model
    report = dependency_report(wide_run)
    measured = [t for t in model.marginals if len(t.attributes) == 2]
    assert report.measured_pairs == len(measured) > 0
    assert report.independent_pairs == len(noise_pairs(measured, model.noise_scales(), 2.0))
    assert 0 < report.independent_pairs < report.measured_pairs


def test_it_says_which_selection_ran_and_why(wide_run):
    """The default on 60 attributes measures a tree first, and the report says so."""
    assert any(m.origin == "tree" for m in wide_run.marginals)
    assert dependency_report(wide_run).method == (
        "wide table (60 attributes >= 30): a tree first, then the pairs it does not explain"
    )


def test_a_run_that_measured_no_scores_reports_none():
    table, domain = wide_table(2000, 5)
    config = PrivSynConfig(selection="all_pairs", gum=GumSettings(iterations=1))
    result = synthesize(
        table, 1.0, 1e-8, domain=domain, config=config, rng=np.random.default_rng(0)
    )
    report = dependency_report(result)
    assert report.sigma is None and report.scores is None
    assert report.candidates == 0 and report.selected == ()


@pytest.mark.slow
def test_it_counts_the_measured_pairs_drawn_as_quasi_independent():
    """b copies a (20 values) with probability 0.6: independent but for the diagonal, and at
    epsilon 0.5 the measured (a, b) marginal is drawn from that fit on a wide table (27
    independent fillers beside a, b and c); the report counts it, and none with the rule
    off."""
    from dataclasses import replace

    from privsyn_core.generation.independence import noise_pairs
    from privsyn_core.generation.quasi_independence import quasi_independent_marginals

    rng = np.random.default_rng(7)
    n = 60_000
    a = rng.integers(0, 20, n)
    columns = {
        "a": a,
        "b": np.where(rng.random(n) < 0.6, a, rng.integers(0, 20, n)),
        "c": rng.integers(0, 5, n),
    }
    table = pd.DataFrame(columns | {f"f{k:02d}": rng.integers(0, 3, n) for k in range(27)})
    config = PrivSynConfig(gum=GumSettings(iterations=2))
    domain = {"a": 20, "b": 20, "c": 5} | {f"f{k:02d}": 3 for k in range(27)}
    run = synthesize(table, 0.5, 1e-9, domain=domain, config=config, rng=np.random.default_rng(0))
    model = run.model
    scales = model.noise_scales()
    independent = noise_pairs(model.marginals, scales, 2.0)
    replaced, count = quasi_independent_marginals(
        model.marginals, model.noisy, 2.0, independent, len(table.columns)
    )
    (quasi,) = [t.attributes for t, r in zip(model.marginals, replaced, strict=True) if t is not r]
    assert set(quasi) == {"a", "b"}
    report = dependency_report(run)
    assert report.quasi_pairs == count == 1
    # the rule has its own setting: off (None), nothing is counted as quasi-independent
    off = replace(model, defaults=replace(model.defaults, quasi_independence=None))
    assert dependency_report(replace(run, model=off)).quasi_pairs == 0
