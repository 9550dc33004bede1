"""The paper lab: two to four configurations on one table and budget, over several seeds.

The paper justifies each of its choices by comparing it with alternatives (sections 6.3-6.4,
appendices H-J). A lab comparison re-runs such a comparison on the user's own table. Its one
rule comes from Algorithm 3's split: lines 1-4 measure (the only part that reads the table and
spends budget), lines 5-6 generate from the measurements alone. So configurations that differ
only in generation (consistency, MCF or GUM, GUM's strategy and decay) share one measurement
per seed: one spend, many generations. Configurations that differ in what is measured
(selection, noise allocation, budget shares, a prediction target, ...) each get their own.
Every seed is a fresh measurement, so the spread over seeds includes the DP noise, which is
what decides most of the paper's comparisons.

Each measurement is a full run's spend at (epsilon, delta), reported through ``on_measured``
as soon as it is made so that a front end can record it before anything else can fail. The
convergence curves (mean L1 of the synthetic table against the noisy marginals) are
post-processing of DP measurements; the fidelity scores compare with the real table and are
owner-only.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from privsyn_core.config import PrivSynConfig
from privsyn_core.data.schema import Schema
from privsyn_core.errors import InputError
from privsyn_core.evaluation import FidelityReport, fidelity_of
from privsyn_core.generation.synthesis import Measurements, generate
from privsyn_core.pipeline import measure
from privsyn_core.privacy.budget import NOTHING, Budget
from privsyn_core.privacy.ledger import FailedAfterSpending, PrivacyLedger
from privsyn_core.progress import GumProgress, SynthesisCancelled

#: the fields of :class:`PrivSynConfig` that only change generation; every other field
#: (including any added later) changes what is measured, so nothing is shared by mistake
GENERATION_FIELDS: frozenset[str] = frozenset(
    {"consistency", "consistency_rounds", "synthesis", "gum", "append_attributes",
     "separate_and_join", "independence_threshold", "quasi_independence", "empty_sigmas"}
)  # fmt: skip
MIN_ARMS, MAX_ARMS = 2, 4
MAX_SEEDS = 10


@dataclass(frozen=True)
class LabArm:
    """One configuration of a comparison, under a name people read on the charts."""

    name: str
    config: PrivSynConfig


def measurement_settings(config: PrivSynConfig) -> PrivSynConfig:
    """``config`` with its generation fields reset: equal for configs that can share a
    measurement."""
    default = PrivSynConfig()
    return replace(config, **{f: getattr(default, f) for f in GENERATION_FIELDS})


@dataclass(frozen=True)
class LabPlan:
    """What a comparison will run: its arms, its seeds, and which arms share a measurement."""

    arms: tuple[LabArm, ...]
    seeds: int
    #: arm indices that share one measurement per seed, in arm order
    groups: tuple[tuple[int, ...], ...]

    @property
    def measurements(self) -> int:
        return len(self.groups) * self.seeds

    def budget(self, epsilon: float, delta: float) -> Budget:
        """The most the comparison spends: every measurement is a run at (epsilon, delta)
        (:meth:`~privsyn_core.config.PrivSynConfig.run_budget`), and runs compose part by
        part."""
        total = NOTHING
        for group in self.groups:
            total = total + self.arms[group[0]].config.run_budget(epsilon, delta)
        return Budget(self.seeds * total.rho, self.seeds * total.delta)


def plan_lab(arms: Sequence[LabArm], seeds: int) -> LabPlan:
    """Check a comparison (refused before anything is spent) and group its arms."""
    if not MIN_ARMS <= len(arms) <= MAX_ARMS:
        raise InputError(
            f"a comparison takes {MIN_ARMS} to {MAX_ARMS} configurations, got {len(arms)}"
        )
    names = [a.name.strip() for a in arms]
    if any(not n for n in names) or len(set(names)) != len(names):
        raise InputError(f"give every configuration its own name, got {names}")
    for i, a in enumerate(arms):
        for b in arms[i + 1 :]:
            if a.config == b.config:
                raise InputError(
                    f"'{a.name}' and '{b.name}' are the same configuration: change one of "
                    "them, or compare fewer"
                )
    if isinstance(seeds, bool) or not isinstance(seeds, int) or not 1 <= seeds <= MAX_SEEDS:
        raise InputError(f"seeds must be a whole number from 1 to {MAX_SEEDS}, got {seeds!r}")
    keys: dict[PrivSynConfig, list[int]] = {}
    for index, arm in enumerate(arms):
        keys.setdefault(measurement_settings(arm.config), []).append(index)
    return LabPlan(tuple(arms), seeds, tuple(tuple(g) for g in keys.values()))


@dataclass(frozen=True)
class ArmRun:
    """One arm on one seed: its convergence and (owner-only) fidelity."""

    arm: str
    seed: int
    #: which measurement it was generated from (its index in :attr:`LabResult.ledgers`)
    measurement: int
    #: mean L1 against the noisy marginals after each GUM (or MCF) iteration
    errors: tuple[float, ...]
    fidelity: FidelityReport
    marginals: int
    seconds: float


@dataclass(frozen=True)
class LabResult:
    plan: LabPlan
    runs: tuple[ArmRun, ...]
    #: one per measurement, in the order they were made
    ledgers: tuple[PrivacyLedger, ...]

    @property
    def spent_rho(self) -> float:
        return math.fsum(ledger.spent_rho for ledger in self.ledgers)

    @property
    def spent(self) -> Budget:
        """What the comparison spent in all: its measurements' costs composed."""
        return sum((ledger.spent for ledger in self.ledgers), NOTHING)

    def frame(self) -> pd.DataFrame:
        """One row per arm and seed: the fidelity scores (owner-only) and run facts."""
        return pd.DataFrame(
            {
                "configuration": r.arm,
                "seed": r.seed,
                "2-way L1": r.fidelity.two_way_l1,
                "3-way range error": r.fidelity.range_query_error,
                "SVM misclassification": r.fidelity.svm_misclassification,
                "iterations": len(r.errors),
                "marginals": r.marginals,
                "seconds": r.seconds,
            }
            for r in self.runs
        )


