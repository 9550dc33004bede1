"""GUM: gradually updating a synthetic table towards the noisy marginals (paper 5.2-5.3).

The synthetic table is one integer array of shape ``(k, N)`` (attributes x records) and is
the only state GUM touches; it is never mirrored in a DataFrame (the research code's pandas
copy silently discarded every update). For each marginal with target frequencies ``a`` and
current frequencies ``s``:

* under-filled cells with ``s > 0`` gain ``min(a - s, alpha s) N`` records, empty cells
  (``s = 0 < a``) gain ``alpha a N``;
* over-filled cells lose ``min(s - a, beta s) N`` records, ``beta`` solved exactly (the paper
  and the authors' code use a bisection) so removals equal additions and ``N`` stays fixed.

Removed rows are rewritten: either **duplicated** from a random row of the target cell (keeps
the row's other attributes coherent) or **replaced** (only the marginal's attributes change;
the only option for empty cells). Which share is duplicated follows the update strategy of
appendix I; the default "half-half plus duplicate" uses half/half on even iterations and
duplication only on odd ones. ``alpha`` follows a step decay (appendix J); the other
schedules of section 5.3 (exponential, linear, square root) and a constant alpha are
options for comparison.

Choices where the paper is silent, each made for speed at 600k rows without losing accuracy:
rows to remove are drawn by independent Bernoulli trials with each over-filled cell's removal
rate (so per-cell removals match in expectation, not exactly), and the additions are then
allocated by largest remainder to exactly the number of rows removed, so ``N`` is fixed
exactly; duplication sources are drawn with replacement from a Bernoulli sample of each
target cell. Rows removed are paired with additions in random order, which keeps row
positions meaningless (otherwise two marginals updated in one pass become correlated
through positions).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

import numpy as np

from privsyn_core.cores import threads
from privsyn_core.generation.dependence import UnmeasuredPairs
from privsyn_core.generation.gum_settings import GumSettings, resolve_kernel
from privsyn_core.generation.gum_update import UpdateScratch, update_towards
from privsyn_core.generation.target_scores import (
    GumTarget,
    initial_errors,
    score_from_errors,
    table_score,
    target_errors,
)


@dataclass(frozen=True)
class GumIterationRecord:
    """Errors seen in one iteration: each marginal's L1 (frequencies, in [0, 2]) measured
    when GUM visited it, before updating it."""

    iteration: int
    alpha: float
    errors: dict[tuple[str, ...], float]
    seconds: float
    #: the whole table's :func:`table_score` after the iteration (measured when
    #: :attr:`GumSettings.keep_best`; the per-marginal ``errors`` are each seen at one visit)
    table_error: float | None = None
    #: "gum", or "mrf" for a sweep of :mod:`~privsyn_core.generation.mrf` (``alpha`` is then
    #: its step, and ``errors`` each target's L1 before the sweep's move)
    method: str = "gum"
    #: the table each component with targets would return if the run ended here: the
    #: iteration (counted from 1) of its closest table so far, 0 its starting table
    #: (:attr:`GumSettings.keep_best`); empty when the run returns its last table
    kept: tuple[int, ...] = ()

    @property
    def mean_error(self) -> float:
        return float(np.mean(list(self.errors.values()))) if self.errors else 0.0


ProgressHook = Callable[[GumIterationRecord], bool]

#: one marginal's update in a pass: (iteration, component, target index) -> that marginal's L1
#: error before the update (GUM's gradual step, MCF's exact flow)
UpdateStep = Callable[[int, int, int], float]


@dataclass(frozen=True)
class PassOutcome:
    """What a synthesiser measures on the whole table after a pass (:func:`run_passes`): the
    table's score (GUM's kept-table score), and whether a stop of its own holds (GUM's noise
    floor)."""

    table_error: float | None = None
    stop: bool = False
    #: see :attr:`GumIterationRecord.kept`
    kept: tuple[int, ...] = ()


def _full_step(iteration: int) -> float:
    return 1.0


def run_passes(
    components: Sequence[tuple[np.ndarray, Sequence[GumTarget]]],
    settings: GumSettings,
    update: UpdateStep,
    on_iteration: ProgressHook | None = None,
    *,
    alpha: Callable[[int], float] = _full_step,
    after_pass: Callable[[], PassOutcome] | None = None,
) -> tuple[list[GumIterationRecord], bool]:
    """The outer loop GUM and MCF share (paper 5.2; MCF, the strawman of 5.1, runs the same
    loop so the two convergence curves compare directly).

    Up to ``settings.iterations`` passes; each visits every component's marginals in
    descending order of their error (:func:`worst_first`, fixed before the pass updates any),
    calling ``update`` on each, which returns the marginal's error before it acted. Then
    ``after_pass`` measures the whole table, and one :class:`GumIterationRecord` (with
    ``alpha(iteration)``, 1 when every step goes all the way) goes to ``on_iteration``, which
    cancels by returning ``False``. The loop stops early by the plateau rule
    (:meth:`GumSettings.converged` on :func:`_plateau_errors`) or ``after_pass``'s stop.
    Returns the history and whether the run ended normally (not cancelled).
    """
    errors = {
        (c, k): error
        for c, (records, targets) in enumerate(components)
        for k, error in enumerate(initial_errors(records, targets))
    }
    history: list[GumIterationRecord] = []
    if not errors:
        return history, True
    for t in range(settings.iterations):
        started = time.perf_counter()
        for c, (_, targets) in enumerate(components):
            for k in worst_first(errors, c, len(targets)):
                errors[(c, k)] = update(t, c, k)
        outcome = PassOutcome() if after_pass is None else after_pass()
        record = GumIterationRecord(
            iteration=t,
            alpha=alpha(t),
            errors={components[c][1][k].attributes: e for (c, k), e in errors.items()},
            seconds=time.perf_counter() - started,
            table_error=outcome.table_error,
            kept=outcome.kept,
        )
        history.append(record)
        if on_iteration is not None and on_iteration(record) is False:
            return history, False
        if settings.converged(_plateau_errors(history)) or outcome.stop:
            break
    return history, True


def run_gum(
    components: Sequence[tuple[np.ndarray, Sequence[GumTarget]]],
    settings: GumSettings,
    rng: np.random.Generator,
    on_iteration: ProgressHook | None = None,
    unmeasured: Sequence[UnmeasuredPairs | None] = (),
) -> tuple[list[GumIterationRecord], bool]:
    """Run GUM on every component in lockstep (separate and join, paper 5.3): the passes of
    :func:`run_passes`, each marginal moved towards its target by :func:`update_towards` with
    the iteration's alpha and duplicate share.

    ``unmeasured`` (one per component, or empty) are the pairs no target covers, with their
    noisy InDif: with :attr:`GumSettings.keep_best` the kept table is the one closest to the
    targets and to those scores (:func:`table_score`), restored when the run ends normally.

    Each component has its own record array, so duplicating a row for one component never
    disturbs another's marginals. Returns the history and whether the run ended normally (all
    iterations, the plateau rule of :meth:`GumSettings.converged` or the noise floor) rather
    than by ``on_iteration`` returning ``False``.
    """
    if settings.copy == "blanket":
        components = [(records, with_blankets(targets)) for records, targets in components]
    # a pool of one thread still runs: the parts then run one after the other
    with ThreadPoolExecutor(max_workers=threads()) as pool:
        judged = list(unmeasured) or [None] * len(components)
        gum = _GumPasses(components, settings, rng, pool, judged)
        history, finished = run_passes(
            components,
            settings,
            gum.update,
            on_iteration,
            alpha=settings.alpha,
            after_pass=gum.after_pass,
        )
        if finished:
            gum.finish()
        return history, finished


def with_blankets(targets: Sequence[GumTarget]) -> list[GumTarget]:
    """``targets`` with :attr:`GumTarget.copied` set to each one's blanket: its own attribute
    rows and every row that shares a target with one of them.

    A duplication exists to keep a record coherent across the marginals its rewritten
    attributes sit in; the rest of the record it need not carry. Copying it anyway clones the
    unmeasured part of records over thousands of updates until pairs no target covers look
    dependent (genetic drift). A blanket that holds every attribute stays empty: the fast
    whole-record copy."""
    neighbours: dict[int, set[int]] = {}
    for target in targets:
        for row in target.rows:
            neighbours.setdefault(row, set()).update(target.rows)
    everything = set(neighbours)
    out = []
    for target in targets:
        blanket = set().union(*(neighbours[row] for row in target.rows))
        copied = () if blanket >= everything else tuple(sorted(blanket))
        out.append(replace(target, copied=copied))
    return out


class _GumPasses:
    """GUM's part of :func:`run_passes`: the update kernel of each component, the kept table
    (:attr:`GumSettings.keep_best`) and the noise-floor stop."""

    def __init__(
        self,
        components: Sequence[tuple[np.ndarray, Sequence[GumTarget]]],
        settings: GumSettings,
        rng: np.random.Generator,
        pool: ThreadPoolExecutor,
        unmeasured: Sequence[UnmeasuredPairs | None],
    ) -> None:
        self.components = components
        self.settings = settings
        self.rng = rng
        self.pool = pool
        # numba's import is paid once for all components: judge the run's updates together
        # (a wide table split into many small components is as much work as one large one)
        updates = sum(len(targets) for _, targets in components)
        self.kernels = [
            resolve_kernel(settings.kernel, records.shape[1], updates) for records, _ in components
        ]
        self.scratches = [
            UpdateScratch.for_records(records.shape[1]) if kernel == "compiled" else None
            for (records, _), kernel in zip(components, self.kernels, strict=True)
        ]
        self.best = _BestTables(components, unmeasured) if settings.keep_best else None
        self.floor = _NoiseFloor(components, settings.noise_floor)

    def update(self, iteration: int, component: int, target: int) -> float:
        records, targets = self.components[component]
        return update_towards(
            records,
            targets[target],
            self.settings.alpha(iteration),
            self.settings.duplicate_share(iteration),
            self.rng,
            self.pool,
            self.kernels[component],
            self.scratches[component],
        )

    def after_pass(self) -> PassOutcome:
        best, floor, components = self.best, self.floor, self.components
        measured = (
            [target_errors(records, targets) for records, targets in components]
            if best is not None or floor.active
            else []
        )
        return PassOutcome(
            table_error=None if best is None else best.consider(components, measured),
            stop=floor.reached(measured),
            kept=() if best is None else best.kept,
        )

    def finish(self) -> None:
        """Leave each component's kept table in its array."""
        if self.best is not None:
            self.best.restore(self.components)


