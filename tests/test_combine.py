import math
from itertools import combinations

import networkx as nx
import numpy as np
import pandas as pd
import pytest

from privsyn_core import PrivSynConfig
from privsyn_core.errors import InputError
from privsyn_core.selection.combine import combine_marginals
from privsyn_core.selection.target import TargetEmphasis


def indif(names, value=1.0):
    m = np.full((len(names), len(names)), value)
    return pd.DataFrame(m, index=names, columns=names)


def test_triangle_with_small_domain_becomes_one_marginal():
    names = ["a", "b", "c", "d"]
    sizes = dict.fromkeys(names, 10)
    out = combine_marginals([("a", "b"), ("b", "c"), ("a", "c"), ("c", "d")], sizes, indif(names))
    assert out == (("a", "b", "c"), ("c", "d"))


def test_clique_over_gamma_stays_as_pairs():
    names = ["a", "b", "c"]
    sizes = dict.fromkeys(names, 20)  # 8,000 cells > 5,000
    pairs = [("a", "b"), ("b", "c"), ("a", "c")]
    assert combine_marginals(pairs, sizes, indif(names)) == tuple(pairs)
    assert combine_marginals(pairs, sizes, indif(names), gamma=8000) == (("a", "b", "c"),)


def test_largest_clique_first_and_overlap_limit_of_two():
    names = list("abcde")
    sizes = dict.fromkeys(names, 2)
    # K4 on a,b,c,d plus triangle c,d,e (shares c,d with the K4: allowed)
    pairs = [(x, y) for i, x in enumerate("abcd") for y in "abcd"[i + 1 :]]
    pairs += [("c", "e"), ("d", "e")]
    out = combine_marginals(pairs, sizes, indif(names))
    assert out[0] == ("a", "b", "c", "d")
    assert ("c", "d", "e") in out
    # every pair is covered by an accepted clique, so no pair remains
    assert all(len(m) > 2 for m in out)
    # no 3-subset of the K4 is accepted on its own (it would share 3 attributes)
    assert ("a", "b", "c") not in out


def test_equal_sized_cliques_are_taken_by_strength():
    names = list("abcd")
    sizes = dict.fromkeys(names, 2)
    pairs = [("a", "b"), ("a", "c"), ("b", "c"), ("b", "d"), ("c", "d")]
    weak_first = indif(names, 1.0)
    weak_first.loc["d", ["b", "c"]] = weak_first.loc[["b", "c"], "d"] = 100.0
    out = combine_marginals(pairs, sizes, weak_first)
    assert out[0] == ("b", "c", "d")


def reference_combine(pairs, sizes, scores, gamma):
    """Algorithm 2 written the slow, obvious way: every clique, summed InDif, then the pass."""
    graph = nx.Graph(pairs)
    cliques = [
        tuple(sorted(c))
        for c in nx.enumerate_all_cliques(graph)
        if len(c) >= 3 and math.prod(sizes[a] for a in c) <= gamma
    ]

    def strength(clique):
        return sum(scores.at[a, b] for a, b in combinations(clique, 2))

    cliques.sort(key=lambda c: (-len(c), -strength(c), c))
    accepted, seen = [], set()
    for clique in cliques:
        if len(seen.intersection(clique)) <= 2:
            accepted.append(clique)
            seen.update(clique)
    covered = {frozenset(p) for c in accepted for p in combinations(c, 2)}
    return (*accepted, *(p for p in pairs if frozenset(p) not in covered))


@pytest.mark.parametrize("seed", range(6))
def test_dense_random_graphs_match_the_obvious_algorithm(seed):
    rng = np.random.default_rng(seed)
    names = [f"v{i:02d}" for i in range(12)]
    sizes = {n: int(rng.choice([2, 2, 3, 5])) for n in names}
    pairs = [p for p in combinations(names, 2) if rng.random() < 0.7]
    raw = rng.exponential(1.0, (12, 12))
    scores = pd.DataFrame(np.triu(raw, 1) + np.triu(raw, 1).T, index=names, columns=names)
    out = combine_marginals(pairs, sizes, scores, gamma=200)
    assert out == reference_combine(pairs, sizes, scores, 200)
    assert any(len(m) > 3 for m in out)  # the graphs are dense enough to merge big cliques


# --- which cliques are worth it (rule) --------------------------------------------------------


@pytest.mark.parametrize(("size", "merged"), [(5, True), (6, False)])
def test_no_added_noise_merges_a_triangle_only_below_the_break_even_domain(size, merged):
    """Three attributes of k values: the clique costs (k^3)^(2/3) = k^2 and its three pairs
    3 (k^2)^(2/3), so it merges while k^(2/3) <= 3, i.e. k <= 5.196."""
    names = ["a", "b", "c"]
    pairs = [("a", "b"), ("b", "c"), ("a", "c")]
    out = combine_marginals(pairs, dict.fromkeys(names, size), indif(names), rule="no_added_noise")
    assert out == ((("a", "b", "c"),) if merged else tuple(pairs))
    # the paper's rule merges both: 125 and 216 cells are under gamma
    assert combine_marginals(pairs, dict.fromkeys(names, size), indif(names)) == (("a", "b", "c"),)


def test_no_added_noise_weighs_a_targets_cells():
    """a, b of 6 values and a binary target t: unweighted the clique (72 cells) costs
    72^(2/3) = 17.3 < 36^(2/3) + 2 * 12^(2/3) = 21.4 and merges; with weight 8 on every
    marginal holding t, (8 * 72)^(2/3) = 69.2 > 36^(2/3) + 2 * 96^(2/3) = 52.8 and the
    pairs stay (merging would move (a, b)'s cells into the costly, weighted clique)."""
    names = ["a", "b", "t"]
    sizes = {"a": 6, "b": 6, "t": 2}
    pairs = [("a", "b"), ("a", "t"), ("b", "t")]
    plain = combine_marginals(pairs, sizes, indif(names), rule="no_added_noise")
    assert plain == (("a", "b", "t"),)
    weighted = combine_marginals(
        pairs, sizes, indif(names), rule="no_added_noise", emphasis=TargetEmphasis("t", 8.0)
    )
    assert weighted == tuple(pairs)


def noise_cost(marginals, sizes):
    """Algorithm 1's noise error of a set, up to its constant: (sum_j c_j^(2/3))^(3/2)."""
    return sum(math.prod(sizes[a] for a in m) ** (2 / 3) for m in marginals) ** 1.5


def test_no_added_noise_never_raises_the_noise_error_and_off_keeps_the_pairs():
    rng = np.random.default_rng(7)
    for _ in range(20):
        names = [f"v{i:02d}" for i in range(10)]
        sizes = {n: int(rng.choice([2, 3, 4, 8, 20])) for n in names}
        pairs = [p for p in combinations(names, 2) if rng.random() < 0.6]
        scores = indif(names)
        assert combine_marginals(pairs, sizes, scores, rule="off") == tuple(pairs)
        out = combine_marginals(pairs, sizes, scores, rule="no_added_noise")
        assert noise_cost(out, sizes) <= noise_cost(pairs, sizes) + 1e-9
        covered = {frozenset(p) for m in out for p in combinations(m, 2)}
        assert covered >= {frozenset(p) for p in pairs}  # every selected pair still measured


def test_an_unknown_rule_is_refused_by_the_config():
    with pytest.raises(InputError, match="combine"):
        PrivSynConfig(combine="cliques")
