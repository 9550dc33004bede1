import numpy as np
import pytest

from privsyn_core.generation.consistency import make_consistent, project_nonnegative
from privsyn_core.marginals import MarginalTable, NoisyMarginal


def noisy_marginals(rng, attribute_sets, sizes, n=2000, sigma=30.0):
    """Noisy marginals of one random table, so a consistent solution exists."""
    names = sorted(sizes)
    records = {a: rng.integers(0, sizes[a], n) for a in names}
    out = []
    for attrs in attribute_sets:
        shape = tuple(sizes[a] for a in attrs)
        flat = np.ravel_multi_index([records[a] for a in attrs], shape)
        counts = np.bincount(flat, minlength=int(np.prod(shape))).astype(float)
        rho = float(rng.uniform(0.5, 2.0)) / (2 * sigma**2)
        noise = rng.normal(0, 1 / np.sqrt(2 * rho), counts.size)
        out.append(
            NoisyMarginal(MarginalTable(attrs, shape, counts + noise), rho, 1 / np.sqrt(2 * rho))
        )
    return out


def test_shared_projections_agree_and_cells_are_non_negative():
    rng = np.random.default_rng(0)
    sizes = {"a": 3, "b": 4, "c": 5, "d": 2}
    sets = [("a", "b"), ("b", "c"), ("a", "b", "d"), ("c", "d"), ("a",), ("b",), ("c",), ("d",)]
    marginals = noisy_marginals(rng, sets, sizes)
    tables, report = make_consistent(marginals, max_rounds=200)
    totals = [t.total for t in tables]
    assert np.ptp(totals) < 1e-6 * totals[0]
    assert report.total == pytest.approx(totals[0])
    for t in tables:
        assert (t.values >= 0).all()
    for i, t in enumerate(tables):
        for u in tables[i + 1 :]:
            shared = [a for a in t.attributes if a in u.attributes]
            if shared:
                left, right = t.project(shared).values, u.project(shared).values
                assert np.abs(left - right).max() < 1e-3 * report.total
    # before consistency, the same projections disagreed by far more
    raw_b = [m.table.project(["b"]).values for m in marginals if "b" in m.attributes]
    assert np.abs(raw_b[0] - raw_b[1]).max() > 10


def test_weighted_mean_uses_rho_over_g():
    """Two marginals sharing one attribute: the target is the inverse-variance mean."""
    a = MarginalTable(("x",), (2,), np.array([100.0, 300.0]))
    ab = MarginalTable(("x", "y"), (2, 2), np.array([60.0, 60.0, 100.0, 100.0]))
    # projection of ab on x is [120, 200]; g = 2 for ab, 1 for a
    rho_a, rho_ab = 1.0, 4.0
    tables, _ = make_consistent(
        [NoisyMarginal(a, rho_a, 1.0), NoisyMarginal(ab, rho_ab, 1.0)], max_rounds=1
    )
    w_a, w_ab = rho_a / 1, rho_ab / 2
    # the empty set (totals) is made consistent first: totals 400 and 320
    total = (rho_a / 2 * 400 + rho_ab / 4 * 320) / (rho_a / 2 + rho_ab / 4)
    assert tables[0].total == pytest.approx(total)
    shifted_a = np.array([100.0, 300.0]) + (total - 400) / 2
    shifted_ab = np.array([120.0, 200.0]) + (total - 320) / 2
    expected = (w_a * shifted_a + w_ab * shifted_ab) / (w_a + w_ab)
    assert tables[0].values == pytest.approx(expected)
    assert tables[1].project(["x"]).values == pytest.approx(expected)


def test_nonnegative_projection_keeps_the_total_and_is_the_l2_closest():
    rng = np.random.default_rng(1)
    for _ in range(50):
        values = rng.normal(5, 20, size=int(rng.integers(2, 30)))
        total = float(rng.uniform(1, 200))
        projected = project_nonnegative(values, total)
        assert projected.sum() == pytest.approx(total)
        assert (projected >= 0).all()
        # KKT: one shift t with projected = max(values - t, 0)
        positive = projected > 0
        shift = (values - projected)[positive]
        assert np.ptp(shift) < 1e-9
        assert (values[~positive] <= shift[0] + 1e-9).all()


def test_consistency_off_makes_each_marginal_a_distribution_and_reports_the_disagreement():
    from privsyn_core.generation.consistency import without_consistency

    a = NoisyMarginal(MarginalTable(("a", "b"), (2, 2), np.array([50.0, -5.0, 30.0, 25.0])), 1, 1)
    b = NoisyMarginal(MarginalTable(("b", "c"), (2, 2), np.array([70.0, 10.0, 10.0, 20.0])), 1, 1)
    tables, report = without_consistency([a, b])
    assert report.rounds == 0
    assert report.total == pytest.approx(105.0)  # mean of the noisy totals 100 and 110
    for table in tables:
        assert table.values.min() >= 0 and table.values.sum() == pytest.approx(105.0)
    assert tables[0].values[1] == 0.0  # the negative cell
    # b from {a, b}: (80, 25); from {b, c}: (80, 30) * 105/110 = (76.4, 28.6): off by 3.6/105
    assert report.max_discrepancy == pytest.approx((80 - 80 * 105 / 110) / 105)
    _, reconciled = make_consistent([a, b])
    assert reconciled.max_discrepancy < 1e-6 < report.max_discrepancy
