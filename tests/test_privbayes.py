"""PrivBayes-InDif selection: the public candidates and the private choice (paper 6.3)."""

import numpy as np
import pytest

from privsyn_core.domain import Domain
from privsyn_core.marginals import indif_of_joint
from privsyn_core.measuring.counters import ArrayCounter
from privsyn_core.measuring.privbayes import candidate_scores, select_network
from privsyn_core.privacy.ledger import exponential_scale
from privsyn_core.privacy.noise import SeededNoise
from privsyn_core.selection.privbayes import NetworkNode, candidates, network_marginals


def chain(n: int, rng: np.random.Generator) -> tuple[np.ndarray, Domain]:
    """a -> b -> c strongly dependent (copies with 5% flips), d and e independent noise."""
    a = rng.integers(0, 3, n)
    b = np.where(rng.random(n) < 0.05, rng.integers(0, 3, n), a)
    c = np.where(rng.random(n) < 0.05, rng.integers(0, 3, n), b)
    noise = rng.integers(0, 3, (2, n))
    records = np.vstack([a, b, c, noise]).astype(np.uint8)
    return records, Domain(("a", "b", "c", "d", "e"), (3, 3, 3, 3, 3))


def test_candidates_have_the_full_degree_within_the_cell_cap():
    sizes = {"a": 2, "b": 3, "c": 4, "x": 5}
    options = candidates(["a", "b", "c"], ["x"], sizes, degree=2, max_cells=50)
    assert {o.parents for o in options} == {("a", "b"), ("a", "c")}  # b, c: 60 cells
    assert all(o.attribute == "x" for o in options)
    # a network smaller than the degree offers all of it as the parent set
    assert candidates(["a"], ["x", "b"], sizes, 2, 100) == [
        NetworkNode("x", ("a",)),
        NetworkNode("b", ("a",)),
    ]


def test_candidates_fall_back_to_single_parents_when_nothing_fits_the_cap():
    sizes = {"a": 50, "b": 50, "x": 50}
    options = candidates(["a", "b"], ["x"], sizes, degree=2, max_cells=1000)
    assert options == [NetworkNode("x", ("a",)), NetworkNode("x", ("b",))]
    with pytest.raises(ValueError):
        candidates(["a"], ["x"], sizes, degree=0, max_cells=10)


def test_network_marginals_drop_sets_inside_others_and_keep_table_order():
    nodes = [
        NetworkNode("c", ()),
        NetworkNode("a", ("c",)),
        NetworkNode("b", ("a", "c")),
        NetworkNode("d", ("b",)),
    ]
    assert network_marginals(nodes, ["a", "b", "c", "d"]) == (("a", "b", "c"), ("b", "d"))


def test_candidate_scores_are_indif_between_the_attribute_and_its_joint_parents():
    rng = np.random.default_rng(0)
    records, domain = chain(2000, rng)
    options = [NetworkNode("c", ("a", "b")), NetworkNode("d", ("a",))]
    scores = candidate_scores(ArrayCounter(records, domain), options)
    joint = np.zeros((3, 9))
    np.add.at(joint, (records[2], records[0] * 3 + records[1]), 1)
    assert scores[0] == pytest.approx(indif_of_joint(joint))
    assert scores[0] > 1000 > scores[1]


def test_a_generous_budget_recovers_the_chain_and_charges_each_step():
    rng = np.random.default_rng(1)
    records, domain = chain(5000, rng)
    rho = 50.0
    nodes, spends = select_network(
        ArrayCounter(records, domain), rho, SeededNoise(rng), degree=1, max_cells=5000
    )
    assert sorted(n.attribute for n in nodes) == list("abcde")
    assert len(spends) == 4  # d - 1 exponential-mechanism steps
    assert sum(s.rho for s in spends) == pytest.approx(rho)
    assert all(s.step == "privbayes" and s.sensitivity == 4.0 for s in spends)
    assert spends[0].sigma == pytest.approx(exponential_scale(rho / 4, 4.0))
    edges = {frozenset((n.attribute, *n.parents)) for n in nodes if n.parents}
    # the chain's two links are found whatever attribute came first
    assert frozenset("ab") in edges and frozenset("bc") in edges


def test_a_tiny_budget_chooses_nearly_at_random():
    """With rho near 0 the scores barely matter: over many seeds, the chain's links are
    picked about as often as chance says, far less often than with a generous budget."""
    rng = np.random.default_rng(2)
    records, domain = chain(3000, rng)
    counter = ArrayCounter(records, domain)
    found = 0
    for seed in range(40):
        nodes, _ = select_network(
            counter, 1e-9, SeededNoise(np.random.default_rng(seed)), degree=1, max_cells=5000
        )
        edges = {frozenset((n.attribute, *n.parents)) for n in nodes if n.parents}
        found += frozenset("ab") in edges and frozenset("bc") in edges
    assert found < 20  # with a generous budget it is 40 of 40 (test above)
