import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import norm

from privsyn_core.privacy.conversion import (
    _bisect,
    delta_for,
    epsilon_from_rho,
    rho_from_epsilon_delta,
)
from privsyn_core.privacy.ledger import (
    BudgetExceededError,
    Measurement,
    PrivacyLedger,
    gaussian_sigma,
)


def exact_gaussian_delta(rho: float, epsilon: float) -> float:
    """Balle & Wang (2018): the exact delta(epsilon) of a Gaussian mechanism that is rho-zCDP."""
    sigma = 1 / math.sqrt(2 * rho)
    return norm.cdf(-epsilon * sigma + 1 / (2 * sigma)) - math.exp(epsilon) * norm.cdf(
        -epsilon * sigma - 1 / (2 * sigma)
    )


@pytest.mark.parametrize("epsilon", [0.1, 0.2, 1.0, 2.0, 8.0])
@pytest.mark.parametrize("delta", [1e-5, 1e-9, 1 / 48842**2])
def test_tight_conversion_sits_between_exact_gaussian_and_the_papers_bound(epsilon, delta):
    rho = rho_from_epsilon_delta(epsilon, delta)
    assert delta_for(rho, epsilon) == pytest.approx(delta, rel=1e-6)
    # The Gaussian mechanism is exactly rho-zCDP, so its true delta cannot exceed the bound ...
    assert exact_gaussian_delta(rho, epsilon) <= delta * (1 + 1e-9)
    # ... and the bound must be tighter than the paper's Proposition C.2.
    rho_paper = rho_from_epsilon_delta(epsilon, delta, "proposition")
    assert rho > rho_paper
    assert rho_paper + 2 * math.sqrt(rho_paper * math.log(1 / delta)) == pytest.approx(epsilon)


@pytest.mark.parametrize("conversion", ["tight", "proposition"])
def test_epsilon_and_rho_conversions_invert_each_other(conversion):
    for epsilon in (0.05, 0.5, 1.0, 3.0):
        rho = rho_from_epsilon_delta(epsilon, 1e-7, conversion)
        assert epsilon_from_rho(rho, 1e-7, conversion) == pytest.approx(epsilon, rel=1e-6)


def _two_hundred_halvings(above, lo, hi):
    """The conversions' bisection before it stopped early: always all 200 halvings."""
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if above(mid):
            lo = mid
        else:
            hi = mid
    return lo, hi


@settings(max_examples=300, deadline=None)
@given(
    point=st.floats(-1e6, 1e6),
    lo=st.floats(-1e6, 0.0),
    width=st.floats(1e-300, 2e6),
    strict=st.booleans(),
)
@pytest.mark.slow
def test_bisection_stops_early_at_the_ends_of_all_200_halvings(point, lo, width, strict):
    def above(x):
        return point > x if strict else point >= x

    assert _bisect(above, lo, lo + width) == _two_hundred_halvings(above, lo, lo + width)


@pytest.mark.parametrize(
    "epsilon, delta", [(0, 1e-9), (-1, 1e-9), (math.inf, 1e-9), (1, 0), (1, 1)]
)
def test_invalid_epsilon_delta_are_rejected(epsilon, delta):
    with pytest.raises(ValueError, match=r"epsilon|delta"):
        rho_from_epsilon_delta(epsilon, delta)


def test_gaussian_sigma_matches_proposition_c3():
    # Delta^2 / (2 sigma^2) == rho
    sigma = gaussian_sigma(0.3, sensitivity=4.0)
    assert 16 / (2 * sigma**2) == pytest.approx(0.3)


def _spend(rho: float) -> Measurement:
    return Measurement("marginal", ("a",), 1.0, rho, gaussian_sigma(rho))


def test_ledger_refuses_to_overspend_and_stays_unchanged():
    ledger = PrivacyLedger(budget_rho=1.0).charge(_spend(0.7))
    with pytest.raises(BudgetExceededError, match=r"only 0\.3"):
        ledger.charge(_spend(0.31))
    assert ledger.spent_rho == pytest.approx(0.7)
    assert len(ledger.entries) == 1


@settings(max_examples=200, deadline=None)
@given(
    budget=st.floats(1e-6, 10.0),
    weights=st.lists(st.floats(1e-3, 1.0), min_size=1, max_size=60),
)
def test_splitting_the_budget_in_any_proportions_fits_exactly(budget, weights):
    total = sum(weights)
    ledger = PrivacyLedger(budget_rho=budget)
    ledger = ledger.charge_all([_spend(budget * w / total) for w in weights])
    assert ledger.spent_rho <= budget * (1 + 1e-9)
    assert ledger.spent_rho == pytest.approx(budget, rel=1e-9)
    with pytest.raises(BudgetExceededError):
        ledger.charge(_spend(budget * 1e-6))


