"""A fitted PrivSyn model: measure once, sample many.

:class:`FittedModel` is :class:`~privsyn_core.generation.fitted_data.FittedData` (the DP
measurements made consistent, and what decodes them; its module docstring says why
sampling from them is post-processing) with the sampling methods:
``model.sample(n, seed=...)`` draws a table; ``model.generate(...)`` also returns GUM's
history and the stage timings; ``generate_blocks`` and ``generate_where`` hand the rows over
block by block. The same seed gives the same table.

Why a subclass: everything that only reads a model (drawing a block, conditions, rules, the
release files and report) types against ``FittedData`` and so never imports the methods
that call it, while a user holds one value that both is the model and samples it. The
methods add no field: a ``FittedModel`` is its data, and ``dataclasses.replace`` keeps its
class. They check their arguments and hand over to the functions that do the work
(:mod:`~privsyn_core.generation.sample_blocks`, :mod:`~privsyn_core.generation.conditional`).
Saving and loading a model are the release bundle's (:mod:`privsyn_core.release.bundle`,
``PrivSyn.load``), and samples made on Spark are
:func:`~privsyn_core.generation.spark_blocks.sample_spark`'s.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from privsyn_core.data.rules import Rule
from privsyn_core.domain import Domain
from privsyn_core.errors import InputError
from privsyn_core.generation.conditional import conditioned_blocks
from privsyn_core.generation.consistency import make_consistent, without_consistency
from privsyn_core.generation.dependence import NoisyDependence
from privsyn_core.generation.fitted_data import (
    ColumnDecoder,
    FittedData,
    Sample,
    SamplingSettings,
    check_rows,
)
from privsyn_core.generation.grouping import ValueGrouping
from privsyn_core.generation.gum_settings import GumSettings
from privsyn_core.generation.identifiers import Identifier
from privsyn_core.generation.sample_blocks import PlannedBlocks, generated_blocks, joined
from privsyn_core.marginals import NoisyMarginal
from privsyn_core.privacy.ledger import PrivacyLedger
from privsyn_core.progress import ProgressCallback

#: a sample's conditions: ``{"sex": "Female", "age": "30..40"}`` or ``--where`` texts
Where = Mapping[str, Any] | Sequence[str]


class FittedModel(FittedData):
    """DP measurements made consistent, what decodes them, and the sampling methods (see
    the module docstring)."""

    def sample(
        self,
        n: int | None = None,
        *,
        seed: int | None = None,
        rng: np.random.Generator | None = None,
        gum: GumSettings | None = None,
        workers: int | None = None,
        where: Where | None = None,
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
        where: Where | None = None,
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
        where: Where | None = None,
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
        return blocks[0] if len(blocks) == 1 else joined(blocks)

    def generate_where(
        self,
        n: int | None,
        where: Where,
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
        rng = _generator(seed, rng)
        settings = self._settings(gum, settings)
        n = self.default_rows if n is None else n
        check_rows(n)
        return conditioned_blocks(self, n, where, settings, rng, workers)

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
        rng = _generator(seed, rng)
        settings = self._settings(gum, settings)
        n = self.default_rows if n is None else n
        return generated_blocks(self, n, settings, rng, workers, on_progress)

    def _settings(
        self, gum: GumSettings | None, settings: SamplingSettings | None
    ) -> SamplingSettings:
        settings = settings or self.defaults
        return settings if gum is None else replace(settings, gum=gum)


def _generator(seed: int | None, rng: np.random.Generator | None) -> np.random.Generator:
    if seed is not None and rng is not None:
        raise InputError("give a seed or a random generator, not both")
    return rng if rng is not None else np.random.default_rng(seed)


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
    return kept[0] if len(kept) == 1 else joined(kept)


def _columns_only(table: pd.DataFrame) -> pd.DataFrame:
    """``table``'s columns and types without its rows, holding none of its memory (a slice
    of no rows is a view that keeps the whole block alive: 5 MB a block of adult-coded,
    gigabytes over a hundred million rows)."""
    return table.iloc[:0].copy()