def worst_first(errors: dict[tuple[int, int], float], component: int, count: int) -> list[int]:
    """The indices of ``component``'s ``count`` marginals, largest error first (ties in
    order): the order of one pass (:func:`run_passes`), fixed before the pass updates any
    error."""
    return sorted(range(count), key=lambda k: -errors[(component, k)])


def _plateau_errors(history: Sequence[GumIterationRecord]) -> list[float]:
    """What the plateau rule (:meth:`GumSettings.converged`) watches: the whole table's score
    when GUM keeps its best table (that score decides what is returned), else the mean
    error each marginal had when visited (MCF's too)."""
    scores = [h.table_error for h in history if h.table_error is not None]
    if history and len(scores) == len(history):
        return [float(score) for score in scores]
    return [h.mean_error for h in history]


class _BestTables:
    """Each component's table closest to what was measured so far (:func:`table_score`,
    measured on the whole table after each iteration), copied aside to restore at the end.
    The copy costs one table's memory; measuring costs one batch count per iteration, a
    small share of an iteration's updates."""

    def __init__(
        self,
        components: Sequence[tuple[np.ndarray, Sequence[GumTarget]]],
        unmeasured: Sequence[UnmeasuredPairs | None],
    ) -> None:
        self.unmeasured = unmeasured
        self.scores = [
            table_score(records, targets, judged) if targets else 0.0
            for (records, targets), judged in zip(components, unmeasured, strict=True)
        ]
        # a component without targets is never scored, so never restored: nothing to keep
        self.saved = [
            records.copy() if targets else records[:, :0] for records, targets in components
        ]
        self.latest = list(self.scores)
        #: each component's saved table: the pass (counted from 1) that made it, 0 the start
        self.made = [0] * len(components)
        self.passes = 0
        self.judged = [bool(targets) for _, targets in components]

    @property
    def kept(self) -> tuple[int, ...]:
        """The pass of each component with targets whose table is kept (0: the start)."""
        return tuple(made for made, judged in zip(self.made, self.judged, strict=True) if judged)

    def consider(
        self,
        components: Sequence[tuple[np.ndarray, Sequence[GumTarget]]],
        measured: Sequence[np.ndarray],
    ) -> float:
        """Keep each component's table if it is its best yet; the whole table's score (the
        components' scores weighted by their number of targets). ``measured``: each
        component's :func:`target_errors`."""
        self.passes += 1
        total = 0.0
        for c, (records, targets) in enumerate(components):
            if not targets:
                continue
            score, exact = score_from_errors(
                records, targets, self.unmeasured[c], self.scores[c], measured[c]
            )
            # inexact: a lower bound at or above the best, so this table is not kept
            self.latest[c] = score if exact else math.inf
            total += score * len(targets)
            if exact and score < self.scores[c]:
                self.scores[c] = score
                self.made[c] = self.passes
                np.copyto(self.saved[c], records)
        return total / max(1, sum(len(targets) for _, targets in components))

    def restore(self, components: Sequence[tuple[np.ndarray, Sequence[GumTarget]]]) -> None:
        for c, (records, _) in enumerate(components):
            if self.latest[c] > self.scores[c]:
                np.copyto(records, self.saved[c])


