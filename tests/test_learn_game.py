"""The Learn page's distinguishing game in words: the verdict says what is compared, and a
measured separation above the bound but within its own noise is not called a leak (issue 41)."""

from __future__ import annotations

import pytest

from dashboard.views import learn_game
from privsyn_core.privacy.audit import AuditResult

DELTA = 1e-6


def audited(
    mu: float, se: float, allowed: float, *, epsilon_bound: float = 0.45, reach: float = 1.0
) -> AuditResult:
    """An audit's numbers as given (claimed epsilon 1); ``reach``: the share of the bound
    honest code puts the two tables apart."""
    return AuditResult(
        mechanism="1-way marginals", trials=5000, delta=DELTA, claimed_rho=allowed**2 / 2,
        claimed_epsilon=1.0, epsilon_lower_bound=epsilon_bound, confidence=0.99,
        mu_estimate=mu, mu_standard_error=se, mu_claimed=allowed,
        mu_of_neighbours=reach * allowed,
    )  # fmt: skip


def test_the_issues_numbers_read_as_within_noise_of_the_bound_not_as_a_contradiction():
    found = learn_game.verdict(audited(0.24, 0.02, 0.22))
    assert not found.leak and found.headline == "No leak shown."
    assert "at most 0.22 noise widths apart" in found.reason
    assert "We measured 0.24, above the bound by less than the measurement's own noise" in (
        found.reason
    )
    assert "from 0.16 to 0.32, and that range includes 0.22" in found.reason
    assert "exactly at the bound" in found.reason
    assert "epsilon is at least 0.45, within the 1.00 claimed" in found.reason
    below = learn_game.verdict(audited(0.20, 0.02, 0.22, reach=0.9))
    assert "We measured 0.20, below the bound by less" in below.reason
    assert "puts these two tables 0.20 apart" in below.reason


def test_a_range_wholly_above_the_bound_is_a_leak_and_says_so():
    found = learn_game.verdict(audited(0.44, 0.02, 0.22))
    assert found.leak and found.headline == "Leak caught."
    assert "even the low end of the measurement's range (0.36 to 0.52) is above 0.22" in (
        found.reason
    )
    assert "alone prove only epsilon ≥ 0.45: from a few thousand runs" in found.reason
    both = learn_game.verdict(audited(0.44, 0.02, 0.22, epsilon_bound=1.2))
    assert both.leak and "alone prove only" not in both.reason


def test_a_low_end_just_above_the_bound_is_shown_with_the_digits_that_tell_them_apart():
    found = learn_game.verdict(audited(0.22 + 0.08 + 0.001, 0.02, 0.22))
    assert found.leak
    assert "(0.221 to" in found.reason and "is above 0.220" in found.reason


def test_a_range_wholly_below_the_bound_is_no_leak_with_room_to_spare():
    found = learn_game.verdict(audited(0.13, 0.02, 0.22, reach=0.6))
    assert not found.leak
    assert "range 0.05 to 0.21" in found.reason and "below the bound even at the top" in (
        found.reason
    )


def test_an_epsilon_bound_above_the_claim_is_a_leak_named_by_its_numbers():
    found = learn_game.verdict(audited(0.24, 0.02, 0.22, epsilon_bound=1.2))
    assert found.leak
    assert "prove epsilon is at least 1.20, more than the 1.00 claimed" in found.reason


@pytest.mark.parametrize("broken", [False, True])
@pytest.mark.slow
def test_a_played_game_agrees_with_the_audits_own_decision(broken):
    """Real plays (seeded): the words follow ``violates_claim`` on every step."""
    play = learn_game.play(learn_game.GameInputs(2.0, 1000, broken, 3))
    for result in play.results:
        found = learn_game.verdict(result)
        assert found.leak == result.violates_claim
        low, high = result.mu_range
        if result.separation != "above" and result.epsilon_refuted:
            assert "prove epsilon is at least" in found.reason
        else:  # the range the decision was made on is stated
            assert f"{low:.2f}" in found.reason and f"{high:.2f}" in found.reason
    # halving the noise moves the marginals' separation to twice the bound: caught
    assert not broken or play.results[0].violates_claim
