"""From PrivSyn's measurements to a synthetic table (paper Algorithm 3, lines 6-7):
consistency, GUM, appending and decoding, all post-processing of the DP measurements.

The types the measuring side hands over (:class:`Measurements`, :class:`SelectedMarginal`)
and the run's result (:class:`SynthesisResult`) live here, beyond the private boundary:
nothing in this module reads or counts the table (:mod:`privsyn_core.pipeline` does).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from privsyn_core.config import PrivSynConfig
from privsyn_core.domain import Domain
from privsyn_core.generation.blocks import check_workers
from privsyn_core.generation.consistency import ConsistencyReport
from privsyn_core.generation.dependence import NoisyDependence
from privsyn_core.generation.fitted import FittedModel, fit_model, written
from privsyn_core.generation.fitted_data import SamplingSettings, check_rows
from privsyn_core.generation.grouping import ValueGrouping
from privsyn_core.generation.gum import GumIterationRecord
from privsyn_core.generation.kept import KeptTable
from privsyn_core.marginals import NoisyMarginal
from privsyn_core.privacy.ledger import PrivacyLedger, charged_on_refusal
from privsyn_core.progress import ProgressCallback, Stage
from privsyn_core.progress import StageReporter as _Reporter
from privsyn_core.release.model_json import released_schema
from privsyn_core.selection.greedy import Selection
from privsyn_core.selection.marginal_graph import AppendPlan, marginal_pairs

if TYPE_CHECKING:
    import networkx as nx

    from privsyn_core.data.codecs import CodesCodec
    from privsyn_core.data.column_structure import PreparedColumn
    from privsyn_core.data.columns import Preparation

#: a streamed writer: consumes the synthetic table's blocks, one DataFrame at a time
BlockWriter = Callable[[Iterator[pd.DataFrame]], object]


@dataclass(frozen=True)
class SelectedMarginal:
    """A measured marginal: attributes, cells, budget and noise, and why it was chosen.

    ``origin`` is "combined" (a clique of Algorithm 2), "selected" (a pair of Algorithm 1),
    "isolated" (the link of an attribute no selected pair covered) or "one_way" (an attribute
    with no pair at all, measured alone so the budget is not wasted); with another
    ``PrivSynConfig.selection`` it is that selection's name ("privbayes", "all_pairs",
    "given"). ``rho`` is what the ledger was charged.
    """

    attributes: tuple[str, ...]
    cells: int
    rho: float
    sigma: float
    origin: str


@dataclass(frozen=True)
class SynthesisResult:
    """Everything a run produced. All of it is DP (derived from the noisy measurements only)."""

    synthetic: pd.DataFrame
    noisy_indif: pd.DataFrame
    selection: Selection
    marginals: tuple[SelectedMarginal, ...]
    #: the engine's codes (after grouping low counts): the sizes :attr:`graph` shows
    engine: Domain
    history: tuple[GumIterationRecord, ...]
    ledger: PrivacyLedger
    groupings: tuple[ValueGrouping, ...]
    appended: tuple[AppendPlan, ...]
    consistency: ConsistencyReport
    n_records: int
    stage_seconds: dict[str, float]
    #: per synthesised column: codec and where its domain came from (empty for ``domain=``)
    columns: tuple[PreparedColumn, ...] = ()
    #: columns left out, with the reason
    excluded: tuple[tuple[str, str], ...] = ()
    #: columns written as fresh ids 1..n, not modelled
    identifiers: tuple[str, ...] = ()
    #: the schema's rules that no synthesised pair of columns could keep: (words, why)
    dropped_rules: tuple[tuple[str, str], ...] = ()
    #: the DP measurements themselves: noisy 1-way marginals (declared codes) and the noisy
    #: selected marginals (engine codes, see ``groupings``), before consistency
    noisy_marginals: tuple[NoisyMarginal, ...] = ()
    #: the fitted model these rows were sampled from: more samples at no privacy cost
    model: FittedModel | None = None
    #: attributes the guard drew as independent columns (see
    #: :func:`~privsyn_core.generation.guard.guard_message`)
    independent: tuple[str, ...] = ()
    #: the rows went to ``write`` block by block (more than one block, see :func:`generate`)
    #: and ``synthetic`` holds none of them, only the columns
    synthetic_written: bool = False
    #: which of GUM's tables was returned (its iteration and score), for the page and the
    #: command line to name; of the first block when there were several
    kept: KeptTable | None = None

    @cached_property
    def graph(self) -> nx.Graph:
        """The marginal graph with its DP sizes and weights, built when first read: networkx
        costs every run a tenth of a second to import, and only the dashboard draws it."""
        return _described_graph(self.engine, self.marginals, self.noisy_indif)

    @property
    def end_to_end_dp(self) -> bool:
        """False when some domain was read off the raw data (``raw_domains=True``)."""
        return not self.ledger.not_private

    def history_frame(self) -> pd.DataFrame:
        """One row per GUM iteration: iteration, alpha, mean L1, seconds, then one column per
        marginal (named ``a|b|c``) with its L1 against its noisy target."""
        rows = []
        for record in self.history:
            row: dict[str, Any] = {
                "iteration": record.iteration,
                "alpha": record.alpha,
                "mean_l1": record.mean_error,
                "seconds": record.seconds,
            }
            row.update({"|".join(k): v for k, v in record.errors.items()})
            rows.append(row)
        return pd.DataFrame(rows)

    def marginals_frame(self) -> pd.DataFrame:
        return pd.DataFrame(
            [
                {
                    "attributes": " x ".join(m.attributes),
                    "size": len(m.attributes),
                    "cells": m.cells,
                    "rho": m.rho,
                    "sigma": m.sigma,
                    "origin": m.origin,
                }
                for m in self.marginals
            ]
        )

    def ledger_frame(self) -> pd.DataFrame:
        return pd.DataFrame(
            [
                {
                    "step": e.step,
                    "attributes": ", ".join(e.attributes),
                    "sensitivity": e.sensitivity,
                    "rho": e.rho,
                    "sigma": e.sigma,
                    "queries": e.n_queries,
                    "mechanism": e.mechanism,
                }
                for e in self.ledger.entries
            ]
        )


@dataclass(frozen=True)
class Measurements:
    """What PrivSyn measured on the private table, and nothing else: the DP output that
    generation works from as post-processing (paper Algorithm 3, lines 1-4). It holds no row
    of the table: codecs (declared or DP estimates), noisy counts, the noisy InDif scores,
    the selection made from them, and the ledger that paid for all of it."""

    ledger: PrivacyLedger
    #: the declared codes (one per column) and the engine's codes after grouping low counts
    declared: Domain
    engine: Domain
    groupings: tuple[ValueGrouping, ...]
    #: noisy 1-way marginals on declared codes, and on engine codes (the same counts summed)
    one_way: tuple[NoisyMarginal, ...]
    grouped: tuple[NoisyMarginal, ...]
    #: the selected and combined marginals, measured on engine codes
    measured: tuple[NoisyMarginal, ...]
    noisy_indif: pd.DataFrame
    selection: Selection
    marginals: tuple[SelectedMarginal, ...]
    #: how codes become values: a raw table's prepared columns, or a pre-coded table's codecs
    preparation: Preparation | None
    codecs: tuple[CodesCodec, ...]
    stage_seconds: dict[str, float]


def fit_measurements(
    measurements: Measurements,
    config: PrivSynConfig | None = None,
    on_progress: ProgressCallback | None = None,
) -> FittedModel:
    """The fitted model of ``measurements``: consistency (paper 4.3) once, and everything
    sampling needs, none of it a row of the table (:mod:`privsyn_core.generation.fitted`)."""
    report = _Reporter(on_progress)
    report.ledger = measurements.ledger
    return _fitted(measurements, config or PrivSynConfig(), report)


def _fitted(measurements: Measurements, config: PrivSynConfig, report: _Reporter) -> FittedModel:
    report.start(Stage.CONSISTENCY)
    preparation = measurements.preparation
    decoders = (
        tuple(c.codec for c in preparation.columns)
        if preparation is not None
        else measurements.codecs
    )
    model = fit_model(
        measurements.ledger,
        measurements.engine,
        measurements.groupings,
        measurements.grouped,
        measurements.measured,
        decoders,
        consistency_rounds=config.consistency_rounds,
        defaults=SamplingSettings(
            config.gum,
            config.append_attributes,
            config.separate_and_join,
            config.synthesis,
            independence_threshold=config.independence_threshold,
            quasi_independence=config.quasi_independence,
            empty_sigmas=config.empty_sigmas,
        ),
        consistent=config.consistency,
        noisy=(*measurements.one_way, *measurements.measured),
        schema=released_schema(
            preparation.columns if preparation is not None else (),
            measurements.groupings,
            preparation.excluded if preparation is not None else (),
            decoders,
            preparation.identifiers if preparation is not None else (),
        ),
        config=asdict(config),
        dependence=_dependence(measurements),
        identifiers=preparation.identifiers if preparation is not None else (),
        rules=preparation.rules if preparation is not None else (),
    )
    consistency = model.consistency
    report.finish(f"{consistency.rounds} rounds, total {consistency.total:.0f}")
    return model


def _dependence(measurements: Measurements) -> NoisyDependence | None:
    """The released InDif scores with the noise scale the ledger paid for, if any."""
    paid = [e for e in measurements.ledger.entries if e.step == "indif"]
    if not paid:
        return None
    return NoisyDependence(
        measurements.engine.attributes, measurements.noisy_indif.to_numpy(), paid[-1].sigma
    )


def generate(
    measurements: Measurements,
    *,
    n_records: int | None = None,
    config: PrivSynConfig | None = None,
    rng: np.random.Generator | None = None,
    on_progress: ProgressCallback | None = None,
    workers: int | None = None,
    block_rows: int | None = None,
    write: BlockWriter | None = None,
) -> SynthesisResult:
    """A synthetic table from ``measurements`` alone (paper Algorithm 3, lines 5-6:
    consistency, GUM, appending, decoding): post-processing, free of privacy cost, with no
    access to the private table. ``n_records`` (public) defaults to the noisy total.

    The same as :func:`fit_measurements` then :meth:`FittedModel.generate`; the result
    carries the model (``result.model``) for more samples and the release bundle. Only
    ``config``'s generation fields are read here (``consistency``, ``consistency_rounds``,
    ``synthesis``, ``gum``, ``append_attributes``, ``separate_and_join``), so one set of
    measurements can be generated from many times with different ones (the paper lab).

    The rows are made as blocks of ``block_rows`` (default: the model's,
    :attr:`~privsyn_core.generation.fitted_data.SamplingSettings.block_rows`) on ``workers``
    processes (default: every core this process may use). With ``write`` they are handed to
    it block by block as they are decoded (memory bounded by the blocks in flight, not the
    rows; the check before GUM is per block) and the result's ``synthetic`` holds them only
    when they were one block (``synthetic_written`` says which)."""
    config = config or PrivSynConfig()
    rng = rng if rng is not None else np.random.default_rng()
    if n_records is not None:
        check_rows(n_records)
    ledger = measurements.ledger
    with charged_on_refusal(lambda: ledger):  # everything here comes after the spend
        return _generated(
            measurements, n_records, config, rng, on_progress, workers, block_rows, write
        )


def _generated(
    measurements: Measurements,
    n_records: int | None,
    config: PrivSynConfig,
    rng: np.random.Generator,
    on_progress: ProgressCallback | None,
    workers: int | None,
    block_rows: int | None,
    write: BlockWriter | None,
) -> SynthesisResult:
    """:func:`generate`'s work, every input error of which its caller charges to the run."""
    ledger = measurements.ledger
    report = _Reporter(on_progress)
    report.ledger = ledger
    model = _fitted(measurements, config, report)
    n = n_records if n_records is not None else model.default_rows
    settings = (
        model.defaults if block_rows is None else replace(model.defaults, block_rows=block_rows)
    )
    # the noisy total is known only now: refuse before GUM rather than die in it
    model.check_fits(n, settings, workers=check_workers(workers), streamed=write is not None)
    if write is None:
        drawn = model.generate(
            n, rng=rng, settings=settings, on_progress=on_progress, workers=workers
        )
    else:
        blocks = model.generate_blocks(
            n, rng=rng, settings=settings, on_progress=on_progress, workers=workers
        )
        drawn = written(blocks, write)  # the writer's refusal (a full disk) is charged too
    preparation = measurements.preparation
    seconds = {**measurements.stage_seconds, **report.seconds, **drawn.stage_seconds}
    return SynthesisResult(
        synthetic=drawn.table,
        noisy_indif=measurements.noisy_indif,
        selection=measurements.selection,
        marginals=measurements.marginals,
        engine=measurements.engine,
        history=drawn.history,
        ledger=ledger,
        groupings=measurements.groupings,
        appended=drawn.appended,
        consistency=model.consistency,
        n_records=n,
        stage_seconds=seconds,
        columns=preparation.columns if preparation else (),
        excluded=preparation.excluded if preparation else (),
        identifiers=tuple(i.name for i in model.identifiers),
        dropped_rules=tuple((r.words(), why) for r, why in preparation.dropped_rules)
        if preparation
        else (),
        noisy_marginals=model.noisy,
        model=model,
        independent=drawn.independent,
        synthetic_written=len(drawn.table) < n,
        kept=drawn.kept,
    )


def _described_graph(
    engine: Domain, marginals: Sequence[SelectedMarginal], noisy_indif: pd.DataFrame
) -> nx.Graph:
    """The marginal graph (:mod:`~privsyn_core.selection.marginal_graph`) as a networkx
    graph, with node sizes and edge weights from DP quantities only."""
    import networkx as nx  # here: only the dashboard draws it (see SynthesisResult.graph)

    graph = nx.Graph()
    graph.add_nodes_from(engine.attributes)
    graph.add_edges_from(marginal_pairs([m.attributes for m in marginals if len(m.attributes) > 1]))
    for name in graph.nodes:
        graph.nodes[name]["size"] = engine.size(name)
    for a, b in graph.edges:
        graph.edges[a, b]["indif"] = float(noisy_indif.at[a, b])
        holders = [m for m in marginals if a in m.attributes and b in m.attributes]
        graph.edges[a, b]["marginals"] = [" x ".join(m.attributes) for m in holders]
        graph.edges[a, b]["combined"] = any(len(m.attributes) > 2 for m in holders)
    return graph
