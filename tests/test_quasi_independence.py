"""Measured pairs independent but for a few cells (generation/quasi_independence.py)."""

from __future__ import annotations

import numpy as np
import pytest

from privsyn_core.generation.quasi_independence import (
    quasi_independent,
    quasi_independent_fit,
    quasi_independent_marginals,
    quasi_pairs_message,
)
from privsyn_core.marginals import MarginalTable, NoisyMarginal
from privsyn_core.width_policy import WIDTH_POLICY

ROWS = 200_000
WIDE = WIDTH_POLICY.quasi_independence_from


def copy_pair(a: int, b: int, keep: float, rows: int = ROWS) -> np.ndarray:
    """Expected counts of (x, y) where y copies x mod b with probability ``keep``, else is
    uniform, x uniform on a values: quasi-independent off the cells (i, i mod b)."""
    joint = np.full((a, b), (1 - keep) / (a * b))
    joint[np.arange(a), np.arange(a) % b] += keep / a
    return rows * joint


def linear_by_linear(a: int, b: int, rows: int = ROWS) -> np.ndarray:
    """Expected counts of an ordinal pair with linear-by-linear association (``log p_ij =
    u_i + v_j + 2 x_i y_j``): every cell departs from independence a little, no few cells
    carry the dependence, so it is not quasi-independent."""
    x, y = np.linspace(-1, 1, a), np.linspace(-1, 1, b)
    joint = np.exp(2 * np.outer(x, y))
    return rows * joint / joint.sum()


def l1(x: np.ndarray, truth: np.ndarray) -> float:
    return float(np.abs(x - truth).sum() / truth.sum())


def test_the_fit_keeps_margins_total_and_the_special_cells() -> None:
    rng = np.random.default_rng(0)
    counts = copy_pair(12, 9, 0.6) + rng.normal(0, 20, (12, 9))
    consistent = np.maximum(counts, 0.0)  # what the estimate keeps the margins of
    estimate = quasi_independent(consistent, counts, 20.0, 2.0)
    assert estimate is not None
    counts = consistent
    np.testing.assert_allclose(estimate.sum(axis=1), counts.sum(axis=1), rtol=1e-6)
    np.testing.assert_allclose(estimate.sum(axis=0), counts.sum(axis=0), rtol=1e-6)
    diagonal = (np.arange(12), np.arange(12) % 9)
    np.testing.assert_array_equal(estimate[diagonal], counts[diagonal])
    # off the diagonal it is rank one: every 2 x 2 minor of cells off it vanishes
    outside = np.ones((12, 9), dtype=bool)
    outside[diagonal] = False
    fit = quasi_independent_fit(counts, outside)
    assert fit[0, 3] * fit[1, 4] == pytest.approx(fit[0, 4] * fit[1, 3], rel=1e-9)


def test_noise_off_the_special_cells_is_averaged_away() -> None:
    """Fixed seed, 60 noisy copies of two quasi-independent pairs: the estimate is taken in
    every draw, and its L1 distance to the expected table is a fraction of the noisy
    table's: the a + b - 1 numbers off the diagonal average whole rows' and columns' noise,
    and what is left is the diagonal's own and theirs. Measured 0.28-0.29 (30 x 30, 30
    special cells of 900) and 0.55-0.57 (40 x 6: 40 special cells of 240, and each row's
    number fitted to 5 cells) over seeds 1-3; a bug that kept the counts, or swept
    noise-only cells into the special set, gives 1."""
    rng = np.random.default_rng(1)
    for a, b, keep, sigma, bound in ((30, 30, 0.6, 18.0, 0.35), (40, 6, 0.5, 40.0, 0.65)):
        truth = copy_pair(a, b, keep)
        ratios = []
        for _ in range(60):
            noisy = truth + rng.normal(0, sigma, truth.shape)
            estimate = quasi_independent(noisy, noisy, sigma, 2.0)
            assert estimate is not None
            ratios.append(l1(estimate, truth) / l1(noisy, truth))
        assert np.mean(ratios) < bound, (a, b, np.mean(ratios))


def test_a_pair_dependent_over_every_cell_is_kept_as_measured() -> None:
    """Linear-by-linear association is far from any few-cell exception at this noise: the
    counts are kept in every draw (a rule that took the rank-one fit anyway would flatten
    the association)."""
    rng = np.random.default_rng(2)
    truth = linear_by_linear(15, 15)
    noisy = [truth + rng.normal(0, 10, truth.shape) for _ in range(40)]
    taken = [quasi_independent(y, y, 10.0, 2.0) for y in noisy]
    assert all(t is None for t in taken)


def test_a_consistent_table_already_closer_than_the_fit_is_kept() -> None:
    """The fit is weighed against the consistent table, not the measurement: where
    consistency has already taken most of the noise out (here a consistent table with a
    tenth of the measurement's noise, so ``||Y - T||^2`` is about ``ab sigma^2``), nothing
    is replaced, in every draw; the same measurement taken as its own consistent table is
    replaced in every draw (a rule that judged against the measurement alone, as the first
    version did, replaces both)."""
    rng = np.random.default_rng(3)
    truth = copy_pair(20, 20, 0.6)
    for _ in range(20):
        measured = truth + rng.normal(0, 20, truth.shape)
        consistent = truth + rng.normal(0, 2, truth.shape)
        assert quasi_independent(consistent, measured, 20.0, 2.0) is None
        assert quasi_independent(measured, measured, 20.0, 2.0) is not None


def test_a_measurement_of_another_shape_is_not_read() -> None:
    counts = copy_pair(10, 10, 0.6)
    assert quasi_independent(counts, counts[:, :5], 20.0, 2.0) is None