@dataclass(frozen=True)
class LabProgress:
    """Where a comparison is: ``done`` of ``total`` steps (measurements and generations)
    finished, and the ``step`` under way in words (its seed, 0-based, and the arm it
    generates, or None while it measures). ``gum`` is the arm's latest GUM (or MCF)
    iteration, None before its first."""

    done: int
    total: int
    step: str
    seed: int | None = None
    arm: str | None = None
    measuring: bool = False
    gum: GumProgress | None = None

    @property
    def text(self) -> str:
        """The step and, while an arm is generated, its latest iteration."""
        if self.gum is None:
            return self.step
        return (
            f"{self.step}: iteration {self.gum.iteration + 1} of at most {self.gum.iterations}, "
            f"mean L1 {self.gum.mean_error:.4f} against the noisy marginals"
        )

    @property
    def fraction(self) -> float:
        """The share of the comparison done, counting the current arm's iterations."""
        within = 0.0 if self.gum is None else (self.gum.iteration + 1) / self.gum.iterations
        return min(1.0, (self.done + within) / self.total) if self.total else 1.0


#: the progress callback: False stops the comparison (:class:`LabCancelled`)
LabCallback = Callable[[LabProgress], bool | None]


class LabCancelled(RuntimeError):
    """The progress callback asked to stop. ``ledgers`` lists every measurement spent by then
    (a measurement stopped half-way counts with what it had spent), all of them already
    passed to ``on_measured``."""

    def __init__(self, ledgers: Sequence[PrivacyLedger]) -> None:
        self.ledgers = tuple(ledgers)
        self.spent_rho = math.fsum(ledger.spent_rho for ledger in self.ledgers)
        super().__init__(
            f"the comparison was stopped after {len(self.ledgers)} measurements "
            f"(rho {self.spent_rho:.6g} spent)"
        )


def run_lab(
    table: pd.DataFrame,
    epsilon: float,
    delta: float,
    plan: LabPlan,
    *,
    domain: dict[str, int] | None = None,
    schema: Schema | None = None,
    label: str | None = None,
    rng: np.random.Generator | None = None,
    on_progress: LabCallback | None = None,
    on_measured: Callable[[PrivacyLedger], None] | None = None,
) -> LabResult:
    """Run ``plan`` on ``table``: per seed, one measurement per group (Algorithm 3, lines
    1-4), then every arm of the group generated from it (lines 5-6: post-processing, free)
    and scored against the table (``label``: also the SVM score, section 6.1).

    ``rng`` None measures with release-grade noise, as a run does. A Generator makes the
    comparison reproducible: each (seed, group) measurement and each (seed, arm) generation
    draws from its own stream derived from it (and the ledgers are marked debug).

    ``on_progress`` sees every step before it starts and every GUM iteration; returning
    False stops the comparison with :class:`LabCancelled`. ``on_measured`` receives each
    measurement's ledger as soon as it is spent (before anything else can fail): a
    measurement that fails after spending raises
    :class:`~privsyn_core.privacy.ledger.FailedAfterSpending`, and one that is cancelled half-way
    raises :class:`LabCancelled`, both after ``on_measured`` saw what it spent.
    """
    if label is not None and label not in table.columns:
        raise InputError(f"the label {label!r} is not a column of the table")
    lab = _LabRun(table, plan, label, rng, on_progress, on_measured)
    for seed in range(plan.seeds):
        for g, group in enumerate(plan.groups):
            # Algorithm 3, lines 1-4: the group's one measurement (it spends)
            measured = lab.measure_group(seed, g, epsilon, delta, domain, schema)
            for index in group:  # lines 5-6: each arm generated from it (free)
                lab.generate_arm(seed, index, measured)
    lab.goes_on(LabProgress(lab.done, lab.total, "done"))
    order = {arm.name: i for i, arm in enumerate(plan.arms)}
    runs = sorted(lab.runs, key=lambda r: (order[r.arm], r.seed))
    return LabResult(plan, tuple(runs), tuple(lab.ledgers))


