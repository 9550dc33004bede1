import math

import pytest

from privsyn_core import PrivSynConfig
from privsyn_core.measuring.indif import indif_sigma
from privsyn_core.privacy.ledger import gaussian_sigma, rho_from_epsilon_delta
from privsyn_core.privacy.planner import plan_budget


def test_plan_splits_rho_like_the_pipeline_and_reports_each_sigma():
    plan = plan_budget(1.0, 1e-9, 14)
    rho = rho_from_epsilon_delta(1.0, 1e-9)
    assert plan.rho == pytest.approx(rho)
    steps = {s.step: s for s in plan.steps}
    one_way, indif = PrivSynConfig().one_way_share, PrivSynConfig().indif_share
    assert steps["1-way marginals"].rho == pytest.approx(one_way * rho)
    assert steps["1-way marginals"].sigma == pytest.approx(gaussian_sigma(one_way * rho / 14))
    assert steps["InDif scores"].sigma == pytest.approx(indif_sigma(14, indif * rho))
    assert math.fsum(s.rho for s in plan.steps) == pytest.approx(rho)
    assert "domains" not in steps


def test_plan_with_private_domains_reserves_delta_and_a_tenth_of_rho():
    plan = plan_budget(1.0, 1e-9, 15, private_categories=9, private_ranges=6)
    rho = rho_from_epsilon_delta(1.0, 0.5e-9)  # half of delta reserved for thresholding
    assert plan.rho == pytest.approx(rho)
    steps = {s.step: s for s in plan.steps}
    assert steps["domains"].rho == pytest.approx(0.1 * rho)
    # a category weighs three ranges: 0.1 rho / (6 + 3 * 9) * 3 each, without the ranges'
    # reserve (it reaches the categories only when every range finds its bounds at first)
    assert steps["domains"].sigma == pytest.approx(gaussian_sigma(0.1 * rho * 3 / 33))
    assert plan.categories is not None and plan.categories.sigma == steps["domains"].sigma
    assert math.fsum(s.rho for s in plan.steps) == pytest.approx(rho)
    assert len(plan.as_rows()) == 4


def test_plan_of_ranges_only_shows_the_sigma_of_a_first_range_histogram():
    plan = plan_budget(1.0, 1e-9, 15, private_ranges=15)
    rho = rho_from_epsilon_delta(1.0, 1e-9)  # no category: no delta reserved
    domains = {s.step: s for s in plan.steps}["domains"]
    # three quarters of each range's share first, in two histograms
    assert domains.sigma == pytest.approx(gaussian_sigma(0.1 * rho / 15 * 0.75 / 2))
    assert plan.categories is None


def test_smaller_epsilon_means_more_noise_at_every_step():
    loose, tight = plan_budget(2.0, 1e-9, 10), plan_budget(0.2, 1e-9, 10)
    for a, b in zip(loose.steps, tight.steps, strict=True):
        assert b.sigma > a.sigma
    assert PrivSynConfig().domain_share == 0.1


def test_cli_plan_prints_every_step_without_reading_data(capsys):
    from privsyn_core.cli import main

    assert main(["plan", "--epsilon", "1", "--columns", "15", "--private-ranges", "3"]) == 0
    out = capsys.readouterr().out
    for step in ("domains", "1-way marginals", "InDif scores", "selected marginals"):
        assert step in out
    assert f"{plan_budget(1.0, 1e-9, 15, private_ranges=3).rho:.6g}" in out


def test_undeclared_columns_plan_a_structure_step_and_an_estimate_each():
    plan = plan_budget(1.0, 1e-9, 15, private_structure=15, private_undecided=15)
    rows = {row["step"]: row for row in plan.as_rows()}
    config = PrivSynConfig()
    assert rows["column kinds"]["share"] == pytest.approx(config.structure_share)
    assert rows["domains"]["share"] == pytest.approx(config.domain_share)
    assert rows["column kinds"]["sigma"] == pytest.approx(
        gaussian_sigma(config.structure_share * plan.rho / 15)
    )
    # undecided columns may release categories: half of delta is reserved for thresholding
    assert plan.rho == pytest.approx(rho_from_epsilon_delta(1.0, 0.5e-9))
    assert sum(row["rho"] for row in plan.as_rows()) == pytest.approx(plan.rho)


def test_the_plan_names_the_prediction_targets_weight():
    plain = plan_budget(1.0, 1e-9, 15)
    target = plan_budget(1.0, 1e-9, 15, config=PrivSynConfig(target="income", target_weight=4))
    note = {s.step: s.note for s in target.steps}["selected marginals"]
    assert "w = 4 for marginals with 'income'" in note
    assert "w =" not in {s.step: s.note for s in plain.steps}["selected marginals"]
    assert [s.rho for s in target.steps] == [s.rho for s in plain.steps]  # the same split
