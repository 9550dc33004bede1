"""Empirical audits of every noisy step: no privacy loss beyond the claim, and the audit has
the power to see a mis-calibrated step."""

import math
from dataclasses import replace

import numpy as np
import pytest
from scipy.stats import norm

from privsyn_core.domain import Domain
from privsyn_core.privacy.audit import (
    SEPARATION_ERRORS,
    AuditResult,
    Neighbours,
    audit_engine,
    audit_indif,
    audit_marginal,
    audit_one_way,
    distinguishing_audit,
    gdp_epsilon,
    worst_indif_neighbours,
)
from privsyn_core.privacy.conversion import epsilon_from_rho, rho_from_epsilon_delta
from privsyn_core.privacy.ledger import PrivacyUnit, gaussian_sigma
from privsyn_core.privacy.noise import SecureNoise, SeededNoise

DELTA = 1e-6
DOMAIN = Domain.from_mapping({"a": 2, "b": 3, "c": 2})


@pytest.fixture(scope="module")
def neighbours():
    rng = np.random.default_rng(0)
    records = np.stack([rng.integers(0, s, size=200) for s in DOMAIN.sizes])
    return Neighbours(DOMAIN, records, np.array([1, 2, 0]))


@pytest.fixture(scope="module")
def indif_neighbours():
    return worst_indif_neighbours(DOMAIN, 6, np.random.default_rng(0), candidates=60)


def seeded(seed):
    return SeededNoise(np.random.default_rng(seed))


def test_gdp_epsilon_solves_the_tradeoff_and_sits_below_the_zcdp_conversion():
    for mu in [0.1, 0.5, 1.0, 3.0]:
        eps = gdp_epsilon(mu, DELTA)
        delta = norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2)
        assert delta == pytest.approx(DELTA, rel=1e-6)
        # the Gaussian's exact curve is tighter than any conversion from its zCDP guarantee
        assert eps <= epsilon_from_rho(mu * mu / 2, DELTA)
    assert gdp_epsilon(0.0, DELTA) == 0.0


def check_audit(result, *, min_lower_bound, z=4.0):
    """``z`` standard errors of slack; tests on OS randomness (not reproducible) use 5, so a
    correct sampler fails them with probability below 1e-6."""
    assert result.epsilon_lower_bound <= result.claimed_epsilon
    assert result.mu_estimate - z * result.mu_standard_error <= result.mu_claimed
    # the audit finds real privacy loss (it is not vacuous) ...
    assert result.epsilon_lower_bound >= min_lower_bound
    # ... and measures the separation the calibration predicts for these neighbours
    assert abs(result.mu_estimate - result.mu_of_neighbours) < z * result.mu_standard_error
    assert result.mu_of_neighbours <= result.mu_claimed * (1 + 1e-9)


@pytest.mark.slow
def test_one_way_marginals_leak_no_more_than_claimed(neighbours):
    rho = rho_from_epsilon_delta(4.0, DELTA)
    result = audit_one_way(neighbours, rho, seeded(1), DELTA, 10_000)
    check_audit(result, min_lower_bound=1.0)
    assert not result.violates_claim
    # adding a record moves one cell of every attribute: the bound is attained
    assert result.mu_of_neighbours == pytest.approx(result.mu_claimed)


@pytest.mark.slow
def test_indif_scores_leak_no_more_than_claimed(indif_neighbours):
    rho = rho_from_epsilon_delta(4.0, DELTA)
    result = audit_indif(indif_neighbours, rho, seeded(2), DELTA, 6_000)
    check_audit(result, min_lower_bound=0.5)


