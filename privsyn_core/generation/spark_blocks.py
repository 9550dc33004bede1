"""Synthetic rows made on Spark: every task makes its blocks, Spark writes them.

The rows are made as independent blocks (:mod:`privsyn_core.generation.blocks`); a block
needs the fitted model, its size and its seed, nothing else. So a Spark job over the block
indices (``spark.range(blocks)``, contiguous ranges per partition) makes them where the
cores are: each task draws its blocks (GUM, appending, decoding: the local path's own
:func:`~privsyn_core.generation.draw.draw_block`) and yields them as Arrow batches
(``DataFrame.mapInArrow``), and the DataFrame is written by Spark (Parquet, a folder of part
files). The driver holds no row.

What leaves the driver: the model as a release bundle's bytes
(:func:`~privsyn_core.release.bundle.model_bytes`, without a synthetic table), broadcast
once, and per task the sampling settings and the blocks' seeds (public choices). A bundle
holds only DP measurements and public or DP-estimated metadata, and it is the file the
owner may publish anyway, so nothing the owner alone may see (the table, its fingerprint,
the registry, diagnostics) can reach an executor; a model that read domains off the raw
data is not DP and is refused, as it is for a bundle. Each Python worker decodes the
bundle once (:func:`_model`) and keeps it while Spark reuses the worker.

Same rows as the local path: block ``i`` draws from ``BlockSeeds.generator(i)``, the
generator the local path gives block ``i`` for the same run generator and block size, and
GUM gives the same table whatever its threads. Partitions hold consecutive blocks in order
and Spark writes partition ``p`` as part file ``p``, so the folder read in file order is
the local table, row for row (``tests/test_spark_blocks.py``). A conditional sample
(``where``, :mod:`privsyn_core.generation.conditional`) is made the same way: each task makes
its blocks by rejection (:func:`~privsyn_core.generation.conditional.block_where`) from the
blocks' own seeds, and the conditions (released values only) travel with the settings, so
the rows are again the local ones. Generation is
post-processing: nothing is measured, nothing is spent, and a retried task makes the same
rows again.

Executors need this package (the same version as the driver: the task runs the engine),
NumPy, pandas and PyArrow; in local mode (``local[N]``) the workers run the driver's own
interpreter (:func:`~privsyn_core.spark_session.spark_session`). Each task runs
GUM on ``spark.task.cpus`` threads (default 1): Spark runs as many tasks at once as it has
cores, so threads within a task would oversubscribe them.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from privsyn_core.cores import limit_threads
from privsyn_core.errors import InputError, UsageError
from privsyn_core.generation.blocks import BlockSeeds, BlockSizes
from privsyn_core.generation.condition import Condition
from privsyn_core.generation.conditional import block_where
from privsyn_core.generation.draw import draw_block
from privsyn_core.generation.fitted import FittedModel, Where
from privsyn_core.generation.fitted_data import FittedData, Sample, SamplingSettings
from privsyn_core.generation.gum_settings import GumSettings
from privsyn_core.generation.identifiers import with_identifiers
from privsyn_core.generation.sample_blocks import BlockPlan, numbered
from privsyn_core.progress import Stage, StageReporter
from privsyn_core.release.bundle import load_model, model_bytes
from privsyn_core.spark_session import spark_session

#: partitions per core of the session: several blocks a task amortise its start, and more
#: tasks than cores even out blocks whose GUM takes longer
PARTITIONS_PER_CORE = 4


def sample_spark(
    model: FittedModel,
    n: int | None = None,
    spark: Any = None,
    *,
    seed: int | None = None,
    rng: np.random.Generator | None = None,
    gum: GumSettings | None = None,
    settings: SamplingSettings | None = None,
    where: Where | None = None,
) -> Any:
    """``model.sample``'s rows as a Spark DataFrame whose tasks make the blocks (see the
    module docstring): only the model's DP content is sent to the cluster, and the rows are
    the ones ``model.sample_blocks`` makes for the same seed, block size and conditions
    (``where``, checked here), in block order. Lazy, as any DataFrame: write it where it
    should go (``.write.parquet(...)``); each action makes the same rows again. ``spark`` is
    a SparkSession (default: the running one, or ``local[N]``)."""
    blocks = (
        model.generate_where(n, where, seed=seed, rng=rng, gum=gum, settings=settings)
        if where is not None
        else model.generate_blocks(n, seed=seed, rng=rng, gum=gum, settings=settings)
    )
    blocks.close()  # nothing is drawn here: Spark's tasks make the blocks
    return spark_rows(blocks.plan, spark).frame


def output_schema(model: FittedData) -> Any:
    """The synthetic table's Arrow schema, from the decoders alone (their type depends on
    the codec, never on the values drawn, :func:`privsyn_core.data.codecs._typed`): every
    code of every column decoded once. A column of only missing values is text, as the
    local Parquet writer makes it (:func:`privsyn_core.data.streamed.without_null_types`)."""
    import pyarrow as pa

    from privsyn_core.data.streamed import without_null_types

    longest = max(decoder.size for decoder in model.decoders)
    rng = np.random.default_rng(0)  # values are thrown away: only their types are kept
    frame = pd.concat(
        [
            decoder.decode(np.arange(longest, dtype=np.int64) % decoder.size, rng)
            for decoder in model.decoders
        ],
        axis=1,
    )
    frame = with_identifiers(frame, model.identifiers)
    return without_null_types(pa.Schema.from_pandas(frame, preserve_index=False)).remove_metadata()


@dataclass(frozen=True)
class SparkRows:
    """A sample's rows as a Spark DataFrame (lazy: made when an action runs) and what its
    tasks report back about each block (:meth:`sample`, after an action)."""

    frame: Any
    plan: BlockPlan
    schema: Any
    stats: Any  # an accumulator of {block index: (GUM history or iterations, independent)}

    def sample(self, seconds: float) -> Sample:
        """The sample without its rows (they are in the written folder), as
        :func:`~privsyn_core.generation.fitted.written` returns it: the columns with no rows,
        block 0's GUM history, each block's iterations."""
        stats: dict[int, tuple[Any, tuple[str, ...]]] = self.stats.value
        count = len(self.plan.sizes)
        if sorted(stats) != list(range(count)):
            raise InputError(f"Spark made {len(stats)} of the sample's {count} blocks")
        ordered = [stats[i] for i in range(count)]
        history = ordered[0][0]
        iterations = tuple(len(h) if isinstance(h, tuple) else h for h, _ in ordered)
        return Sample(
            self.schema.empty_table().to_pandas(),
            self.plan.sizes.rows,
            history,
            (),
            {Stage.GUM.value: seconds},
            self.plan.settings,
            tuple(dict.fromkeys(a for _, independent in ordered for a in independent)),
            iterations if count > 1 else (),
        )


def spark_rows(plan: BlockPlan, spark: Any = None) -> SparkRows:
    """The Spark job that makes ``plan``'s blocks (see the module docstring), not yet run.
    ``spark``: a SparkSession (default: the running one, or ``local[N]``)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    spark = spark or spark_session()
    context = spark.sparkContext
    bundle = model_bytes(plan.model)  # refuses a model that is not DP (raw domains)
    schema = output_schema(plan.model)
    count = len(plan.sizes)
    partitions = min(count, max(1, context.defaultParallelism) * PARTITIONS_PER_CORE)
    stats = context.accumulator({}, _BlockStats())
    task = _BlockTask(
        context.broadcast(bundle),
        hashlib.sha256(bundle).hexdigest(),
        plan.settings,
        (plan.sizes.rows, plan.sizes.blocks),
        plan.seeds,
        int(spark.conf.get("spark.task.cpus", "1") or 1),
        schema,
        stats,
        plan.where,
    )
    blocks = spark.range(0, count, 1, partitions)
    frame = blocks.mapInArrow(task, from_arrow_schema(schema))
    return SparkRows(frame, plan, schema, stats)


