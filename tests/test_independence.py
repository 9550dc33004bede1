"""Measured pairs within their noise drawn as independent (generation/independence.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from privsyn_core.errors import InputError
from privsyn_core.generation.independence import (
    check_threshold,
    independent_product,
    noise_pairs,
    noise_pairs_message,
    product_of_margins,
    within_noise,
)
from privsyn_core.generation.initial import dependency_tree
from privsyn_core.marginals import MarginalTable


def _table(attributes: tuple[str, ...], counts: np.ndarray) -> MarginalTable:
    return MarginalTable(attributes, counts.shape, counts.ravel().astype(float))


def _noisy(expected: np.ndarray, sigma: float, rng: np.random.Generator) -> MarginalTable:
    return _table(("a", "b"), expected + rng.normal(0, sigma, expected.shape))


ROWS = np.array([0.5, 0.3, 0.2])
COLUMNS = np.array([0.4, 0.3, 0.2, 0.1])
SIGMA = 20.0


def test_product_keeps_margins_and_total() -> None:
    joint = np.array([[30.0, 5.0, 1.0], [2.0, 40.0, 22.0]])
    product = product_of_margins(joint)
    assert product.sum() == pytest.approx(joint.sum())
    np.testing.assert_allclose(product.sum(axis=1), joint.sum(axis=1))
    np.testing.assert_allclose(product.sum(axis=0), joint.sum(axis=0))
    # independent: every 2 x 2 minor vanishes
    assert product[0, 0] * product[1, 1] == pytest.approx(product[0, 1] * product[1, 0])
    assert not product_of_margins(np.zeros((2, 3))).any()
    table = independent_product(_table(("a", "b"), joint))
    assert table.attributes == ("a", "b") and table.shape == (2, 3)
    np.testing.assert_allclose(table.values, product.ravel())


def test_independent_tables_are_within_their_noise() -> None:
    """Under independence the interaction of a noisy table carries about sigma^2 chi^2 with
    (a-1)(b-1) = 6 degrees of freedom: the Cp threshold (2 x 6) would keep 94% of noisy
    tables, a threshold of 1 (the noise's mean) 58%. The product of the table's own noisy
    margins takes out a little less than the margins' share of the noise, so the rates
    measured here sit a few points lower (0.89 and 0.48 over three seeds). Fixed seed,
    400 tables."""
    rng = np.random.default_rng(0)
    expected = 10_000 * np.outer(ROWS, COLUMNS)
    tables = [_noisy(expected, SIGMA, rng) for _ in range(400)]
    at_two = np.mean([within_noise(t, SIGMA, 2.0) for t in tables])
    at_one = np.mean([within_noise(t, SIGMA, 1.0) for t in tables])
    at_four = np.mean([within_noise(t, SIGMA, 4.0) for t in tables])
    assert 0.85 <= at_two <= 0.95
    assert 0.40 <= at_one <= 0.60
    assert at_four >= 0.99


def test_dependent_tables_are_not_within_their_noise() -> None:
    """A pair whose interaction is three times the noise's expected squared norm is kept in
    nearly every draw, and a strong one in every draw."""
    rng = np.random.default_rng(1)
    expected = 10_000 * np.outer(ROWS, COLUMNS)
    direction = np.array([[1.0, -1.0, 0.0, 0.0], [-1.0, 1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
    weak = expected + direction * math.sqrt(3 * 6 * SIGMA**2 / 4)
    kept = np.mean([not within_noise(_noisy(weak, SIGMA, rng), SIGMA, 2.0) for _ in range(400)])
    assert kept >= 0.6
    strong = expected + direction * 300
    assert not any(within_noise(_noisy(strong, SIGMA, rng), SIGMA, 2.0) for _ in range(100))


def test_the_threshold_is_twice_the_noise_energy() -> None:
    """Exactly at the boundary: interaction energy 2 (a-1)(b-1) sigma^2 is within, a hair
    more is not."""
    expected = 1_000 * np.outer([0.5, 0.5], [0.5, 0.5])
    direction = np.array([[1.0, -1.0], [-1.0, 1.0]])  # squared norm 4, margins unchanged
    sigma = 3.0
    at = expected + direction * math.sqrt(2 * 1 * sigma**2 / 4)
    assert within_noise(_table(("a", "b"), at), sigma, 2.0)
    above = expected + direction * math.sqrt(2 * 1 * sigma**2 / 4) * 1.001
    assert not within_noise(_table(("a", "b"), above), sigma, 2.0)


def test_what_is_never_replaced() -> None:
    one_value = _table(("a", "b"), np.array([[5.0, 7.0, 9.0]]))
    three_way = MarginalTable(("a", "b", "c"), (2, 2, 2), np.full(8, 10.0))
    empty = _table(("a", "b"), np.zeros((2, 2)))
    for table in (one_value, three_way, empty):
        assert not within_noise(table, 1e6, 2.0)
    noise_only = _table(("c", "d"), np.array([[10.0, 11.0], [9.0, 10.0]]))
    sigmas = {("c", "d"): 50.0}
    assert noise_pairs([noise_only], sigmas, 2.0) == frozenset({("c", "d")})
    assert noise_pairs([noise_only], sigmas, None) == frozenset()
    assert noise_pairs([noise_only], {}, 2.0) == frozenset()  # no known noise: kept


def test_the_tree_keeps_its_shape_and_drops_the_dependence() -> None:
    """A pair drawn as independent stays an edge of the start's spanning tree (rebuilt
    without it, the chain would route elsewhere), carrying the product of its margins."""
    strong = _table(("a", "b"), np.array([[400.0, 20.0], [30.0, 550.0]]))
    weak = _table(("b", "c"), np.array([[300.0, 150.0], [180.0, 370.0]]))
    weaker = _table(("a", "c"), np.array([[240.0, 235.0], [250.0, 260.0]]))
    plain = dependency_tree(["a", "b", "c"], [strong, weak, weaker])
    kept = dependency_tree(["a", "b", "c"], [strong, weak, weaker], frozenset({("b", "c")}))
    edges = {frozenset((x, y)) for x in plain for y in plain[x]}
    assert edges == {frozenset((x, y)) for x in kept for y in kept[x]}
    assert frozenset(("b", "c")) in edges
    np.testing.assert_allclose(kept["b"]["c"].joint, product_of_margins(weak.values.reshape(2, 2)))
    np.testing.assert_array_equal(kept["a"]["b"].joint, plain["a"]["b"].joint)


@pytest.mark.parametrize("bad", [-1.0, math.nan, math.inf, "2", True])
def test_bad_thresholds_are_refused(bad: object) -> None:
    with pytest.raises(InputError, match="independence_threshold"):
        check_threshold(bad)
    check_threshold(None)
    check_threshold(0)


def test_message() -> None:
    assert noise_pairs_message(1).startswith("1 measured pair drawn as independent")
    assert noise_pairs_message(19).startswith("19 measured pairs drawn as independent")
