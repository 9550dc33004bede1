import itertools
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import numpy as np
import pytest

from privsyn_core.errors import InputError
from privsyn_core.generation.gum import PassOutcome, run_gum, run_passes, with_blankets
from privsyn_core.generation.gum_settings import GumSettings
from privsyn_core.generation.gum_update import (
    _fine_index,
    _removal_rate,
    plan_update,
    update_towards,
)
from privsyn_core.generation.records import record_major
from privsyn_core.generation.sampling import shuffled_column
from privsyn_core.generation.target_scores import GumTarget, l1_error
from privsyn_core.marginals import cell_index


def correlated_target(k: int, strength: float) -> np.ndarray:
    joint = np.full((k, k), (1 - strength) / (k * k))
    joint[np.arange(k), np.arange(k)] += strength / k
    return joint.ravel()


@pytest.mark.parametrize("seed", range(20))
def test_the_removal_rate_removes_exactly_what_is_wanted(seed):
    """beta solves sum(min(excess, beta s)) == wanted, including tied breakpoints, a cell
    whose whole frequency is excess, and ``wanted`` at either end of its range."""
    rng = np.random.default_rng(seed)
    k = int(rng.integers(1, 40))
    s = rng.dirichlet(np.ones(k))
    excess = s * rng.uniform(0.01, 1.0, k)
    excess[: k // 3] = s[: k // 3] * 0.5  # tied breakpoints
    excess[-1] = s[-1]
    for wanted in (0.0, excess.sum() * rng.random(), excess.sum()):
        beta = _removal_rate(s, excess, wanted)
        assert 0.0 <= beta <= 1.0
        assert np.minimum(excess, beta * s).sum() == pytest.approx(wanted, abs=1e-12)


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
    settings = GumSettings(alpha0=1.0, decay=0.5, decay_every=10, strategy="S5")
    assert [settings.alpha(t) for t in (0, 9, 10, 25)] == [1.0, 1.0, 0.5, 0.25]
    assert [settings.duplicate_share(t) for t in range(4)] == [0.5, 1.0, 0.5, 1.0]
    assert [GumSettings(strategy="S3").duplicate_share(t) for t in range(4)] == [0.5] * 4
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
    # with keep_best (the default) the rule watches the score that picks the kept table
    scores = [h.table_error for h in history]
    assert settings.converged(scores)
    assert not settings.converged(scores[:-1])
    assert not any(h.table_error is None for h in history)
    history, _ = run_gum([(records, [target])], replace(settings, keep_best=False), rng)
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


def _distribution_start() -> tuple[np.ndarray, GumTarget, np.ndarray]:
    """A record-major start table (as the pipeline builds), a target on its first two
    attributes with one empty cell to fill and correlations to build, and the start counts."""
    rng = np.random.default_rng(10)
    n = 20_000
    records = record_major(3, n, np.uint8)
    records[0] = rng.integers(0, 4, n)
    records[1] = rng.integers(0, 3, n)
    records[1][records[0] == 3] = np.minimum(records[1][records[0] == 3], 1)  # cell (3, 2) empty
    records[2] = (records[0] + rng.integers(0, 2, n)) % 5  # c follows a: duplication keeps it
    frequencies = rng.dirichlet(np.full(12, 2.0))
    target = GumTarget(("a", "b"), (0, 1), (4, 3), frequencies)
    return records, target, np.bincount(cell_index(records, (0, 1), (4, 3)), minlength=12)


def _after_one_update(kernel: str, seeds: range, duplicate_share: float) -> np.ndarray:
    """Cell counts of (a, b) and of (a, c) after one update from the same start, per seed."""
    start, target, _ = _distribution_start()
    out = []
    for seed in seeds:
        records = start.copy()
        update_towards(
            records, target, 0.6, duplicate_share, np.random.default_rng(seed), kernel=kernel
        )
        ab = np.bincount(cell_index(records, (0, 1), (4, 3)), minlength=12)
        ac = np.bincount(cell_index(records, (0, 2), (4, 5)), minlength=20)
        out.append(np.concatenate([ab, ac]))
    return np.array(out, dtype=float)


@pytest.mark.parametrize("duplicate_share", [0.5, 1.0])
@pytest.mark.slow
def test_compiled_and_reference_updates_agree_in_distribution(duplicate_share):
    """Same start, same target, 300 seeded updates each: every cell count of the target
    marginal and of a marginal the update does not target (which duplication and
    replacement move differently) has the same mean and spread under both kernels, and in
    over-filled cells matches the Bernoulli removal law exactly."""
    repeats = 300
    compiled = _after_one_update("compiled", range(repeats), duplicate_share)
    reference = _after_one_update("reference", range(10_000, 10_000 + repeats), duplicate_share)
    for runs in (compiled, reference):  # N fixed in every run
        assert np.all(runs[:, :12].sum(axis=1) == 20_000)
        assert np.all(runs[:, 12:].sum(axis=1) == 20_000)

    mean_c, mean_r = compiled.mean(axis=0), reference.mean(axis=0)
    var_c, var_r = compiled.var(axis=0, ddof=1), reference.var(axis=0, ddof=1)
    standard_error = np.sqrt((var_c + var_r) / repeats)
    assert np.all(np.abs(mean_c - mean_r) <= 5 * standard_error + 0.5)
    moving = (var_c + var_r) / 2 > 25  # cells whose count varies by more than a few records
    assert moving.sum() >= 8
    ratio = np.sqrt(var_c[moving] / var_r[moving])
    assert np.all((ratio > 0.7) & (ratio < 1.4))  # chi-square(299) spread: well inside

    # over-filled cells only lose records, each with its cell's removal rate: binomial law
    _, target, counts = _distribution_start()
    _, plan = plan_update(counts, target.frequencies, 0.6, duplicate_share)
    rate = plan.thresholds / 2.0**32
    over = plan.over
    expected = counts[over] * (1 - rate[over])
    binomial_sd = np.sqrt(counts[over] * rate[over] * (1 - rate[over]))
    for mean in (mean_c, mean_r):
        assert np.all(np.abs(mean[:12][over] - expected) <= 5 * binomial_sd / np.sqrt(repeats))
    # the empty cell can only be filled by replacement, and is in both
    assert mean_c[11] > 0 and mean_r[11] > 0
    assert abs(mean_c[11] - mean_r[11]) <= 5 * standard_error[11] + 0.5


@pytest.mark.parametrize("strategy", ["half_half_plus_duplicate", "replace", "duplicate"])
@pytest.mark.slow
def test_both_kernels_keep_n_and_the_domain_and_lower_the_error_alike(strategy):
    errors = {}
    for kernel in ("compiled", "reference"):
        rng = np.random.default_rng(11)
        n = 30_000
        records = record_major(3, n, np.uint8)
        for row, size in enumerate((5, 4, 3)):
            records[row] = shuffled_column(np.ones(size), n, rng)
        targets = [
            GumTarget(("a", "b"), (0, 1), (5, 4), correlated_target_rect(5, 4, 0.7)),
            GumTarget(("b", "c"), (1, 2), (4, 3), correlated_target_rect(4, 3, 0.5)),
        ]
        start = sum(l1_error(records, t) for t in targets)
        settings = GumSettings(iterations=15, patience=None, strategy=strategy, kernel=kernel)
        history, _ = run_gum([(records, targets)], settings, rng)
        assert records.shape[1] == n
        assert records[0].max() == 4 and records[1].max() == 3 and records[2].max() == 2
        assert np.count_nonzero(records[3:]) == 0  # padding untouched
        end = sum(l1_error(records, t) for t in targets)
        assert end < 0.3 * start
        errors[kernel] = (start, end, [h.mean_error for h in history])
    (start, end_c, curve_c), (_, end_r, curve_r) = errors["compiled"], errors["reference"]
    assert abs(end_c - end_r) < 0.1 * start
    # the first iterations make large, near-deterministic moves; later ones hover at a noise
    # floor where single runs of either kernel differ by chance
    assert np.allclose(curve_c[:3], curve_r[:3], atol=0.025 * start)


def correlated_target_rect(rows: int, columns: int, strength: float) -> np.ndarray:
    joint = np.full((rows, columns), (1 - strength) / (rows * columns))
    joint[np.arange(min(rows, columns)), np.arange(min(rows, columns))] += strength / min(
        rows, columns
    )
    return joint.ravel() / joint.sum()


def test_compiled_update_is_reproducible_from_the_seed_whatever_the_threads():
    """Draws depend on the Generator and the record position, not on how work is split."""
    start, target, _ = _distribution_start()
    big = record_major(3, 200_000, np.uint8)  # large enough to be split over threads
    big[:] = np.tile(start, 10)
    outcomes = []
    with ThreadPoolExecutor(max_workers=2) as pool:
        for seed, workers in ((5, pool), (5, None), (6, pool)):
            records = big.copy()
            update_towards(records, target, 0.8, 0.5, np.random.default_rng(seed), workers)
            outcomes.append(records)
    assert np.array_equal(outcomes[0], outcomes[1])
    assert not np.array_equal(outcomes[0], outcomes[2])


def test_gum_settings_reject_an_unknown_kernel():
    with pytest.raises(ValueError, match="kernel"):
        GumSettings(kernel="gpu")


def test_compiled_update_pairs_removed_rows_with_new_cells_at_random():
    """The compiled rewrite visits removed rows in record order and shuffles the new cells
    instead: rows filling each cell must come from all over the table, not from the front
    for low cells and the back for high ones (row positions must stay meaningless)."""
    rng = np.random.default_rng(12)
    n = 40_000
    records = record_major(2, n, np.uint8)
    records[0] = 0  # every record starts in cell (0, 0)
    records[1] = 0
    target = GumTarget(("a", "b"), (0, 1), (2, 3), np.full(6, 1 / 6))
    before = records[:2].copy()
    update_towards(records, target, 1.0, 0.0, rng, kernel="compiled")  # replacement only
    cells = cell_index(records, (0, 1), (2, 3))
    moved = np.flatnonzero((records[:2] != before).any(axis=0))
    assert moved.size > 0.5 * n
    for cell in range(1, 6):
        positions = moved[cells[moved] == cell]
        assert positions.size > 0.1 * n
        # mean position of a uniform sample of rows: n/2 with sd n / sqrt(12 m)
        assert abs(positions.mean() - n / 2) < 5 * n / np.sqrt(12 * positions.size)


def test_auto_kernel_is_the_reference_on_small_tables_and_compiled_on_wide_ones():
    from privsyn_core.generation.gum_settings import resolve_kernel

    assert GumSettings().kernel == "auto"
    assert resolve_kernel("auto", 48_842, 20) == "reference"  # Adult: no numba import
    assert resolve_kernel("auto", 600_000, 700) == "compiled"  # numba is installed in tests
    assert resolve_kernel("reference", 600_000, 700) == "reference"
    assert resolve_kernel("compiled", 10, 1) == "compiled"


def test_decay_schedules_follow_section_5_3_and_meet_the_step_decay_at_100():
    step = GumSettings()
    assert step.alpha(0) == 1.0 and step.alpha(19) == 1.0
    assert step.alpha(20) == pytest.approx(0.84) and step.alpha(45) == pytest.approx(0.84**2)
    reach = 0.84**5
    for schedule in ("exponential", "linear", "sqrt"):
        settings = GumSettings(decay_schedule=schedule)
        assert settings.alpha(0) == 1.0
        assert settings.alpha(100) == pytest.approx(reach)
        alphas = [settings.alpha(t) for t in range(101)]
        assert all(a > b for a, b in itertools.pairwise(alphas))  # smooth
    exponential = GumSettings(decay_schedule="exponential")
    assert exponential.alpha(20) == pytest.approx(0.84)  # the step decay made continuous
    linear = GumSettings(decay_schedule="linear", decay_k=0.5, alpha0=0.8)
    assert linear.alpha(4) == pytest.approx(0.8 / 3)
    root = GumSettings(decay_schedule="sqrt", decay_k=0.5)
    assert root.alpha(6) == pytest.approx(0.5)
    assert GumSettings(decay_schedule="none", alpha0=0.6).alpha(500) == 0.6


def test_the_papers_strategy_names_stand_for_the_long_ones():
    assert GumSettings(strategy="S3") == GumSettings()  # our default (see its docstring)
    assert GumSettings(strategy="S5").strategy == "half_half_plus_duplicate"
    assert GumSettings(strategy="S1").strategy == "replace"
    assert GumSettings(strategy="S4").duplicate_share(0) == 0.0
    assert GumSettings(strategy="S4").duplicate_share(1) == 1.0
    assert GumSettings(strategy="S6").duplicate_share(1) == 0.0
    assert GumSettings(strategy="S2").duplicate_share(0) == 1.0
    assert GumSettings(strategy="S3").duplicate_share(1) == 0.5


@pytest.mark.parametrize(
    "kwargs", [{"strategy": "S7"}, {"decay_schedule": "cosine"}, {"decay_k": -1.0}]
)
def test_gum_settings_refuse_unknown_strategies_and_schedules(kwargs):
    from privsyn_core.errors import InputError

    with pytest.raises(InputError):
        GumSettings(**kwargs)


def _drifting_problem(seed: int) -> tuple[np.ndarray, list[GumTarget]]:
    """A chain of near-copies (each column copies the one before with probability 0.8) and
    noisy targets on every pair: started from the real table, GUM's updates chase the noise
    and settle further from the targets than the real table is (issue 22)."""
    rng = np.random.default_rng(seed)
    n, d, k = 20_000, 8, 6
    columns = [rng.integers(0, k, n)]
    for _ in range(d - 1):
        copy = rng.random(n) < 0.8
        columns.append(np.where(copy, columns[-1], rng.integers(0, k, n)))
    records = np.vstack(columns).astype(np.uint8)
    targets = []
    for a, b in itertools.combinations(range(d), 2):
        counts = np.bincount(records[a] * k + records[b], minlength=k * k).astype(float)
        noisy = np.clip(counts + rng.normal(0, 30, counts.size), 0, None)
        targets.append(GumTarget((f"c{a}", f"c{b}"), (a, b), (k, k), noisy / noisy.sum()))
    return records, targets


def _mean_error(records: np.ndarray, targets: list[GumTarget]) -> float:
    return float(np.mean([l1_error(records, t) for t in targets]))


@pytest.mark.slow
def test_gum_returns_its_best_table_not_its_last():
    records, targets = _drifting_problem(0)
    start = _mean_error(records, targets)
    settings = GumSettings(iterations=12, patience=None)
    last, best = records.copy(), records.copy()
    run_gum([(last, targets)], replace(settings, keep_best=False), np.random.default_rng(1))
    run_gum([(best, targets)], settings, np.random.default_rng(1))
    drifted = _mean_error(last, targets)
    assert drifted > 1.05 * start, "the problem drifts: without the guard GUM ends worse"
    assert _mean_error(best, targets) <= start + 1e-12
    assert np.array_equal(best, records)  # no iteration beat the start: it is returned


def test_keeping_the_best_table_changes_nothing_when_gum_improves():
    rng = np.random.default_rng(4)
    n, k = 4000, 3
    records = np.vstack([shuffled_column(np.ones(k), n, rng) for _ in range(2)])
    target = GumTarget(("a", "b"), (0, 1), (k, k), correlated_target(k, 0.5))
    settings = GumSettings(iterations=20, patience=None)
    kept, plain = records.copy(), records.copy()
    run_gum([(kept, [target])], settings, np.random.default_rng(2))
    run_gum([(plain, [target])], replace(settings, keep_best=False), np.random.default_rng(2))
    assert l1_error(kept, target) <= l1_error(plain, target)
    assert l1_error(kept, target) < 0.5 * l1_error(records, target)


def test_gum_settings_refuse_an_unknown_initial_table():
    with pytest.raises(InputError, match="initial must be one of tree, independent"):
        GumSettings(initial="random")


def test_a_blanket_holds_the_targets_attributes_and_their_partners():
    freq = np.full(4, 0.25)
    targets = [
        GumTarget(("a", "b"), (0, 1), (2, 2), freq),
        GumTarget(("b", "c"), (1, 2), (2, 2), freq),
        GumTarget(("d", "e"), (3, 4), (2, 2), freq),
        GumTarget(("c", "d"), (2, 3), (2, 2), freq),
    ]
    blankets = [t.copied for t in with_blankets(targets)]
    assert blankets == [(0, 1, 2), (0, 1, 2, 3), (2, 3, 4), (1, 2, 3, 4)]
    # a blanket holding every attribute stays empty: the whole-record copy
    star = [GumTarget(("a", x), (0, i), (2, 2), freq) for i, x in enumerate("bcd", start=1)]
    assert [t.copied for t in with_blankets(star)] == [(), (), ()]


@pytest.mark.parametrize("kernel", ["reference", "compiled"])
@pytest.mark.parametrize("copied", [(), (0, 1, 2)])
def test_a_duplication_copies_its_blanket_and_leaves_the_rest_of_the_row(kernel, copied):
    """Attribute 3 is a row id outside the blanket: with a blanket its values stay distinct
    (no record is cloned there); with whole-row copies duplicated ids appear."""
    records, target, _ = _distribution_start()
    before = l1_error(records, target)
    n = records.shape[1]
    table = record_major(4, n, np.int32)
    table[:3] = records[:3]
    table[3] = np.arange(n)
    follows_before = np.mean(table[2] == table[0])
    target = replace(target, copied=copied)
    update_towards(table, target, 0.6, 1.0, np.random.default_rng(3), kernel=kernel)
    ids = np.unique(table[3]).size
    if copied:
        assert ids == n
    else:
        assert ids < n - 500
    # the blanket's own attributes travel together: c still follows a as often as before
    assert abs(np.mean(table[2] == table[0]) - follows_before) < 0.02
    assert l1_error(table, target) < before


def test_gum_settings_refuse_an_unknown_copy_scope():
    with pytest.raises(InputError, match="copy must be one of"):
        GumSettings(copy="half")  # type: ignore[arg-type]


def _scripted_passes(pass_errors, **settings):
    """:func:`run_passes` over one component of three marginals whose errors, pass by pass,
    are ``pass_errors`` (one row per pass, read at each visit); returns the visits made and
    the loop's answer."""
    records = np.zeros((2, 10), dtype=np.uint8)
    frequencies = np.full(4, 0.25)
    targets = [GumTarget((f"m{k}",), (k % 2,), (4,), frequencies) for k in range(3)]
    visits = []

    def update(iteration, component, target):
        visits.append((iteration, target))
        return pass_errors[iteration][target]

    history, finished = run_passes([(records, targets)], GumSettings(**settings), update)
    return visits, history, finished


def test_the_shared_loop_visits_worst_first_and_records_each_pass():
    """The outer loop of GUM and MCF: each pass in the order of the errors the previous pass
    left (the first by equal initial errors, ties in order), one record per pass with the
    errors seen at the visits and alpha 1 by default."""
    errors = [[0.1, 0.5, 0.3], [0.4, 0.2, 0.6]]
    visits, history, finished = _scripted_passes(errors, iterations=2, patience=None)
    assert visits == [(0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (1, 0)]
    assert finished and [h.alpha for h in history] == [1.0, 1.0]
    assert history[1].errors == {("m0",): 0.4, ("m1",): 0.2, ("m2",): 0.6}


def test_the_shared_loop_stops_on_the_plateau_a_caller_stop_or_a_cancel():
    flat = [[0.5, 0.5, 0.5]] * 20
    _, history, finished = _scripted_passes(flat, iterations=20, patience=3)
    assert finished and len(history) == 4  # 3 passes without improving on the first
    records = np.zeros((1, 4), dtype=np.uint8)
    targets = [GumTarget(("a",), (0,), (2,), np.array([0.5, 0.5]))]
    settings = GumSettings(iterations=20, patience=None)
    stops = iter([PassOutcome(0.3), PassOutcome(0.2, stop=True)])
    history, finished = run_passes(
        [(records, targets)], settings, lambda *_: 0.1, after_pass=lambda: next(stops)
    )
    assert finished and [h.table_error for h in history] == [0.3, 0.2]
    history, finished = run_passes(
        [(records, targets)], settings, lambda *_: 0.1, lambda record: record.iteration < 2
    )
    assert not finished and len(history) == 3


def _two_parts(rng: np.random.Generator) -> list[tuple[np.ndarray, list[GumTarget]]]:
    """Two independent parts of a table (separate and join), each of three independent
    columns that two correlated pair marginals pull together."""
    n, k = 5_000, 5
    parts = []
    for _ in range(2):
        records = np.vstack([shuffled_column(np.ones(k), n, rng) for _ in range(3)])
        targets = [
            GumTarget(("a", "b"), (0, 1), (k, k), correlated_target(k, 0.9)),
            GumTarget(("b", "c"), (1, 2), (k, k), correlated_target(k, 0.5)),
        ]
        parts.append((records, targets))
    return parts


def test_the_kept_iteration_gum_reports_is_the_table_it_returns():
    """Each part keeps its own closest table: the step the last record names for a part is
    the iteration whose table comes back, and it is the part's closest table (by
    ``table_score``) among the start and every iteration, the earliest of equals."""
    from privsyn_core.generation.target_scores import table_score

    rng = np.random.default_rng(0)
    parts = _two_parts(rng)
    tables = [[records.copy() for records, _ in parts]]  # index 0: the starting tables

    def snapshot(record) -> bool:
        tables.append([records.copy() for records, _ in parts])
        return True

    settings = GumSettings(iterations=15, patience=None, noise_floor=None)
    history, finished = run_gum(parts, settings, rng, snapshot)
    assert finished and len(history) == 15
    kept = history[-1].kept
    assert len(kept) == 2
    # what makes this case worth testing: at least one part kept a table before the last
    assert min(kept) < 15, kept
    for c, (records, targets) in enumerate(parts):
        scores = [table_score(step[c], targets, None) for step in tables]
        assert kept[c] == int(np.argmin(scores))
        assert np.array_equal(records, tables[kept[c]][c])
    # each record names the closest so far: never later than itself, never going back
    for t, record in enumerate(history):
        assert all(at <= t + 1 for at in record.kept)
    assert all(
        all(a <= b for a, b in zip(h.kept, later.kept, strict=True))
        for h, later in itertools.pairwise(history)
    )


def test_gum_names_no_kept_table_when_it_returns_its_last():
    rng = np.random.default_rng(1)
    parts = _two_parts(rng)
    settings = GumSettings(iterations=3, patience=None, noise_floor=None, keep_best=False)
    history, _ = run_gum(parts, settings, rng)
    assert [h.kept for h in history] == [(), (), ()]


def test_the_kept_table_is_named_in_words():
    from privsyn_core.generation.kept import KeptPart, KeptTable

    def kept(*ats, iterations=14, sweeps=0, score=0.0326):
        parts = tuple(KeptPart("gum" if at <= iterations else "mrf", at, 5) for at in ats)
        return KeptTable(parts, iterations, sweeps, score, 0.09)

    middle = kept(9)
    assert middle.at == 9 and not middle.is_last
    assert middle.words().startswith("Kept the table from iteration 9 of 14: the lowest error")
    assert "(0.0326, lower is better)" in middle.words()
    assert kept(14).is_last and "the last step, iteration 14" in kept(14).words()
    assert kept(0).words().startswith("Kept the starting table")
    assert "MRF sweep 3" in kept(17, sweeps=40).words()
    mixed = kept(9, 12, 12)
    assert mixed.at is None
    assert (
        "3 independent parts" in mixed.words() and "iteration 9 and iteration 12" in mixed.words()
    )
    guarded = KeptTable((KeptPart("gum", 4), KeptPart("independent", 0)), 6, 0, 0.05, 0.1)
    assert "1 of them independent columns" in guarded.words()
    alone = KeptTable((KeptPart("independent", 0),), 6, 0, 0.05, 0.1)
    assert alone.words().startswith("Kept independent columns")
    unjudged = kept(14, score=None)
    assert unjudged.words() == "Kept the table from the last iteration 14 (of 14)."


def test_a_sample_reports_the_table_it_kept_with_its_score():
    """Through the fitted model: the sample's kept step is the one its history names, and
    its score is that step's whole-table error (one part) or the start's."""
    import pandas as pd

    from privsyn_core import PrivSyn
    from privsyn_core.generation.fitted_data import SamplingSettings

    rng = np.random.default_rng(3)
    n = 4000
    a = rng.integers(0, 4, n)
    table = pd.DataFrame(
        {
            "a": a,
            "b": np.where(rng.random(n) < 0.8, a, rng.integers(0, 4, n)),
            "c": np.where(rng.random(n) < 0.6, a, rng.integers(0, 4, n)),
        }
    )
    model = PrivSyn(1.0, 1e-6, domain={"a": 4, "b": 4, "c": 4}).fit(table, rng=rng)
    gum = GumSettings(iterations=12, patience=None, noise_floor=None)
    sample = model.generate(n, seed=4, settings=SamplingSettings(gum, False))
    kept = sample.kept
    assert kept is not None and kept.iterations == len(sample.history) == 12
    assert kept.at == sample.history[-1].kept[0]
    expected = kept.start_score if kept.at == 0 else sample.history[kept.at - 1].table_error
    assert kept.score == pytest.approx(expected, rel=1e-9)


def test_the_command_line_names_the_table_gum_kept(tmp_path, capsys):
    """``privsyn synthesize`` ends with a line naming the iteration whose table came out."""
    import json
    import re

    import pandas as pd

    from privsyn_core.cli import main

    rng = np.random.default_rng(0)
    n = 2000
    a = rng.integers(0, 4, n)
    table = pd.DataFrame(  # three pairwise dependent columns: no pair is appended after GUM
        {
            "a": a,
            "b": np.where(rng.random(n) < 0.8, a, rng.integers(0, 4, n)),
            "c": np.where(rng.random(n) < 0.6, a, rng.integers(0, 4, n)),
        }
    )
    csv, domain, out = tmp_path / "t.csv", tmp_path / "d.json", tmp_path / "s.csv"
    table.to_csv(csv, index=False)
    domain.write_text(json.dumps({"a": 4, "b": 4, "c": 4}))
    argv = ["synthesize", str(csv), "-o", str(out), "--epsilon", "2", "--domain", str(domain)]
    assert main([*argv, "--iterations", "6", "--seed", "3"]) == 0
    err = capsys.readouterr().err
    line = next(x for x in err.splitlines() if x.startswith("GUM: "))
    named = r"GUM: Kept the (starting table|table from (the last step, )?iteration \d)"
    assert re.match(named, line), line


def test_the_kept_table_follows_the_mrf_and_the_guard_part_by_part():
    """On a wide table the MRF's sweeps follow GUM's iterations and each part keeps the
    closer table; the guard may replace a part by independent columns: the kept table says
    which, in the history's steps."""
    from privsyn_core.generation.guard import kept_table
    from privsyn_core.generation.gum import GumIterationRecord
    from privsyn_core.generation.strategies import after

    target = GumTarget(("x", "y"), (0, 1), (2, 2), np.full(4, 0.25))
    components = [
        (names, np.zeros((2, 4)), [target]) for names in (["a", "b"], ["c", "d"], ["e", "f"])
    ]
    components.append((["z"], np.zeros((1, 4)), []))  # no targets: not a part
    gum = [GumIterationRecord(t, 1.0, {}, 0.0, 0.1, kept=(t + 1, 1, 0)) for t in range(5)]
    sweeps = [
        after(GumIterationRecord(t, 0.1, {}, 0.0, 0.1, "mrf", (t + 1, 0, 2)), 5) for t in range(4)
    ]
    assert sweeps[-1].iteration == 8 and sweeps[-1].kept == (9, 0, 7)
    mrf_closer = [True, False, True, False]
    kept = kept_table(components, [*gum, *sweeps], 5, mrf_closer, {"e", "f"}, (0.3, 0.05))
    assert kept is not None and (kept.iterations, kept.sweeps) == (5, 4)
    assert [(p.source, p.at) for p in kept.parts] == [("mrf", 9), ("gum", 1), ("independent", 0)]
    assert kept.at is None and kept.score == 0.05 and kept.start_score == 0.3
    words = kept.words()
    assert "MRF sweep 4" in words and "iteration 1" in words and "1 of them independent" in words