class _BlockStats:
    """A Spark accumulator (an ``AccumulatorParam`` by its two methods) of what each
    block's GUM did, keyed by block index: a retried task reports its blocks again, with
    the same values, so nothing is counted twice."""

    def zero(self, value: dict) -> dict:
        return {}

    def addInPlace(self, a: dict, b: dict) -> dict:  # noqa: N802 (Spark's name)
        a.update(b)
        return a


@dataclass(frozen=True)
class _BlockTask:
    """What a Spark task runs (pickled by reference to this class, so the executor runs
    this package's code): block indices in, the blocks' rows out as Arrow batches."""

    bundle: Any  # a Broadcast of the release bundle's bytes
    key: str  # its SHA-256: the worker's cached model is reused when it matches
    settings: SamplingSettings
    sizes: tuple[int, int]  # rows and blocks (BlockSizes)
    seeds: BlockSeeds
    threads: int
    schema: Any
    stats: Any
    #: the conditions every row satisfies (a conditional sample), or none
    where: tuple[Condition, ...] = ()

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        limit_threads(self.threads)
        model = _model(self.key, self.bundle)
        sizes = BlockSizes(*self.sizes)
        for batch in batches:
            for index in batch.column(0).to_pylist():
                stats = None
                for drawn in self._block(model, sizes, index):
                    if stats is None:  # the first draw's GUM stands for the block's
                        history = drawn.history if index == 0 else len(drawn.history)
                        stats = {index: (history, drawn.independent)}
                    table = pa.Table.from_pandas(
                        drawn.table, schema=self.schema, preserve_index=False
                    )
                    del drawn
                    yield from table.to_batches()
                self.stats.add(stats)

    def _block(self, model: FittedData, sizes: BlockSizes, index: int) -> Iterator[Sample]:
        """Block ``index``'s rows: one draw, or with conditions the draws of the rounds
        that kept its rows."""
        first_row = sizes.start(index)  # fresh ids count on from the rows before
        if not self.where:
            drawn = draw_block(
                model, sizes[index], self.settings, self.seeds.generator(index), None
            )
            yield from numbered(model.identifiers, iter([drawn]), first_row)
            return
        plan = BlockPlan(model, sizes, self.settings, self.seeds, where=self.where)
        yield from numbered(model.identifiers, block_where(plan, index), first_row)


