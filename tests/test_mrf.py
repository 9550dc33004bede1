"""The Markov random field fitted to the targets (privsyn_core.generation.mrf)."""

import numpy as np
import pandas as pd
import pytest

from privsyn_core.generation.gum_settings import GumSettings
from privsyn_core.generation.initial import Link
from privsyn_core.generation.mrf import (
    MrfSettings,
    _draw,
    _draw_compiled,
    _fit,
    _gibbs_sweep,
    _kernel,
    _start,
    _Step,
    _stratified,
    _stratified_compiled,
    run_mrf,
)
from privsyn_core.generation.records import record_major
from privsyn_core.generation.target_scores import GumTarget, l1_error
from privsyn_core.progress import GumProgress

KERNELS = ["reference", "compiled"]


def _step(kernel: str) -> _Step:
    return _Step(_kernel(kernel))


def _triangle(rng, n, k=4):
    """Records drawn along the tree a - b - c of a joint with a loop, and the joint's three
    pair marginals as targets (``noise_l1`` unknown: every gap is fitted)."""
    joint = rng.dirichlet(np.ones(k**3) * 0.3).reshape(k, k, k)
    summed_out = {"ab": 2, "bc": 0, "ac": 1}
    targets = [
        GumTarget(tuple(p), tuple("abc".index(x) for x in p), (k, k), joint.sum(axis=a).ravel())
        for p, a in summed_out.items()
    ]
    records = record_major(3, n, np.dtype(np.uint8))
    ab, bc = joint.sum(axis=2), joint.sum(axis=0)
    records[0] = rng.choice(k, n, p=ab.sum(axis=1))
    records[1] = [rng.choice(k, p=ab[a] / ab[a].sum()) for a in records[0]]
    records[2] = [rng.choice(k, p=bc[b] / bc[b].sum()) for b in records[1]]
    tree = {
        "a": {"b": Link("a", "b", 1.0, ab)},
        "b": {"a": Link("a", "b", 1.0, ab), "c": Link("b", "c", 1.0, bc)},
        "c": {"b": Link("b", "c", 1.0, bc)},
    }
    return records, targets, tree, {"a": 0, "b": 1, "c": 2}


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.slow
def test_the_start_is_the_trees_distribution(kernel):
    """Gibbs steps on the starting field, with no fitting, leave a sample of the tree a sample
    of the tree: its potentials are the tree's. Without them (independent columns' field) the
    same steps lose the measured pairs."""
    rng = np.random.default_rng(1)
    records, targets, tree, rows = _triangle(rng, 20_000)
    field = _start(records, targets, tree, rows)
    for _ in range(5):
        _gibbs_sweep(field, rng, _step(kernel))
    records[:3] = field.codes
    assert l1_error(records, targets[0]) < 0.05 and l1_error(records, targets[1]) < 0.05
    loose = _start(records, targets, {name: {} for name in rows}, rows)
    for _ in range(5):
        _gibbs_sweep(loose, rng, _step(kernel))
    records[:3] = loose.codes
    assert l1_error(records, targets[0]) > 0.2


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.slow
def test_a_loop_the_tree_cannot_hold_is_fitted(kernel):
    """The pair a - c closes a loop: the tree start misses it, the fitted field matches all
    three pairs to within the sample's own deviations."""
    rng = np.random.default_rng(6)
    records, targets, tree, rows = _triangle(rng, 20_000)
    before = [l1_error(records, t) for t in targets]
    calls = []
    settings = MrfSettings(sweeps=30, kernel=kernel)
    history, finished = run_mrf([(records, targets)], [tree], [rows], rng, settings, calls.append)
    after = [l1_error(records, t) for t in targets]
    assert finished and len(history) == 30 == len(calls)
    assert set(history[0].errors) == {t.attributes for t in targets}
    assert before[2] > 0.2 and after[2] < before[2] / 4
    assert max(after) < 0.06
    assert history[-1].table_error is not None
    stopped, finished = run_mrf(
        [(records, targets)], [tree], [rows], rng, MrfSettings(), lambda r: False
    )
    assert not finished and len(stopped) == 1


