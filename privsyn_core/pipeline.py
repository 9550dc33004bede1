"""PrivSyn end to end (paper Algorithm 3): one call from a private table to a synthetic one.

Privacy: the private table is touched only by Gaussian measurements, each charged to the
ledger: the structure and domain estimates a schema leaves open (:mod:`privsyn_core.data.columns`),
then PrivSyn's three (1-way marginals, InDif, selected marginals). This module makes them
(:func:`measure`: Algorithm 3, lines 1-5, with the selection methods of
:mod:`privsyn_core.selection.methods`). Everything after them (consistency, GUM, appending,
decoding) is post-processing of their output, in :mod:`privsyn_core.generation.synthesis`.
The number of synthetic records defaults to the consistent noisy total, never the true ``n``.

The guarantee is per row, or per person (:class:`~privsyn_core.privacy.ledger.PrivacyUnit`):
with ``person`` and ``max_rows_per_person`` K, the table is bounded to at most K rows per
person before anything is counted (:mod:`privsyn_core.measuring.persons`), the person column is
dropped, and every measurement's noise is calibrated for K rows (the noise source carries the
unit; the ledger records it).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from privsyn_core.config import PrivSynConfig
from privsyn_core.data.codecs import BinnedCodec, CodesCodec
from privsyn_core.data.columns import (
    Preparation,
    check_schema_matches,
    open_parts,
    prepare_columns,
)
from privsyn_core.data.schema import Provenance, Schema
from privsyn_core.data.sources import ENGINES, Engine, Source, load_source, source_width
from privsyn_core.data.table import DomainSpec, encode_table
from privsyn_core.domain import Domain, code_dtype
from privsyn_core.errors import InputError
from privsyn_core.generation.blocks import check_workers
from privsyn_core.generation.fitted_data import SamplingSettings, check_rows
from privsyn_core.generation.grouping import ValueGrouping
from privsyn_core.generation.memory import check_width
from privsyn_core.generation.planned import plan_synthesis
from privsyn_core.generation.rules import rule_pairs
from privsyn_core.generation.synthesis import (
    BlockWriter,
    Measurements,
    SelectedMarginal,
    SynthesisResult,
    generate,
)
from privsyn_core.marginals import NoisyMarginal
from privsyn_core.measuring.counters import (
    ArrayCounter,
    Counter,
    FrameTable,
    RawTable,
    RecodedCounter,
)
from privsyn_core.measuring.indif import indif_sigma, measure_indif
from privsyn_core.measuring.measurement import measure_marginals
from privsyn_core.measuring.one_way import (
    group_low_counts,
    grouped_one_way,
    measure_one_way,
    row_counts_without_each,
)
from privsyn_core.measuring.persons import bounded
from privsyn_core.measuring.privbayes import select_network
from privsyn_core.privacy.ledger import (
    ROW,
    FailedAfterSpending,
    Measurement,
    PrivacyLedger,
    PrivacyUnit,
    charged_on_refusal,
)
from privsyn_core.privacy.noise import NoiseSource, SecureNoise, SeededNoise
from privsyn_core.progress import ProgressCallback, Stage
from privsyn_core.progress import StageReporter as _Reporter
from privsyn_core.selection.greedy import budget_weights
from privsyn_core.selection.methods import SelectionMethod, SelectionScores
from privsyn_core.selection.tree_first import pooled


def synthesize(
    table: Source,
    epsilon: float,
    delta: float,
    *,
    engine: Engine = "numpy",
    domain: DomainSpec | None = None,
    schema: Schema | None = None,
    raw_domains: bool = False,
    n_records: int | None = None,
    config: PrivSynConfig | None = None,
    rng: np.random.Generator | None = None,
    on_progress: ProgressCallback | None = None,
    spark: Any = None,
    workers: int | None = None,
    block_rows: int | None = None,
    write: BlockWriter | None = None,
    person: str | None = None,
    max_rows_per_person: int | None = None,
) -> SynthesisResult:
    """Synthesise a DP copy of ``table`` with PrivSyn at (epsilon, delta)-DP: :func:`measure`
    then :func:`generate`.

    ``table`` is a pandas DataFrame, the path of a CSV (with a header) or Parquet file, or,
    with ``engine="spark"``, a Spark DataFrame or a catalogue table's name. ``engine`` says
    where the private table is counted: ``"numpy"`` loads it into memory; ``"duckdb"`` and
    ``"spark"`` count (and encode, for a raw table) in SQL where it lies, and only counts come
    into Python (:mod:`privsyn_core.measuring.counters.sql_encoding`). The counts, hence the
    ledger and, in debug mode, the synthetic table, are the same on every engine. ``spark`` is
    an existing SparkSession (default: the running one, or ``local[N]`` for the N cores this
    process may use).

    Domains come from one of: ``domain``, mapping each column to its number of integer codes
    or its list of categories (pre-coded tables); or ``schema`` (:class:`Schema`), whose
    undeclared parts are estimated privately (paid from the budget); with neither, every
    column's domain is estimated privately. ``raw_domains=True`` reads the undeclared parts
    off the data instead: a demo shortcut, *not* end-to-end DP, flagged in the result and the
    ledger. ``n_records`` fixes the output size (public choice); by default it is the noisy
    total.

    Randomness (:mod:`privsyn_core.privacy.noise`): without ``rng`` the run is in release mode, with
    exact discrete Gaussian noise from secure randomness, never reproducible. Passing a seeded
    ``rng`` selects debug mode: reproducible, and marked "not for release" in the ledger.

    ``workers``, ``block_rows`` and ``write``: see :func:`generate`.

    ``person`` and ``max_rows_per_person`` (K, a public whole number >= 1) make the guarantee
    one per person: at most K rows of each person are kept, chosen at random, every
    measurement's sensitivity is K times its per-row one, and the person column is neither
    synthesised nor released. Without them the guarantee is per row.
    """
    config = config or PrivSynConfig()
    unit = PrivacyUnit.of(person, max_rows_per_person)  # refused before anything is read
    columns = source_width(table, engine) - (0 if unit.is_row else 1)
    sampling = _Sampling(workers, block_rows, write)

    def measured(noise_rng: np.random.Generator | None) -> Measurements:
        return measure(
            table,
            epsilon,
            delta,
            engine=engine,
            spark=spark,
            domain=domain,
            schema=schema,
            raw_domains=raw_domains,
            config=config,
            rng=noise_rng,
            on_progress=on_progress,
            person=person,
            max_rows_per_person=max_rows_per_person,
        )

    return _measured_and_generated(
        measured, max(0, columns), n_records, config, rng, on_progress, sampling
    )


def synthesize_coded(
    counter: Counter,
    epsilon: float,
    delta: float,
    *,
    n_records: int | None = None,
    config: PrivSynConfig | None = None,
    rng: np.random.Generator | None = None,
    on_progress: ProgressCallback | None = None,
) -> SynthesisResult:
    """:func:`synthesize` for a pre-coded table behind a :class:`Counter`, such as a file
    counted out of core on DuckDB or a table on a Spark cluster."""
    config = config or PrivSynConfig()

    def measured(noise_rng: np.random.Generator | None) -> Measurements:
        return measure_coded(
            counter, epsilon, delta, config=config, rng=noise_rng, on_progress=on_progress
        )

    return _measured_and_generated(
        measured, len(counter.domain), n_records, config, rng, on_progress
    )


@dataclass(frozen=True)
class _Sampling:
    """How :func:`generate` makes and hands over the rows (see there); not a setting of
    the measurements."""

    workers: int | None = None
    block_rows: int | None = None
    write: BlockWriter | None = None


def _measured_and_generated(
    measured: Callable[[np.random.Generator | None], Measurements],
    columns: int,
    n_records: int | None,
    config: PrivSynConfig,
    rng: np.random.Generator | None,
    on_progress: ProgressCallback | None,
    sampling: _Sampling = _Sampling(),
) -> SynthesisResult:
    if n_records is not None:
        check_rows(n_records)
    check_width(columns)  # before anything is spent: InDif measures every pair
    workers = check_workers(sampling.workers)
    if n_records is not None and columns:  # before anything is spent, at the input's width
        planned = plan_synthesis(
            config.synthesis,
            config.gum.iterations,
            sampling.block_rows or SamplingSettings().block_rows,
            workers,
            columns,
        )  # the synthesis the model will plan after measuring (generation/planned.py)
        planned.check_fits(n_records, columns, 2, streamed=sampling.write is not None)
    # the synthesis itself (GUM, sampling) needs no secure randomness: post-processing
    generation_rng = rng if rng is not None else np.random.default_rng()
    return generate(
        measured(rng),
        n_records=n_records,
        config=config,
        rng=generation_rng,
        on_progress=on_progress,
        workers=sampling.workers,
        block_rows=sampling.block_rows,
        write=sampling.write,
    )


def measure(
    table: Source,
    epsilon: float,
    delta: float,
    *,
    engine: Engine = "numpy",
    domain: DomainSpec | None = None,
    schema: Schema | None = None,
    raw_domains: bool = False,
    config: PrivSynConfig | None = None,
    rng: np.random.Generator | None = None,
    on_progress: ProgressCallback | None = None,
    spark: Any = None,
    person: str | None = None,
    max_rows_per_person: int | None = None,
) -> Measurements:
    """Every measurement PrivSyn makes on ``table``, and the choices made from them: the only
    part of a run that reads the private table (see :func:`synthesize` for the arguments;
    ``rng`` None means release-mode noise)."""
    config = config or PrivSynConfig()
    if domain is not None and schema is not None:
        raise InputError("give either a domain (pre-coded tables) or a schema, not both")
    if engine not in ENGINES:
        raise InputError(f"unknown engine {engine!r}: use one of {', '.join(ENGINES)}")
    unit = PrivacyUnit.of(person, max_rows_per_person)
    _check_unit(unit, domain, schema)
    noise = _noise(rng, unit)
    # at most K rows per person, without the person column, before anything is counted
    raw = bounded(_opened(table, engine, spark), unit, noise)
    _check_names(config.selection_method(), config, raw.names)  # before anything is spent
    if engine != "numpy" and domain is not None:
        from privsyn_core.measuring.counters.sql_encoding import SqlTable

        assert isinstance(raw, SqlTable), "read in SQL (_opened), and bounded keeps it there"
        counter = raw.coded(_code_sizes(domain, engine))
        return _measure_coded(counter, epsilon, delta, config, noise, on_progress)
    report = _Reporter(on_progress)
    with charged_on_refusal(lambda: report.ledger):  # every stage after the first spend
        if isinstance(raw, FrameTable) and domain is not None:
            report.ledger = _ledger(epsilon, delta, config, noise)
            report.start(Stage.ENCODE)
            records, declared, codecs = encode_table(raw.frame, domain)
            report.finish(f"{len(declared)} columns checked against their domains")
            return _measure_counts(
                ArrayCounter(records, declared), 0.0, None, tuple(codecs), config, noise, report
            )
        schema = schema or Schema.undeclared(raw.names)
        check_schema_matches(raw, schema)
        preparation = _prepared(raw, schema, epsilon, delta, raw_domains, config, noise, report)
        prepared = [c.codec for c in preparation.columns]
        counter = raw.encoded(prepared, code_dtype(max(c.size for c in prepared)))
        # the true row count is private: progress messages may be shown to anyone
        report.finish(f"{len(counter.domain)} columns checked against their domains")
        # what the estimates left unspent (no category to estimate and every range found at
        # first: DomainSplit) goes to PrivSyn's own steps
        spent = math.fsum(m.rho for m in preparation.measurements)
        return _measure_counts(counter, spent, preparation, (), config, noise, report)


def _opened(table: Source, engine: Engine, spark: Any) -> RawTable:
    """``table`` as the engine reads it: loaded into memory, or a table counted in SQL."""
    if engine == "numpy":
        return FrameTable(load_source(table))
    from privsyn_core.measuring.counters.sql_encoding import sql_table

    return sql_table(table, engine, spark=spark)


def _noise(rng: np.random.Generator | None, unit: PrivacyUnit = ROW) -> NoiseSource:
    """Release-mode noise (exact, from secure randomness) without ``rng``; debug mode with;
    calibrated for ``unit``."""
    return SecureNoise(unit) if rng is None else SeededNoise(rng, unit=unit)


def _check_unit(unit: PrivacyUnit, domain: DomainSpec | None, schema: Schema | None) -> None:
    """Refuse a person column that would be synthesised, before anything is read."""
    if unit.person is None:
        return
    if domain is not None and unit.person in domain:
        raise InputError(
            f"the person column {unit.person!r} is in the domain: it is never synthesised, "
            "so leave it out of the domain"
        )
    if schema is not None and unit.person in schema.names():
        raise InputError(
            f"the person column {unit.person!r} is in the schema: it is never synthesised, "
            "so leave it out of the schema"
        )


def _ledger(
    epsilon: float,
    delta: float,
    config: PrivSynConfig,
    noise: NoiseSource,
    reserved_delta: float = 0.0,
) -> PrivacyLedger:
    """The run's empty ledger, marked with the noise's mode (release or debug)."""
    ledger = PrivacyLedger.from_epsilon_delta(epsilon, delta, config.conversion, reserved_delta)
    return replace(ledger, randomness=noise.mode, unit=noise.unit)


def _prepared(
    raw: RawTable,
    schema: Schema,
    epsilon: float,
    delta: float,
    raw_domains: bool,
    config: PrivSynConfig,
    noise: NoiseSource,
    report: _Reporter,
) -> Preparation:
    """The structure and domain estimates ``schema`` leaves open, paid from the budget before
    PrivSyn's own steps (:mod:`privsyn_core.data.columns`); with ``raw_domains`` read off the
    data instead (not DP: the ledger names the columns). Starts the encoding stage."""
    parts = open_parts(schema)
    split = config.open_split(
        delta,
        structure=len(parts.structure),
        estimates=parts.domain_estimates,
        category_estimates=parts.possible_category_estimates,
        private=not raw_domains,
    )
    ledger = report.ledger = _ledger(epsilon, delta, config, noise, split.reserved_delta)
    rho_structure, rho_domains = split.rho(ledger.budget_rho)
    columns = max(1, len(schema.included()))
    left = config.split(ledger.budget_rho - rho_structure - rho_domains, columns)
    report.start(Stage.ENCODE)
    try:
        preparation = prepare_columns(
            raw,
            schema,
            rho_per_structure=rho_structure / max(1, len(parts.structure)),
            rho_per_estimate=rho_domains / max(1, parts.domain_estimates),
            delta_for_thresholds=split.reserved_delta,
            rng=noise,
            raw_domains=raw_domains,
            one_way_sigma=noise.unit.sigma(left.one_way / columns),
        )
    except FailedAfterSpending as error:  # the estimates made before it are spent
        raise FailedAfterSpending.after(
            _for_unit(error, noise.unit), ledger.charge_all(error.ledger.entries)
        ) from None
    ledger = report.charge(preparation.measurements)
    if raw_domains:
        report.ledger = replace(
            ledger,
            not_private=tuple(
                c.codec.name
                for c in preparation.columns
                if any(choice.provenance is Provenance.RAW for choice in c.choices)
            ),
        )
    return preparation


def _for_unit(error: FailedAfterSpending, unit: PrivacyUnit) -> InputError:
    """``error`` with, under a person-level unit, the cause a user would not guess: only K
    rows of each person are kept, so a column that names few people leaves few rows."""
    if unit.is_row:
        return error
    return InputError(
        f"{error.reason}; only {unit.rows_per_person} row(s) of each person (column "
        f"{unit.person!r}) are kept, so if that column names few people, few rows remain: "
        "check it names people, or allow more rows per person"
    )


def measure_coded(
    counter: Counter,
    epsilon: float,
    delta: float,
    *,
    config: PrivSynConfig | None = None,
    rng: np.random.Generator | None = None,
    on_progress: ProgressCallback | None = None,
) -> Measurements:
    """:func:`measure` for a pre-coded table behind any :class:`Counter` (every column a code
    ``0..k-1`` of the counter's domain), such as one counted out of core by DuckDB."""
    return _measure_coded(
        counter, epsilon, delta, config or PrivSynConfig(), _noise(rng), on_progress
    )


def _measure_coded(
    counter: Counter,
    epsilon: float,
    delta: float,
    config: PrivSynConfig,
    noise: NoiseSource,
    on_progress: ProgressCallback | None,
) -> Measurements:
    """:func:`measure_coded` with ``noise`` calibrated for the run's privacy unit (a counter
    over the rows a person-level run keeps)."""
    _check_names(config.selection_method(), config, counter.domain.attributes)  # nothing spent yet
    report = _Reporter(on_progress)
    report.ledger = _ledger(epsilon, delta, config, noise)
    declared = counter.domain
    with charged_on_refusal(lambda: report.ledger):  # every stage after the first spend
        report.start(Stage.ENCODE)
        codecs = tuple(CodesCodec(a, declared.size(a), None, np.int64) for a in declared)
        report.finish(f"{len(declared)} columns checked against their domains")
        return _measure_counts(counter, 0.0, None, codecs, config, noise, report)


def _code_sizes(domain: DomainSpec, engine: str) -> dict[str, int]:
    """A pre-coded table's numbers of codes (the SQL engines read integer codes only)."""
    sizes: dict[str, int] = {}
    for name, size in domain.items():
        if not isinstance(size, int | np.integer) or isinstance(size, bool):
            raise InputError(
                f"the {engine} engine reads a pre-coded table with a number of codes per "
                "column; for categories give a schema instead (or use engine='numpy')"
            )
        sizes[str(name)] = int(size)
    return sizes


def _measure_counts(
    counter: Counter,
    rho_private: float,
    preparation: Preparation | None,
    codecs: tuple[CodesCodec, ...],
    config: PrivSynConfig,
    noise: NoiseSource,
    report: _Reporter,
) -> Measurements:
    """PrivSyn's own measurements through ``counter``: Algorithm 3, lines 1-5, with what is
    left of the budget after the structure and domain estimates (``rho_private``)."""
    method = config.selection_method()
    assert report.ledger is not None
    # a named column may be gone after it was paid for (the caller charges the refusal)
    _check_names(method, config, counter.domain.attributes)
    split = config.split(report.ledger.budget_rho - rho_private, len(counter.domain))
    # lines 1-2: publish the 1-way marginals; combine or drop values below 3 sigma
    one_way, groupings, grouped = _one_way(
        counter, split.one_way, preparation, config, noise, report
    )
    engine_counter = RecodedCounter(counter, groupings)
    # line 3: the scores the method chooses from (InDif, or PrivBayes's parent sets)
    scores = _selection_scores(method, engine_counter, split.selection, config, noise, report)
    scores = replace(scores, one_way=grouped)
    # lines 3-4: select, and combine; every column no choice covers is measured alone
    report.start(Stage.SELECT)
    choice = method.choose(scores, engine_counter.domain, split.marginals)
    first: tuple[tuple[NoisyMarginal, Measurement], ...] = ()
    if choice.then is not None:  # a first round: measured now, the final choice made from it
        first = tuple(_measured(engine_counter, choice.marginals, choice.budgets, config, noise))
        report.charge([spend for _, spend in first])
        choice = choice.then([m for m, _ in first])
    report.finish(choice.summary)
    report.start(Stage.COMBINE)
    covered = {a for m in choice.marginals for a in m}
    covered |= {a for m, _ in first for a in m.attributes}
    alone = tuple((a,) for a in engine_counter.domain if a not in covered)
    chosen, origins = (*choice.marginals, *alone), (*choice.origins, *("one_way",) * len(alone))
    # a declared rule's pair is measured whatever the selection chose: its target gives the
    # rule's mapping (generation/rules.py); an attribute it covers is not measured alone
    held = [frozenset(m) for m in chosen] + [frozenset(m.attributes) for m, _ in first]
    rules = preparation.rules if preparation is not None else ()
    ruled = [p for p in rule_pairs(rules) if not any(frozenset(p) <= m for m in held)]
    budgets = list(choice.budgets)
    if ruled:
        in_rules = {a for p in ruled for a in p}
        kept = [i for i, m in enumerate(chosen) if not (len(m) == 1 and m[0] in in_rules)]
        chosen = (*(chosen[i] for i in kept), *ruled)
        origins = (*(origins[i] for i in kept), *("rule",) * len(ruled))
        if budgets:  # the method's own split (every attribute covered), the pairs at its mean
            total, count = sum(budgets), len(budgets) + len(ruled)
            budgets = [b * len(budgets) / count for b in budgets] + [total / count] * len(ruled)
    report.finish(f"{len(chosen)} marginals to measure")
    # line 5: publish the chosen marginals
    assert not (first and alone), "a second round covers every attribute itself"
    budgets = budgets or _marginal_budgets(chosen, engine_counter.domain, split.marginals, config)
    measured, summary = _published(
        engine_counter, chosen, origins, budgets, config, noise, report, first
    )
    # measurement is over: generation works from the measurements alone, so the table's
    # codes are let go before GUM (its memory depends on the synthetic rows only)
    return Measurements(
        ledger=report.ledger,
        declared=counter.domain,
        engine=engine_counter.domain,
        groupings=groupings,
        one_way=one_way,
        grouped=grouped,
        measured=measured,
        noisy_indif=scores.indif,
        selection=choice.selection,
        marginals=summary,
        preparation=preparation,
        codecs=codecs,
        stage_seconds=dict(report.seconds),
    )


def _check_names(method: SelectionMethod, config: PrivSynConfig, names: Sequence[str]) -> None:
    """Refuse user-given marginals or a prediction target that do not fit the table's columns
    (free checks: column names are public)."""
    method.check(names)
    if config.emphasis is not None:
        config.emphasis.check_column([str(n) for n in names])


def _one_way(
    counter: Counter,
    rho: float,
    preparation: Preparation | None,
    config: PrivSynConfig,
    noise: NoiseSource,
    report: _Reporter,
) -> tuple[tuple[NoisyMarginal, ...], tuple[ValueGrouping, ...], tuple[NoisyMarginal, ...]]:
    """The noisy 1-way marginals (Algorithm 3, line 1), each column's grouping of the values
    below ``threshold_sigmas`` sigma (line 2), and the marginals on the grouped codes."""
    report.start(Stage.ONE_WAY)
    one_way, spends = measure_one_way(counter, rho, noise)
    report.charge(spends)
    codecs = [c.codec for c in preparation.columns] if preparation is not None else []
    missing_codes = [c.missing_code for c in codecs] or [None] * len(one_way)
    # a numeric column's tails beyond its DP bounds combine among themselves only
    tails = [c.tail_codes() if isinstance(c, BinnedCodec) else () for c in codecs]
    rows = row_counts_without_each(one_way)
    groupings = tuple(
        group_low_counts(m, config.threshold_sigmas * m.sigma, solitary=code, rows=r, apart=t)
        if config.filter_low_counts
        else ValueGrouping.identity(m.attributes[0], m.cells)
        for m, code, r, t in zip(
            one_way, missing_codes, rows, tails or [()] * len(one_way), strict=True
        )
    )
    grouped = tuple(
        grouped_one_way(m, g, r) for m, g, r in zip(one_way, groupings, rows, strict=True)
    )
    merged = sum(g.declared_size - g.size for g in groupings)
    report.finish(f"{merged} low-count values combined or dropped")
    return tuple(one_way), groupings, grouped


def _selection_scores(
    method: SelectionMethod,
    counter: Counter,
    rho: float,
    config: PrivSynConfig,
    noise: NoiseSource,
    report: _Reporter,
) -> SelectionScores:
    """What ``method`` reads before it chooses, measured with ``rho`` (rho_2): the noisy
    InDif scores (section 4.2), PrivBayes's parent sets, or nothing."""
    report.start(Stage.INDIF)
    names = list(counter.domain)
    d = len(names)
    # NaN: not measured (the marginal graph and heat map show no score)
    empty = np.nan if method.reads != "indif" else 0.0
    scores = SelectionScores(pd.DataFrame(np.full((d, d), empty), index=names, columns=names))
    if method.reads == "indif" and d > 1:
        noisy_indif, spend = measure_indif(counter, rho, noise)
        report.charge([spend] if spend is not None else [])
        scores = SelectionScores(noisy_indif, indif_sigma(d, rho, noise.unit) if rho > 0 else 0.0)
        report.finish(f"{d * (d - 1) // 2} pairs scored")
    elif method.reads == "network" and d > 1:
        nodes, spends = select_network(
            counter, rho, noise, degree=config.privbayes_degree, max_cells=config.gamma
        )
        report.charge(spends)
        scores = replace(scores, network=nodes)
        report.finish(f"{len(spends)} parent sets chosen by the exponential mechanism")
    else:
        report.finish("no scores needed")
    return scores


def _published(
    counter: Counter,
    chosen: Sequence[tuple[str, ...]],
    origins: Sequence[str],
    budgets: Sequence[float],
    config: PrivSynConfig,
    noise: NoiseSource,
    report: _Reporter,
    first: Sequence[tuple[NoisyMarginal, Measurement]] = (),
) -> tuple[tuple[NoisyMarginal, ...], tuple[SelectedMarginal, ...]]:
    """The chosen marginals measured with ``budgets`` (rho_3 split by
    :func:`_marginal_budgets`, or by the selection method; Algorithm 3, line 5), and what each
    cost. A marginal of a first round (``first``, already charged) measured again is pooled
    with it (:func:`~privsyn_core.selection.tree_first.pooled`); one not measured again is
    kept as it was."""
    report.start(Stage.MEASURE)
    earlier = {m.attributes: (m, spend.rho) for m, spend in first}
    measured: list[NoisyMarginal] = []
    summary: list[SelectedMarginal] = []

    def add(noisy: NoisyMarginal, rho: float, origin: str) -> None:
        measured.append(noisy)
        summary.append(SelectedMarginal(noisy.attributes, noisy.cells, rho, noisy.sigma, origin))

    for (noisy, spend), origin in zip(
        _measured(counter, chosen, budgets, config, noise), origins, strict=True
    ):
        report.charge([spend])
        before, rho_before = earlier.pop(noisy.attributes, (None, 0.0))
        add(noisy if before is None else pooled(before, noisy), spend.rho + rho_before, origin)
    for noisy, rho in earlier.values():  # measured in the first round only
        add(noisy, rho, "tree")
    report.finish(f"{len(measured)} marginals, {sum(m.cells for m in measured)} cells")
    return tuple(measured), tuple(summary)


def _measured(
    counter: Counter,
    chosen: Sequence[tuple[str, ...]],
    budgets: Sequence[float],
    config: PrivSynConfig,
    noise: NoiseSource,
) -> list[tuple[NoisyMarginal, Measurement]]:
    """The marginals ``chosen`` measured with ``budgets`` (step "marginal" in the ledger)."""
    return measure_marginals(
        counter,
        list(chosen),
        budgets,
        noise,
        step="marginal",
        mechanism="laplace" if config.noise == "equal_laplace" else "gaussian",
    )


def _marginal_budgets(
    chosen: Sequence[tuple[str, ...]], engine: Domain, rho: float, config: PrivSynConfig
) -> list[float]:
    """Each marginal's share of ``rho`` (paper section 4.2, Equation 1, against the equal
    splits of section 6.4): ~ (w_i c_i)^(2/3) for "weighted_gaussian" (w_i the prediction
    target's weight, 1 without one), ``rho / m`` otherwise."""
    if not chosen:
        return []
    weights = budget_weights(
        chosen, engine.as_dict(), config.emphasis, equal=config.noise != "weighted_gaussian"
    )
    return [float(b) for b in rho * weights / weights.sum()]
