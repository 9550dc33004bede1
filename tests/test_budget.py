import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privsyn_core.privacy.budget import NOTHING, Budget
from privsyn_core.privacy.conversion import epsilon_from_rho, rho_from_epsilon_delta


def test_costs_compose_part_by_part():
    total = Budget(0.01, 5e-10) + Budget(0.02, 0.0) + Budget(0.03, 2e-10)
    assert total.rho == pytest.approx(0.06) and total.delta == pytest.approx(7e-10)
    assert NOTHING + total == total


def test_a_cost_fits_only_when_both_parts_fit():
    allowance = Budget(0.1, 1e-9)
    assert Budget(0.1, 1e-9).fits(allowance)
    assert not Budget(0.1001, 0.0).fits(allowance)
    assert not Budget(0.0, 1.1e-9).fits(allowance)
    assert Budget(5.0, 1e-3).fits(Budget(5.0, math.inf))  # a lifetime that caps rho only
    left = Budget(0.04, 3e-10).left_of(allowance)
    assert left.rho == pytest.approx(0.06) and left.delta == pytest.approx(7e-10)
    assert Budget(0.2, 2e-9).left_of(allowance) == NOTHING


@settings(max_examples=60, deadline=None)
@given(
    epsilon=st.floats(0.05, 10.0),
    exponent=st.floats(-12.0, -4.0),
    share=st.floats(0.0, 0.9),
    used=st.floats(0.0, 1.0),
)
@pytest.mark.slow
def test_whatever_fits_an_epsilon_delta_allowance_keeps_that_guarantee(
    epsilon, exponent, share, used
):
    """The allowance of (epsilon, delta) converts rho at what the approximate share leaves:
    a history that fits it, stated at that delta, is (epsilon, delta)-DP."""
    delta = 10.0**exponent
    allowance = Budget.for_epsilon_delta(epsilon, delta, share)
    assert allowance.delta == pytest.approx(share * delta)
    spent = Budget(used * allowance.rho, used * allowance.delta)
    stated_epsilon, stated_delta = spent.guarantee(delta - allowance.delta)
    assert stated_epsilon <= epsilon * (1 + 1e-9)
    assert stated_delta <= delta * (1 + 1e-12)


def test_the_guarantee_adds_the_thresholds_delta_to_the_conversions():
    rho = rho_from_epsilon_delta(1.0, 1e-9)
    epsilon, delta = Budget(3 * rho, 1.5e-9).guarantee(1e-9)
    assert delta == pytest.approx(2.5e-9)  # three runs' thresholds on top of the conversion's
    assert epsilon == pytest.approx(epsilon_from_rho(3 * rho, 1e-9))
    assert epsilon > 1.0


@pytest.mark.parametrize(
    "rho, delta", [(-0.1, 0.0), (math.nan, 0.0), (0.1, -1e-9), (0.1, math.nan)]
)
def test_a_budget_is_never_negative_or_undefined(rho, delta):
    with pytest.raises(ValueError, match="budget's"):
        Budget(rho, delta)


def test_words_name_both_parts():
    assert Budget(0.0118, 5e-10).words == "rho 0.0118, delta 5e-10"
    assert Budget(2.0, math.inf).words == "rho 2, delta not capped"