def within_noise_floor(
    components: Sequence[tuple[np.ndarray, Sequence[GumTarget]]], factor: float | None
) -> bool:
    """Whether the components' tables are within :attr:`GumSettings.noise_floor` (``factor``)
    of their targets, as GUM's noise-floor stop judges them: nearer than that, a method
    that fits the targets more closely mostly fits noise. False when the floor is off or no
    target knows its noise."""
    floor = _NoiseFloor(components, factor)
    return floor.active and floor.reached(
        [target_errors(records, targets) for records, targets in components]
    )


class _NoiseFloor:
    """The stop of :attr:`GumSettings.noise_floor`: the targets that know their noise
    (:attr:`GumTarget.noise_l1`), pooled over the components."""

    def __init__(
        self, components: Sequence[tuple[np.ndarray, Sequence[GumTarget]]], factor: float | None
    ) -> None:
        self.known = [
            np.array([t.noise_l1 is not None for t in targets], dtype=bool)
            for _, targets in components
        ]
        noise = sum((t.noise_l1 or 0.0) for _, targets in components for t in targets)
        self.active = factor is not None and any(k.any() for k in self.known)
        self.bound = 0.0 if factor is None else factor * noise

    def reached(self, measured: Sequence[np.ndarray]) -> bool:
        """Whether the targets' summed L1 (``measured``, per component) is within the bound."""
        if not self.active:
            return False
        total = sum(float(e[k].sum()) for e, k in zip(measured, self.known, strict=True))
        return total <= self.bound