#: the model this Python worker decoded last, by its bundle's SHA-256
_cached: tuple[str, FittedModel] | None = None


def _model(key: str, bundle: Any) -> FittedModel:
    """The broadcast bundle's model, decoded (and verified, :func:`load_model`) once per
    Python worker while Spark reuses it."""
    global _cached
    if _cached is None or _cached[0] != key:
        _cached = (key, load_model(bundle.value))
    return _cached[1]


def make_rows(plan: BlockPlan, spark: Any, folder: str) -> Sample:
    """Make ``plan``'s blocks on Spark and write them as Parquet at ``folder`` (a path Spark
    can write: on a cluster, shared storage), reporting the GUM, appending and decoding
    stages to ``plan.on_progress``. Returns the sample without its rows."""
    report = StageReporter(plan.on_progress)
    report.ledger = plan.model.ledger  # generation spends nothing: the model's own ledger
    report.start(Stage.GUM)
    started = time.perf_counter()
    rows = spark_rows(plan, spark)
    rows.frame.write.mode("errorifexists").parquet(folder)
    sample = rows.sample(time.perf_counter() - started)
    blocks = len(plan.sizes)
    iterations = sample.block_iterations or (len(sample.history),)
    report.finish(
        f"{blocks} block{'s' * (blocks != 1)} of {plan.sizes.largest:,} rows or fewer on Spark "
        f"({spark.sparkContext.master}); {min(iterations)}-{max(iterations)} iterations each"
    )
    for stage in (Stage.APPEND, Stage.DECODE):
        report.start(stage)
        report.finish("within each block, on Spark")
    return sample


