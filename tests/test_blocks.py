"""Rows made as independent blocks on worker processes (``privsyn_core.generation.blocks``).

A seed and a block size give the same rows whatever the number of workers; each block draws
from its own child of the run's generator; a table no larger than a block is drawn exactly
as before blocks existed; the blocks together keep the model's marginals; progress is a
step per block and a ``False`` stops the run.
"""

import os
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from privsyn_core import BlockProgress, FittedModel, GumSettings, PrivSyn, PrivSynConfig
from privsyn_core.errors import InputError
from privsyn_core.generation import draw, fitted, planned
from privsyn_core.generation.blocks import (
    block_generators,
    block_sizes,
    check_workers,
)
from privsyn_core.generation.fitted_data import SamplingSettings
from privsyn_core.progress import Stage, StageFinished, StageStarted, SynthesisCancelled

FAST = PrivSynConfig(gum=GumSettings(iterations=15, patience=None))


@pytest.fixture(scope="module")
def model() -> FittedModel:
    """A pair (a, b) equal in 80% of rows, a third column tied to a, one on its own."""
    rng = np.random.default_rng(1)
    n = 6000
    a = rng.integers(0, 4, n)
    table = pd.DataFrame(
        {
            "a": a,
            "b": np.where(rng.random(n) < 0.8, a, rng.integers(0, 4, n)),
            "c": np.where(rng.random(n) < 0.7, a % 3, rng.integers(0, 3, n)),
            "d": rng.integers(0, 5, n),
        }
    )
    domain = {"a": 4, "b": 4, "c": 3, "d": 5}
    return PrivSyn(4.0, 1e-9, domain=domain, config=FAST).fit(table, rng=rng)


def blocks_of(model: FittedModel, rows: int) -> SamplingSettings:
    return replace(model.defaults, block_rows=rows)


