import numpy as np
import pytest

from privsyn_core.generation.sampling import quota_counts


@pytest.mark.parametrize("seed", range(30))
def test_quota_counts_of_one_row_match_the_row_wise_rule(seed):
    """The one-row fast path gives the counts of the general (row-wise) path, ties included,
    and those counts are largest-remainder rounding: each within one record of its share."""
    rng = np.random.default_rng(seed)
    k = int(rng.integers(1, 50))
    weights = rng.dirichlet(np.ones(k)) * rng.choice([1.0, 1e-9, 3.0])
    weights[rng.random(k) < 0.3] = 0.0
    if seed % 5 == 0:
        weights[:] = 1.0  # all remainders tie
    if seed % 7 == 0:
        weights[:] = 0.0  # spread uniformly
    total = int(rng.integers(0, 10_000))
    one_row = quota_counts(weights, total)
    row_wise = quota_counts(weights[None, :], np.array([total]))[0]
    np.testing.assert_array_equal(one_row, row_wise)
    assert one_row.sum() == total and (one_row >= 0).all()
    share = weights / weights.sum() * total if weights.sum() > 0 else np.full(k, total / k)
    assert np.abs(one_row - share).max() < 1.0