#: what Spark leaves in a Parquet output folder besides the parts
_SPARK_MARKERS = ("_SUCCESS", "._SUCCESS.crc")


def check_parquet_folder(target: Path) -> None:
    """Refuse (:class:`UsageError`) an output that Spark's Parquet folder may not replace: a
    path whose folder does not exist, or an existing file or folder that is not a Parquet
    output (a folder of ``part-`` files and Spark's markers, or a Parquet file): replacing
    it would delete what the user keeps there."""
    if not target.parent.is_dir():
        raise UsageError(f"cannot write {target}: folder {target.parent} does not exist")
    if not os.access(target.parent, os.W_OK):
        raise UsageError(f"cannot write {target}: no permission to write in {target.parent}")
    if target.is_dir():
        strays = [p.name for p in target.iterdir() if not _spark_part(p.name)]
        if strays:
            raise UsageError(
                f"cannot write {target}: it is a folder holding {strays[0]!r}, not only the "
                "Parquet parts of an earlier output, and Spark's output would replace it"
            )
    elif target.exists() and not target.is_file():
        raise UsageError(f"cannot write {target}: it is not a regular file or folder")


def _spark_part(name: str) -> bool:
    bare = name[1:-4] if name.startswith(".") and name.endswith(".crc") else name
    return name in _SPARK_MARKERS or (bare.startswith("part-") and bare.endswith(".parquet"))


class SparkParquet:
    """The synthetic table's output when Spark makes the rows: a Parquet folder at
    ``target`` that appears whole or not at all, the counterpart of
    :class:`~privsyn_core.data.streamed.TableFile` (same use: ``with``, ``write``,
    ``commit``). Spark writes to a hidden folder beside ``target``; :meth:`commit` moves it
    into place, replacing an earlier output there; leaving without it removes it.

    ``write`` is the writer handed to :func:`~privsyn_core.generation.fitted.written`
    (through :func:`privsyn_core.pipeline.generate`'s ``write``): its ``make_rows`` gets the
    blocks' plan, and Spark makes and writes them. Blocks already made on this machine are
    not taken: Spark is to make them."""

    def __init__(self, target: Path, spark: Any) -> None:
        self.target = target
        self.spark = spark
        self.tmp: Path | None = None
        self.written = 0
        self.write = _SparkWrite(self)

    def __enter__(self) -> SparkParquet:
        self.tmp = self.target.parent / f".{self.target.name}.{uuid.uuid4().hex[:12]}.part"
        return self

    def make_rows(self, plan: BlockPlan) -> Sample:
        assert self.tmp is not None, "write inside the with block"
        sample = make_rows(plan, self.spark, str(self.tmp))
        self.written = sample.n_records
        return sample

    def commit(self) -> None:
        assert self.tmp is not None and self.tmp.is_dir(), "commit after the rows are written"
        old = None
        if self.target.exists():
            check_parquet_folder(self.target)  # still an output of ours: replaced
            old = self.target.parent / f".{self.target.name}.{uuid.uuid4().hex[:12]}.old"
            os.replace(self.target, old)
        os.replace(self.tmp, self.target)
        if old is not None:
            _remove(old)

    def __exit__(self, *_: object) -> None:
        if self.tmp is not None and self.tmp.exists():
            _remove(self.tmp)


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


@dataclass(frozen=True)
class _SparkWrite:
    """:class:`SparkParquet`'s writer: it takes a plan (``make_rows``), never rows."""

    output: SparkParquet

    def make_rows(self, plan: BlockPlan) -> Sample:
        return self.output.make_rows(plan)

    def __call__(self, blocks: Iterator[pd.DataFrame]) -> int:
        raise InputError("Spark makes the rows itself: hand it the blocks' plan, not rows")
