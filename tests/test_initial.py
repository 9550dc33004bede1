"""GUM's initial table (privsyn_core/generation/initial.py): independent columns, or columns
drawn along a maximum spanning tree of the measured pairs."""

import math

import numpy as np
import pytest

from privsyn_core.generation.initial import (
    dependency_tree,
    initial_columns,
    mutual_information,
)
from privsyn_core.marginals import MarginalTable
from privsyn_core.selection.forest import edge_list


def pair(a: str, b: str, joint: np.ndarray) -> MarginalTable:
    return MarginalTable((a, b), joint.shape, joint.ravel().astype(float))


def joint_of(x: np.ndarray, y: np.ndarray, kx: int, ky: int) -> np.ndarray:
    return np.bincount(x * ky + y, minlength=kx * ky).reshape(kx, ky).astype(float)


@pytest.fixture(scope="module")
def chain() -> tuple[dict[str, np.ndarray], list[MarginalTable]]:
    """a -> b -> c, each a near-copy of the one before, with every pair measured."""
    rng = np.random.default_rng(0)
    n, k = 20_000, 5
    a = rng.integers(0, k, n)
    b = np.where(rng.random(n) < 0.8, a, rng.integers(0, k, n))
    c = np.where(rng.random(n) < 0.8, b, rng.integers(0, k, n))
    columns = {"a": a, "b": b, "c": c}
    marginals = [
        pair(x, y, joint_of(columns[x], columns[y], k, k))
        for x, y in (("a", "b"), ("b", "c"), ("a", "c"))
    ]
    return columns, marginals


def test_mutual_information_is_zero_for_independence_and_log_k_for_a_copy():
    assert mutual_information(np.outer([1, 2, 3], [4, 5])) == pytest.approx(0, abs=1e-12)
    assert mutual_information(np.eye(4) * 10) == pytest.approx(math.log(4))
    assert mutual_information(np.zeros((2, 2))) == 0.0
    # negative noisy cells count as empty
    assert mutual_information(np.array([[5.0, -3.0], [-1.0, 5.0]])) == pytest.approx(math.log(2))


def test_the_tree_keeps_the_strongest_measured_pairs(chain):
    _, marginals = chain
    tree = dependency_tree(["a", "b", "c"], marginals)
    assert sorted(tuple(sorted(e)) for e in edge_list(tree)) == [("a", "b"), ("b", "c")]


def test_a_three_way_marginal_gives_its_pairs_to_the_tree(chain):
    columns, _ = chain
    cells = (columns["a"] * 5 + columns["b"]) * 5 + columns["c"]
    joint = np.bincount(cells, minlength=125).astype(float)
    tree = dependency_tree(["a", "b", "c"], [MarginalTable(("a", "b", "c"), (5, 5, 5), joint)])
    assert sorted(tuple(sorted(e)) for e in edge_list(tree)) == [("a", "b"), ("b", "c")]


@pytest.mark.parametrize("how", ["tree", "independent"])
def test_initial_columns_meet_the_tree_edges_or_only_the_one_way_marginals(chain, how):
    columns, marginals = chain
    names = ["a", "b", "c"]
    n = 20_000
    one_way = {name: np.bincount(columns[name], minlength=5).astype(float) for name in names}
    drawn = initial_columns(
        names, marginals, one_way, n, how, np.random.default_rng(1), np.dtype(np.uint8)
    )
    assert drawn.shape == (3, n) and drawn.dtype == np.uint8
    for row, name in enumerate(names):  # every column meets its 1-way marginal exactly
        np.testing.assert_array_equal(np.bincount(drawn[row], minlength=5), one_way[name])
    a, b, c = (drawn[row].astype(np.int64) for row in range(3))
    for (x, y), marginal in zip(((a, b), (b, c), (a, c)), marginals, strict=True):
        real = marginal.values.reshape(5, 5) / n
        product = np.outer(real.sum(1), real.sum(0))
        error = np.abs(joint_of(x, y, 5, 5) / n - real).sum()
        if how == "independent":  # no dependency drawn: the pair is the product
            assert np.abs(joint_of(x, y, 5, 5) / n - product).sum() < 0.03
        elif marginal.attributes != ("a", "c"):  # a tree edge: met within rounding
            assert error < 0.005
        else:  # not an edge: implied through b, as in the real chain
            assert error < 0.03 < np.abs(real - product).sum()


def test_initial_columns_are_reproducible_from_the_generator(chain):
    columns, marginals = chain
    one_way = {name: np.bincount(columns[name], minlength=5).astype(float) for name in columns}
    draw = [
        initial_columns(
            ["a", "b", "c"], marginals, one_way, 500, "tree", np.random.default_rng(7),
            np.dtype(np.uint8),
        )
        for _ in range(2)
    ]  # fmt: skip
    np.testing.assert_array_equal(*draw)
