import numpy as np
import pytest

from privsyn_core.gum import (
    GumSettings,
    GumTarget,
    _fine_index,
    l1_error,
    record_major,
    run_gum,
    update_towards,
)
from privsyn_core.marginals import cell_index
from privsyn_core.sampling import shuffled_column


def correlated_target(k: int, strength: float) -> np.ndarray:
    joint = np.full((k, k), (1 - strength) / (k * k))
    joint[np.arange(k), np.arange(k)] += strength / k
    return joint.ravel()


def test_gum_brings_a_planted_pair_correlation_through():
    """The pandas-aliasing failure of the research code returned the independent start."""
    rng = np.random.default_rng(0)
    n, k = 20_000, 5
    records = np.vstack([shuffled_column(np.ones(k), n, rng) for _ in range(3)])
    target = GumTarget(("a", "b"), (0, 1), (k, k), correlated_target(k, 0.9))
    before = l1_error(records, target)
    settings = GumSettings(iterations=40, patience=None)
    history, finished = run_gum([(records, [target])], settings, rng)
    assert finished and len(history) == 40
    after = l1_error(records, target)
    assert before > 1.0
    assert after < 0.03
    assert np.corrcoef(records[0], records[1])[0, 1] > 0.85
    assert records.shape == (3, n)


@pytest.mark.parametrize(
    "strategy",
    ["half_half_plus_duplicate", "replace", "duplicate", "half_half", "replace_plus_duplicate"],
)
def test_every_update_keeps_n_and_the_domain_and_lowers_the_error(strategy):
    rng = np.random.default_rng(1)
    n = 5000
    records = np.vstack([rng.integers(0, 4, n), rng.integers(0, 3, n), rng.integers(0, 2, n)])
    target_ab = GumTarget(("a", "b"), (0, 1), (4, 3), rng.dirichlet(np.ones(12)))
    target_bc = GumTarget(("b", "c"), (1, 2), (3, 2), rng.dirichlet(np.ones(6)))
    start = l1_error(records, target_ab) + l1_error(records, target_bc)
    settings = GumSettings(iterations=30, strategy=strategy)
    run_gum([(records, [target_ab, target_bc])], settings, rng)
    assert records.shape == (3, n)
    assert records[0].max() < 4 and records[1].max() < 3 and records[2].max() < 2
    end = l1_error(records, target_ab) + l1_error(records, target_bc)
    assert end < 0.5 * start


def test_empty_cells_are_filled_by_replacement():
    rng = np.random.default_rng(2)
    records = np.zeros((2, 1000), dtype=np.int64)  # everything in cell (0, 0)
    target = GumTarget(("a", "b"), (0, 1), (2, 2), np.full(4, 0.25))
    error = update_towards(records, target, alpha=1.0, duplicate_share=1.0, rng=rng)
    assert error == pytest.approx(1.5)
    counts = np.bincount(records[0] * 2 + records[1], minlength=4)
    assert counts.sum() == 1000
    assert (counts[1:] > 150).all()  # alpha * a * N = 250 each, Bernoulli removals


def test_step_decay_and_strategy_schedule():
    settings = GumSettings(alpha0=1.0, decay=0.5, decay_every=10)
    assert [settings.alpha(t) for t in (0, 9, 10, 25)] == [1.0, 1.0, 0.5, 0.25]
    assert [settings.duplicate_share(t) for t in range(4)] == [0.5, 1.0, 0.5, 1.0]
    with pytest.raises(ValueError, match="strategy"):
        GumSettings(strategy="teleport")


def test_callback_returning_false_stops_after_that_iteration():
    rng = np.random.default_rng(3)
    records = rng.integers(0, 3, size=(2, 500))
    target = GumTarget(("a", "b"), (0, 1), (3, 3), correlated_target(3, 0.5))
    seen = []
    history, finished = run_gum(
        [(records, [target])],
        GumSettings(iterations=50),
        rng,
        lambda record: seen.append(record.iteration) or record.iteration < 4,
    )
    assert not finished and seen == [0, 1, 2, 3, 4] and len(history) == 5


def test_plateau_rule_stops_only_when_progress_stalls():
    settings = GumSettings(patience=3, min_improvement=0.01)
    assert not settings.converged([1.0, 0.5, 0.4])
    assert not settings.converged([1.0, 0.5, 0.4, 0.39, 0.38, 0.37])  # 7.5% better than 0.4
    assert settings.converged([1.0, 0.5, 0.4, 0.399, 0.41, 0.40])  # best of last 3 is 0.399
    assert not GumSettings(patience=None).converged([1.0] * 50)


def test_gum_stops_at_the_plateau_and_reports_a_normal_finish():
    rng = np.random.default_rng(4)
    n, k = 4000, 3
    records = np.vstack([shuffled_column(np.ones(k), n, rng) for _ in range(2)])
    target = GumTarget(("a", "b"), (0, 1), (k, k), correlated_target(k, 0.5))
    settings = GumSettings(iterations=200, patience=5, min_improvement=0.01)
    history, finished = run_gum([(records, [target])], settings, rng)
    assert finished
    assert 5 < len(history) < 200
    means = [h.mean_error for h in history]
    assert settings.converged(means)
    assert not settings.converged(means[:-1])


def test_large_tables_take_the_pair_code_path_and_still_converge():
    """Above 2^18 records, byte-sized pairs are tracked by 16-bit codes: same errors, same
    domain, same fixed N as the cell-index path."""
    rng = np.random.default_rng(5)
    n = 300_000
    records = record_major(3, n, np.uint8)
    for row, size in enumerate((6, 5, 4)):
        records[row] = shuffled_column(np.ones(size), n, rng)
    target = GumTarget(("a", "b"), (0, 1), (6, 5), rng.dirichlet(np.ones(30)))
    code, cell_of = _fine_index(records, target)
    assert cell_of is not None  # the 16-bit path is the one under test
    assert np.array_equal(cell_of[code], cell_index(records, (0, 1), (6, 5)))
    before = l1_error(records, target)
    first = update_towards(records, target, alpha=1.0, duplicate_share=0.5, rng=rng)
    assert first == pytest.approx(before)
    assert l1_error(records, target) < first
    for _ in range(15):
        update_towards(records, target, alpha=0.8, duplicate_share=0.5, rng=rng)
    assert l1_error(records, target) < 0.02
    assert records.shape[1] == n and records[0].max() < 6 and records[1].max() < 5
    assert records[2].max() < 4
