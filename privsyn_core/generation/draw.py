"""One block of synthetic rows from a fitted model: paper Algorithm 3, lines 5-6.

:func:`draw_block` reads as the paper's steps, each a function of its own module:

1. prepare the targets: the consistent marginals after the independence, quasi-independence
   and empty-cell rules, the appending plan, and each component's starting table
   (:mod:`~privsyn_core.generation.targets`);
2. fit them with the sample's method, looked up in a table of strategies (GUM, MCF, MRF,
   GUM then MRF: :mod:`~privsyn_core.generation.strategies`);
3. guard: independent columns replace a component's table where they come closer to the
   measurements (:mod:`~privsyn_core.generation.guard`);
4. assemble the components into one table of engine codes, append the degree-1 attributes
   (paper 5.3) and move rows out of cells measured as empty;
5. decode engine codes to declared codes and values (paper 5.3), keeping the schema's rules.

Everything reads the model alone (:class:`~privsyn_core.generation.fitted_data.FittedData`):
post-processing, no budget. The block's generator is read in that order, so the same seed
gives the same rows.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from privsyn_core.domain import Domain
from privsyn_core.generation.empty_cells import empty_cell_rows, fill_empty_cells
from privsyn_core.generation.fitted_data import FittedData, Sample, SamplingSettings
from privsyn_core.generation.grouping import decode
from privsyn_core.generation.guard import guard, guard_message, kept_table, start_score
from privsyn_core.generation.independence import noise_pairs_message
from privsyn_core.generation.kept import KeptTable
from privsyn_core.generation.quasi_independence import quasi_pairs_message
from privsyn_core.generation.records import columns_of
from privsyn_core.generation.rules import kept_rules
from privsyn_core.generation.sampling import conditional_column
from privsyn_core.generation.strategies import STRATEGIES, Fit, FitProblem, Progress, Strategy
from privsyn_core.generation.targets import (
    Component,
    Targets,
    gum_problems,
    judged_pairs,
    one_way_targets,
    prepare_targets,
)
from privsyn_core.marginals import MarginalTable
from privsyn_core.progress import ProgressCallback, Stage, StageReporter
from privsyn_core.selection.marginal_graph import AppendPlan

#: the GUM stage's summary of synthesis "independent"
INDEPENDENT_COLUMNS = (
    "each column drawn on its own from its noisy 1-way marginal (independent columns, the "
    "baseline): no marginal of two or more columns fitted"
)


def draw_block(
    model: FittedData,
    n: int,
    settings: SamplingSettings,
    rng: np.random.Generator,
    on_progress: ProgressCallback | None,
) -> Sample:
    """GUM, appending and decoding (paper Algorithm 3, lines 5-6) from the model alone."""
    report = StageReporter(on_progress)
    report.ledger = model.ledger
    report.start(Stage.GUM)
    strategy = STRATEGIES[model.planned(settings, workers=1).method]  # as memory was checked
    fitted = strategy.fits_marginals
    targets = prepare_targets(model, settings) if fitted else one_way_targets(model)
    components = gum_problems(model, settings, targets, n, rng)
    fit, independent, kept = fit_and_guard(
        model, settings, strategy, targets, components, rng, report
    )
    synthetic = assembled(components, model.engine, n, model.code_dtype)
    summary = fit_summary(fit, strategy.unit, targets, kept, independent, len(components))
    report.finish(summary if fitted else INDEPENDENT_COLUMNS)

    report.start(Stage.APPEND)
    report.finish(appended(synthetic, model, targets, rng))

    report.start(Stage.DECODE)
    declared = declared_codes(synthetic, model, rng)
    del synthetic
    frame, changed = decoded(declared, model, rng)
    report.finish(
        f"{n} rows" + (f"; {changed} values changed to keep the schema's rules" if changed else "")
    )
    in_order = tuple(a for a in model.engine if a in independent)
    seconds = dict(report.seconds)
    history, plans = fit.history, targets.appended
    return Sample(frame, n, history, plans, seconds, settings, in_order, kept=kept)


def fit_and_guard(
    model: FittedData,
    settings: SamplingSettings,
    strategy: Strategy,
    targets: Targets,
    components: list[Component],
    rng: np.random.Generator,
    report: StageReporter,
) -> tuple[Fit, list[str], KeptTable | None]:
    """Fit ``components`` (changed in place) with ``strategy``, then guard them: what the
    strategy did, the attributes the guard drew as independent columns, and which table
    each part returned. A strategy that is not weighed (MCF), or ``keep_best`` off, runs
    no guard and reports no scores."""
    weighed = strategy.weighed and settings.gum.keep_best
    judged = (
        judged_pairs(model, settings, components) if strategy.weighed else [None] * len(components)
    )
    problem = FitProblem(components, judged, targets, settings.gum)
    start = start_score(problem.problems, judged) if weighed else 0.0
    fit = strategy.fit(problem, rng, Progress(report, strategy.steps(settings.gum)))
    if not fit.finished:
        report.stop()
    # its own stream: a table the guard keeps is drawn exactly as without the guard
    independent = guard(components, judged, model, rng.spawn(1)[0]) if weighed else []
    scores = (start, start_score(problem.problems, judged)) if weighed else None
    kept = kept_table(components, fit.history, fit.iterations, fit.chosen, set(independent), scores)
    return fit, independent, kept


def assembled(components: list[Component], engine: Domain, n: int, dtype: np.dtype) -> np.ndarray:
    """The components' tables as one array of engine codes, a row per attribute (the
    appended attributes' rows still zero)."""
    synthetic = np.zeros((len(engine), n), dtype=dtype)
    for names, arr, _ in components:
        # one transposing copy: reading a record-major attribute alone streams the whole array
        columns = columns_of(arr, len(names))
        for row, name in enumerate(names):
            synthetic[engine.index(name)] = columns[row]
        del columns
    return synthetic


