import math
from itertools import combinations

import numpy as np
import pandas as pd
import pytest

from privsyn_core.selection.greedy import noise_error, select_marginals
from privsyn_core.selection.methods import selection_account
from privsyn_core.width_policy import WIDTH_POLICY

WIDE_TABLE_ATTRIBUTES = WIDTH_POLICY.tree_first_from


def frame(matrix, names):
    return pd.DataFrame(matrix, index=names, columns=names)


def total_error(chosen, phi, power, rho):
    return noise_error(sum(power[i] for i in chosen), rho) + sum(
        phi[i] for i in range(len(phi)) if i not in chosen
    )


def test_greedy_takes_the_best_pair_each_round_and_stops_when_error_stops_falling():
    rng = np.random.default_rng(4)
    names = [f"c{i}" for i in range(7)]
    sizes = {n: int(rng.integers(2, 20)) for n in names}
    scores = rng.exponential(2000, size=(7, 7))
    scores = np.triu(scores, 1) + np.triu(scores, 1).T
    rho = 0.01
    selection = select_marginals(frame(scores, names), sizes, rho, connect_isolated=False)
    pairs = list(combinations(range(7), 2))
    phi = [scores[i, j] for i, j in pairs]
    power = [(sizes[names[i]] * sizes[names[j]]) ** (2 / 3) for i, j in pairs]
    index = {(names[i], names[j]): k for k, (i, j) in enumerate(pairs)}
    chosen: list[int] = []
    current = sum(phi)
    assert selection.initial_error == pytest.approx(current)
    for step in selection.steps:
        k = index[step.pair]
        options = {
            c: total_error([*chosen, c], phi, power, rho)
            for c in range(len(pairs))
            if c not in chosen
        }
        assert options[k] == pytest.approx(min(options.values()))
        assert options[k] < current
        assert step.total_error == pytest.approx(options[k])
        chosen.append(k)
        current = options[k]
    # stopping rule: no remaining candidate improves the total error
    rest = [
        total_error([*chosen, c], phi, power, rho) for c in range(len(pairs)) if c not in chosen
    ]
    assert min(rest) >= current
    assert 0 < len(selection.steps) < len(pairs)


def test_noise_error_is_the_optimal_allocation_cost():
    cells = np.array([10.0, 200.0, 37.0])
    rho = 0.3
    shares = cells ** (2 / 3) / np.sum(cells ** (2 / 3))
    direct = np.sum(cells * np.sqrt(1 / (math.pi * rho * shares)))
    assert noise_error(float(np.sum(cells ** (2 / 3))), rho) == pytest.approx(direct)


def test_independent_attributes_select_nothing_and_strong_ones_everything():
    names = ["a", "b", "c"]
    sizes = dict.fromkeys(names, 4)
    none = select_marginals(frame(np.zeros((3, 3)), names), sizes, 1.0, connect_isolated=False)
    assert none.pairs == ()
    strong = np.full((3, 3), 1e9)
    np.fill_diagonal(strong, 0)
    every = select_marginals(frame(strong, names), sizes, 1.0, connect_isolated=False)
    assert len(every.pairs) == 3


def test_isolated_attribute_is_linked_through_its_highest_noisy_indif():
    names = ["a", "b", "c", "d"]
    scores = np.zeros((4, 4))
    scores[0, 1] = scores[1, 0] = 1e9
    scores[2, 1] = scores[1, 2] = 5.0
    scores[2, 3] = scores[3, 2] = 7.0
    scores[3, 0] = scores[0, 3] = -2.0
    sizes = {"a": 3, "b": 3, "c": 3, "d": 1}
    selection = select_marginals(frame(scores, names), sizes, 0.1, connect_isolated=True)
    assert selection.steps[0].pair == ("a", "b")
    # c's best partner is d, but d has one value: linking to it carries nothing
    assert selection.isolated_links == (("b", "c"),)


def test_all_pairs_lists_every_two_way_marginal_in_table_order():
    from privsyn_core.selection.fixed import all_pairs

    assert all_pairs(["a", "b", "c"]) == (("a", "b"), ("a", "c"), ("b", "c"))


