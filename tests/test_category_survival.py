"""The noise plan's category threshold matches what the category estimate really does."""

from __future__ import annotations

import numpy as np
import pytest

from privsyn_core.measuring.domain_split import FIRST_CATEGORY_SHARE, DomainSplit
from privsyn_core.measuring.private_domain import categories_from_counts
from privsyn_core.privacy.noise import SecureNoise, SeededNoise
from privsyn_core.privacy.planner import plan_budget

#: distinct values simulated per check: the binomial standard error at 95% is 0.0015
VALUES = 20_000


def _survival_rate(count: int, rho: float, delta: float, seed: int) -> float:
    """Share of VALUES values, each held by ``count`` records, that the real code keeps."""
    noise = SeededNoise(np.random.default_rng(seed))
    values = list(range(VALUES))
    counts = np.full(VALUES, float(count))
    kept = categories_from_counts("c", values, counts, rho, delta, noise)
    return len(kept.categories) / VALUES


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 4.0])
def test_reported_counts_survive_as_claimed(epsilon: float) -> None:
    noise = SeededNoise(np.random.default_rng(0))
    plan = plan_budget(epsilon, 1e-9, 8, private_structure=8, private_undecided=8, noise=noise)
    survival = plan.categories
    assert survival is not None
    domains = next(s for s in plan.steps if s.step == "domains")
    # the first estimate's share: what a category can count on (DomainSplit)
    rho_each = DomainSplit(domains.rho, ranges=0, categories=8).category_least
    assert rho_each == pytest.approx(FIRST_CATEGORY_SHARE * domains.rho / 8)
    assert survival.sigma == pytest.approx(domains.sigma)
    rate_95 = _survival_rate(survival.count_95, rho_each, survival.delta_each, seed=1)
    rate_50 = _survival_rate(survival.count_50, rho_each, survival.delta_each, seed=2)
    # counts are rounded up to whole records, so the rates sit at or a little above the target
    assert 0.945 <= rate_95 <= 0.95 + 0.4 / survival.sigma + 0.01
    assert 0.495 <= rate_50 <= 0.5 + 0.4 / survival.sigma + 0.01
    # and the count reported for 5% survives about 5% of the time, not more
    rate_05 = _survival_rate(survival.count_for(0.05), rho_each, survival.delta_each, seed=3)
    assert 0.045 <= rate_05 <= 0.05 + 0.4 / survival.sigma + 0.01


def test_release_threshold_uses_the_release_tail_bound() -> None:
    plan = plan_budget(1.0, 1e-9, 8, private_undecided=8)
    survival = plan.categories
    assert survival is not None
    expected = 1.0 + survival.sigma * SecureNoise().tail_quantile(survival.delta_each)
    assert survival.threshold == pytest.approx(expected)
    # penguins (344 rows, 8 undeclared columns) at epsilon 1: no category can survive
    assert survival.count_50 > 344


def test_no_threshold_when_categories_are_declared() -> None:
    assert plan_budget(1.0, 1e-9, 8, private_ranges=3).categories is None
    assert plan_budget(1.0, 1e-9, 8).categories is None


def test_privsyn_plan_prints_the_category_threshold(capsys) -> None:
    from privsyn_core.cli import main

    argv = ["plan", "--epsilon", "1", "--delta", "1e-9", "--columns", "8", "--undeclared", "8"]
    assert main(argv) == 0
    expected = plan_budget(1.0, 1e-9, 8, private_structure=8, private_undecided=8).categories
    assert expected is not None
    out = capsys.readouterr().out
    assert f"about {expected.count_50} records to survive half the time" in out
    assert f"{expected.count_95} to survive 95% of the time" in out
    assert main(["plan", "--epsilon", "1", "--columns", "8"]) == 0
    assert "category estimates" not in capsys.readouterr().out
