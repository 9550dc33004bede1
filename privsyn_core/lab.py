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
from privsyn_core.data.columns import coded_frame
from privsyn_core.data.schema import Schema
from privsyn_core.errors import FailedAfterSpending, InputError
from privsyn_core.evaluation import FidelityReport, fidelity_report
from privsyn_core.pipeline import SynthesisResult, generate, measure
from privsyn_core.privacy.ledger import PrivacyLedger

#: the fields of :class:`PrivSynConfig` that only change generation; every other field
#: (including any added later) changes what is measured, so nothing is shared by mistake
GENERATION_FIELDS: frozenset[str] = frozenset(
    {"consistency", "consistency_rounds", "synthesis", "gum", "append_attributes",
     "separate_and_join"}
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

    def rho(self, epsilon: float, delta: float) -> float:
        """The comparison's whole spend: every measurement is a run's budget at (epsilon,
        delta), and zCDP composes by addition."""
        return self.seeds * sum(
            PrivacyLedger.from_epsilon_delta(
                epsilon, delta, self.arms[group[0]].config.conversion
            ).budget_rho
            for group in self.groups
        )


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
    """``done`` of ``total`` steps (measurements and generations) finished; what runs next."""

    done: int
    total: int
    text: str


def run_lab(
    table: pd.DataFrame,
    epsilon: float,
    delta: float,
    plan: LabPlan,
    *,
    domain: dict[str, int] | None = None,
    schema: Schema | None = None,
    label: str | None = None,
    seed: int = 0,
    on_progress: Callable[[LabProgress], None] | None = None,
    on_measured: Callable[[PrivacyLedger], None] | None = None,
) -> LabResult:
    """Run ``plan`` on ``table``: per seed, one measurement per group, then every arm of the
    group generated from it and scored against the table (``label``: also the SVM score).

    The noise is seeded from ``(seed, seed index, group)``, so a comparison is reproducible
    (and its ledgers are marked debug). ``on_measured`` receives each measurement's ledger
    as soon as it is spent; a measurement that fails after spending raises
    :class:`~privsyn_core.errors.FailedAfterSpending` after ``on_measured`` saw its ledger.
    """
    if label is not None and label not in table.columns:
        raise InputError(f"the label {label!r} is not a column of the table")
    total = plan.measurements + plan.seeds * len(plan.arms)
    done = 0

    def report(text: str) -> None:
        if on_progress is not None:
            on_progress(LabProgress(done, total, text))

    runs: list[ArmRun] = []
    ledgers: list[PrivacyLedger] = []
    for s in range(plan.seeds):
        for g, group in enumerate(plan.groups):
            names = ", ".join(plan.arms[i].name for i in group)
            report(f"seed {s + 1} of {plan.seeds}: measuring the table for {names}")
            try:
                measured = measure(
                    table,
                    epsilon,
                    delta,
                    domain=domain,
                    schema=schema,
                    config=plan.arms[group[0]].config,
                    rng=np.random.default_rng([seed, s, g]),
                )
            except FailedAfterSpending as error:
                if on_measured is not None:
                    on_measured(error.ledger)
                raise
            ledgers.append(measured.ledger)
            if on_measured is not None:
                on_measured(measured.ledger)
            done += 1
            for index in group:
                arm = plan.arms[index]
                report(f"seed {s + 1} of {plan.seeds}: generating '{arm.name}'")
                started = time.perf_counter()
                result = generate(
                    measured, config=arm.config, rng=np.random.default_rng([seed, s, 100 + index])
                )
                seconds = time.perf_counter() - started
                runs.append(
                    ArmRun(
                        arm=arm.name,
                        seed=s,
                        measurement=len(ledgers) - 1,
                        errors=tuple(h.mean_error for h in result.history),
                        fidelity=fidelity_of(table, result, label),
                        marginals=len(result.marginals),
                        seconds=seconds,
                    )
                )
                done += 1
    report("done")
    order = {arm.name: i for i, arm in enumerate(plan.arms)}
    runs.sort(key=lambda r: (order[r.arm], r.seed))
    return LabResult(plan, tuple(runs), tuple(ledgers))


def fidelity_of(table: pd.DataFrame, result: SynthesisResult, label: str | None) -> FidelityReport:
    """Owner-only: ``result``'s synthetic table against the real one. A raw table is compared
    in the run's own codes (its bins and categories), a pre-coded one as it is."""
    if result.columns:
        real = coded_frame(result.columns, table)
        synthetic = coded_frame(result.columns, result.synthetic)
    else:
        real, synthetic = table, result.synthetic
    usable = label if label is not None and label in real.columns else None
    return fidelity_report(real, synthetic, label=usable)