@pytest.mark.slow
def test_person_level_indif_neighbours_are_as_strong_as_the_per_row_ones(indif_neighbours):
    """A person of K rows against noise K times larger. The scaled neighbours (every row of
    the table K times, the person K rows of the record) move every InDif score exactly K
    times as far as the record moves the table's (InDif is homogeneous of degree one), so
    the separation is the per-row one at every K; K rows added to the table itself move the
    scores far less than K times, and an audit of them would claim less than it can."""
    rho = rho_from_epsilon_delta(1.0, DELTA)
    per_row = audit_indif(indif_neighbours, rho, seeded(7), DELTA, 100)
    assert per_row.mu_of_neighbours > 0.8 * per_row.mu_claimed  # the search, with its ascent
    for k in (5, 20):
        noise = SeededNoise(np.random.default_rng(8), unit=PrivacyUnit("person", k))
        scaled = audit_indif(indif_neighbours.of_people(k), rho, noise, DELTA, 100)
        assert scaled.mu_of_neighbours == pytest.approx(per_row.mu_of_neighbours)
        people = np.arange(indif_neighbours.records.shape[1])  # the table as it is
        unscaled = replace(indif_neighbours, people=people, copies=3 * k, rows_per_person=k)
        weak = audit_indif(unscaled, rho, noise, DELTA, 100)
        assert weak.mu_of_neighbours < 0.8 * scaled.mu_of_neighbours


@pytest.mark.slow
def test_a_marginal_leaks_no_more_than_claimed(neighbours):
    rho = rho_from_epsilon_delta(4.0, DELTA)
    result = audit_marginal(neighbours, ("a", "b"), rho, seeded(3), DELTA, 10_000)
    check_audit(result, min_lower_bound=1.0)
    assert result.mu_of_neighbours == pytest.approx(result.mu_claimed)


@pytest.mark.slow
def test_the_audit_catches_noise_that_is_too_small(neighbours, indif_neighbours):
    """A step run with half the noise it claims (as a sensitivity off by 2 would cause)."""
    rho = rho_from_epsilon_delta(1.0, DELTA)
    for result in [
        audit_one_way(neighbours, 4 * rho, seeded(4), DELTA, 4_000, claimed_rho=rho),
        audit_marginal(neighbours, ("b", "c"), 4 * rho, seeded(5), DELTA, 4_000, claimed_rho=rho),
    ]:
        assert result.violates_claim
        assert result.mu_estimate - 4 * result.mu_standard_error > result.mu_claimed
    # InDif's attainable separation is below its bound, so its bug must be larger to show
    broken = audit_indif(indif_neighbours, 16 * rho, seeded(6), DELTA, 3_000, claimed_rho=rho)
    assert broken.violates_claim


@pytest.mark.slow
def test_a_grossly_broken_step_fails_the_epsilon_bound_itself(neighbours):
    claimed = rho_from_epsilon_delta(0.5, DELTA)
    result = audit_marginal(neighbours, ("a",), 100 * claimed, seeded(7), DELTA, 4_000,
                            claimed_rho=claimed)  # fmt: skip
    assert result.epsilon_lower_bound > result.claimed_epsilon


@pytest.mark.slow
def test_release_mode_noise_passes_the_same_audit(neighbours):
    """The secure sampler, stacked: one call draws every trial's noise for a 1-way marginal
    (the engine's path in release mode is audited with fewer trials below)."""
    rho, trials = rho_from_epsilon_delta(4.0, DELTA), 40_000
    sigma = gaussian_sigma(rho)
    counts = np.bincount(neighbours.records[1], minlength=3).astype(float)
    moved = counts + np.eye(3)[neighbours.extra[1]]
    secure = SecureNoise()
    on_d = secure.add(np.tile(counts, (trials, 1)), sigma, integer=True)
    on_neighbour = secure.add(np.tile(moved, (trials, 1)), sigma, integer=True)
    result = distinguishing_audit(
        "release 1-way", on_d, on_neighbour, (moved - counts) / sigma**2, rho, DELTA,
        mu_of_neighbours=1 / sigma,
    )  # fmt: skip
    # over 20 seeded repeats this bound averaged 1.72 (sd 0.08): 1.3 is five sd below
    check_audit(result, min_lower_bound=1.3, z=5.0)
    engine = audit_marginal(neighbours, ("a", "c"), rho, secure, DELTA, 1_500)
    check_audit(engine, min_lower_bound=0.0, z=5.0)


