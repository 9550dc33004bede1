"""Combinations the measurements show as empty stay empty (generation/empty_cells.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from privsyn_core import PrivSynConfig, synthesize
from privsyn_core.domain import Domain
from privsyn_core.generation.empty_cells import (
    emptied,
    emptied_targets,
    empty_cell_rows,
    fill_empty_cells,
    structural_zeros,
)
from privsyn_core.generation.gum_settings import GumSettings
from privsyn_core.marginals import MarginalTable

FAST = PrivSynConfig(gum=GumSettings(iterations=20))


def test_structural_zeros_are_small_cells_that_independence_expects_to_be_large():
    # a, b of 1000 rows each way: independence expects 250 in every cell
    table = MarginalTable(("a", "b"), (2, 2), np.array([480.0, 8.0, 25.0, 487.0]))
    assert structural_zeros(table, 20.0, 0.5).tolist() == [False, True, False, False]
    assert structural_zeros(table, 20.0, 2.0).tolist() == [False, True, True, False]
    assert emptied(table, 20.0, 0.5).values.tolist() == [480.0, 0.0, 25.0, 487.0]
    # a cell independence expects to be small is kept, however small: a rare combination
    # (and no row holds its rows in one cell: 15 is more than half a sigma)
    rare = MarginalTable(("a", "b"), (2, 2), np.array([990.0, 15.0, 15.0, 1.0]))
    assert not structural_zeros(rare, 20.0, 0.5).any()  # expected (0-1): 1005 x 16 / 1021
    one_way = MarginalTable(("a",), (2,), np.array([5.0, 800.0]))
    scales = {("a", "b"): 20.0, ("a",): 20.0}
    # 1-way targets, and pairs drawn as independent (a product has no empty cell), are kept
    kept, masks = emptied_targets([table, one_way], scales, 0.5, [("a", "b")])
    assert kept == [table, one_way] and masks == {}
    tables, masks = emptied_targets([table, one_way], scales, 0.5)
    assert tables[0].values.tolist() == [480.0, 0.0, 25.0, 487.0] and tables[1] == one_way
    assert masks[("a", "b")].tolist() == [False, True, False, False]


def test_a_value_whose_rows_lie_in_one_cell_empties_the_rest_of_its_row():
    """Where independence expects too little to tell (rare values), a row whose other cells
    are within noise of zero, each and together, holds its rows in one cell: the rest of the
    row is empty. Sigma 10: a row with a second cell of 2.5 sigmas is not so, nor is a row
    whose largest cell is under 3 sigmas."""
    values = np.array([[5000, 6, 1, 0], [3, 80, 4, 0], [0, 25, 70, 2], [4, 1, 2, 20]], dtype=float)
    table = MarginalTable(("a", "b"), (4, 4), values.ravel())
    empty = structural_zeros(table, 10.0, 0.5).reshape(4, 4)
    assert empty.astype(int).tolist() == [
        [0, 1, 1, 1],  # a = 0 determines b (6 + 1 + 0 is under half a sigma of their sum)
        [1, 0, 1, 1],  # so does a = 1
        [1, 0, 0, 0],  # b = 0 and b = 2 do (by column); a = 2 holds 25 in b = 1: not one cell
        [1, 0, 1, 0],  # a = 3's largest cell, 20, is under 3 sigma: only its columns decide
    ]
    # the same row with more of its rows outside the cell is not determined
    spread = values.copy()
    spread[0, 1:] = [6, 4, 3]  # 13 against half a sigma of noise over 3 cells (8.7)
    assert not structural_zeros(MarginalTable(("a", "b"), (4, 4), spread.ravel()), 10.0, 0.5)[1]


def test_rows_in_empty_cells_are_moved_by_exchange_keeping_each_columns_counts():
    """a = 0 only with b = 0 and a = 1 only with b = 1; a = 2 or 3 with either. A row in an
    empty cell takes a new a from a row that can take its old one without entering an empty
    cell itself (a (2, 0) row takes the 0 of a (0, 1) row): a keeps its counts, where a plain
    redraw would move them from 0 and 1 to 2 and 3."""
    rng = np.random.default_rng(0)
    engine = Domain(("a", "b", "c"), (4, 2, 2))
    allowed = np.array([[1, 0], [0, 1], [1, 1], [1, 1]], dtype=float) * 1000
    pair = MarginalTable(("a", "b"), (4, 2), allowed.ravel())
    other = MarginalTable(("b", "c"), (2, 2), np.array([1000.0, 1000, 1000, 1000]))
    masks = {("a", "b"): allowed.ravel() == 0}
    n = 20_000
    synthetic = np.vstack([rng.integers(0, 4, n), rng.integers(0, 2, n), rng.integers(0, 2, n)])
    synthetic = synthetic.astype(np.uint8)
    before = synthetic.copy()
    wrong = empty_cell_rows(synthetic, engine, ("a", "b"), masks[("a", "b")])
    assert wrong.size == pytest.approx(n / 4, rel=0.05)
    left = fill_empty_cells(synthetic, engine, [pair, other], masks, np.random.default_rng(1))
    assert left == 0 and empty_cell_rows(synthetic, engine, ("a", "b"), masks[("a", "b")]).size == 0
    for row in range(3):  # every column keeps every value's count
        assert (np.bincount(synthetic[row]) == np.bincount(before[row])).all(), row
    # b and c were not changed: a was, and only by exchange
    assert (synthetic[1:] == before[1:]).all()
    assert np.count_nonzero(synthetic[0] != before[0]) <= 2 * wrong.size


def test_a_row_whose_condition_is_empty_is_moved_by_another_attribute():
    engine = Domain(("a", "b"), (2, 2))
    # b = 1 never occurs: a row (0, 1) cannot keep b and redraw a; b is redrawn next pass
    pair = MarginalTable(("a", "b"), (2, 2), np.array([300.0, 0.0, 100.0, 0.0]))
    masks = {("a", "b"): np.array([False, True, False, True])}
    synthetic = np.array([[0, 0, 1], [1, 0, 1]], dtype=np.uint8)
    assert fill_empty_cells(synthetic, engine, [pair], masks, np.random.default_rng(0)) == 0
    assert (synthetic[1] == 0).all()


def test_a_functional_dependency_comes_out_whole_and_l1_does_not_suffer():
    """A column that determines another (education and its number of years): the rows that
    break it are moved, and the pair's 2-way error falls."""
    rng = np.random.default_rng(3)
    n = 6000
    level = rng.choice(8, n, p=[0.05, 0.1, 0.3, 0.2, 0.15, 0.1, 0.05, 0.05])
    years = np.array([3, 5, 9, 10, 12, 13, 14, 16])[level]
    noise = rng.integers(0, 3, n)
    job = np.where(rng.random(n) < 0.6, level % 4, rng.integers(0, 4, n))
    real = pd.DataFrame({"level": level, "years": years, "noise": noise, "job": job})
    domain = {"level": 8, "years": 17, "noise": 3, "job": 4}
    results = {}
    for arm, sigmas in (("off", None), ("on", 0.5)):
        config = PrivSynConfig(gum=GumSettings(iterations=20), empty_sigmas=sigmas)
        results[arm] = synthesize(
            real, 2.0, 1e-7, domain=domain, config=config, rng=np.random.default_rng(4)
        ).synthetic

    def broken(table: pd.DataFrame) -> float:
        allowed = set(zip(real["level"], real["years"], strict=True))
        pairs = zip(table["level"], table["years"], strict=True)
        return float(np.mean([p not in allowed for p in pairs]))

    def l1(table: pd.DataFrame) -> float:
        a = pd.crosstab(real["level"], real["years"], normalize=True)
        b = pd.crosstab(table["level"], table["years"], normalize=True)
        return float(a.sub(b, fill_value=0).abs().to_numpy().sum())

    assert broken(results["on"]) < 0.005 < broken(results["off"])
    assert l1(results["on"]) < l1(results["off"])
