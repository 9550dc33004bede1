import math
from itertools import combinations

import numpy as np
import pandas as pd
import pytest

from privsyn_core.selection.greedy import noise_error, select_marginals


def frame(matrix, names):
    return pd.DataFrame(matrix, index=names, columns=names)


def total_error(chosen, phi, power, rho):
    return noise_error(sum(power[i] for i in chosen), rho) + sum(
        phi[i] for i in range(len(phi)) if i not in chosen
    )


def test_greedy_takes_the_best_pair_each_round_and_stops_when_error_stops_falling():
    rng = np.random.default_rng(4)
    names = [f"c{i}" for i in range(7)]
    sizes = {n: int(rng.integers(2, 20)) for n in names}
    scores = rng.exponential(2000, size=(7, 7))
    scores = np.triu(scores, 1) + np.triu(scores, 1).T
    rho = 0.01
    selection = select_marginals(frame(scores, names), sizes, rho, connect_isolated=False)
    pairs = list(combinations(range(7), 2))
    phi = [scores[i, j] for i, j in pairs]
    power = [(sizes[names[i]] * sizes[names[j]]) ** (2 / 3) for i, j in pairs]
    index = {(names[i], names[j]): k for k, (i, j) in enumerate(pairs)}
    chosen: list[int] = []
    current = sum(phi)
    assert selection.initial_error == pytest.approx(current)
    for step in selection.steps:
        k = index[step.pair]
        options = {
            c: total_error([*chosen, c], phi, power, rho)
            for c in range(len(pairs))
            if c not in chosen
        }
        assert options[k] == pytest.approx(min(options.values()))
        assert options[k] < current
        assert step.total_error == pytest.approx(options[k])
        chosen.append(k)
        current = options[k]
    # stopping rule: no remaining candidate improves the total error
    rest = [
        total_error([*chosen, c], phi, power, rho) for c in range(len(pairs)) if c not in chosen
    ]
    assert min(rest) >= current
    assert 0 < len(selection.steps) < len(pairs)


def test_noise_error_is_the_optimal_allocation_cost():
    cells = np.array([10.0, 200.0, 37.0])
    rho = 0.3
    shares = cells ** (2 / 3) / np.sum(cells ** (2 / 3))
    direct = np.sum(cells * np.sqrt(1 / (math.pi * rho * shares)))
    assert noise_error(float(np.sum(cells ** (2 / 3))), rho) == pytest.approx(direct)


def test_independent_attributes_select_nothing_and_strong_ones_everything():
    names = ["a", "b", "c"]
    sizes = dict.fromkeys(names, 4)
    none = select_marginals(frame(np.zeros((3, 3)), names), sizes, 1.0, connect_isolated=False)
    assert none.pairs == ()
    strong = np.full((3, 3), 1e9)
    np.fill_diagonal(strong, 0)
    every = select_marginals(frame(strong, names), sizes, 1.0, connect_isolated=False)
    assert len(every.pairs) == 3


def test_isolated_attribute_is_linked_through_its_highest_noisy_indif():
    names = ["a", "b", "c", "d"]
    scores = np.zeros((4, 4))
    scores[0, 1] = scores[1, 0] = 1e9
    scores[2, 1] = scores[1, 2] = 5.0
    scores[2, 3] = scores[3, 2] = 7.0
    scores[3, 0] = scores[0, 3] = -2.0
    sizes = {"a": 3, "b": 3, "c": 3, "d": 1}
    selection = select_marginals(frame(scores, names), sizes, 0.1, connect_isolated=True)
    assert selection.steps[0].pair == ("a", "b")
    # c's best partner is d, but d has one value: linking to it carries nothing
    assert selection.isolated_links == (("b", "c"),)


def test_all_pairs_lists_every_two_way_marginal_in_table_order():
    from privsyn_core.selection.fixed import all_pairs

    assert all_pairs(["a", "b", "c"]) == (("a", "b"), ("a", "c"), ("b", "c"))


def test_given_marginals_are_put_in_table_order_and_checked():
    from privsyn_core.errors import InputError
    from privsyn_core.selection.fixed import given_marginals

    columns = ["age", "sex", "income"]
    assert given_marginals([("income", "age"), ("sex",)], columns) == (
        ("age", "income"),
        ("sex",),
    )
    with pytest.raises(InputError, match=r"'agee', not a column.*columns: age, sex, income"):
        given_marginals([("agee", "sex")], columns)
    with pytest.raises(InputError, match="twice"):
        given_marginals([("age", "age")], columns)
    with pytest.raises(InputError, match="listed twice"):
        given_marginals([("age", "sex"), ("sex", "age")], columns)
    with pytest.raises(InputError, match="at least one column"):
        given_marginals([()], columns)
    with pytest.raises(InputError, match="at least one marginal"):
        given_marginals([], columns)
