"""Judging a synthetic table on the pairs no marginal measured, by the noisy InDif scores."""

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from privsyn_core import GumSettings, PrivSynConfig, synthesize
from privsyn_core.generation.dependence import (
    MAX_JUDGED_PAIRS,
    NoisyDependence,
    unmeasured_pairs,
)
from privsyn_core.marginals import indif_of_joint


def test_scores_travel_as_their_upper_triangle():
    scores = np.array([[0.0, 5.0, 7.0], [5.0, 0.0, 9.0], [7.0, 9.0, 0.0]])
    dependence = NoisyDependence(("a", "b", "c"), scores, 2.5)
    assert dependence.upper() == [5.0, 7.0, 9.0]
    again = NoisyDependence.from_upper(("a", "b", "c"), dependence.upper(), 2.5)
    np.testing.assert_array_equal(again.scores, scores)
    with pytest.raises(ValueError, match="2 InDif scores for 3"):
        NoisyDependence.from_upper(("a", "b", "c"), [1.0, 2.0], 2.5)
    with pytest.raises(ValueError, match="finite"):
        NoisyDependence.from_upper(("a", "b"), [float("nan")], 2.5)
    with pytest.raises(ValueError, match="noise scale"):
        NoisyDependence(("a", "b", "c"), scores, 0.0)


def test_only_pairs_no_marginal_covers_are_judged_and_at_most_a_fixed_number():
    names = [f"c{i}" for i in range(6)]
    sizes = {n: 3 for n in names} | {"c5": 1}  # a one-value attribute has no dependence
    dependence = NoisyDependence(tuple(names), np.full((6, 6), 40.0), 4.0)
    pairs = unmeasured_pairs(names, sizes, [("c0", "c1"), ("c1", "c2", "c3")], dependence, 200.0)
    assert pairs is not None
    judged = {(names[i], names[j]) for i, j in pairs.rows}
    covered = {("c0", "c1"), ("c1", "c2"), ("c1", "c3"), ("c2", "c3")}
    assert judged == {(a, b) for a in names[:5] for b in names[:5] if a < b} - covered
    assert pairs.count == len(judged) == 6
    np.testing.assert_allclose(pairs.indif, 0.2)  # in shares of the noisy row count
    assert pairs.noise == pytest.approx(0.02)

    wide = [f"w{i:03d}" for i in range(40)]
    everything = NoisyDependence(tuple(wide), np.zeros((40, 40)), 1.0)
    capped = unmeasured_pairs(wide, {n: 2 for n in wide}, [], everything, 10.0)
    assert capped.count == 780 and len(capped.rows) == MAX_JUDGED_PAIRS
    assert capped.rows[0] == (0, 1) and capped.rows[-1] == (38, 39)  # spread over all pairs


def _joint(rng, n, dependent):
    a = rng.integers(0, 4, n)
    b = np.where(rng.random(n) < dependent, a, rng.integers(0, 4, n))
    return np.bincount(a * 4 + b, minlength=16)


@pytest.mark.slow
def test_the_gap_is_unbiased_under_the_release_noise():
    """A table whose pairs have the real InDif scores nothing against noisy scores (within
    noise of 0 on average); one whose pairs are more dependent scores their true gap."""
    rng = np.random.default_rng(0)
    names = [f"c{i}" for i in range(12)]
    sizes = {n: 4 for n in names}
    n, sigma = 5000, 400.0
    real = [_joint(rng, n, 0.3) for _ in range(66)]
    truth = np.array([indif_of_joint(j.reshape(4, 4)) for j in real])
    same, stronger = [], []
    for _ in range(200):
        scores = np.zeros((12, 12))
        scores[np.triu_indices(12, 1)] = truth + rng.normal(0, sigma, 66)
        dependence = NoisyDependence(tuple(names), scores + scores.T, sigma)
        pairs = unmeasured_pairs(names, sizes, [], dependence, float(n))
        same.append(pairs.gap(real) ** 2)
        stronger.append(pairs.gap([_joint(rng, n, 0.6) for _ in range(66)]))
    # (sigma / n)^2 = 0.0064: without the correction the mean squared gap would be that
    assert np.mean(same) < 0.0008
    extra = np.mean(
        [indif_of_joint(_joint(rng, n, 0.6).reshape(4, 4)) / n for _ in range(200)]
    ) - np.mean(truth / n)
    assert np.mean(stronger) == pytest.approx(extra, rel=0.1)


def grouped_table(n: int, rng: np.random.Generator) -> tuple[pd.DataFrame, dict[str, int]]:
    """Three groups of four columns, each group copying its own hidden factor: pairs across
    groups are independent."""
    data, domain = {}, {}
    hidden = rng.integers(0, 12, size=(3, n))
    for c in range(12):
        size = int(rng.integers(4, 12))
        copy = hidden[c % 3] % size
        data[f"c{c:02d}"] = np.where(rng.random(n) < 0.8, copy, rng.integers(0, size, n))
        domain[f"c{c:02d}"] = size
    return pd.DataFrame(data), domain


@pytest.mark.slow
def test_judging_unmeasured_pairs_keeps_a_table_whose_independent_pairs_stay_independent():
    """GUM's whole-row duplications make pairs across the groups dependent; judged on the
    noisy InDif of those pairs too, the kept table leaves them close to independent (3
    seeds). Whole-row copies (``copy="row"``, the paper's) are where the judge matters most;
    blanket copies, the default, drift far less."""
    table, domain = grouped_table(20_000, np.random.default_rng(1))
    cross = [(a, b) for a in table for b in table if a < b and int(a[1:]) % 3 != int(b[1:]) % 3]

    def cross_l1(synthetic: pd.DataFrame) -> float:
        errors = []
        for a, b in cross:
            real = pd.crosstab(table[a], table[b]).reindex(
                index=range(domain[a]), columns=range(domain[b]), fill_value=0
            )
            fake = pd.crosstab(synthetic[a], synthetic[b]).reindex(
                index=range(domain[a]), columns=range(domain[b]), fill_value=0
            )
            errors.append(np.abs(real / len(table) - fake / len(synthetic)).to_numpy().sum())
        return float(np.mean(errors))

    judged, measured_only = [], []
    for seed in range(3):
        model = synthesize(table, 4.0, 1e-9, domain=domain, rng=np.random.default_rng(seed)).model
        assert model.dependence is not None
        rows = GumSettings(copy="row")
        judged.append(cross_l1(model.sample(len(table), seed=seed, gum=rows)))
        alone = model.sample(len(table), seed=seed, gum=replace(rows, judge_unmeasured=False))
        measured_only.append(cross_l1(alone))
    # the same draws up to the table kept: on these seeds 0.061 against 0.066
    assert all(j < m for j, m in zip(judged, measured_only, strict=True))
    assert np.mean(judged) < 0.96 * np.mean(measured_only)


@pytest.mark.slow
def test_a_run_without_indif_scores_judges_the_measured_marginals_alone():
    table, domain = grouped_table(3000, np.random.default_rng(2))
    result = synthesize(
        table,
        1.0,
        1e-9,
        domain=domain,
        rng=np.random.default_rng(0),
        config=PrivSynConfig(selection="all_pairs", gum=GumSettings(iterations=3)),
    )
    assert result.model.dependence is None