@pytest.mark.slow
def test_audit_engine_runs_every_step_and_keeps_the_game_for_plotting():
    results = audit_engine(4.0, DELTA, seeded(9), 3_000, np.random.default_rng(0),
                           indif_candidates=20)  # fmt: skip
    assert [r.mechanism for r in results] == [
        "1-way marginals", "InDif scores", "marginal a x b", "column kinds",
    ]  # fmt: skip
    assert not any(r.violates_claim for r in results)
    for result in results:
        assert result.on_d.shape == result.on_neighbour.shape == (result.trials,)
        # the statistic's shift between the neighbours is the measured separation
        spread = np.sqrt(0.5 * (result.on_d.var(ddof=1) + result.on_neighbour.var(ddof=1)))
        shift = (result.on_neighbour.mean() - result.on_d.mean()) / spread
        assert shift == pytest.approx(result.mu_estimate)


@pytest.mark.slow
def test_audit_engine_with_a_rho_multiplier_runs_a_broken_engine_the_audit_catches():
    """The Learn page's "break the noise" demo: 4x rho (half the noise), rho still claimed."""
    honest, broken = (
        audit_engine(
            1.0,
            DELTA,
            seeded(10),
            4_000,
            np.random.default_rng(0),
            indif_candidates=20,
            rho_multiplier=multiplier,
        )
        for multiplier in (1.0, 4.0)
    )
    claimed = rho_from_epsilon_delta(1.0, DELTA)
    for fair, bad in zip(honest, broken, strict=True):
        assert fair.claimed_rho == bad.claimed_rho == pytest.approx(claimed)
        assert fair.claimed_epsilon == pytest.approx(1.0)
        # the same neighbours, half the noise: twice the attainable separation
        assert bad.mu_of_neighbours == pytest.approx(2 * fair.mu_of_neighbours)
        assert not fair.violates_claim
    # the marginal steps reach the bound, so halving their noise shows at once (InDif's
    # neighbours stay below it and need more trials: see test_the_audit_catches_...)
    assert broken[0].violates_claim and broken[2].violates_claim and broken[3].violates_claim


def audited(mu: float, se: float, allowed: float, epsilon_bound: float = 0.5) -> AuditResult:
    """An audit's numbers as given, claimed epsilon 1: for the decision rule at its edges."""
    return AuditResult(
        mechanism="made up", trials=1000, delta=DELTA, claimed_rho=allowed**2 / 2,
        claimed_epsilon=1.0, epsilon_lower_bound=epsilon_bound, confidence=0.99,
        mu_estimate=mu, mu_standard_error=se, mu_claimed=allowed, mu_of_neighbours=allowed,
    )  # fmt: skip


def test_a_leak_is_a_separation_range_wholly_above_the_bound_and_touching_it_is_not():
    """Dyadic numbers, so the range's ends hit the bound exactly: se 1/16 makes the range
    the estimate ± 1/4 (SEPARATION_ERRORS is 4)."""
    assert SEPARATION_ERRORS == 4.0
    se, allowed, tiny = 1 / 16, 0.5, 2.0**-20
    cases = {
        # the numbers: 0.24 ± 0.02 against 0.22 is within noise of the bound
        (0.24, 0.02, 0.22): "across",
        (0.31, 0.02, 0.22): "above",  # range 0.23 to 0.39
        (0.13, 0.02, 0.22): "below",  # range 0.05 to 0.21
        (0.75, se, allowed): "across",  # the low end on the bound: not above it
        (0.75 + tiny, se, allowed): "above",
        (0.25, se, allowed): "across",  # the high end on the bound: not below it
        (0.25 - tiny, se, allowed): "below",
    }
    for (mu, error, bound), where in cases.items():
        result = audited(mu, error, bound)
        low, high = result.mu_range
        assert (low, high) == pytest.approx((mu - 4 * error, mu + 4 * error), abs=1e-15)
        assert result.separation == where, (mu, error, bound)
        assert result.violates_claim == (where == "above")


def test_an_epsilon_bound_above_the_claim_is_a_leak_whatever_the_separation():
    across = audited(0.24, 0.02, 0.22, epsilon_bound=1.0)
    assert across.separation == "across" and not across.violates_claim  # equal: not above
    proved = audited(0.24, 0.02, 0.22, epsilon_bound=1.01)
    assert proved.epsilon_refuted and proved.violates_claim
    assert audited(0.13, 0.02, 0.22, epsilon_bound=1.01).violates_claim
