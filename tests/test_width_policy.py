"""The width policy: one field per width-dependent rule, each checked on its own."""

import pytest

from privsyn_core.width_policy import WIDTH_POLICY, WidthPolicy


def test_each_width_rule_has_its_own_threshold():
    """Moving where the MRF starts leaves selection and quasi-independence where they were."""
    policy = WidthPolicy(mrf_from=50)
    assert policy.selection(40) == "treefirst" and policy.quasi_independence(40)
    assert policy.synthesis(40) == "gum" and policy.synthesis(50) == "gum+mrf"
    assert policy.synthesis(50, iterations=0) == "gum"
    assert not WidthPolicy(quasi_independence_from=41).quasi_independence(40)
    assert WidthPolicy(tree_first_from=41).selection(40) == "densemarg"


@pytest.mark.parametrize(
    "bad", [{"mrf_from": 0}, {"tree_first_from": 2.5}, {"tree_first_margin": -1.0}]
)
def test_a_width_policy_refuses_nonsense(bad):
    with pytest.raises(ValueError):
        WidthPolicy(**bad)


def test_auto_names_the_rule_it_followed():
    wide, narrow = WIDTH_POLICY.tree_first_from, WIDTH_POLICY.tree_first_from - 1
    assert WIDTH_POLICY.selection_account(wide) == f"wide table ({wide} attributes >= {wide})"
    assert WIDTH_POLICY.selection_account(narrow).startswith("narrow table")