def test_given_marginals_are_put_in_table_order_and_checked():
    from privsyn_core.errors import InputError
    from privsyn_core.selection.fixed import given_marginals

    columns = ["age", "sex", "income"]
    assert given_marginals([("income", "age"), ("sex",)], columns) == (
        ("age", "income"),
        ("sex",),
    )
    with pytest.raises(InputError, match=r"'agee', not a column.*columns: age, sex, income"):
        given_marginals([("agee", "sex")], columns)
    with pytest.raises(InputError, match="twice"):
        given_marginals([("age", "age")], columns)
    with pytest.raises(InputError, match="listed twice"):
        given_marginals([("age", "sex"), ("sex", "age")], columns)
    with pytest.raises(InputError, match="at least one column"):
        given_marginals([()], columns)
    with pytest.raises(InputError, match="at least one marginal"):
        given_marginals([], columns)


def test_a_margin_over_the_indif_noise_leaves_out_pairs_that_only_noise_made_dependent():
    """The winner's curse: when half the scores are negative (noise around no dependency),
    scores within a noise sigma of zero are taken by the paper's rule when their marginals
    are cheap, not with a margin of one sigma; a real dependency is taken either way."""
    names = ["a", "b", "c", "d", "e"]
    sizes = dict.fromkeys(names, 2)
    sigma = 300.0
    upper = np.r_[10.0, 0.8, 0.8, 0.8, 0.8, -0.5, -0.5, -0.5, -0.5, -0.5] * sigma
    scores = np.zeros((5, 5))
    scores[np.triu_indices(5, 1)] = upper
    scores += scores.T
    plain = select_marginals(frame(scores, names), sizes, 1.0, connect_isolated=False)
    assert len(plain.steps) == 5
    kept = select_marginals(
        frame(scores, names), sizes, 1.0, connect_isolated=False, indif_sigma=sigma, margin=1.0
    )
    assert [s.pair for s in kept.steps] == [("a", "b")]
    assert kept.initial_error == pytest.approx(9 * sigma)  # the dependency beyond the margin
    # where no score is negative, nothing looks like noise and the margin fades away
    dependent = np.abs(scores)
    fade = select_marginals(
        frame(dependent, names), sizes, 1.0, connect_isolated=False, indif_sigma=sigma, margin=1.0
    )
    assert len(fade.steps) == 10


def test_the_null_share_is_estimated_from_the_negative_scores():
    from privsyn_core.selection.greedy import null_share

    rng = np.random.default_rng(3)
    null = rng.normal(0, 1, 900)
    dependent = rng.normal(8, 1, 100)
    assert null_share(np.r_[null, dependent]) == pytest.approx(0.9, abs=0.06)
    assert null_share(dependent) == 0.0
    assert null_share(np.array([])) == 0.0
    assert null_share(-np.ones(5)) == 1.0


def test_with_the_default_margin_a_noisy_wide_table_selects_few_independent_pairs():
    """Twelve independent columns and one dependent pair at epsilon 0.5 on 6,000 rows, 6
    seeds: the paper's rule takes 6 to 10 independent pairs on their noise alone (and the
    table's sampling noise), the default margin 0 to 2, and both always take the dependent
    pair."""
    from privsyn_core import PrivSynConfig
    from privsyn_core.generation.gum_settings import GumSettings
    from privsyn_core.pipeline import measure

    rng = np.random.default_rng(0)
    n = 6000
    table = pd.DataFrame({f"x{i:02d}": rng.integers(0, 6, n) for i in range(12)})
    table["y"] = np.where(rng.random(n) < 0.8, table["x00"], rng.integers(0, 6, n))
    domain = dict.fromkeys(table.columns, 6)

    def null_pairs(margin: float, seed: int) -> int:
        config = PrivSynConfig(indif_margin=margin, gum=GumSettings(iterations=0))
        measured = measure(
            table, 0.5, 1e-9, domain=domain, config=config, rng=np.random.default_rng(seed)
        )
        pairs = {frozenset(s.pair) for s in measured.selection.steps}
        assert frozenset(("x00", "y")) in pairs
        return len(pairs) - 1

    plain = [null_pairs(0.0, seed) for seed in range(6)]
    default = [null_pairs(PrivSynConfig().indif_margin, seed) for seed in range(6)]
    assert np.mean(plain) >= 6
    assert np.mean(default) <= np.mean(plain) / 4


