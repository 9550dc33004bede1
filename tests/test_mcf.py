"""MCF, the paper's strawman (section 5.1): each marginal made exact by a min-cost flow."""

import itertools

import networkx as nx
import numpy as np
import pytest

from privsyn_core.generation.gum_settings import GumSettings
from privsyn_core.generation.mcf import mcf_update, min_cost_moves, run_mcf, target_counts
from privsyn_core.generation.records import record_major
from privsyn_core.generation.target_scores import GumTarget, l1_error
from privsyn_core.marginals import cell_index


def hamming(u: int, v: int, shape: tuple[int, ...]) -> int:
    return int(np.sum(np.array(np.unravel_index(u, shape)) != np.array(np.unravel_index(v, shape))))


def optimal_cost(counts: np.ndarray, target: np.ndarray, shape: tuple[int, ...]) -> int:
    """networkx's exact min-cost flow on the full bipartite graph (the reference)."""
    graph = nx.DiGraph()
    cells = counts.size
    for c in range(cells):
        graph.add_node(c, demand=int(target[c] - counts[c]))
    for u, v in itertools.permutations(range(cells), 2):
        graph.add_edge(u, v, weight=hamming(u, v, shape))
    return nx.cost_of_flow(graph, nx.min_cost_flow(graph))


def apply(counts: np.ndarray, moves, shape) -> tuple[np.ndarray, int]:
    after = counts.copy()
    cost = 0
    for u, v, amount in moves:
        assert amount > 0 and counts[u] > 0
        after[u] -= amount
        after[v] += amount
        cost += amount * hamming(u, v, shape)
    return after, cost


def random_case(rng, shape, n=60):
    cells = int(np.prod(shape))
    counts = np.bincount(rng.integers(0, cells, n), minlength=cells)
    target = np.bincount(rng.integers(0, cells, n), minlength=cells)
    return counts, target


@pytest.mark.parametrize("seed", range(12))
def test_pairs_get_an_exact_min_cost_flow(seed):
    rng = np.random.default_rng(seed)
    shape = tuple(int(k) for k in rng.integers(2, 6, size=2))
    counts, target = random_case(rng, shape)
    after, cost = apply(counts, min_cost_moves(counts, target, shape), shape)
    assert np.array_equal(after, target)
    assert cost == optimal_cost(counts, target, shape)


def test_triples_reach_the_target_within_a_few_percent_of_the_optimal_cost():
    rng = np.random.default_rng(100)
    ours = best = 0
    for _ in range(15):
        shape = tuple(int(k) for k in rng.integers(2, 4, size=3))
        counts, target = random_case(rng, shape)
        after, cost = apply(counts, min_cost_moves(counts, target, shape), shape)
        assert np.array_equal(after, target)
        ours += cost
        best += optimal_cost(counts, target, shape)
    assert best <= ours <= 1.1 * best


def test_one_way_marginals_move_each_record_once():
    counts, target = np.array([5, 0, 3]), np.array([1, 4, 3])
    assert min_cost_moves(counts, target, (3,)) == [(0, 1, 4)]
    with pytest.raises(ValueError):
        min_cost_moves(np.array([1, 2]), np.array([1, 1]), (2,))


def test_target_counts_are_whole_records_summing_to_n():
    counts = target_counts(np.array([0.333, 0.333, 0.334]), 10)
    assert counts.sum() == 10 and counts.dtype.kind == "i"


def test_an_update_makes_the_marginal_exact_and_changes_only_its_attributes():
    rng = np.random.default_rng(5)
    n = 3000
    records = record_major(3, n, np.dtype(np.uint8))
    records[:] = rng.integers(0, 4, size=(records.shape[0], n))
    records[3:] = 0  # padding stays zero
    before = records.copy()
    frequencies = rng.dirichlet(np.ones(16))
    target = GumTarget(("a", "b"), (0, 1), (4, 4), frequencies)
    error = mcf_update(records, target, rng)
    assert error == pytest.approx(l1_error(before, target))
    counts = np.bincount(cell_index(records, (0, 1), (4, 4)), minlength=16)
    assert np.array_equal(counts, target_counts(frequencies, n))
    assert np.array_equal(records[2], before[2])  # the attribute outside the marginal
    changed = np.flatnonzero((records[:2] != before[:2]).any(axis=0))
    # minimal: exactly as many records change as must leave the over-filled cells
    old = np.bincount(cell_index(before, (0, 1), (4, 4)), minlength=16)
    assert changed.size == np.abs(counts - old).sum() // 2


def test_run_mcf_reports_like_gum_and_fits_consistent_marginals():
    """On marginals of one joint distribution MCF converges (each step is a projection, as
    in iterative proportional fitting); whether it beats GUM on noisy marginals is the
    benchmark's question (benchmarks/paper_lab.py), not a unit test's."""
    rng = np.random.default_rng(6)
    n, k = 4000, 4
    joint = rng.dirichlet(np.ones(k**3) * 0.3).reshape(k, k, k)
    targets = [
        GumTarget(("a", "b"), (0, 1), (k, k), joint.sum(axis=2).ravel()),
        GumTarget(("b", "c"), (1, 2), (k, k), joint.sum(axis=0).ravel()),
        GumTarget(("a", "c"), (0, 2), (k, k), joint.sum(axis=1).ravel()),
    ]
    records = record_major(3, n, np.dtype(np.uint8))
    for row, axes in enumerate([(1, 2), (0, 2), (0, 1)]):
        records[row] = rng.choice(k, n, p=joint.sum(axis=axes))
    start = np.mean([l1_error(records, t) for t in targets])
    calls = []
    history, finished = run_mcf(
        [(records, targets)], GumSettings(iterations=12, patience=None), rng, calls.append
    )
    assert finished and len(history) == 12 == len(calls)
    assert all(h.alpha == 1.0 for h in history)
    assert set(history[0].errors) == {t.attributes for t in targets}
    assert history[0].mean_error == pytest.approx(start, rel=0.5)
    assert np.mean([l1_error(records, t) for t in targets]) < start / 5
    stopped, finished = run_mcf(
        [(records, targets)], GumSettings(iterations=12, patience=None), rng, lambda r: False
    )
    assert not finished and len(stopped) == 1