@pytest.mark.slow
def test_gaps_within_the_noise_are_not_fitted():
    """A target whose gap to the records lies within its noise sigmas leaves its potential
    where it was; with no noise the same gap moves it."""
    rng = np.random.default_rng(2)
    records, targets, tree, rows = _triangle(rng, 5_000)
    noisy = [
        GumTarget(t.attributes, t.rows, t.shape, t.frequencies, noise_l1=50.0) for t in targets
    ]
    field = _start(records, noisy, tree, rows)
    before = [p.copy() for p in field.potentials]
    _fit(field, MrfSettings())
    assert all(np.array_equal(a, b) for a, b in zip(before, field.potentials, strict=True))
    exact = _start(records, targets, tree, rows)
    _fit(exact, MrfSettings())
    assert np.abs(exact.potentials[2]).max() > 0.01


def _five_copies_run():
    """An engine run on five 4-valued columns that each copy one hidden column 70% of the
    time (epsilon 4)."""
    from privsyn_core import synthesize

    rng = np.random.default_rng(0)
    hidden = rng.integers(0, 4, 3000)
    table = pd.DataFrame(
        {c: np.where(rng.random(3000) < 0.7, hidden, rng.integers(0, 4, 3000)) for c in "abcde"}
    )
    return synthesize(table, 4.0, 1e-6, domain=dict.fromkeys(table, 4), rng=rng)


@pytest.mark.slow
def test_synthesis_mrf_samples_a_fitted_model_reproducibly():
    """The engine path: same model, same seed, same rows; codes inside the domain; one
    history record per sweep."""
    from privsyn_core.generation.fitted_data import SamplingSettings

    run = _five_copies_run()
    settings = SamplingSettings(synthesis="mrf")
    first = run.model.generate(2000, seed=3, settings=settings)
    again = run.model.generate(2000, seed=3, settings=settings)
    pd.testing.assert_frame_equal(first.table, again.table)
    assert first.table.shape == (2000, 5)
    assert first.table.isin(range(4)).all().all()
    assert len(first.history) == MrfSettings().sweeps
    seen = []
    run.model.generate(500, seed=1, settings=settings, on_progress=seen.append)
    sweeps = [e for e in seen if isinstance(e, GumProgress)]
    assert len(sweeps) == MrfSettings().sweeps
    assert all(e.iterations == MrfSettings().sweeps for e in sweeps)


def test_an_unknown_synthesis_is_refused_with_the_choices():
    from privsyn_core.errors import InputError
    from privsyn_core.generation.fitted_data import SamplingSettings

    with pytest.raises(InputError, match="gum, mcf, mrf"):
        SamplingSettings(synthesis="ipf")


def _uniforms(kernel, groups, n, rng):
    if kernel == "reference":
        return _stratified(groups, n, rng)
    return _stratified_compiled(groups, n, rng, _kernel("compiled"))


@pytest.mark.parametrize("kernel", KERNELS)
def test_draws_are_stratified_within_each_anchor_group(kernel):
    """Each group's uniforms fall one in each of its equal strata, so a group's records that
    share a conditional meet it to within a record per value; which record gets which
    stratum is random (no trend along the records, every stratum reached evenly)."""

    rng = np.random.default_rng(4)
    groups = rng.integers(0, 5, 1000).astype(np.uint8)
    uniforms = _uniforms(kernel, groups, 1000, rng)
    for g in range(5):
        mine = np.sort(uniforms[groups == g])
        strata = np.floor(mine * mine.size).astype(int)
        assert np.array_equal(strata, np.arange(mine.size))
    # records in order carry no order of strata: the rank correlation of 1,000 random
    # uniforms with their positions has sigma 0.032, a sorted assignment would give 1
    assert abs(np.corrcoef(np.argsort(np.argsort(uniforms)), np.arange(1000))[0, 1]) < 0.13
    # the jitter within a stratum is uniform: its mean over 1,000 records is 0.5 +- 0.009
    assert abs((uniforms * np.bincount(groups)[groups]) % 1).mean() - 0.5 < 0.04
    alone = _uniforms(kernel, None, 1000, rng)
    assert np.array_equal(np.sort(np.floor(alone * 1000).astype(int)), np.arange(1000))
    # one conditional for all: the counts are its quotas to within one record
    draws = np.searchsorted(np.cumsum([0.5, 0.3, 0.2]), alone, side="right")
    assert np.abs(np.bincount(draws, minlength=3) - [500, 300, 200]).max() <= 1