def test_ledger_json_lists_every_measurement_and_both_conversions():
    import json

    ledger = PrivacyLedger.from_epsilon_delta(1.0, 1e-9, reserved_delta=2e-10)
    ledger = ledger.charge_all([_spend(ledger.budget_rho / 4) for _ in range(4)])
    record = json.loads(json.dumps(ledger.to_json()))
    assert record["format"] == "privsyn-ledger" and record["version"] == 1
    assert len(record["measurements"]) == 4
    assert record["spent_rho"] == pytest.approx(record["budget_rho"])
    back = record["conversions"]["epsilon_from_rho"]
    assert back["delta"] == pytest.approx(8e-10)
    assert back["epsilon"] == pytest.approx(1.0, rel=1e-6)  # fully spent: the whole epsilon
    forward = record["conversions"]["rho_from_epsilon_delta"]
    assert rho_from_epsilon_delta(forward["epsilon"], forward["delta"]) == pytest.approx(
        forward["rho"]
    )
    assert record["end_to_end_dp"] is True


def test_conversions_reproduce_opendps_published_reference_values():
    """OpenDP's own test of its zCDP -> (epsilon, delta) cast (src/combinators/measure_cast/
    zCDP_to_approxDP/test.rs): a Gaussian of scale 4 on sensitivity 1, rho = 1/32."""
    rho = (1 / 4) ** 2 / 2
    assert epsilon_from_rho(rho, 1e-3) == pytest.approx(0.6880024554878086, rel=1e-12)
    assert delta_for(rho, 0.0) == pytest.approx(0.1508457845622862, rel=1e-12)
    assert delta_for(rho, 0.6880024554878085) == pytest.approx(1e-3, rel=1e-12)
    assert rho_from_epsilon_delta(0.6880024554878086, 1e-3) == pytest.approx(rho, rel=1e-12)


@pytest.mark.parametrize("rho", [1e-4, 0.01, 0.5, 2.63, 10.0])
@pytest.mark.parametrize("delta", [1e-10, 1e-6, 1e-3])
def test_conversions_agree_with_opendp_everywhere(rho, delta):
    """An independent implementation of the same bound (CKS 2020, Proposition 12)."""
    from opendp import combinators, domains, measurements, metrics, mod

    mod.enable_features("contrib")
    gaussian = measurements.make_gaussian(
        domains.atom_domain(T=float, nan=False),
        metrics.absolute_distance(T=float),
        scale=1 / math.sqrt(2 * rho),
    )
    profile = combinators.make_zCDP_to_approxDP(gaussian).map(1.0)
    assert epsilon_from_rho(rho, delta) == pytest.approx(profile.epsilon(delta), rel=1e-9)
    assert rho_from_epsilon_delta(profile.epsilon(delta), delta) == pytest.approx(rho, rel=1e-9)


def test_the_proposition_conversion_is_bun_and_steinkes_closed_form():
    """Bun and Steinke 2016, Proposition 1.3 (the paper's Proposition C.2)."""
    assert epsilon_from_rho(0.5, 1e-6, "proposition") == pytest.approx(
        0.5 + 2 * math.sqrt(0.5 * math.log(1e6)), rel=1e-12
    )


def test_a_laplace_release_bought_with_rho_is_epsilon_dp_with_epsilon_squared_over_two_rho():
    from opendp import domains, measurements, metrics, mod

    from privsyn_core.privacy.ledger import laplace_scale, pure_epsilon

    rho = 0.02
    epsilon = pure_epsilon(rho)
    assert epsilon**2 / 2 == pytest.approx(rho)  # Bun-Steinke: epsilon-DP is eps^2/2-zCDP
    mod.enable_features("contrib")
    laplace = measurements.make_laplace(
        domains.vector_domain(domains.atom_domain(T=int)),
        metrics.l1_distance(T=int),
        scale=laplace_scale(rho, l1_sensitivity=1.0),
    )
    # OpenDP's own privacy map: a marginal (L1 sensitivity 1) costs exactly that epsilon
    assert laplace.map(1) == pytest.approx(epsilon, rel=1e-9)
    assert laplace_scale(rho, 3.0) == pytest.approx(3 / epsilon)


def test_the_exponential_mechanism_scale_is_rho_zcdp_by_opendps_own_map():
    from opendp import domains, measurements, measures, metrics, mod

    from privsyn_core.privacy.ledger import exponential_scale

    mod.enable_features("contrib")
    rho, sensitivity = 0.003, 4.0
    chooser = measurements.make_noisy_max(
        domains.vector_domain(domains.atom_domain(T=float, nan=False)),
        metrics.linf_distance(T=float),
        measures.zero_concentrated_divergence(),
        scale=exponential_scale(rho, sensitivity),
    )
    assert chooser.map(sensitivity) == pytest.approx(rho, rel=1e-6)
