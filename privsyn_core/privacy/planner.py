"""Budget planning from public inputs only: how much noise each step will add.

Everything here is computed from epsilon, delta, the number of columns and the settings;
nothing reads the table, so the plan can be shown before any data is touched (the
dashboard's Privacy page does so live while the user types).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

from privsyn_core.config import PrivSynConfig
from privsyn_core.measuring.indif import indif_sigma
from privsyn_core.privacy.ledger import gaussian_sigma, rho_from_epsilon_delta
from privsyn_core.privacy.noise import NoiseSource, SecureNoise


@dataclass(frozen=True)
class StepPlan:
    """One step's share of the budget and the noise it implies."""

    step: str
    rho: float
    sigma: float | None
    queries: str
    note: str


@dataclass(frozen=True)
class CategorySurvival:
    """How many records a category needs to survive the private category estimate.

    The estimate (:func:`privsyn_core.measuring.private_domain.categories_from_counts`) keeps
    a value whose count ``c`` plus noise N(0, sigma^2) reaches ``threshold``, so it survives
    with probability about ``P(c + N(0, sigma^2) >= threshold)``. Public inputs only: the
    threshold assumes every column that may release categories is thresholded (each gets an
    equal part of the reserved delta); if structure settles fewer as categorical, each gets
    more delta and the real threshold is a little lower.
    """

    sigma: float
    threshold: float
    #: delta spent by each thresholded column (the chance a one-record value is released)
    delta_each: float
    #: columns whose categories may be thresholded
    columns: int

    def probability(self, count: float) -> float:
        """Chance that a value held by ``count`` records clears the threshold."""
        return NormalDist().cdf((count - self.threshold) / self.sigma)

    def count_for(self, probability: float) -> int:
        """The smallest whole count that survives with at least ``probability``."""
        return max(1, math.ceil(self.threshold + self.sigma * NormalDist().inv_cdf(probability)))

    @property
    def count_50(self) -> int:
        return self.count_for(0.5)

    @property
    def count_95(self) -> int:
        return self.count_for(0.95)

    def summary(self) -> str:
        return (
            f"a category needs about {self.count_50} records to survive half the time and "
            f"{self.count_95} to survive 95% of the time (threshold {self.threshold:.1f}, "
            f"sigma {self.sigma:.1f}); rarer values become 'other', and a column with no "
            "surviving value is dropped. Declare the categories in the schema to skip this."
        )


@dataclass(frozen=True)
class BudgetPlan:
    epsilon: float
    delta: float
    rho: float
    steps: tuple[StepPlan, ...]
    #: the category threshold, when some column's categories are estimated privately
    categories: CategorySurvival | None = None

    def as_rows(self) -> list[dict[str, object]]:
        return [
            {
                "step": s.step,
                "rho": s.rho,
                "share": s.rho / self.rho if self.rho else 0.0,
                "sigma": s.sigma,
                "queries": s.queries,
                "note": s.note,
            }
            for s in self.steps
        ]


def plan_budget(
    epsilon: float,
    delta: float,
    n_columns: int,
    *,
    config: PrivSynConfig | None = None,
    private_structure: int = 0,
    private_categories: int = 0,
    private_ranges: int = 0,
    private_undecided: int = 0,
    noise: NoiseSource | None = None,
) -> BudgetPlan:
    """The split of rho over PrivSyn's steps (Algorithm 3) and each step's noise.

    How many columns the schema leaves open: ``private_structure`` have their kind, whole
    numbers or date format decided privately; ``private_categories`` / ``private_ranges``
    their categories or bounds estimated; ``private_undecided`` are of undeclared kind, so
    they get one estimate of either sort (and may release categories). ``noise`` is the noise
    source whose tail bound sets the category threshold (release mode by default).
    """
    config = config or PrivSynConfig()
    estimates = private_categories + private_ranges + private_undecided
    may_threshold = private_categories + private_undecided
    reserved = config.threshold_delta_share * delta if may_threshold else 0.0
    rho = rho_from_epsilon_delta(epsilon, delta - reserved, config.conversion)
    steps: list[StepPlan] = []
    rho_structure = config.structure_share * rho if private_structure else 0.0
    if private_structure:
        steps.append(
            StepPlan(
                "column kinds",
                rho_structure,
                gaussian_sigma(rho_structure / private_structure),
                f"{private_structure} columns",
                "sigma of the counts of numbers, decimals, dates and text per column; kinds, "
                "whole numbers and date formats are decided from their noisy shares",
            )
        )
    rho_domain = config.domain_share * rho if estimates else 0.0
    survival = None
    if may_threshold:
        sigma = gaussian_sigma(rho_domain / estimates)
        delta_each = reserved / may_threshold
        survival = CategorySurvival(
            sigma=sigma,
            threshold=1.0 + sigma * (noise or SecureNoise()).tail_quantile(delta_each),
            delta_each=delta_each,
            columns=may_threshold,
        )
    if estimates:
        each = rho_domain / estimates
        steps.append(
            StepPlan(
                "domains",
                rho_domain,
                gaussian_sigma(each),
                f"{estimates} columns",
                f"sigma of category counts (bound histograms: x1.41); categories kept when "
                f"their noisy count clears a threshold (delta "
                f"{reserved:.2g} reserved); bounds from two noisy histograms",
            )
        )
    rest = rho - rho_structure - rho_domain
    one_way = config.one_way_share * rest
    steps.append(
        StepPlan(
            "1-way marginals",
            one_way,
            gaussian_sigma(one_way / max(1, n_columns)),
            f"{n_columns} marginals",
            "values below 3 sigma are combined or dropped",
        )
    )
    pairs = n_columns * (n_columns - 1) // 2
    indif = config.indif_share * rest if pairs else 0.0
    if pairs:
        steps.append(
            StepPlan(
                "InDif scores",
                indif,
                indif_sigma(n_columns, indif),
                f"{pairs} pairs",
                "sensitivity 4; noise variance 8m / rho_2",
            )
        )
    marginals = rest - one_way - indif
    split = "cells^(2/3)"
    if config.target is not None:
        split = (
            f"(w x cells)^(2/3), w = {config.target_weight:g} for marginals with {config.target!r}"
        )
    steps.append(
        StepPlan(
            "selected marginals",
            marginals,
            gaussian_sigma(marginals / max(1, n_columns)),
            "chosen by the data",
            f"sigma shown for {max(1, n_columns)} equal marginals; the real split follows " + split,
        )
    )
    return BudgetPlan(epsilon, delta, rho, tuple(steps), survival)