@pytest.mark.slow
def test_the_compiled_step_draws_what_the_reference_draws():
    """Given the same uniforms the compiled kernel draws the reference's values, also where a
    record's product of factors underflows and across a split of the records over threads.
    ab's potential favours b = 0 by 1,000 and bc's favours b = 1 by as much: each table's
    factors then give the other value exp(-1000) = 0, every product is 0, and the draws of b
    come from the summed-logs path, where 0 and 1 tie."""
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(3)
    records, targets, tree, rows = _triangle(rng, 50_000, k=6)
    reference = _start(records, targets, tree, rows)
    noise = np.random.default_rng(9)
    reference.potentials = [p + noise.normal(size=p.shape) * 3 for p in reference.potentials]
    reference.potentials[0][:, 0] += 1000.0
    reference.potentials[1][1, :] += 1000.0
    compiled = _start(records, targets, tree, rows)
    compiled.potentials = [p.copy() for p in reference.potentials]
    with ThreadPoolExecutor(2) as pool:
        step = _Step(_kernel("compiled"), pool, 3)
        for row in (1, 0, 2, 1):
            uniforms = rng.random(50_000)
            _draw(reference, row, uniforms)
            _draw_compiled(compiled, row, uniforms, step)
            assert np.array_equal(reference.codes, compiled.codes)
    drawn = np.bincount(reference.codes[1], minlength=6)
    assert drawn[2:].sum() == 0 and min(drawn[:2]) > 5_000


def test_closer_takes_per_component_the_table_nearer_the_measurements():
    """GUM's table and the MRF's are weighed component by component; the nearer one is kept
    in place and counted."""
    from privsyn_core.generation.guard import closer

    rng = np.random.default_rng(5)
    records, targets, _, _ = _triangle(rng, 4_000)
    shuffled = records.copy()
    for row in range(3):  # the same 1-way marginals, no pair left
        shuffled[row] = rng.permutation(shuffled[row])
    good, bad = (records.copy(), targets), (shuffled.copy(), targets)
    assert closer([bad], [good], [None]) == [True] and np.array_equal(bad[0], records)
    kept, other = (records.copy(), targets), (shuffled.copy(), targets)
    assert closer([kept, other], [(shuffled, targets), (records, targets)], [None, None]) == [
        False,
        True,
    ]
    assert np.array_equal(kept[0], records) and np.array_equal(other[0], records)


@pytest.mark.slow
def test_gum_plus_mrf_runs_both_and_says_which_table_it_kept():
    """synthesis "gum+mrf": GUM's iterations, then the MRF's sweeps from the same start; the
    stage says how many components took the MRF's table, and where none did the sample is
    GUM's own table."""
    from privsyn_core.generation.fitted_data import SamplingSettings
    from privsyn_core.progress import Stage, StageFinished

    run = _five_copies_run()
    both = SamplingSettings(synthesis="gum+mrf")
    events: list = []
    first = run.model.generate(2000, seed=3, settings=both, on_progress=events.append)
    again = run.model.generate(2000, seed=3, settings=both)
    pd.testing.assert_frame_equal(first.table, again.table)
    gum = run.model.generate(2000, seed=3)
    gum_iterations = len(gum.history)
    assert len(first.history) == gum_iterations + MrfSettings().sweeps
    sweeps = [e for e in events if isinstance(e, GumProgress)]
    assert [e.iteration for e in sweeps] == list(range(len(first.history)))
    assert [h.iteration for h in first.history] == list(range(len(first.history)))
    methods = [h.method for h in first.history]
    assert methods == ["gum"] * gum_iterations + ["mrf"] * MrfSettings().sweeps
    assert [e.method for e in sweeps] == methods
    planned = {e.iterations for e in sweeps}
    assert planned == {GumSettings().iterations + MrfSettings().sweeps}
    (done,) = [e for e in events if isinstance(e, StageFinished) and e.stage == Stage.GUM]
    assert f"{gum_iterations} GUM iterations and {MrfSettings().sweeps} MRF sweeps" in done.summary
    took = int(done.summary.split("kept the MRF's table in ")[1].split(" of ")[0])
    assert (took == 0) == first.table.equals(gum.table)