def test_measurable_pairs_is_the_most_marginals_whose_expected_noise_stays_within_the_share():
    from privsyn_core.selection.greedy import measurable_pairs

    cells, rho, rows = [100] * 50, 0.02, 20_000

    def expected_l1(k: int) -> float:  # k equal marginals of 100 cells, as a share of rows
        sigma = math.sqrt(k / (2 * rho))
        return math.sqrt(2 / math.pi) * sigma * 100 / rows

    k = measurable_pairs(cells, rho, rows)
    assert 0 < k < 50
    assert expected_l1(k) <= 0.1 < expected_l1(k + 1)
    assert measurable_pairs(cells, 100.0, rows) == 50  # never more than the candidates
    assert measurable_pairs([], rho, rows) == 0


def _noisy(attributes, shape, values, sigma):
    from privsyn_core.marginals import MarginalTable, NoisyMarginal

    table = MarginalTable(attributes, shape, np.asarray(values, dtype=float).ravel())
    return NoisyMarginal(table, 1 / (2 * sigma**2), sigma)


def test_two_measurements_of_a_marginal_pool_by_inverse_variance_and_add_their_costs():
    from privsyn_core.selection.tree_first import pooled

    first = _noisy(("a", "b"), (1, 2), [10.0, 30.0], 1.0)
    again = _noisy(("a", "b"), (1, 2), [20.0, 0.0], 2.0)
    both = pooled(first, again)
    assert both.table.values == pytest.approx([(10 + 20 / 4) / 1.25, (30 + 0 / 4) / 1.25])
    assert both.sigma == pytest.approx(1.25**-0.5)
    assert both.rho == pytest.approx(first.rho + again.rho)
    assert both.rho == pytest.approx(1 / (2 * both.sigma**2))  # as if measured once


def test_the_expected_indif_of_a_sample_counts_its_own_deviations():
    from privsyn_core.marginals import indif_of_joint
    from privsyn_core.selection.tree_first import sampled_indif

    rng = np.random.default_rng(0)
    for joint in (np.full((6, 5), 1 / 30), np.array([[0.4, 0.1], [0.1, 0.4]])):
        rows = 2000
        draws = [
            indif_of_joint(rng.multinomial(rows, joint.ravel()).reshape(joint.shape).astype(float))
            for _ in range(400)
        ]
        assert sampled_indif(joint, rows) == pytest.approx(np.mean(draws), rel=0.05)
    assert sampled_indif(np.full((6, 5), 1 / 30), 2000) > 100  # not the zero of independence


def test_the_tree_implies_a_pairs_joint_along_its_path():
    from privsyn_core.selection.tree_first import implied_indif, sampled_indif

    ab = np.array([[0.3, 0.1], [0.1, 0.5]])
    bc = np.array([[0.35, 0.05], [0.2, 0.4]])
    bc = bc / bc.sum() * 1.0
    ac = ab @ (bc / bc.sum(axis=1, keepdims=True))
    rows = 1000.0
    tree = [_noisy(("a", "b"), (2, 2), ab * rows, 1.0), _noisy(("b", "c"), (2, 2), bc * rows, 1.0)]
    got = implied_indif(tree, ["a", "b", "c", "d"], {"a": 2, "b": 2, "c": 2, "d": 3})
    assert got[0, 2] == got[2, 0] == pytest.approx(sampled_indif(ac, rows))
    assert got[0, 1] == pytest.approx(sampled_indif(ab, rows))
    independent = np.outer(ab.sum(axis=1), np.full(3, 1 / 3))  # d: outside the tree, uniform
    assert got[0, 3] == pytest.approx(sampled_indif(independent, rows))


def _chain_and_factor(rows, rng):
    """a -> b -> c -> d copies (a chain), and x, y, z siblings of a hidden factor."""
    a = rng.integers(0, 6, rows)
    chain = [a]
    for _ in range(3):
        chain.append(np.where(rng.random(rows) < 0.7, chain[-1], rng.integers(0, 6, rows)))
    hidden = rng.integers(0, 6, rows)
    siblings = [np.where(rng.random(rows) < 0.7, hidden, rng.integers(0, 6, rows)) for _ in "xyz"]
    return pd.DataFrame(dict(zip("abcdxyz", [*chain, *siblings], strict=True)))


