"""A fitted PrivSyn model: measure once, sample many.

Paper Algorithm 3 splits into two parts. Lines 1-4 read the private table, and each read is a
Gaussian measurement charged to the ledger (:func:`privsyn_core.pipeline.measure`). Lines 5-6
(consistency, GUM, appending, decoding) use only what those measurements returned, so by the
post-processing property of DP (Dwork and Roth 2014, Prop. 2.1; zCDP keeps it, Bun and
Steinke 2016, Lemma 1.8) they may run as often as wanted, with any settings and any number
of rows, at no further privacy cost.

:class:`FittedModel` is that boundary as a value. It holds the DP measurements made
consistent (paper 4.3) and the public or DP-estimated metadata that turns codes back into
values: codecs, the grouping of low-count values, the released schema, and the ledger that
paid for it all. It holds no row of the private table, and this module imports nothing
that reads or counts one (``tests/test_package_layout.py`` checks this). Consistency is
computed once when the model is made, so every sample, and every copy of the model loaded
from a release bundle (:mod:`privsyn_core.release.bundle`), works from the same targets.

``model.sample(n, seed=...)`` draws a table; ``model.generate(...)`` also returns GUM's
history and the stage timings. The same seed gives the same table.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from contextlib import closing
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import pandas as pd

from privsyn_core.config import SYNTHESIS_METHODS
from privsyn_core.data.codecs import BinnedCodec, with_fitted_tails
from privsyn_core.data.rules import Rule
from privsyn_core.domain import Domain, code_dtype
from privsyn_core.errors import InputError
from privsyn_core.generation.blocks import (
    DEFAULT_BLOCK_ROWS,
    BlockSeeds,
    BlockSizes,
    block_seeds,
    block_sizes,
    check_block_rows,
    check_workers,
    run_blocks,
)
from privsyn_core.generation.consistency import (
    ConsistencyReport,
    make_consistent,
    without_consistency,
)
from privsyn_core.generation.dependence import NoisyDependence, UnmeasuredPairs, unmeasured_pairs
from privsyn_core.generation.empty_cells import (
    EMPTY_SIGMAS,
    emptied_targets,
    empty_cell_rows,
    fill_empty_cells,
)
from privsyn_core.generation.grouping import ValueGrouping, declared_shares, decode
from privsyn_core.generation.gum import (
    GumIterationRecord,
    GumSettings,
    GumTarget,
    columns_of,
    fill_record_major,
    record_major,
    run_gum,
    score_below,
    table_score,
    within_noise_floor,
)
from privsyn_core.generation.identifiers import Identifier, numbered
from privsyn_core.generation.independence import (
    DEFAULT_THRESHOLD,
    check_threshold,
    independent_product,
    noise_pairs,
    noise_pairs_message,
)
from privsyn_core.generation.initial import Initial, Tree, dependency_tree, initial_columns
from privsyn_core.generation.kept import KeptPart, KeptSource, KeptTable
from privsyn_core.generation.mcf import run_mcf
from privsyn_core.generation.mrf import MrfSettings, run_mrf
from privsyn_core.generation.planned import PlannedSynthesis, plan_synthesis
from privsyn_core.generation.quasi_independence import (
    quasi_independent_marginals,
    quasi_pairs_message,
)
from privsyn_core.generation.rules import kept_rules
from privsyn_core.generation.sampling import conditional_column, shuffled_column
from privsyn_core.marginals import MarginalTable, NoisyMarginal
from privsyn_core.privacy.ledger import PrivacyLedger
from privsyn_core.progress import (
    BlockProgress,
    GumProgress,
    ProgressCallback,
    Stage,
    StageReporter,
)
from privsyn_core.selection.marginal_graph import AppendPlan, gum_components, plan_appending

if TYPE_CHECKING:
    from privsyn_core.generation.conditional import Condition


class ColumnDecoder(Protocol):
    """Declared codes of one column back to values. Every codec the engine makes
    (:class:`~privsyn_core.data.codecs.CategoryCodec`, ``BinnedCodec``, ``CodesCodec``) is
    one; all they hold is declared or a DP estimate."""

    @property
    def name(self) -> str: ...

    @property
    def size(self) -> int: ...

    def decode(self, codes: np.ndarray, rng: np.random.Generator) -> pd.Series: ...

    def labels(self) -> Sequence[object]:
        """Each code's value as a released count's label (None for the missing code)."""
        ...


@dataclass(frozen=True)
class SamplingSettings:
    """The post-processing choices of one sample; any of them may differ between samples of
    the same model (they change the synthetic table, never what was spent)."""

    gum: GumSettings = field(default_factory=GumSettings)
    #: synthesise attributes of degree 1 after GUM from their single marginal (paper 5.3)
    append_attributes: bool = True
    #: run GUM per connected component of the marginal graph (paper 5.3, separate and join)
    separate_and_join: bool = True
    #: "gum" (paper 5.2), the paper's min-cost-flow strawman "mcf" (paper 5.1), the lab's
    #: comparison (MCF reads the same ``gum`` settings for its passes and plateau rule),
    #: "mrf": a Markov random field fitted to the same targets, sampled by Gibbs chains
    #: (:mod:`privsyn_core.generation.mrf`; it starts from GUM's ``initial`` table),
    #: "gum+mrf": both, the closer table kept per component, or "auto" (the default, see
    #: :func:`~privsyn_core.generation.planned.resolve_synthesis`)
    synthesis: str = "auto"
    #: rows per block: a sample of more rows is made as independent blocks, each a whole draw
    #: (GUM, appending, decoding) with its own seed (:mod:`privsyn_core.generation.blocks`).
    #: The rows a sample holds, and the same seed with the same block size gives the same
    #: rows whatever the number of workers. Default chosen by measurement (README, "Blocks
    #: and workers"; ``benchmarks/evidence/block-size-2026-11-26.txt``): GUM's accuracy is
    #: about the same from tens of thousands of rows up, and a block of 100,000 rows reaches
    #: GUM's noise-floor stop in 3 iterations where one of 50,000 rows, farther from its
    #: targets by its coarser counts, runs on to the plateau rule (planted 600,000 x 100:
    #: 13 s against 37 s, 2-way L1 0.0278 against 0.0276)
    block_rows: int = DEFAULT_BLOCK_ROWS
    #: a measured pair whose dependence is within this many times what its noise alone gives
    #: is drawn as independent (:mod:`privsyn_core.generation.independence`); None: every
    #: pair as measured
    independence_threshold: float | None = DEFAULT_THRESHOLD
    #: a measured marginal's cells at most this many noise sigmas are targeted as empty, and
    #: the rows synthesis leaves in an empty cell are moved out
    #: (:mod:`privsyn_core.generation.empty_cells`); None: neither
    empty_sigmas: float | None = EMPTY_SIGMAS

    def __post_init__(self) -> None:
        if self.synthesis not in SYNTHESIS_METHODS:
            raise InputError(
                f"synthesis must be one of {', '.join(SYNTHESIS_METHODS)}, got {self.synthesis!r}"
            )
        check_threshold(self.independence_threshold)
        object.__setattr__(self, "block_rows", check_block_rows(self.block_rows))


@dataclass(frozen=True)
class Sample:
    """One synthetic table and how it was made."""

    table: pd.DataFrame
    n_records: int
    history: tuple[GumIterationRecord, ...]
    appended: tuple[AppendPlan, ...]
    stage_seconds: dict[str, float]
    settings: SamplingSettings
    #: attributes the guard drew as independent columns (:func:`_guard`), in engine order;
    #: of a sample of several blocks, those it drew so in any block
    independent: tuple[str, ...] = ()
    #: GUM's iterations in each block, when there were several (``history`` is the first
    #: block's; a hundred million rows are thousands of blocks, whose histories are not kept)
    block_iterations: tuple[int, ...] = ()
    #: which of GUM's tables came out (of the first block, like ``history``); None when GUM
    #: had no marginal to iterate on
    kept: KeptTable | None = None

    @property
    def blocks(self) -> int:
        return max(1, len(self.block_iterations))


@dataclass(frozen=True)
class FittedModel:
    """DP measurements, made consistent, and what decodes them (see the module docstring)."""

    #: what the measurements cost; sampling never adds to it. A model loaded from a release
    #: bundle carries figures recomputed from its noise scales, never the file's own
    #: (:func:`~privsyn_core.privacy.ledger.verified`)
    ledger: PrivacyLedger
    #: the engine's attributes and numbers of codes (after grouping low-count values)
    engine: Domain
    #: declared codes <-> engine codes, per column (paper 5.3)
    groupings: tuple[ValueGrouping, ...]
    #: consistent 1-way targets on engine codes, one per column, in column order
    one_way: tuple[MarginalTable, ...]
    #: consistent targets of the selected and combined marginals, on engine codes
    marginals: tuple[MarginalTable, ...]
    consistency: ConsistencyReport
    #: one per column: declared codes -> values
    decoders: tuple[ColumnDecoder, ...]
    #: settings used when a sample does not override them (the fit's configuration)
    defaults: SamplingSettings = field(default_factory=SamplingSettings)
    #: the DP measurements as made (declared 1-way, then the selected marginals), for the
    #: release bundle; consistency already folded them into ``one_way`` and ``marginals``
    noisy: tuple[NoisyMarginal, ...] = ()
    #: the released schema (JSON-ready): each column's codec and where its domain came from
    schema: tuple[Mapping[str, Any], ...] = ()
    #: the configuration of the fit (JSON-ready), kept for the release bundle
    config: Mapping[str, Any] = field(default_factory=dict)
    #: the noisy InDif scores on the engine's attributes (None when the run measured none):
    #: GUM judges the pairs no marginal covers by them
    #: (:mod:`privsyn_core.generation.dependence`)
    dependence: NoisyDependence | None = None
    #: columns written as fresh ids 1..n, not modelled
    #: (:mod:`privsyn_core.generation.identifiers`)
    identifiers: tuple[Identifier, ...] = ()
    #: the schema's rules, kept by every row (:mod:`privsyn_core.generation.rules`)
    rules: tuple[Rule, ...] = ()

    def __post_init__(self) -> None:
        d = len(self.engine)
        if not (len(self.groupings) == len(self.one_way) == len(self.decoders) == d):
            raise InputError(
                f"a fitted model needs one grouping, 1-way target and decoder per column "
                f"({d}), got {len(self.groupings)}, {len(self.one_way)} and {len(self.decoders)}"
            )

    @cached_property
    def sampling_decoders(self) -> tuple[ColumnDecoder, ...]:
        """The decoders with each numeric tail thinning as its 1-way target asks
        (:func:`~privsyn_core.data.codecs.with_fitted_tails`): post-processing of the
        release's DP content, the same in every sample, worked out once per model (a sample
        of thousands of blocks decodes each with them)."""
        return tuple(
            with_fitted_tails(decoder, declared_shares(self.one_way[row].values, grouping))
            if isinstance(decoder, BinnedCodec)
            else decoder
            for row, (decoder, grouping) in enumerate(
                zip(self.decoders, self.groupings, strict=True)
            )
        )

    @property
    def modelled(self) -> tuple[str, ...]:
        """The columns the model makes, in the order of its decoders (no identifier)."""
        return tuple(decoder.name for decoder in self.decoders)

    @property
    def columns(self) -> tuple[str, ...]:
        """The synthetic table's columns, in order (identifiers at their places)."""
        names = [decoder.name for decoder in self.decoders]
        for identifier in sorted(self.identifiers, key=lambda i: i.position):
            names.insert(min(identifier.position, len(names)), identifier.name)
        return tuple(names)

    def noise_scales(self) -> dict[tuple[str, ...], float]:
        """Each measurement's noise standard deviation per cell, in counts, by attributes
        (public: the ledger paid for exactly these)."""
        return {m.attributes: m.sigma for m in self.noisy}

    @property
    def default_rows(self) -> int:
        """The noisy consistent total: the row count when a sample gives none (the true row
        count is private; this estimate is DP)."""
        return max(1, round(self.consistency.total))

    @property
    def code_dtype(self) -> np.dtype:
        return code_dtype(max(decoder.size for decoder in self.decoders))

    def planned(self, settings: SamplingSettings, workers: int) -> PlannedSynthesis:
        """The synthesis ``settings`` make on this model's attributes with ``workers``."""
        return plan_synthesis(
            settings.synthesis,
            settings.gum.iterations,
            settings.block_rows,
            workers,
            len(self.engine),
        )

    def check_fits(
        self,
        n_records: int,
        settings: SamplingSettings | None = None,
        *,
        workers: int = 1,
        streamed: bool = False,
    ) -> None:
        """Refuse (:class:`InputError`) a row count below 1 or one the machine's memory
        cannot hold, before any work (``settings``: the sample's, default the model's).
        Streamed (:meth:`generate_blocks`), only ``workers`` blocks are held at once, so
        any number of rows is fine when one block is."""
        check_rows(n_records)
        settings = self.defaults if settings is None else settings
        self.planned(settings, workers).check_fits(
            int(n_records), len(self.engine), self.code_dtype.itemsize, streamed=streamed
        )

    def sample(
        self,
        n: int | None = None,
        *,
        seed: int | None = None,
        rng: np.random.Generator | None = None,
        gum: GumSettings | None = None,
        workers: int | None = None,
        where: Mapping[str, Any] | Sequence[str] | None = None,
    ) -> pd.DataFrame:
        """A synthetic table of ``n`` rows (default :attr:`default_rows`), at no privacy
        cost. ``seed`` (or an explicit ``rng``) makes it reproducible: the same seed gives
        the same table. ``gum`` overrides GUM's settings for this sample only. ``workers``
        processes make its blocks (default: every core this process may use; the table is
        the same for any number). ``where`` conditions the sample on released values
        (``{"sex": "Female", "age": "30..40"}``; :meth:`generate_where`)."""
        return self.generate(n, seed=seed, rng=rng, gum=gum, workers=workers, where=where).table

    def sample_blocks(
        self,
        n: int | None = None,
        *,
        seed: int | None = None,
        rng: np.random.Generator | None = None,
        gum: GumSettings | None = None,
        settings: SamplingSettings | None = None,
        workers: int | None = None,
        on_progress: ProgressCallback | None = None,
        where: Mapping[str, Any] | Sequence[str] | None = None,
    ) -> Iterator[pd.DataFrame]:
        """:meth:`sample`'s rows as they are made, block by block (their concatenation is
        :meth:`sample`'s table for the same seed and settings): for writing a table larger
        than memory (``privsyn generate --rows 100000000``)."""
        if where is not None:
            kept = self.generate_where(
                n, where, seed=seed, rng=rng, gum=gum, settings=settings, workers=workers
            )
            return (block.table for block in kept)
        drawn = self.generate_blocks(
            n,
            seed=seed,
            rng=rng,
            gum=gum,
            settings=settings,
            workers=workers,
            on_progress=on_progress,
        )
        return (block.table for block in drawn)

    def generate(
        self,
        n: int | None = None,
        *,
        seed: int | None = None,
        rng: np.random.Generator | None = None,
        gum: GumSettings | None = None,
        settings: SamplingSettings | None = None,
        on_progress: ProgressCallback | None = None,
        workers: int | None = None,
        where: Mapping[str, Any] | Sequence[str] | None = None,
    ) -> Sample:
        """:meth:`sample` with everything about the draw: GUM's history, the appended
        attributes and stage timings. ``settings`` replaces all sampling settings; ``gum``
        only GUM's. ``on_progress`` gets the GUM, appending and decoding stages (returning
        ``False`` stops with :class:`~privsyn_core.progress.SynthesisCancelled`, whose
        ledger is this model's: a sample spends nothing). The whole table is held in
        memory; :meth:`generate_blocks` hands it over block by block. ``where``: see
        :meth:`generate_where` (``on_progress`` is then not called)."""
        settings = self._settings(gum, settings)
        n = self.default_rows if n is None else n
        self.check_fits(n, settings)
        drawn = (
            self.generate_where(n, where, seed=seed, rng=rng, settings=settings, workers=workers)
            if where is not None
            else self.generate_blocks(
                n, seed=seed, rng=rng, settings=settings, workers=workers, on_progress=on_progress
            )
        )
        blocks = list(drawn)
        return blocks[0] if len(blocks) == 1 else _joined(blocks)

    def generate_where(
        self,
        n: int | None,
        where: Mapping[str, Any] | Sequence[str],
        *,
        seed: int | None = None,
        rng: np.random.Generator | None = None,
        gum: GumSettings | None = None,
        settings: SamplingSettings | None = None,
        workers: int | None = None,
    ) -> PlannedBlocks:
        """``n`` rows (default :attr:`default_rows`) that satisfy every condition of
        ``where``, as blocks of kept rows (:mod:`privsyn_core.generation.conditional`):
        ``{"sex": "Female", "age": "30..40"}``, or ``--where`` texts
        (``["sex=Female", "age>=30"]``). Blocks are drawn as :meth:`generate_blocks` draws
        them and the rows that match are kept (rejection), so the rows follow the model's
        own conditional distribution; post-processing, at no privacy cost. The conditions,
        and the bound on the draws they need, are checked when this is called (a readable
        :class:`InputError`); the same seed and conditions give the same rows."""
        from privsyn_core.generation.conditional import block_where, check_bound, resolve

        if seed is not None and rng is not None:
            raise InputError("give a seed or a random generator, not both")
        rng = rng if rng is not None else np.random.default_rng(seed)
        settings = self._settings(gum, settings)
        n = self.default_rows if n is None else n
        check_rows(n)
        conditions = resolve(self, where)
        check_bound(self, int(n), conditions)  # before any draw
        # the blocks of an unconditioned sample of n rows, each made by rejection
        sizes = block_sizes(int(n), settings.block_rows)
        plan = BlockPlan(self, sizes, settings, block_seeds(rng, len(sizes)), where=conditions)
        blocks = (sample for i in range(len(sizes)) for sample in block_where(plan, i, workers))
        return PlannedBlocks(numbered(self.identifiers, blocks), plan)

    def generate_blocks(
        self,
        n: int | None = None,
        *,
        seed: int | None = None,
        rng: np.random.Generator | None = None,
        gum: GumSettings | None = None,
        settings: SamplingSettings | None = None,
        on_progress: ProgressCallback | None = None,
        workers: int | None = None,
    ) -> PlannedBlocks:
        """The sample's blocks (:mod:`privsyn_core.generation.blocks`) in order, each a
        :class:`Sample` of its rows, made by ``workers`` processes and handed over as each
        is decoded; at most ``workers`` blocks are held at once. The arguments are checked,
        and the blocks' memory, when this is called, not when the first block is asked for.

        A sample of one block (``n`` at most :attr:`SamplingSettings.block_rows`) is drawn
        here from ``rng`` itself and reports every GUM iteration; a sample of several
        reports the GUM stage over all blocks and a
        :class:`~privsyn_core.progress.BlockProgress` per block."""
        if seed is not None and rng is not None:
            raise InputError("give a seed or a random generator, not both")
        rng = rng if rng is not None else np.random.default_rng(seed)
        settings = self._settings(gum, settings)
        n = self.default_rows if n is None else n
        count = check_workers(workers)
        self.check_fits(n, settings, workers=count, streamed=True)
        sizes = block_sizes(int(n), settings.block_rows)
        seeds = block_seeds(rng, len(sizes))
        plan = BlockPlan(self, sizes, settings, seeds, on_progress)
        if len(sizes) == 1:
            single = _single(self, int(n), settings, rng, on_progress)
            return PlannedBlocks(numbered(self.identifiers, single), plan)
        work = _BlockDraw(self, settings)
        generators = (seeds.generator(index) for index in range(len(sizes)))
        blocks = _reported(
            self, run_blocks(work, sizes, generators, count), sizes, count, on_progress
        )
        return PlannedBlocks(numbered(self.identifiers, blocks), plan)

    def sample_spark(
        self,
        n: int | None = None,
        spark: Any = None,
        *,
        seed: int | None = None,
        rng: np.random.Generator | None = None,
        gum: GumSettings | None = None,
        settings: SamplingSettings | None = None,
        where: Mapping[str, Any] | Sequence[str] | None = None,
    ) -> Any:
        """:meth:`sample`'s rows as a Spark DataFrame whose tasks make the blocks
        (:mod:`privsyn_core.generation.spark_blocks`): only this model's DP content is sent
        to the cluster, and the rows are the ones :meth:`sample_blocks` makes for the same
        seed, block size and conditions (``where``, checked here), in block order. Lazy, as
        any DataFrame: write it where it should go (``.write.parquet(...)``); each action
        makes the same rows again. ``spark`` is a SparkSession (default: the running one, or
        ``local[N]``)."""
        from privsyn_core.generation.spark_blocks import spark_rows

        blocks = (
            self.generate_where(n, where, seed=seed, rng=rng, gum=gum, settings=settings)
            if where is not None
            else self.generate_blocks(n, seed=seed, rng=rng, gum=gum, settings=settings)
        )
        blocks.close()  # nothing is drawn here: Spark's tasks make the blocks
        return spark_rows(blocks.plan, spark).frame

    def _settings(
        self, gum: GumSettings | None, settings: SamplingSettings | None
    ) -> SamplingSettings:
        settings = settings or self.defaults
        return settings if gum is None else replace(settings, gum=gum)

    def save(self, path: str | Path, synthetic: pd.DataFrame | None = None) -> None:
        """Write this model as a release bundle (with ``synthetic``, if given, as its
        synthetic table); :meth:`load` reads it back."""
        from privsyn_core.release.bundle import save_model

        save_model(self, path, synthetic)

    @staticmethod
    def load(path: str | Path) -> FittedModel:
        """The model in the release bundle at ``path`` (checked; a clear
        :class:`InputError` for a damaged, foreign or older bundle)."""
        from privsyn_core.release.bundle import load_model

        return load_model(path)


