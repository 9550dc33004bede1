"""A sample's blocks: which rows each block makes, made here or on worker processes.

A sample of more rows than :attr:`~privsyn_core.generation.fitted_data.SamplingSettings.
block_rows` is made as independent blocks (:mod:`privsyn_core.generation.blocks`), each a
whole :func:`~privsyn_core.generation.draw.draw_block` with its own seed. A
:class:`BlockPlan` holds everything that decides the rows, so the same plan makes the same
rows here, on worker processes, or on Spark's tasks
(:mod:`privsyn_core.generation.spark_blocks`); :class:`PlannedBlocks` hands the blocks over
as they are made, with their plan. Identifier columns are numbered on over the blocks
(:func:`numbered`), so ids are unique over the whole sample.
"""

from __future__ import annotations

import time
from collections.abc import Generator, Iterator, Sequence
from contextlib import closing
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from privsyn_core.generation.blocks import (
    BlockSeeds,
    BlockSizes,
    block_seeds,
    block_sizes,
    check_workers,
    run_blocks,
)
from privsyn_core.generation.condition import Condition
from privsyn_core.generation.draw import draw_block
from privsyn_core.generation.fitted_data import FittedData, Sample, SamplingSettings
from privsyn_core.generation.identifiers import Identifier, with_identifiers
from privsyn_core.progress import BlockProgress, ProgressCallback, Stage, StageReporter


@dataclass(frozen=True)
class BlockPlan:
    """Everything that decides a sample's rows, wherever its blocks are made: the model,
    the rows per block, the settings, every block's seed and the conditions. Block ``i`` is
    ``draw_block(model, sizes[i], settings, seeds.generator(i))``, or with conditions (``where``)
    :func:`~privsyn_core.generation.conditional.block_where`, here, on a worker process or
    on a Spark task alike."""

    model: FittedData
    sizes: BlockSizes
    settings: SamplingSettings
    seeds: BlockSeeds
    on_progress: ProgressCallback | None = None
    #: the conditions every row satisfies
    #: (:meth:`~privsyn_core.generation.fitted.FittedModel.generate_where`), or none
    where: tuple[Condition, ...] = ()


class PlannedBlocks(Generator[Sample, None, None]):
    """:func:`generated_blocks`' blocks, made on this machine when iterated, with the
    :class:`BlockPlan` they come from: :func:`~privsyn_core.generation.fitted.written` hands
    a writer that makes the rows itself (Spark,
    :class:`~privsyn_core.generation.spark_blocks.SparkParquet`) the plan instead, so
    nothing is made here. Nothing runs before the first block is asked for."""

    def __init__(self, blocks: Generator[Sample, None, None], plan: BlockPlan) -> None:
        self._blocks = blocks
        self.plan = plan

    def send(self, value: None) -> Sample:
        return self._blocks.send(value)

    def throw(self, *args: Any) -> Sample:
        return self._blocks.throw(*args)

    def close(self) -> None:
        self._blocks.close()


def generated_blocks(
    model: FittedData,
    n: int,
    settings: SamplingSettings,
    rng: np.random.Generator,
    workers: int | None,
    on_progress: ProgressCallback | None,
) -> PlannedBlocks:
    """The blocks of a sample of ``n`` rows (see
    :meth:`~privsyn_core.generation.fitted.FittedModel.generate_blocks`): the worker count
    and the blocks' memory are checked now; a sample of one block is drawn from ``rng``
    itself and reports every GUM iteration, one of several reports a
    :class:`~privsyn_core.progress.BlockProgress` per block."""
    count = check_workers(workers)
    model.check_fits(n, settings, workers=count, streamed=True)
    sizes = block_sizes(int(n), settings.block_rows)
    seeds = block_seeds(rng, len(sizes))
    plan = BlockPlan(model, sizes, settings, seeds, on_progress)
    if len(sizes) == 1:
        single = _single(model, int(n), settings, rng, on_progress)
        return PlannedBlocks(numbered(model.identifiers, single), plan)
    work = _BlockDraw(model, settings)
    generators = (seeds.generator(index) for index in range(len(sizes)))
    blocks = _reported(model, run_blocks(work, sizes, generators, count), sizes, count, on_progress)
    return PlannedBlocks(numbered(model.identifiers, blocks), plan)


