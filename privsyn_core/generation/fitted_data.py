"""What a fitted PrivSyn model holds: DP measurements made consistent, and what decodes them.

Paper Algorithm 3 splits into two parts. Lines 1-4 read the private table, and each read is a
Gaussian measurement charged to the ledger (:func:`privsyn_core.pipeline.measure`). Lines 5-6
(consistency, GUM, appending, decoding) use only what those measurements returned, so by the
post-processing property of DP (Dwork and Roth 2014, Prop. 2.1; zCDP keeps it, Bun and
Steinke 2016, Lemma 1.8) they may run as often as wanted, with any settings and any number
of rows, at no further privacy cost.

:class:`FittedData` is that boundary as a value. It holds the DP measurements made
consistent (paper 4.3) and the public or DP-estimated metadata that turns codes back into
values: codecs, the grouping of low-count values, the released schema, and the ledger that
paid for it all. It holds no row of the private table, and this module imports nothing
that reads or counts one (``tests/test_package_layout.py`` checks this). Consistency is
computed once when the model is made, so every sample, and every copy of the model loaded
from a release bundle (:mod:`privsyn_core.release.bundle`), works from the same targets.

The model is in three layers, each importing only the one below it:

* this module: the frozen data and what is read off it (the rows by default, the memory
  check, the decoders with fitted tails). Everything that only reads a model (drawing a
  block, conditions, rules, the release files and report) types against :class:`FittedData`.
* :mod:`privsyn_core.generation.draw` draws one block from it;
  :mod:`privsyn_core.generation.sample_blocks` makes a sample's blocks.
* :class:`~privsyn_core.generation.fitted.FittedModel` is :class:`FittedData` with the
  sampling methods (``model.sample(n, seed=...)``): a subclass adding methods only, so a
  model is one value whatever reads it, and saving and loading it
  (:mod:`privsyn_core.release.bundle`) sit above all three.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Protocol

import numpy as np
import pandas as pd

from privsyn_core.config import SYNTHESIS_METHODS
from privsyn_core.data.codecs import BinnedCodec, with_fitted_tails
from privsyn_core.data.rules import Rule
from privsyn_core.domain import Domain, code_dtype
from privsyn_core.errors import InputError
from privsyn_core.generation.blocks import DEFAULT_BLOCK_ROWS, check_block_rows
from privsyn_core.generation.consistency import ConsistencyReport
from privsyn_core.generation.dependence import NoisyDependence
from privsyn_core.generation.empty_cells import EMPTY_SIGMAS
from privsyn_core.generation.grouping import ValueGrouping, declared_shares
from privsyn_core.generation.gum import GumIterationRecord
from privsyn_core.generation.gum_settings import GumSettings
from privsyn_core.generation.identifiers import Identifier
from privsyn_core.generation.independence import DEFAULT_THRESHOLD, check_threshold
from privsyn_core.generation.kept import KeptTable
from privsyn_core.generation.planned import PlannedSynthesis, plan_synthesis
from privsyn_core.generation.quasi_independence import DEFAULT_PENALTY
from privsyn_core.marginals import MarginalTable, NoisyMarginal
from privsyn_core.privacy.ledger import PrivacyLedger
from privsyn_core.selection.marginal_graph import AppendPlan


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
    #: "gum+mrf": both, the closer table kept per component, "independent": each column from
    #: its own noisy 1-way marginal (the baseline), or "auto" (the default, see
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
    #: a measured pair is drawn as quasi-independent (independent but for a few cells) where
    #: Mallows' Cp, with this penalty per fitted parameter, says the fit is closer to the real
    #: counts (:mod:`privsyn_core.generation.quasi_independence`; on wide tables only, by
    #: :data:`~privsyn_core.width_policy.WIDTH_POLICY`); None: off
    quasi_independence: float | None = DEFAULT_PENALTY

    def __post_init__(self) -> None:
        if self.synthesis not in SYNTHESIS_METHODS:
            raise InputError(
                f"synthesis must be one of {', '.join(SYNTHESIS_METHODS)}, got {self.synthesis!r}"
            )
        check_threshold(self.independence_threshold)
        check_threshold(self.quasi_independence, "quasi_independence")
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
    #: attributes the guard drew as independent columns
    #: (:func:`~privsyn_core.generation.guard.guard`), in engine order; of a sample of
    #: several blocks, those it drew so in any block
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
class FittedData:
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
        Streamed (:meth:`~privsyn_core.generation.fitted.FittedModel.generate_blocks`), only
        ``workers`` blocks are held at once, so any number of rows is fine when one block is."""
        check_rows(n_records)
        settings = self.defaults if settings is None else settings
        self.planned(settings, workers).check_fits(
            int(n_records), len(self.engine), self.code_dtype.itemsize, streamed=streamed
        )


def check_rows(n_records: object) -> None:
    """Refuse a number of synthetic rows that is not a whole number of at least 1 (a public
    choice, checked before anything is spent)."""
    if isinstance(n_records, bool) or not isinstance(n_records, int | np.integer):
        raise InputError(f"the number of rows must be a whole number, got {n_records!r}")
    if n_records < 1:
        raise InputError(f"the number of synthetic rows must be at least 1, got {n_records}")


def noise_l1(model: FittedData) -> dict[tuple[str, ...], float]:
    """Each measured marginal's expected L1 (frequencies) from its measurement noise,
    ``cells * sigma * sqrt(2 / pi) / total`` (the mean absolute value of Gaussian noise):
    public, from the noise scales and the noisy total (GUM's noise-floor stop)."""
    total = max(1.0, float(model.consistency.total))
    return {m.attributes: m.cells * m.sigma * math.sqrt(2 / math.pi) / total for m in model.noisy}