def check_rows(n_records: object) -> None:
    """Refuse a number of synthetic rows that is not a whole number of at least 1 (a public
    choice, checked before anything is spent)."""
    if isinstance(n_records, bool) or not isinstance(n_records, int | np.integer):
        raise InputError(f"the number of rows must be a whole number, got {n_records!r}")
    if n_records < 1:
        raise InputError(f"the number of synthetic rows must be at least 1, got {n_records}")


def fit_model(
    ledger: PrivacyLedger,
    engine: Domain,
    groupings: Sequence[ValueGrouping],
    grouped: Sequence[NoisyMarginal],
    measured: Sequence[NoisyMarginal],
    decoders: Sequence[ColumnDecoder],
    *,
    consistency_rounds: int,
    defaults: SamplingSettings,
    consistent: bool = True,
    noisy: Sequence[NoisyMarginal] = (),
    schema: Sequence[Mapping[str, Any]] = (),
    config: Mapping[str, Any] | None = None,
    dependence: NoisyDependence | None = None,
    identifiers: Sequence[Identifier] = (),
    rules: Sequence[Rule] = (),
) -> FittedModel:
    """The model from a run's measurements: ``grouped`` are the noisy 1-way marginals on
    engine codes, ``measured`` the selected ones. Makes them consistent (paper 4.3), once;
    ``consistent=False`` is the paper lab's "consistency off" arm (each table normalised alone)."""
    tables, consistency = (
        make_consistent((*grouped, *measured), max_rounds=consistency_rounds)
        if consistent
        else without_consistency((*grouped, *measured))
    )
    d = len(engine)
    return FittedModel(
        ledger=ledger,
        engine=engine,
        groupings=tuple(groupings),
        one_way=tuple(tables[:d]),
        marginals=tuple(tables[d:]),
        consistency=consistency,
        decoders=tuple(decoders),
        defaults=defaults,
        noisy=tuple(noisy),
        schema=tuple(schema),
        config=dict(config or {}),
        dependence=dependence,
        identifiers=tuple(identifiers),
        rules=tuple(rules),
    )


