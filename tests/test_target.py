"""The prediction target (privsyn_core/selection/target.py): weighted selection and budget."""

from __future__ import annotations

import math
from itertools import combinations

import numpy as np
import pandas as pd
import pytest

from privsyn_core import PrivSynConfig
from privsyn_core.errors import InputError
from privsyn_core.pipeline import measure
from privsyn_core.privacy.ledger import FailedAfterSpending
from privsyn_core.selection.greedy import noise_error, select_marginals
from privsyn_core.selection.target import TargetEmphasis, marginal_weights

DOMAIN = {
    "y": 2,
    **{f"x{i}": 3 for i in range(6)},
    **{f"z{i}{s}": 4 for i in range(3) for s in "ab"},
}


def weak_target_table(n: int, rng: np.random.Generator) -> pd.DataFrame:
    """``y`` depends weakly on each of x0..x5; the z pairs are strongly dependent (80% copies),
    so without a target their pairs are the cheapest to select."""
    xs = [rng.integers(0, 3, n) for _ in range(6)]
    logit = sum(0.45 * (x - 1) for x in xs)
    columns = {"y": (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(int)}
    columns |= {f"x{i}": x for i, x in enumerate(xs)}
    for i in range(3):
        a = rng.integers(0, 4, n)
        columns[f"z{i}a"] = a
        columns[f"z{i}b"] = np.where(rng.random(n) < 0.2, rng.integers(0, 4, n), a)
    return pd.DataFrame(columns)


def measured(config: PrivSynConfig, seed: int, epsilon: float = 0.3):
    table = weak_target_table(5000, np.random.default_rng(seed))
    return measure(
        table, epsilon, 1e-9, domain=DOMAIN, config=config, rng=np.random.default_rng(seed)
    )


@pytest.mark.parametrize("weight", [0.5, 0.0, -1.0, math.nan, math.inf])
def test_a_weight_below_one_or_not_finite_is_refused(weight):
    with pytest.raises(InputError, match="target_weight must be a number >= 1"):
        PrivSynConfig(target="y", target_weight=weight)


@pytest.mark.parametrize("target", ["", 3, ("y",)])
def test_a_target_that_is_not_a_name_is_refused(target):
    with pytest.raises(InputError, match="target must be a column name"):
        PrivSynConfig(target=target)


def test_weights_mark_the_marginals_that_hold_the_target():
    emphasis = TargetEmphasis("y", 4.0)
    marginals = [("a", "y"), ("a", "b"), ("y", "b", "c"), ("c",)]
    assert marginal_weights(marginals, emphasis) == [4.0, 1.0, 4.0, 1.0]
    assert marginal_weights(marginals, None) == [1.0] * 4


def test_weighted_greedy_takes_the_best_pair_of_the_weighted_error_each_round():
    rng = np.random.default_rng(7)
    names = ["y", *[f"c{i}" for i in range(6)]]
    sizes = {n: int(rng.integers(2, 15)) for n in names}
    scores = rng.exponential(1500, size=(7, 7))
    scores = np.triu(scores, 1) + np.triu(scores, 1).T
    frame = pd.DataFrame(scores, index=names, columns=names)
    rho, emphasis = 0.01, TargetEmphasis("y", 5.0)
    selection = select_marginals(frame, sizes, rho, connect_isolated=False, emphasis=emphasis)
    pairs = list(combinations(range(7), 2))
    w = [5.0 if 0 in p else 1.0 for p in pairs]
    phi = [w[k] * scores[i, j] for k, (i, j) in enumerate(pairs)]
    power = [
        (w[k] * sizes[names[i]] * sizes[names[j]]) ** (2 / 3) for k, (i, j) in enumerate(pairs)
    ]

    def total(chosen):
        rest = sum(phi[k] for k in range(len(pairs)) if k not in chosen)
        return noise_error(sum(power[k] for k in chosen), rho) + rest

    index = {(names[i], names[j]): k for k, (i, j) in enumerate(pairs)}
    chosen: list[int] = []
    assert selection.initial_error == pytest.approx(sum(phi))
    for step in selection.steps:
        options = {c: total([*chosen, c]) for c in range(len(pairs)) if c not in chosen}
        assert options[index[step.pair]] == pytest.approx(min(options.values()))
        assert step.total_error == pytest.approx(options[index[step.pair]])
        chosen.append(index[step.pair])
    current = total(chosen)
    assert all(total([*chosen, c]) >= current for c in range(len(pairs)) if c not in chosen)
    assert selection.steps  # the test exercised at least one round


def test_weight_one_is_the_paper_exactly():
    plain = measured(PrivSynConfig(), seed=3)
    weighted = measured(PrivSynConfig(target="y", target_weight=1.0), seed=3)
    assert weighted.selection == plain.selection
    assert [m.rho for m in weighted.marginals] == pytest.approx([m.rho for m in plain.marginals])


def test_the_budget_follows_weighted_cells_to_the_two_thirds():
    weight = 8.0
    result = measured(PrivSynConfig(target="y", target_weight=weight), seed=1)
    marginals = result.marginals
    assert any("y" in m.attributes for m in marginals)
    assert any("y" not in m.attributes for m in marginals)
    expected = np.array(
        [((weight if "y" in m.attributes else 1.0) * m.cells) ** (2 / 3) for m in marginals]
    )
    rho = np.array([m.rho for m in marginals])
    np.testing.assert_allclose(rho / rho.sum(), expected / expected.sum(), rtol=1e-9)
    ledger = result.ledger
    assert ledger.spent_rho == pytest.approx(ledger.budget_rho, rel=1e-9)  # no extra spend


def test_a_target_links_more_attributes_to_it_on_every_seed():
    """y's six weak partners: the weighted objective selects more of them (5 seeds, epsilon
    0.3, where the plain objective drops some for the strong z pairs)."""

    def partners(config, seed):
        pairs = measured(config, seed).selection.pairs
        return {a for p in pairs if "y" in p for a in p} - {"y"}

    # the paper's selection rule (no margin over the InDif noise), so only the weight differs
    plain = [partners(PrivSynConfig(indif_margin=0.0), s) for s in range(5)]
    target = [
        partners(PrivSynConfig(target="y", target_weight=16.0, indif_margin=0.0), s)
        for s in range(5)
    ]
    assert all(len(t) >= len(p) for t, p in zip(target, plain, strict=True))
    assert sum(map(len, target)) >= sum(map(len, plain)) + 4


def test_an_unknown_target_is_refused_before_anything_is_spent():
    with pytest.raises(InputError, match="'income' is not a column") as caught:
        measured(PrivSynConfig(target="income"), seed=0)
    assert not isinstance(caught.value, FailedAfterSpending)
    assert "columns: y, x0" in str(caught.value)


def test_a_target_left_out_after_spending_names_the_spend():
    # an identifier-like target is excluded by the private structure step: the spend is named
    rng = np.random.default_rng(0)
    table = pd.DataFrame(
        {
            "id": [f"person-{i}" for i in range(2000)],
            "a": rng.integers(0, 3, 2000).astype(str),
            "b": rng.integers(0, 3, 2000).astype(str),
        }
    )
    with pytest.raises(FailedAfterSpending, match=r"'id' is not a column.*was spent"):
        measure(table, 2.0, 1e-9, config=PrivSynConfig(target="id"), rng=rng)