def test_what_is_never_replaced() -> None:
    rng = np.random.default_rng(4)
    counts = copy_pair(10, 10, 0.6) + rng.normal(0, 20, (10, 10))
    pair = MarginalTable(("a", "b"), (10, 10), counts.ravel())
    three = MarginalTable(("a", "b", "c"), (2, 2, 2), np.full(8, 1000.0))
    made = [NoisyMarginal(pair, 0.01, 20.0), NoisyMarginal(three, 0.01, 20.0)]
    out, replaced = quasi_independent_marginals([pair, three], made, 2.0, frozenset(), WIDE)
    assert replaced == 1 and out[1] is three
    assert out[0].attributes == ("a", "b") and not np.array_equal(out[0].values, pair.values)
    for args in (
        (made, None, frozenset()),  # the rule off (no penalty)
        (made, 2.0, frozenset({("a", "b")})),  # drawn as independent already
        ([], 2.0, frozenset()),  # not measured (a combined marginal, say)
    ):
        out, replaced = quasi_independent_marginals([pair, three], *args, WIDE)
        assert replaced == 0 and out[0] is pair
    # a narrow table (fewer attributes than selection "auto" calls wide): nothing either
    out, replaced = quasi_independent_marginals([pair, three], made, 2.0, frozenset(), WIDE - 1)
    assert replaced == 0 and out[0] is pair
    assert quasi_independent(np.full((1, 5), 100.0), np.full((1, 5), 100.0), 1.0, 2.0) is None


def test_message() -> None:
    assert quasi_pairs_message(1).startswith("1 measured pair drawn as quasi-independent")
    assert quasi_pairs_message(7).startswith("7 measured pairs drawn as quasi-independent")


def test_every_block_gets_the_same_read_only_fit():
    """A sample's blocks each ask for the same tables: the second ask gets the first's fit,
    which nobody can change in place (a block that wrote into it would change the next)."""
    rng = np.random.default_rng(5)
    counts = copy_pair(10, 10, 0.6) + rng.normal(0, 20, (10, 10))
    pair = MarginalTable(("a", "b"), (10, 10), counts.ravel())
    made = [NoisyMarginal(pair, 0.01, 20.0)]
    first, _ = quasi_independent_marginals([pair], made, 2.0, frozenset(), WIDE)
    again, _ = quasi_independent_marginals([pair], made, 2.0, frozenset(), WIDE)
    np.testing.assert_array_equal(first[0].values, again[0].values)
    assert not again[0].values.flags.writeable
    with pytest.raises(ValueError):
        again[0].values[0] = 0.0


def test_the_remembered_fits_are_bounded_in_bytes_and_keyed_by_digest(monkeypatch):
    """A long-running server samples many models: the cache never holds more than its
    bound in bytes (estimates and entries), the least recently used dropped first, an
    estimate larger than the bound is not kept, and its keys are 16-byte digests, not the
    tables' counts."""
    from privsyn_core.generation import quasi_independence as module

    entry = module.ENTRY_BYTES + 10 * 10 * 8  # one 10 x 10 estimate of floats
    bound = 3 * entry + entry // 2  # room for three, not four
    cache = module.FitCache(bound)
    monkeypatch.setattr(module, "_fits", cache)
    rng = np.random.default_rng(6)
    tables = [copy_pair(10, 10, 0.6) + rng.normal(0, 20, (10, 10)) for _ in range(6)]
    for counts in tables:
        assert module._remembered_fit(counts, counts, 20.0, 2.0) is not None
        assert cache.bytes <= bound
    assert len(cache) == 3 and cache.bytes == 3 * entry
    assert all(len(key[0]) == 16 for key in cache.held())
    first = module._remembered_fit(tables[-1], tables[-1], 20.0, 2.0)
    assert first is module._remembered_fit(tables[-1], tables[-1], 20.0, 2.0)  # cached
    oldest = module._remembered_fit(tables[0], tables[0], 20.0, 2.0)  # dropped: fitted again
    assert oldest is not None and cache.bytes <= bound
    # the same consistent table with another measurement is another fit
    other = tables[-1] + 1.0
    assert module._remembered_fit(tables[-1], other, 20.0, 2.0) is not first
    assert cache.bytes <= bound
    # an estimate larger than the whole bound is returned but not kept
    small = module.FitCache(entry - 1)
    monkeypatch.setattr(module, "_fits", small)
    assert module._remembered_fit(tables[1], tables[1], 20.0, 2.0) is not None
    assert len(small) == 0 and small.bytes == 0


def test_fits_that_find_nothing_count_towards_the_bound_too():
    """A fit that found nothing (None) is kept as an entry of its own bytes, so many models
    without a quasi-independent pair cannot grow the cache without bound."""
    from privsyn_core.generation.quasi_independence import ENTRY_BYTES, FitCache

    cache = FitCache(10 * ENTRY_BYTES)
    for k in range(100):
        cache.put((bytes([k]) * 16, (2, 2, 2, 2), 1.0, 2.0), None)
        assert cache.bytes <= cache.limit
    assert len(cache) == 10


def test_the_default_bound_is_64_mib():
    from privsyn_core.generation import quasi_independence as module

    assert module.FITS_BYTES == 64 * 2**20
    assert module._fits.limit == module.FITS_BYTES


def test_the_penalty_is_checked():
    from privsyn_core.config import PrivSynConfig
    from privsyn_core.errors import InputError

    PrivSynConfig(quasi_independence=None)
    PrivSynConfig(quasi_independence=2.0)
    for bad in (-1.0, float("nan"), float("inf"), True, "2"):
        with pytest.raises(InputError, match="quasi_independence"):
            PrivSynConfig(quasi_independence=bad)