@dataclass(frozen=True)
class BlockPlan:
    """Everything that decides a sample's rows, wherever its blocks are made: the model,
    the rows per block, the settings, every block's seed and the conditions. Block ``i`` is
    ``draw_block(model, sizes[i], settings, seeds.generator(i))``, or with conditions (``where``)
    :func:`~privsyn_core.generation.conditional.block_where`, here, on a worker process or
    on a Spark task alike."""

    model: FittedModel
    sizes: BlockSizes
    settings: SamplingSettings
    seeds: BlockSeeds
    on_progress: ProgressCallback | None = None
    #: the conditions every row satisfies (:meth:`FittedModel.generate_where`), or none
    where: tuple[Condition, ...] = ()


class PlannedBlocks(Generator[Sample, None, None]):
    """:meth:`FittedModel.generate_blocks`'s blocks, made on this machine when iterated,
    with the :class:`BlockPlan` they come from: :func:`written` hands a writer that makes
    the rows itself (Spark, :class:`~privsyn_core.generation.spark_blocks.SparkParquet`)
    the plan instead, so nothing is made here. Nothing runs before the first block is
    asked for."""

    def __init__(self, blocks: Generator[Sample, None, None], plan: BlockPlan) -> None:
        self._blocks = blocks
        self.plan = plan

    def send(self, value: None) -> Sample:
        return self._blocks.send(value)

    def throw(self, *args: Any) -> Sample:
        return self._blocks.throw(*args)

    def close(self) -> None:
        self._blocks.close()