def fit_summary(
    fit: Fit,
    unit: str,
    targets: Targets,
    kept: KeptTable | None,
    independent: list[str],
    components: int,
) -> str:
    """The GUM stage's summary: what the method did, which table came out, and what each
    rule of the targets and the guard changed."""
    marginals = len(targets.gum_marginals)
    if fit.chosen is not None:
        done = (
            f"{fit.iterations} GUM iterations and {len(fit.history) - fit.iterations} MRF "
            f"sweeps over {marginals} marginals; kept the MRF's table in {sum(fit.chosen)} of "
            f"{components} components, GUM's in the rest (whichever is closer to the "
            "noisy marginals and InDif scores)"
        )
    else:
        done = (
            f"{len(fit.history)} {unit} over {marginals} marginals"
            + ("" if kept is None or kept.is_last else f"; {_clause(kept.words())}")
            + (
                "; GUM's table is within its noise floor, so no MRF was fitted"
                if fit.mrf_skipped
                else ""
            )
        )
    pairs = len(targets.independent_pairs)
    return (
        done
        + (f"; {noise_pairs_message(pairs)}" if pairs else "")
        + (f"; {quasi_pairs_message(targets.quasi)}" if targets.quasi else "")
        + (f"; {guard_message(independent)}" if independent else "")
    )


def _clause(sentence: str) -> str:
    """A sentence as a clause of the stage's summary: lower case, no full stop."""
    return sentence[:1].lower() + sentence[1:].rstrip(".")


def appended(
    synthetic: np.ndarray, model: FittedData, targets: Targets, rng: np.random.Generator
) -> str:
    """Draw each appended attribute from its one marginal (paper 5.3), then move the rows
    in cells measured as empty (:mod:`~privsyn_core.generation.empty_cells`), in place;
    the stage's summary."""
    engine = model.engine
    by_attributes = targets.by_attributes()
    for plan in targets.appended:
        synthetic[engine.index(plan.leaf)] = _append(
            plan, by_attributes[plan.marginal], synthetic, engine, rng
        )
    note = f"{len(targets.appended)} attributes appended"
    masks = targets.masks
    if masks:
        found = sum(empty_cell_rows(synthetic, engine, a, m).size for a, m in masks.items())
        left = fill_empty_cells(
            synthetic, engine, list(by_attributes.values()), dict(masks), rng, model.one_way
        )
        note += f"; {found - left} rows moved out of combinations measured as empty"
    return note


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


def declared_codes(
    synthetic: np.ndarray, model: FittedData, rng: np.random.Generator
) -> np.ndarray:
    """Engine codes back to declared codes, a low-count group's rows spread over its
    members (paper 5.3)."""
    n = synthetic.shape[1]
    declared = np.empty_like(synthetic)  # declared codes never exceed the decoders' sizes
    for row, grouping in enumerate(model.groupings):
        declared[row] = decode(synthetic[row], grouping, rng, model.consistency.total / n)
    return declared


def decoded(
    declared: np.ndarray, model: FittedData, rng: np.random.Generator
) -> tuple[pd.DataFrame, int]:
    """Declared codes as values, and how many the schema's rules changed."""
    frame = pd.concat(
        [
            decoder.decode(declared[row].astype(np.int64), rng)
            for row, decoder in enumerate(model.sampling_decoders)
        ],
        axis=1,
    )
    return frame, kept_rules(frame, model, rng) if model.rules else 0
