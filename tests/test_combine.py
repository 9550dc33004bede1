import numpy as np
import pandas as pd

from privsyn_core.selection.combine import combine_marginals


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