def _single(
    model: FittedModel,
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

    model: FittedModel
    settings: SamplingSettings

    def __call__(self, rows: int, rng: np.random.Generator) -> Sample:
        return draw_block(self.model, rows, self.settings, rng, None)


def _reported(
    model: FittedModel,
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


def written(blocks: Iterator[Sample], write: Callable[[Iterator[pd.DataFrame]], object]) -> Sample:
    """Hand the tables of ``blocks`` (:meth:`FittedModel.generate_blocks`) to ``write`` (a
    streamed writer, which consumes them one by one) and return the sample without its
    rows: a sample of several blocks holds an empty table of its columns; a sample of one
    block keeps its table (no larger than a block), as :meth:`FittedModel.generate` would.

    A writer with a ``make_rows`` method makes the rows itself (Spark's tasks make and
    write them, :mod:`privsyn_core.generation.spark_blocks`): it gets the blocks' plan,
    none is made here, and what it returns (a sample without rows) is returned."""
    make_rows = getattr(write, "make_rows", None)
    if make_rows is not None and isinstance(blocks, PlannedBlocks):
        blocks.close()
        return make_rows(blocks.plan)
    kept: list[Sample] = []

    def tables() -> Iterator[pd.DataFrame]:
        for block in blocks:
            if kept:  # a second block: none of the rows is kept, nor its history
                kept[0] = replace(kept[0], table=_columns_only(kept[0].table))
                light = replace(block, table=_columns_only(block.table), history=(), appended=())
                kept.append(replace(light, block_iterations=(len(block.history),)))
            else:
                kept.append(block)
            yield block.table
            del block

    write(tables())
    return kept[0] if len(kept) == 1 else _joined(kept)


def _columns_only(table: pd.DataFrame) -> pd.DataFrame:
    """``table``'s columns and types without its rows, holding none of its memory (a slice
    of no rows is a view that keeps the whole block alive: 5 MB a block of adult-coded,
    gigabytes over a hundred million rows)."""
    return table.iloc[:0].copy()


def _iterations_of(block: Sample) -> int:
    return block.block_iterations[0] if block.block_iterations else len(block.history)


def _joined(blocks: Sequence[Sample]) -> Sample:
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


def draw_block(
    model: FittedModel,
    n: int,
    settings: SamplingSettings,
    rng: np.random.Generator,
    on_progress: ProgressCallback | None,
) -> Sample:
    """GUM, appending and decoding (paper Algorithm 3, lines 5-6) from the model alone."""
    report = StageReporter(on_progress)
    report.ledger = model.ledger
    engine, groupings = model.engine, model.groupings
    d = len(engine)
    dtype = model.code_dtype

    report.start(Stage.GUM)
    method = model.planned(settings, workers=1).method  # as the memory check planned it
    independent_pairs = noise_pairs(
        model.marginals, model.noise_scales(), settings.independence_threshold
    )
    marginals, quasi = quasi_independent_marginals(
        model.marginals, model.noisy, settings.independence_threshold, independent_pairs, d
    )
    masks: dict[tuple[str, ...], np.ndarray] = {}
    if settings.empty_sigmas is not None:
        emptied, masks = emptied_targets(
            marginals, model.noise_scales(), settings.empty_sigmas, independent_pairs
        )
        marginals = tuple(emptied)
    multiway = [t for t in marginals if len(t.attributes) > 1]
    appended = (
        plan_appending(engine.attributes, [t.attributes for t in multiway])
        if settings.append_attributes
        else ()
    )
    peeled = {p.marginal for p in appended}
    gum_marginals = [t for t in multiway if t.attributes not in peeled]
    leaves = {p.leaf for p in appended}
    synthetic = np.zeros((d, n), dtype=dtype)
    components = _gum_problems(
        [a for a in engine if a not in leaves],
        gum_marginals,
        model.one_way,
        engine,
        n,
        settings.separate_and_join,
        settings.gum.initial,
        rng,
        dtype,
        noise_l1(model),
        independent_pairs,
    )

    planned = {
        "mrf": MrfSettings().sweeps,
        "gum+mrf": settings.gum.iterations + MrfSettings().sweeps,
    }.get(method, settings.gum.iterations)
    done_before = 0  # GUM's iterations, when the MRF's sweeps follow them

    def on_iteration(record: GumIterationRecord) -> bool:
        record = _after(record, done_before)
        return report.send(
            GumProgress(
                record.iteration,
                planned,
                record.alpha,
                record.mean_error,
                record.errors,
                record.seconds,
                record.method,
                record.table_error,
                record.kept,
            )
        )

    problems = [(arr, targets) for _, arr, targets in components]
    independent: list[str] = []
    judged: list[UnmeasuredPairs | None] = [None] * len(components)
    chosen: list[bool] | None = None  # "gum+mrf": each component's kept table is the MRF's
    if method == "mcf":
        start = 0.0
        history, finished = run_mcf(problems, settings.gum, rng, on_iteration)
    else:
        judged = [
            None
            if model.dependence is None or not settings.gum.judge_unmeasured
            else unmeasured_pairs(
                names,
                engine.as_dict(),
                [t.attributes for t in targets],
                model.dependence,
                model.consistency.total,
            )
            for names, _, targets in components
        ]
        start = _start_score(problems, judged) if settings.gum.keep_best else 0.0
        if method in ("mrf", "gum+mrf"):  # the trees the starts were drawn along
            trees: list[Tree] = [
                dependency_tree(
                    names,
                    [t for t in gum_marginals if t.attributes[0] in names],
                    independent_pairs,
                )
                if settings.gum.initial == "tree"
                else {name: {} for name in names}
                for names, _, _ in components
            ]
            rows = [{a: i for i, a in enumerate(names)} for names, _, _ in components]
        if method == "mrf":
            history, finished = run_mrf(
                problems, trees, rows, rng, on_iteration=on_iteration, unmeasured=judged
            )
        elif method == "gum+mrf":
            starts = [(arr.copy(), targets) for arr, targets in problems]
            history, finished = run_gum(problems, settings.gum, rng, on_iteration, judged)
            done_before = len(history)
            if finished and not within_noise_floor(problems, settings.gum.noise_floor):
                sweeps, finished = run_mrf(
                    starts, trees, rows, rng, on_iteration=on_iteration, unmeasured=judged
                )
                history = [*history, *(_after(r, done_before) for r in sweeps)]
                chosen = _closer(problems, starts, judged)
            del starts
        else:
            history, finished = run_gum(problems, settings.gum, rng, on_iteration, judged)
    if not finished:
        report.stop()
    if method != "mcf" and settings.gum.keep_best:
        # its own stream: a table the guard keeps is drawn exactly as without the guard
        independent = _guard(components, judged, model, rng.spawn(1)[0])
    returned = _kept_table(
        components,
        history,
        done_before if method == "gum+mrf" else len(history) if method != "mrf" else 0,
        chosen,
        set(independent),
        (start, _start_score(problems, judged))
        if settings.gum.keep_best and method != "mcf"
        else None,
    )
    for names, arr, _ in components:
        # one transposing copy: reading a record-major attribute alone streams the whole array
        columns = columns_of(arr, len(names))
        for row, name in enumerate(names):
            synthetic[engine.index(name)] = columns[row]
        del columns
    if chosen is not None:
        done = (
            f"{done_before} GUM iterations and {len(history) - done_before} MRF sweeps over "
            f"{len(gum_marginals)} marginals; kept the MRF's table in {sum(chosen)} of "
            f"{len(components)} components, GUM's in the rest (whichever is closer to the "
            "noisy marginals and InDif scores)"
        )
    else:
        done = (
            f"{len(history)} {'MRF sweeps' if method == 'mrf' else 'iterations'} "
            f"over {len(gum_marginals)} marginals"
            + ("" if returned is None or returned.is_last else f"; {_clause(returned.words())}")
            + (
                "; GUM's table is within its noise floor, so no MRF was fitted"
                if method == "gum+mrf" and finished
                else ""
            )
        )
    report.finish(
        done
        + (f"; {noise_pairs_message(len(independent_pairs))}" if independent_pairs else "")
        + (f"; {quasi_pairs_message(quasi)}" if quasi else "")
        + (f"; {guard_message(independent)}" if independent else "")
    )

    report.start(Stage.APPEND)
    by_attributes = {
        t.attributes: independent_product(t) if t.attributes in independent_pairs else t
        for t in marginals
    }
    for plan in appended:
        synthetic[engine.index(plan.leaf)] = _append(
            plan, by_attributes[plan.marginal], synthetic, engine, rng
        )
    appended_note = f"{len(appended)} attributes appended"
    if masks:
        found = sum(empty_cell_rows(synthetic, engine, a, m).size for a, m in masks.items())
        left = fill_empty_cells(
            synthetic, engine, list(by_attributes.values()), masks, rng, model.one_way
        )
        appended_note += f"; {found - left} rows moved out of combinations measured as empty"
    report.finish(appended_note)

    report.start(Stage.DECODE)
    declared = np.empty((d, n), dtype=dtype)  # declared codes never exceed the decoders' sizes
    for row, grouping in enumerate(groupings):
        declared[row] = decode(synthetic[row], grouping, rng, model.consistency.total / n)
    del synthetic
    frame = pd.concat(
        [
            decoder.decode(declared[row].astype(np.int64), rng)
            for row, decoder in enumerate(model.sampling_decoders)
        ],
        axis=1,
    )
    kept = kept_rules(frame, model, rng) if model.rules else 0
    report.finish(
        f"{n} rows" + (f"; {kept} values changed to keep the schema's rules" if kept else "")
    )
    return Sample(
        frame,
        n,
        tuple(history),
        tuple(appended),
        dict(report.seconds),
        settings,
        tuple(a for a in engine if a in independent),
        kept=returned,
    )


def _clause(sentence: str) -> str:
    """A sentence as a clause of the stage's summary: lower case, no full stop."""
    return sentence[:1].lower() + sentence[1:].rstrip(".")


def _after(record: GumIterationRecord, steps: int) -> GumIterationRecord:
    """``record`` of an MRF run that follows ``steps`` GUM iterations, its steps counted
    on from theirs (a starting table stays 0); unchanged when ``steps`` is 0."""
    if not steps or record.method != "mrf":
        return record
    kept = tuple(at + steps if at else 0 for at in record.kept)
    return replace(record, iteration=steps + record.iteration, kept=kept)


def _kept_table(
    components: Sequence[tuple[list[str], np.ndarray, list[GumTarget]]],
    history: Sequence[GumIterationRecord],
    iterations: int,
    mrf_chosen: Sequence[bool] | None,
    independent: set[str],
    scores: tuple[float, float] | None,
) -> KeptTable | None:
    """Which table each component with targets returned (:class:`KeptTable`): read off the
    last record of GUM (and of the MRF) the step each one's kept table was made at, as GUM
    recorded it; then the MRF's table where it was closer, and the guard's independent
    columns where they replaced GUM's. ``scores``: the starting tables' score and the
    returned table's (both :func:`_start_score`), None when GUM returned its last table."""
    parts = [(names, len(targets)) for names, _, targets in components if targets]
    if not parts or not history:
        return None
    gum = history[iterations - 1] if iterations else None
    sweep = history[-1] if len(history) > iterations else None
    everywhere = [True] * len(components)  # the MRF alone: its table in every component
    chosen = [
        c
        for c, (_, _, targets) in zip(mrf_chosen or everywhere, components, strict=True)
        if targets
    ]
    kept: list[KeptPart] = []
    for k, (names, marginals) in enumerate(parts):
        source: KeptSource = "gum"
        at = iterations
        if gum is not None and gum.kept:
            at = gum.kept[k]
        if sweep is not None and chosen[k]:
            source = "mrf"
            at = sweep.kept[k] if sweep.kept else len(history)
        if set(names) <= independent:
            source, at = "independent", 0
        kept.append(KeptPart(source, at, marginals))
    start, score = scores if scores is not None else (None, None)
    return KeptTable(tuple(kept), iterations, len(history) - iterations, score, start)


def _guard(
    components: Sequence[tuple[list[str], np.ndarray, list[GumTarget]]],
    judged: Sequence[UnmeasuredPairs | None],
    model: FittedModel,
    rng: np.random.Generator,
) -> list[str]:
    """The method must not be worse than its own cheapest model (issue 22): each component's
    table is weighed (:func:`~privsyn_core.generation.gum.table_score`, DP outputs only)
    against independent columns drawn from the consistent 1-way marginals, and replaced by
    them when they come closer. Returns the attributes so replaced."""
    replaced: list[str] = []
    for (names, arr, targets), pairs in zip(components, judged, strict=True):
        if not targets:
            continue
        n = arr.shape[1]
        columns = np.empty((len(names), n), dtype=arr.dtype)  # codes, not int64: 8x less
        for row, a in enumerate(names):
            columns[row] = shuffled_column(model.one_way[model.engine.index(a)].values, n, rng)
        cheapest = record_major(len(names), n, arr.dtype)
        fill_record_major(cheapest, columns)
        del columns
        # independent columns usually lose on the measured marginals alone: their unmeasured
        # pairs are then not counted
        kept = table_score(arr, targets, pairs)
        score, exact = score_below(cheapest, targets, pairs, kept)
        if exact and score < kept:
            np.copyto(arr, cheapest)
            replaced.extend(names)
    return replaced


def guard_message(attributes: Sequence[str]) -> str:
    """What the guard did, for the GUM stage and the Marginals page."""
    return (
        f"{len(attributes)} attributes drawn as independent columns from their 1-way "
        "marginals: that table comes closer to the noisy marginals and InDif scores than "
        "any GUM made from the selected marginals"
    )


def _closer(
    kept: Sequence[tuple[np.ndarray, Sequence[GumTarget]]],
    others: Sequence[tuple[np.ndarray, Sequence[GumTarget]]],
    judged: Sequence[UnmeasuredPairs | None],
) -> list[bool]:
    """Per component, the table of ``kept`` or ``others`` closer to the measurements
    (:func:`~privsyn_core.generation.gum.table_score`: DP outputs only), written into
    ``kept``; whether each came from ``others``. Components are drawn independently of each
    other (paper 5.3), so each may come from either method."""
    taken = []
    for (mine, targets), (theirs, _), pairs in zip(kept, others, judged, strict=True):
        closer = bool(targets) and table_score(theirs, targets, pairs) < table_score(
            mine, targets, pairs
        )
        if closer:
            mine[...] = theirs
        taken.append(closer)
    return taken


def _start_score(
    problems: Sequence[tuple[np.ndarray, Sequence[GumTarget]]],
    judged: Sequence[UnmeasuredPairs | None],
) -> float:
    """The initial tables' :func:`~privsyn_core.generation.gum.table_score` (what GUM's kept
    table is weighed against), weighted as GUM weighs them."""
    scored = [
        (table_score(arr, targets, pairs), len(targets))
        for (arr, targets), pairs in zip(problems, judged, strict=True)
        if targets
    ]
    weight = sum(w for _, w in scored)
    return sum(s * w for s, w in scored) / weight if weight else 0.0


def noise_l1(model: FittedModel) -> dict[tuple[str, ...], float]:
    """Each measured marginal's expected L1 (frequencies) from its measurement noise,
    ``cells * sigma * sqrt(2 / pi) / total`` (the mean absolute value of Gaussian noise):
    public, from the noise scales and the noisy total (GUM's noise-floor stop)."""
    total = max(1.0, float(model.consistency.total))
    return {m.attributes: m.cells * m.sigma * math.sqrt(2 / math.pi) / total for m in model.noisy}


def _gum_problems(
    attributes: Sequence[str],
    marginals: Sequence[MarginalTable],
    one_way: Sequence[MarginalTable],
    engine: Domain,
    n: int,
    separate: bool,
    initial: Initial,
    rng: np.random.Generator,
    dtype: np.dtype,
    noise: Mapping[tuple[str, ...], float] | None = None,
    independent: frozenset[tuple[str, ...]] = frozenset(),
) -> list[tuple[list[str], np.ndarray, list[GumTarget]]]:
    """Initial arrays (:func:`~privsyn_core.generation.initial.initial_columns`) and targets.
    The pairs in ``independent`` are targeted at the product of their margins, and know no
    noise: they hold none to fit, so they must not count towards GUM's noise floor
    (:mod:`privsyn_core.generation.independence`).

    Arrays use the smallest integer type of the codes: GUM's duplications copy whole records,
    so their cost is proportional to the bytes per record.
    """
    problems = []
    for names in gum_components(attributes, [m.attributes for m in marginals], separate=separate):
        position = {a: i for i, a in enumerate(names)}
        columns = initial_columns(
            names,
            [m for m in marginals if m.attributes[0] in position],
            {name: one_way[engine.index(name)].values for name in names},
            n,
            initial,
            rng,
            dtype,
            independent,
        )
        arr = record_major(len(names), n, dtype)
        fill_record_major(arr, columns)  # not a strided write of the whole array per column
        del columns
        targets = [
            GumTarget(
                m.attributes,
                tuple(position[a] for a in m.attributes),
                m.shape,
                (independent_product(m) if m.attributes in independent else m).normalised().values,
                noise_l1=None if m.attributes in independent else (noise or {}).get(m.attributes),
            )
            for m in marginals
            if m.attributes[0] in position
        ]
        problems.append((names, arr, targets))
    return problems


def _append(
    plan: AppendPlan,
    marginal: MarginalTable,
    synthetic: np.ndarray,
    engine: Domain,
    rng: np.random.Generator,
) -> np.ndarray:
    """Draw the leaf column from P(leaf | anchor), read off the consistent pair marginal."""
    joint = marginal.values.reshape(marginal.shape)
    if marginal.attributes[0] == plan.leaf:
        joint = joint.T
    return conditional_column(synthetic[engine.index(plan.anchor)].astype(np.int64), joint, rng)