def test_tree_first_measures_the_chain_once_and_the_siblings_the_tree_cannot_explain():
    from privsyn_core import PrivSynConfig, synthesize

    rng = np.random.default_rng(3)
    table = _chain_and_factor(50_000, rng)
    config = PrivSynConfig(selection="treefirst")
    run = synthesize(table, 4.0, 1e-9, domain=dict.fromkeys(table, 6), config=config, rng=rng)
    pairs = {frozenset(m.attributes): m for m in run.marginals if len(m.attributes) == 2}
    links = [frozenset(p) for p in ("ab", "bc", "cd")]
    assert all(pairs[p].origin == "tree" for p in links)
    # two hops on the chain: explained by the tree, not measured
    assert not {frozenset("ac"), frozenset("bd"), frozenset("ad")} & pairs.keys()
    # siblings of one factor: a tree holds two of their three pairs, the third is added
    siblings = {frozenset(p) for p in ("xy", "xz", "yz")}
    assert siblings <= pairs.keys()
    assert sorted(pairs[p].origin for p in siblings) == ["selected", "tree", "tree"]
    # every rho of the marginal step is in a measured marginal: the tree's two rounds pooled
    spent = math.fsum(e.rho for e in run.ledger.entries if e.step == "marginal")
    assert math.fsum(m.rho for m in run.marginals) == pytest.approx(spent)
    twice = [m for m in run.marginals if m.origin == "tree"]
    charged = [e for e in run.ledger.entries if e.step == "marginal"]
    assert len(charged) > len(run.marginals)  # some tree marginals measured in both rounds
    assert all(m.sigma**-2 == pytest.approx(2 * m.rho) for m in twice)


def _wide_chain(columns, rows, rng):
    """``columns`` attributes of 3 values, each a noisy copy of the one before (a chain)."""
    codes = [rng.integers(0, 3, rows)]
    for _ in range(columns - 1):
        codes.append(np.where(rng.random(rows) < 0.8, codes[-1], rng.integers(0, 3, rows)))
    return pd.DataFrame({f"c{i:02d}": c for i, c in enumerate(codes)})


@pytest.mark.parametrize(
    ("columns", "same_as"),
    [
        (WIDE_TABLE_ATTRIBUTES, {"selection": "treefirst"}),
        (WIDE_TABLE_ATTRIBUTES - 1, {"selection": "densemarg"}),
    ],
    ids=["wide: tree first", "narrow: DenseMarg"],
)
@pytest.mark.slow
def test_auto_selection_is_the_named_method_its_width_stands_for(columns, same_as):
    """Selection "auto" is, run for run (same seed, same table, same spend), selection
    "treefirst" with its default settings on a table of ``tree_first_from`` attributes, and
    "densemarg" on one attribute fewer: they agree by construction, with no setting forced."""
    from privsyn_core import PrivSynConfig, synthesize
    from privsyn_core.generation.gum_settings import GumSettings

    table = _wide_chain(columns, 2000, np.random.default_rng(0))
    domain = dict.fromkeys(table, 3)
    gum = GumSettings(iterations=2)
    runs = [
        synthesize(table, 2.0, 1e-6, domain=domain, config=config, rng=np.random.default_rng(1))
        for config in (PrivSynConfig(gum=gum), PrivSynConfig(gum=gum, **same_as))
    ]
    auto, explicit = runs
    assert PrivSynConfig().selection == "auto"
    pd.testing.assert_frame_equal(auto.synthetic, explicit.synthetic)
    assert auto.marginals == explicit.marginals
    assert auto.ledger.entries == explicit.ledger.entries
    tree = any(m.origin == "tree" for m in auto.marginals)
    assert tree == (same_as["selection"] == "treefirst")


def test_the_line_on_which_selection_ran_says_why():
    assert WIDTH_POLICY.selection(WIDE_TABLE_ATTRIBUTES) == "treefirst"
    assert WIDTH_POLICY.selection(WIDE_TABLE_ATTRIBUTES - 1) == "densemarg"
    assert selection_account("auto", 55) == (
        "wide table (55 attributes >= 30): a tree first, then the pairs it does not explain"
    )
    assert (
        selection_account("auto", 14)
        == "narrow table (14 attributes < 30): DenseMarg (Algorithm 1)"
    )
    assert selection_account("densemarg", 55) == "DenseMarg (Algorithm 1)"
    assert selection_account("treefirst", 5).startswith("a tree first")


def test_auto_and_treefirst_build_the_same_tree_first():
    from privsyn_core import PrivSynConfig

    auto = PrivSynConfig().selection_method()
    named = PrivSynConfig(selection="treefirst").selection_method()
    assert auto.resolve(WIDE_TABLE_ATTRIBUTES) == named
    assert named.margin == WIDTH_POLICY.tree_first_margin
    wider = PrivSynConfig(selection="treefirst", tree_first_margin=2.0)
    assert wider.selection_method().margin == 2