def test_a_candidate_table_meets_every_one_way_quota_changing_only_the_surplus():
    """Gibbs draws miss the 1-way counts by sampling noise; the candidate table the judge sees
    has them exact (largest-remainder quotas of the target), changing no more records than
    the surplus, and the moved records follow their conditional among the short values."""
    from privsyn_core.generation.mrf import _with_quotas
    from privsyn_core.generation.sampling import quota_counts

    rng = np.random.default_rng(8)
    records, targets, tree, rows = _triangle(rng, 10_000)
    field = _start(records, targets, tree, rows)
    field.codes[0, :1500] = 0  # value 0 of a over-filled, the others short
    chains = field.codes.copy()
    codes = _with_quotas(field, rng)
    assert np.array_equal(field.codes, chains)  # the chains go on unchanged
    for row, k, axis in ((0, 0, 0), (1, 0, 1), (2, 1, 1)):
        quota = quota_counts(targets[k].frequencies.reshape(4, 4).sum(axis=1 - axis), 10_000)
        counts = np.bincount(chains[row], minlength=4)
        assert np.array_equal(np.bincount(codes[row], minlength=4), quota)
        assert (codes[row] != chains[row]).sum() == np.maximum(counts - quota, 0).sum()
    # a moved record's new value of a is drawn given its b; the same values dealt to the
    # moved records at random put the pair a-b farther from its target
    records[:3] = codes
    conditioned = l1_error(records, targets[0])
    dealt = codes.copy()
    moved = np.flatnonzero(codes[0] != chains[0])
    dealt[0, moved] = rng.permutation(codes[0, moved])
    records[:3] = dealt
    assert conditioned < 0.08 and l1_error(records, targets[0]) > conditioned + 0.01


@pytest.mark.slow
def test_gum_plus_mrf_fits_no_mrf_where_gums_table_is_within_its_noise_floor():
    """A table within the noise floor has nothing left the MRF would fit (it leaves the gaps
    within a noise sigma): GUM's table is the sample and no sweep is run. A floor of 100
    times the noise is reached at once; with the floor off the MRF runs."""
    from privsyn_core.generation.fitted_data import SamplingSettings
    from privsyn_core.progress import Stage, StageFinished

    run = _five_copies_run()
    for floor, sweeps in ((100.0, 0), (None, MrfSettings().sweeps)):
        gum = GumSettings(noise_floor=floor)
        events: list = []
        both = run.model.generate(
            1000,
            seed=2,
            settings=SamplingSettings(synthesis="gum+mrf", gum=gum),
            on_progress=events.append,
        )
        alone = run.model.generate(
            1000, seed=2, settings=SamplingSettings(synthesis="gum", gum=gum)
        )
        (done,) = [e for e in events if isinstance(e, StageFinished) and e.stage == Stage.GUM]
        assert len(both.history) == len(alone.history) + sweeps
        assert ("within its noise floor, so no MRF was fitted" in done.summary) == (sweeps == 0)
        if sweeps == 0:
            pd.testing.assert_frame_equal(both.table, alone.table)


def test_auto_synthesis_is_gum_plus_mrf_on_a_wide_table_and_gum_on_a_narrow_one():
    from privsyn_core.generation.planned import resolve_synthesis
    from privsyn_core.width_policy import WIDTH_POLICY

    WIDE_TABLE_ATTRIBUTES = WIDTH_POLICY.mrf_from

    assert resolve_synthesis("auto", WIDE_TABLE_ATTRIBUTES) == "gum+mrf"
    assert resolve_synthesis("auto", WIDE_TABLE_ATTRIBUTES - 1) == "gum"
    # no GUM iteration asked for (--iterations 0): the initial table, as asked
    assert resolve_synthesis("auto", WIDE_TABLE_ATTRIBUTES, iterations=0) == "gum"
    for choice in ("gum", "mcf", "mrf", "gum+mrf"):
        assert resolve_synthesis(choice, 100) == choice == resolve_synthesis(choice, 3)


@pytest.mark.parametrize(("columns", "runs_both"), [(30, True), (29, False)])
@pytest.mark.slow
def test_the_default_runs_both_on_a_wide_table_only(columns, runs_both):
    from privsyn_core import synthesize
    from privsyn_core.progress import Stage, StageFinished

    rng = np.random.default_rng(1)
    hidden = rng.integers(0, 3, 2000)
    table = pd.DataFrame(
        {
            f"c{i}": np.where(rng.random(2000) < 0.6, hidden, rng.integers(0, 3, 2000))
            for i in range(columns)
        }
    )
    events: list = []
    synthesize(table, 2.0, 1e-6, domain=dict.fromkeys(table, 3), rng=rng, on_progress=events.append)
    (done,) = [e for e in events if isinstance(e, StageFinished) and e.stage == Stage.GUM]
    both = "MRF sweeps" in done.summary or "no MRF was fitted" in done.summary
    assert both == runs_both, done.summary