class _LabRun:
    """A comparison while it runs: where it is (the progress callback sees every step), what
    it has spent (each ledger passed to ``on_measured`` as it is spent) and the arms' runs."""

    def __init__(
        self,
        table: pd.DataFrame,
        plan: LabPlan,
        label: str | None,
        rng: np.random.Generator | None,
        on_progress: LabCallback | None,
        on_measured: Callable[[PrivacyLedger], None] | None,
    ) -> None:
        self.table, self.plan, self.label = table, plan, label
        self.on_progress, self.on_measured = on_progress, on_measured
        self.base = None if rng is None else int(rng.integers(2**63))
        self.total = plan.measurements + plan.seeds * len(plan.arms)
        self.step = LabProgress(0, self.total, "starting")
        self.done = 0
        self.ledgers: list[PrivacyLedger] = []
        self.runs: list[ArmRun] = []

    def stream(self, *path: int) -> np.random.Generator | None:
        """The stream of one (seed, group) measurement or (seed, 100 + arm) generation."""
        return None if self.base is None else np.random.default_rng([self.base, *path])

    def goes_on(self, update: LabProgress) -> bool:
        self.step = update
        return self.on_progress is None or self.on_progress(update) is not False

    def engine_event(self, event: object) -> bool:
        """The engine's callback: GUM's iterations go into the step; False stops it."""
        step = self.step
        return self.goes_on(replace(step, gum=event) if isinstance(event, GumProgress) else step)

    def spent(self, ledger: PrivacyLedger) -> None:
        self.ledgers.append(ledger)
        if self.on_measured is not None:
            self.on_measured(ledger)

    def where(self, seed: int) -> str:
        return f"seed {seed + 1} of {self.plan.seeds}"

    def measure_group(
        self,
        seed: int,
        g: int,
        epsilon: float,
        delta: float,
        domain: dict[str, int] | None,
        schema: Schema | None,
    ) -> Measurements:
        """Group ``g``'s measurement on ``seed``, under its first arm's configuration; what a
        measurement that fails or is cancelled had spent is passed on before it raises."""
        group = self.plan.groups[g]
        names = ", ".join(f"'{self.plan.arms[i].name}'" for i in group)
        step = f"{self.where(seed)}, measuring the table for {names}"
        if not self.goes_on(LabProgress(self.done, self.total, step, seed, measuring=True)):
            raise LabCancelled(self.ledgers)
        try:
            measured = measure(
                self.table,
                epsilon,
                delta,
                domain=domain,
                schema=schema,
                config=self.plan.arms[group[0]].config,
                rng=self.stream(seed, g),
                on_progress=self.engine_event,
            )
        except (FailedAfterSpending, SynthesisCancelled) as error:
            if error.ledger.spent_rho > 0:
                self.spent(error.ledger)
            if isinstance(error, SynthesisCancelled):
                raise LabCancelled(self.ledgers) from None
            raise
        self.spent(measured.ledger)
        self.done += 1
        return measured

    def generate_arm(self, seed: int, index: int, measured: Measurements) -> None:
        """Arm ``index`` generated from the last measurement on ``seed``, and scored."""
        arm = self.plan.arms[index]
        step = f"{self.where(seed)}, generating '{arm.name}'"
        if not self.goes_on(LabProgress(self.done, self.total, step, seed, arm.name)):
            raise LabCancelled(self.ledgers)
        started = time.perf_counter()
        try:
            result = generate(
                measured,
                config=arm.config,
                rng=self.stream(seed, 100 + index),
                on_progress=self.engine_event,
            )
        except SynthesisCancelled:
            raise LabCancelled(self.ledgers) from None
        self.runs.append(
            ArmRun(
                arm=arm.name,
                seed=seed,
                measurement=len(self.ledgers) - 1,
                errors=tuple(h.mean_error for h in result.history),
                fidelity=fidelity_of(self.table, result, self.label),
                marginals=len(result.marginals),
                seconds=time.perf_counter() - started,
            )
        )
        self.done += 1
