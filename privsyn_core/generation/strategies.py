"""The synthesis methods, one entry each in :data:`STRATEGIES`: how a block's components
are fitted to their targets.

* "gum": GUM (paper 5.2), each component's starting table moved towards its targets
  (:func:`~privsyn_core.generation.gum.run_gum`).
* "mcf": the paper's min-cost-flow strawman (paper 5.1), each marginal made exact in turn
  (:func:`~privsyn_core.generation.mcf.run_mcf`); its tables are not weighed against the
  measurements (no unmeasured pairs, no kept-best, no guard), as the paper ran it.
* "mrf": a Markov random field fitted to the same targets and sampled by Gibbs chains along
  the trees the starting tables were drawn on (:func:`~privsyn_core.generation.mrf.run_mrf`).
* "gum+mrf": GUM, then, unless GUM's table is already within its noise floor, the MRF from
  the same starting tables; each component keeps the closer table
  (:func:`~privsyn_core.generation.guard.closer`).
* "independent": no marginal fitted; each column is drawn on its own from its noisy 1-way
  marginal. Not a synthesiser to release with but the baseline every other method must
  beat: a method that does worse than independent columns has a bug somewhere.

Every strategy takes the same :class:`FitProblem`, the block's generator and the stage's
:class:`Progress`, changes the components' arrays in place and returns a :class:`Fit`. All
of them read only the targets (DP measurements made consistent) and the noisy InDif scores:
post-processing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType

import numpy as np

from privsyn_core.generation.dependence import UnmeasuredPairs
from privsyn_core.generation.guard import closer
from privsyn_core.generation.gum import GumIterationRecord, run_gum, within_noise_floor
from privsyn_core.generation.gum_settings import GumSettings
from privsyn_core.generation.initial import Tree, dependency_tree
from privsyn_core.generation.mcf import run_mcf
from privsyn_core.generation.mrf import MrfSettings, run_mrf
from privsyn_core.generation.target_scores import GumTarget
from privsyn_core.generation.targets import Component, Targets
from privsyn_core.progress import GumProgress, StageReporter


@dataclass(frozen=True)
class FitProblem:
    """What a strategy fits: the components (their arrays changed in place), the pairs no
    target covers (per component, or None), the block's targets and GUM's settings."""

    components: Sequence[Component]
    judged: Sequence[UnmeasuredPairs | None]
    targets: Targets
    settings: GumSettings

    @property
    def problems(self) -> list[tuple[np.ndarray, list[GumTarget]]]:
        return [(arr, targets) for _, arr, targets in self.components]

    def trees(self) -> list[Tree]:
        """The trees the starting tables were drawn along (the MRF's structure); no edge
        where the start was independent columns."""
        marginals = self.targets.gum_marginals
        return [
            dependency_tree(
                names,
                [t for t in marginals if t.attributes[0] in names],
                self.targets.independent_pairs,
            )
            if self.settings.initial == "tree"
            else {name: {} for name in names}
            for names, _, _ in self.components
        ]

    def rows(self) -> list[dict[str, int]]:
        """Each component's attribute -> row of its array."""
        return [{a: i for i, a in enumerate(names)} for names, _, _ in self.components]


@dataclass(frozen=True)
class Fit:
    """What a strategy did: its history (GUM's iterations, then the MRF's sweeps), whether
    it ran to its end (False: the user stopped it), GUM's records at the head of the
    history, and per component whether the MRF's table was kept ("gum+mrf", None where no
    choice was made)."""

    history: tuple[GumIterationRecord, ...]
    finished: bool
    iterations: int
    chosen: tuple[bool, ...] | None = None
    #: "gum+mrf" only: GUM's table was within its noise floor, so no MRF was fitted
    mrf_skipped: bool = False


class Progress:
    """GUM's and the MRF's records as one stage's progress (a ``GumProgress`` each), the
    MRF's steps counted on from GUM's once :attr:`offset` is set; ``False`` from the
    callback stops the strategy."""

    def __init__(self, report: StageReporter, planned: int) -> None:
        self.report = report
        self.planned = planned
        #: GUM's iterations before the MRF's sweeps ("gum+mrf")
        self.offset = 0

    def __call__(self, record: GumIterationRecord) -> bool:
        record = after(record, self.offset)
        return self.report.send(
            GumProgress(
                record.iteration,
                self.planned,
                record.alpha,
                record.mean_error,
                record.errors,
                record.seconds,
                record.method,
                record.table_error,
                record.kept,
            )
        )


def after(record: GumIterationRecord, steps: int) -> GumIterationRecord:
    """``record`` of an MRF run that follows ``steps`` GUM iterations, its steps counted
    on from theirs (a starting table stays 0); unchanged when ``steps`` is 0."""
    if not steps or record.method != "mrf":
        return record
    kept = tuple(at + steps if at else 0 for at in record.kept)
    return replace(record, iteration=steps + record.iteration, kept=kept)


def fit_gum(problem: FitProblem, rng: np.random.Generator, progress: Progress) -> Fit:
    history, finished = run_gum(problem.problems, problem.settings, rng, progress, problem.judged)
    return Fit(tuple(history), finished, len(history))


def fit_mcf(problem: FitProblem, rng: np.random.Generator, progress: Progress) -> Fit:
    history, finished = run_mcf(problem.problems, problem.settings, rng, progress)
    return Fit(tuple(history), finished, len(history))


def fit_mrf(problem: FitProblem, rng: np.random.Generator, progress: Progress) -> Fit:
    history, finished = run_mrf(
        problem.problems,
        problem.trees(),
        problem.rows(),
        rng,
        on_iteration=progress,
        unmeasured=problem.judged,
    )
    return Fit(tuple(history), finished, 0)


def fit_gum_then_mrf(problem: FitProblem, rng: np.random.Generator, progress: Progress) -> Fit:
    """GUM, then the MRF from copies of the same starting tables where GUM did not reach
    its noise floor; each component keeps the closer of the two."""
    trees, rows = problem.trees(), problem.rows()
    problems = problem.problems
    starts = [(arr.copy(), targets) for arr, targets in problems]
    history, finished = run_gum(problems, problem.settings, rng, progress, problem.judged)
    iterations = progress.offset = len(history)
    if not finished or within_noise_floor(problems, problem.settings.noise_floor):
        return Fit(tuple(history), finished, iterations, mrf_skipped=finished)
    sweeps, finished = run_mrf(
        starts, trees, rows, rng, on_iteration=progress, unmeasured=problem.judged
    )
    chosen = closer(problems, starts, problem.judged)
    del starts
    records = (*history, *(after(r, iterations) for r in sweeps))
    return Fit(records, finished, iterations, tuple(chosen))


def fit_nothing(problem: FitProblem, rng: np.random.Generator, progress: Progress) -> Fit:
    """ "independent": the starting tables as they are (with no multi-way target, each
    column drawn from its own 1-way marginal)."""
    return Fit((), True, 0)


@dataclass(frozen=True)
class Strategy:
    """One synthesis method: how it fits, how many steps it plans with GUM's settings (the
    progress bar's length), what its steps are called, whether its tables are weighed
    against the measurements (unmeasured pairs, the kept-best start score, the guard), and
    whether it fits the multi-way marginals at all."""

    fit: Callable[[FitProblem, np.random.Generator, Progress], Fit]
    steps: Callable[[GumSettings], int]
    unit: str = "iterations"
    weighed: bool = True
    fits_marginals: bool = True


STRATEGIES: Mapping[str, Strategy] = MappingProxyType(
    {
        "gum": Strategy(fit_gum, lambda gum: gum.iterations),
        "mcf": Strategy(fit_mcf, lambda gum: gum.iterations, weighed=False),
        "mrf": Strategy(fit_mrf, lambda gum: MrfSettings().sweeps, unit="MRF sweeps"),
        "gum+mrf": Strategy(fit_gum_then_mrf, lambda gum: gum.iterations + MrfSettings().sweeps),
        "independent": Strategy(fit_nothing, lambda gum: 0, weighed=False, fits_marginals=False),
    }
)