def test_rows_are_split_into_the_fewest_even_blocks():
    assert tuple(block_sizes(10, 10)) == (10,)
    assert tuple(block_sizes(1, 50_000)) == (1,)
    assert tuple(block_sizes(3500, 1000)) == (875, 875, 875, 875)
    assert tuple(block_sizes(10_001, 5000)) == (3334, 3334, 3333)
    huge = block_sizes(10**11, 1000)  # never listed
    assert len(huge) == 10**8 and huge.largest == 1000 and huge[-1] == 1000
    for n, size in [(7, 3), (100_000, 33_333), (49_999, 50_000)]:
        sizes = block_sizes(n, size)
        assert sum(sizes) == n and max(sizes) <= size and max(sizes) - min(sizes) <= 1
        assert len(sizes) == -(-n // size)


def test_one_block_draws_from_the_run_generator_itself_and_several_from_its_children():
    rng = np.random.default_rng(3)
    assert list(block_generators(rng, 1)) == [rng]
    children = list(block_generators(np.random.default_rng(3), 3))
    again = list(block_generators(np.random.default_rng(3), 3))
    firsts = [g.integers(0, 2**62) for g in children]
    assert firsts == [g.integers(0, 2**62) for g in again]  # reproducible from the seed
    assert len(set(firsts)) == 3  # and each block its own stream


@pytest.mark.slow
def test_a_table_no_larger_than_a_block_is_drawn_as_before_blocks(model):
    settings = blocks_of(model, 2000)
    before = draw.draw_block(model, 2000, settings, np.random.default_rng(9), None).table
    pd.testing.assert_frame_equal(model.generate(2000, seed=9, settings=settings).table, before)


def test_each_block_is_a_draw_with_its_own_child_generator(model):
    settings = blocks_of(model, 1000)
    table = model.generate(3000, seed=4, settings=settings, workers=1).table
    base = np.random.default_rng(4).bit_generator.seed_seq.spawn(1)[0]
    children = [np.random.Generator(np.random.PCG64(s)) for s in base.spawn(3)]
    for index, child in enumerate(children):
        block = draw.draw_block(model, 1000, settings, child, None).table
        rows = table.iloc[index * 1000 : (index + 1) * 1000].reset_index(drop=True)
        pd.testing.assert_frame_equal(rows, block)
    assert (
        not table.iloc[:1000]
        .reset_index(drop=True)
        .equals(table.iloc[1000:2000].reset_index(drop=True))
    )


@pytest.mark.slow
def test_the_same_seed_and_block_size_give_the_same_rows_on_one_or_two_workers(model):
    settings = blocks_of(model, 1000)
    one = model.generate(3500, seed=11, settings=settings, workers=1)
    two = model.generate(3500, seed=11, settings=settings, workers=2)
    pd.testing.assert_frame_equal(one.table, two.table)
    assert one.blocks == two.blocks == 4
    assert one.block_iterations == two.block_iterations and len(one.block_iterations) == 4
    streamed = pd.concat(
        list(model.sample_blocks(3500, seed=11, settings=settings, workers=2)), ignore_index=True
    )
    pd.testing.assert_frame_equal(streamed, one.table)
    other = model.generate(3500, seed=12, settings=settings, workers=1)
    assert not other.table.equals(one.table)


@pytest.mark.slow
def test_blocks_together_keep_the_marginals_a_single_gum_keeps(model):
    """The pair (a, b) agrees in about 80% of rows; 8 blocks of 1,000 rows keep it as one
    GUM over 8,000 rows does, to within sampling error (each block's counts are within a
    few rows of its share)."""
    target = {t.attributes: t for t in model.marginals}[("a", "b")]
    joint = target.values.reshape(target.shape) / target.values.sum()
    expected = float(np.trace(joint))
    for block_rows in (1000, 8000):
        table = model.sample(8000, seed=2, workers=1) if block_rows == 8000 else None
        if table is None:
            table = model.generate(8000, seed=2, settings=blocks_of(model, 1000), workers=1).table
        agree = float((table["a"] == table["b"]).mean())
        assert abs(agree - expected) < 0.03, (block_rows, agree, expected)
        one_way = table["d"].value_counts(normalize=True).sort_index().to_numpy()
        d = model.one_way[model.engine.index("d")].values
        assert np.abs(one_way - d / d.sum()).sum() < 0.03


@pytest.mark.slow
def test_progress_is_a_step_per_block_and_false_stops_the_run(model):
    events = []
    settings = blocks_of(model, 1000)
    model.generate(3000, seed=1, settings=settings, workers=1, on_progress=events.append)
    blocks = [e for e in events if isinstance(e, BlockProgress)]
    assert [(e.block, e.blocks, e.rows) for e in blocks] == [
        (1, 3, 1000),
        (2, 3, 1000),
        (3, 3, 1000),
    ]
    assert all(e.iterations == 15 for e in blocks)
    stages = [
        (type(e).__name__, e.stage) for e in events if isinstance(e, StageStarted | StageFinished)
    ]
    assert stages[0] == ("StageStarted", Stage.GUM) and stages[-1] == (
        "StageFinished",
        Stage.DECODE,
    )
    finished = [e for e in events if isinstance(e, StageFinished) and e.stage is Stage.GUM]
    assert "3 blocks of 1,000 rows or fewer on 1 worker" in finished[0].summary

    def stop_after_first(event: object) -> bool:
        return not isinstance(event, BlockProgress)

    with pytest.raises(SynthesisCancelled):
        model.generate(3000, seed=1, settings=settings, workers=2, on_progress=stop_after_first)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_a_bad_worker_count_is_refused_with_a_reason(model, bad):
    with pytest.raises(InputError, match="workers must be"):
        model.sample(100, seed=0, workers=bad)


@pytest.mark.parametrize("bad", [0, -5, 2.5, False])
def test_a_bad_block_size_is_refused_with_a_reason(bad):
    with pytest.raises(InputError, match="block size"):
        SamplingSettings(block_rows=bad)


def test_the_default_worker_count_is_the_cores_this_process_may_use():
    assert check_workers(None) == len(os.sched_getaffinity(0))
    assert check_workers(3) == 3


def test_arguments_and_memory_are_checked_when_blocks_are_asked_for_not_when_read(
    model, monkeypatch
):
    with pytest.raises(InputError, match="a seed or a random generator"):
        model.generate_blocks(10, seed=1, rng=np.random.default_rng(1))
    monkeypatch.setattr(planned, "check_blocks_fit", _refuse)
    with pytest.raises(InputError, match="blocks"):
        model.generate_blocks(10**9, seed=1, settings=blocks_of(model, 1000), workers=2)


def _refuse(*_: object, **__: object) -> None:
    raise InputError("2 blocks of 1,000 rows need more memory than is free")


@pytest.mark.slow
def test_a_streamed_sample_needs_memory_for_the_blocks_in_flight_only(model, monkeypatch):
    import privsyn_core.generation.memory as memory

    monkeypatch.setattr(memory, "available_bytes", lambda: 64 * 2**20)
    with pytest.raises(InputError, match="fewer rows"):  # held whole: refused
        model.generate(10**8, seed=0)
    blocks = model.generate_blocks(10**8, seed=0, settings=blocks_of(model, 1000), workers=2)
    first = next(blocks)  # streamed: two blocks of 1,000 rows at a time fit
    blocks.close()  # stops the workers
    assert first.n_records == 1000
    with pytest.raises(InputError, match="fewer workers"):
        model.generate_blocks(10**8, seed=0, settings=blocks_of(model, 10**6), workers=2)


def test_the_blocks_seeds_are_fixed_when_the_blocks_are_asked_for(model):
    """What the caller's generator does after asking changes no block."""
    settings = blocks_of(model, 1000)
    rng = np.random.default_rng(21)
    blocks = model.sample_blocks(2000, rng=rng, settings=settings, workers=1)
    rng.spawn(1), rng.random(10)  # the caller goes on using its generator
    late = pd.concat(list(blocks), ignore_index=True)
    pd.testing.assert_frame_equal(late, model.generate(2000, seed=21, settings=settings).table)


def test_a_streamed_sample_keeps_none_of_the_rows_it_handed_over(model):
    """``written`` keeps only the columns of the blocks it hands to the writer: a slice of no
    rows would keep each whole block alive (5 MB a block of adult-coded, found at 10M rows)."""
    import tracemalloc

    first = draw.draw_block(model, 10, model.defaults, np.random.default_rng(0), None)
    rng = np.random.default_rng(0)

    def blocks():
        for _ in range(20):  # 20 blocks of 8 MB
            table = pd.DataFrame({"a": rng.integers(0, 4, 1_000_000)})
            yield replace(first, table=table, n_records=len(table))

    tracemalloc.start()
    try:
        drawn = fitted.written(blocks(), lambda tables: [len(t) for t in tables])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert drawn.n_records == 20_000_000 and len(drawn.table) == 0 and drawn.blocks == 20
    # a few blocks at once at most, not all 20 (160 MB)
    assert peak < 40 * 2**20, f"{peak / 2**20:.0f} MB held while the blocks were written"


@pytest.mark.slow
def test_a_worker_ends_itself_once_the_pool_owner_is_gone():
    """Killed owners (SIGTERM, SIGKILL) leave no orphaned workers sleeping on their queue."""
    import multiprocessing
    import subprocess
    import sys

    from privsyn_core.generation import blocks

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # a process id that no longer runs
    worker = multiprocessing.get_context("fork").Process(
        target=blocks._exit_without, args=(gone.pid,)
    )
    worker.start()
    worker.join(timeout=10)
    assert worker.exitcode == 1


@pytest.mark.slow
def test_a_script_without_a_main_guard_runs_blocks_on_workers_once(tmp_path):
    """multiprocessing re-runs the parent's main script in every new process; a script that
    synthesises at top level (as most do) must not run again in the block workers."""
    script = tmp_path / "script.py"
    script.write_text(
        "import numpy as np, pandas as pd\n"
        "from privsyn_core import synthesize\n"
        "rng = np.random.default_rng(0)\n"
        "table = pd.DataFrame({c: rng.integers(0, 4, 30_000) for c in 'abcd'})\n"
        "result = synthesize(table, 1.0, 1e-6, domain=dict.fromkeys('abcd', 4), rng=rng,\n"
        "                    workers=2, block_rows=10_000)\n"
        "print('made', len(result.synthetic))\n"
    )
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == ["made 30000"]
