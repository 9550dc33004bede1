"""What one block is fitted to: the model's consistent marginals after the engine's rules.

The paper fits GUM to the consistent marginals as they are (paper 4.3, 5.2). Before a block
is drawn, four post-processing rules change what it is fitted to, each reading only the
model's DP measurements, their public noise scales and the sample's settings:

1. A measured pair whose dependence is within its noise is drawn as independent
   (:mod:`~privsyn_core.generation.independence`).
2. On a wide table, a pair that is independent but for a few cells is replaced by that fit
   (:mod:`~privsyn_core.generation.quasi_independence`).
3. Cells measured as empty (within a few sigmas of zero) are targeted at zero, and the rows
   synthesis leaves there are moved out after appending
   (:mod:`~privsyn_core.generation.empty_cells`).
4. Attributes of degree 1 are appended after GUM from their one marginal (paper 5.3), and
   the rest split into the components GUM fits separately (separate and join).

:func:`gum_problems` then draws each component's starting table
(:mod:`~privsyn_core.generation.initial`) and its GUM targets: the only step here that
draws from the block's generator.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from privsyn_core.domain import Domain
from privsyn_core.generation.dependence import UnmeasuredPairs, unmeasured_pairs
from privsyn_core.generation.empty_cells import emptied_targets
from privsyn_core.generation.fitted_data import FittedData, SamplingSettings, noise_l1
from privsyn_core.generation.independence import independent_product, noise_pairs
from privsyn_core.generation.initial import Initial, initial_columns
from privsyn_core.generation.quasi_independence import quasi_independent_marginals
from privsyn_core.generation.records import fill_record_major, record_major
from privsyn_core.generation.target_scores import GumTarget
from privsyn_core.marginals import MarginalTable
from privsyn_core.selection.marginal_graph import AppendPlan, gum_components, plan_appending

#: one part of the table GUM fits on its own: its attributes (rows of the array), the
#: record-major array of codes it changes in place, and its targets
Component = tuple[list[str], np.ndarray, list[GumTarget]]


@dataclass(frozen=True)
class Targets:
    """What a block is fitted to, and what each rule changed (for the stage's summary)."""

    #: every multi-way and 1-way target after the rules, on engine codes
    marginals: tuple[MarginalTable, ...]
    #: the measured pairs drawn as independent
    independent_pairs: frozenset[tuple[str, ...]]
    #: how many measured pairs were drawn as quasi-independent
    quasi: int
    #: per marginal with cells measured as empty, which cells (flat, C order)
    masks: Mapping[tuple[str, ...], np.ndarray]
    #: the attributes appended after GUM, each from its one marginal
    appended: tuple[AppendPlan, ...]
    #: the marginals GUM fits (multi-way, not peeled off by appending)
    gum_marginals: tuple[MarginalTable, ...]

    @property
    def leaves(self) -> frozenset[str]:
        """The appended attributes: GUM does not make them."""
        return frozenset(plan.leaf for plan in self.appended)

    def by_attributes(self) -> dict[tuple[str, ...], MarginalTable]:
        """Each target by its attributes, the pairs drawn as independent as the product of
        their margins (what appending draws a leaf from)."""
        return {
            t.attributes: independent_product(t) if t.attributes in self.independent_pairs else t
            for t in self.marginals
        }


def prepare_targets(model: FittedData, settings: SamplingSettings) -> Targets:
    """The rules of the module docstring, in order, on ``model``'s consistent marginals."""
    scales = model.noise_scales()
    independent = noise_pairs(model.marginals, scales, settings.independence_threshold)
    marginals, quasi = quasi_independent_marginals(
        model.marginals, model.noisy, settings.quasi_independence, independent, len(model.engine)
    )
    masks: dict[tuple[str, ...], np.ndarray] = {}
    if settings.empty_sigmas is not None:
        emptied, masks = emptied_targets(marginals, scales, settings.empty_sigmas, independent)
        marginals = tuple(emptied)
    multiway = [t for t in marginals if len(t.attributes) > 1]
    appended = (
        tuple(plan_appending(model.engine.attributes, [t.attributes for t in multiway]))
        if settings.append_attributes
        else ()
    )
    peeled = {p.marginal for p in appended}
    return Targets(
        tuple(marginals),
        independent,
        quasi,
        masks,
        appended,
        tuple(t for t in multiway if t.attributes not in peeled),
    )


def one_way_targets(model: FittedData) -> Targets:
    """What independent columns are drawn from: the consistent 1-way marginals alone, no
    rule applied (synthesis "independent", the baseline)."""
    one_way = tuple(t for t in model.marginals if len(t.attributes) == 1)
    return Targets(one_way, frozenset(), 0, {}, (), ())


def gum_problems(
    model: FittedData,
    settings: SamplingSettings,
    targets: Targets,
    n: int,
    rng: np.random.Generator,
) -> list[Component]:
    """Each component's starting table of ``n`` rows and its targets
    (:func:`component_problems` on the attributes GUM makes)."""
    leaves = targets.leaves
    return component_problems(
        [a for a in model.engine if a not in leaves],
        targets.gum_marginals,
        model.one_way,
        model.engine,
        n,
        settings.separate_and_join,
        settings.gum.initial,
        rng,
        model.code_dtype,
        noise_l1(model),
        targets.independent_pairs,
    )


def component_problems(
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
) -> list[Component]:
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


def judged_pairs(
    model: FittedData, settings: SamplingSettings, components: Sequence[Component]
) -> list[UnmeasuredPairs | None]:
    """Per component, the pairs no target covers, judged by the noisy InDif scores
    (:mod:`~privsyn_core.generation.dependence`); None where the model has no scores or the
    settings do not judge them."""
    if model.dependence is None or not settings.gum.judge_unmeasured:
        return [None] * len(components)
    return [
        unmeasured_pairs(
            names,
            model.engine.as_dict(),
            [t.attributes for t in targets],
            model.dependence,
            model.consistency.total,
        )
        for names, _, targets in components
    ]