def numbered(
    identifiers: Sequence[Identifier], blocks: Iterator[Sample], first_row: int = 0
) -> Generator[Sample, None, None]:
    """``blocks`` as they come, their identifier columns numbered on from ``first_row``
    (:mod:`~privsyn_core.generation.identifiers`); closing this closes ``blocks`` (a
    consumer that stops early stops the workers)."""
    row = first_row
    try:
        for block in blocks:
            if identifiers:
                block = replace(block, table=with_identifiers(block.table, identifiers, row))
            row += len(block.table)
            yield block
    finally:
        close = getattr(blocks, "close", None)
        if close is not None:
            close()


def _single(
    model: FittedData,
    n: int,
    settings: SamplingSettings,
    rng: np.random.Generator,
    on_progress: ProgressCallback | None,
) -> Generator[Sample, None, None]:
    """A sample of one block, drawn when asked for (as the blocks of a larger one)."""
    yield draw_block(model, n, settings, rng, on_progress)


@dataclass(frozen=True)
class _BlockDraw:
    """One block's draw: what a worker process needs, sent to it once (picklable)."""

    model: FittedData
    settings: SamplingSettings

    def __call__(self, rows: int, rng: np.random.Generator) -> Sample:
        return draw_block(self.model, rows, self.settings, rng, None)


def _reported(
    model: FittedData,
    blocks: Generator[Sample, None, None],
    sizes: BlockSizes,
    workers: int,
    on_progress: ProgressCallback | None,
) -> Generator[Sample, None, None]:
    """``blocks`` as they come, reported as one GUM stage (a :class:`BlockProgress` per
    block; ``False`` from the callback stops, closing ``blocks``), then the appending and
    decoding stages, which ran inside each block."""
    report = StageReporter(on_progress)
    report.ledger = model.ledger
    report.start(Stage.GUM)
    iterations: list[int] = []
    independent = 0
    started = time.perf_counter()
    with closing(blocks):  # a consumer that stops early stops the workers
        for index, block in enumerate(blocks):
            iterations.append(len(block.history))
            independent += bool(block.independent)
            progress = BlockProgress(
                index + 1,
                len(sizes),
                block.n_records,
                iterations[-1],
                time.perf_counter() - started,
            )
            if not report.send(progress):
                report.stop()
            yield block
    workers = min(workers, len(sizes))
    report.finish(
        f"{len(sizes)} blocks of {sizes.largest:,} rows or fewer on {workers} "
        f"worker{'s' * (workers != 1)}; {min(iterations)}-{max(iterations)} iterations each"
        + (f"; the guard drew independent columns in {independent} blocks" if independent else "")
    )
    for stage in (Stage.APPEND, Stage.DECODE):
        report.start(stage)
        report.finish("within each block")


def joined(blocks: Sequence[Sample]) -> Sample:
    """Blocks as one sample: their rows in order, the first block's history (every block
    runs the same settings over the same targets), each stage's seconds summed over blocks
    (work, which exceeds the wall time when workers ran in parallel)."""
    first = blocks[0]
    seconds: dict[str, float] = {}
    for block in blocks:
        for stage, spent in block.stage_seconds.items():
            seconds[stage] = seconds.get(stage, 0.0) + spent
    return Sample(
        pd.concat([block.table for block in blocks], ignore_index=True),
        sum(block.n_records for block in blocks),
        first.history,
        first.appended,
        seconds,
        first.settings,
        tuple(dict.fromkeys(a for block in blocks for a in block.independent)),
        tuple(_iterations_of(block) for block in blocks),
        first.kept,
    )


def _iterations_of(block: Sample) -> int:
    return block.block_iterations[0] if block.block_iterations else len(block.history)
