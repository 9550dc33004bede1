"""GUM's settings (paper 5.2-5.3 and appendices I and J): strategies, schedules, kernels.

Every choice the paper compares is a field whose default is the paper's or the measured
one; :mod:`privsyn_core.generation.gum` runs them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from privsyn_core.errors import InputError
from privsyn_core.generation.initial import INITIALS, Initial
from privsyn_core.limits import check_iterations

UpdateStrategy = Literal[
    "half_half_plus_duplicate",
    "half_half",
    "replace",
    "duplicate",
    "replace_plus_duplicate",
    "half_half_plus_replace",
]

#: the paper's names of the update strategies (appendix I, Figure 11): S1 to S6
STRATEGY_NAMES: dict[str, UpdateStrategy] = {
    "S1": "replace",
    "S2": "duplicate",
    "S3": "half_half",
    "S4": "replace_plus_duplicate",
    "S5": "half_half_plus_duplicate",
    "S6": "half_half_plus_replace",
}

#: how alpha decreases over the iterations (paper section 5.3, compared in appendix J)
DecaySchedule = Literal["step", "exponential", "linear", "sqrt", "none"]

DECAY_SCHEDULES: tuple[str, ...] = ("step", "exponential", "linear", "sqrt", "none")

#: the iteration at which the other schedules' default rate matches the step decay's alpha
#: (the paper runs 100 iterations)
DECAY_MATCHED_AT = 100

#: which implementation runs an update: the fused numba loops, the NumPy passes, or "auto"
#: (see :attr:`GumSettings.kernel`)
GumKernel = Literal["auto", "compiled", "reference"]

#: records times marginals from which "auto" runs the compiled update (see
#: :attr:`GumSettings.kernel`): adult-coded (48,842 x 40, 2 million) stays below
COMPILED_GUM_FROM = 10_000_000

#: share of additions made by duplication on (even, odd) iterations, per strategy
_DUPLICATE_SHARE: dict[str, tuple[float, float]] = {
    "replace": (0.0, 0.0),
    "duplicate": (1.0, 1.0),
    "half_half": (0.5, 0.5),
    "replace_plus_duplicate": (0.0, 1.0),
    "half_half_plus_duplicate": (0.5, 1.0),
    "half_half_plus_replace": (0.5, 0.0),
}

#: what a duplicated record copies: the whole row, or the marginal's blanket (see GumSettings)
CopyScope = Literal["row", "blanket"]

COPY_SCOPES: tuple[str, ...] = ("row", "blanket")


@dataclass(frozen=True)
class GumSettings:
    """GUM's knobs; the decay follows the paper and the authors' code (alpha = 0.84^(t/20)).

    ``strategy`` takes the long names or the paper's S1 to S6 (:data:`STRATEGY_NAMES`). The
    paper chooses S5, half-half plus duplicate (appendix I); our default is S3, half-half,
    chosen by ``benchmarks/defaults.py --study strategy`` (adult-coded, raw Adult, NLTCS and
    penguins at epsilon 0.2, 1 and 2, 3 seeds each): S3 has the best mean rank on both 2-way
    L1 and 3-way range queries. The all-duplicate odd iterations of S5 copy whole rows and
    disturb the other marginals (adult-coded, epsilon 1: L1 0.0955 with S5, 0.0910 with S3);
    S6 wins on Adult's L1 but loses on NLTCS (0.0189 vs 0.0152) and on range queries.
    ``decay_schedule`` is one of section
    5.3's: "step" (default) ``alpha0 * decay^floor(t / decay_every)``, "exponential"
    ``alpha0 * exp(-k t)``, "linear" ``alpha0 / (1 + k t)``, "sqrt" ``alpha0 / sqrt(1 + k t)``,
    or "none" (``alpha0`` throughout). The paper gives no ``k``; ``decay_k=None`` picks, for
    each schedule, the ``k`` whose alpha at iteration 100 equals the step decay's (for the
    exponential that is the step decay made continuous, ``k = -ln(decay) / decay_every``), so
    the schedules differ in shape, not in how far they decay.
    """

    iterations: int = 100
    alpha0: float = 1.0
    decay: float = 0.84
    decay_every: int = 20
    strategy: UpdateStrategy = "half_half"
    decay_schedule: DecaySchedule = "step"
    decay_k: float | None = None
    #: stop early once ``patience`` iterations in a row have not lowered the best error by
    #: ``min_improvement`` (relative); None runs every iteration. The error watched is the
    #: whole table's score when :attr:`keep_best` (the score that picks the table returned),
    #: else the mean L1 of the marginals at their visits. The paper runs a fixed 100 and
    #: notes the error is flat after that; on wide tables each iteration costs seconds, so
    #: stopping at the plateau buys time at no accuracy. 5, not 10, by measurement
    #: (``benchmarks/evidence/gum-speed-2026-11-26.txt``): on 50,000-row blocks of the dense
    #: and planted 600k x 100 tables the kept score is flat after 1 and 4-8 iterations, and
    #: the 2-way L1 is the same to 4 digits with 5 (6 and 9 iterations against 11 and 14-59).
    patience: int | None = 5
    min_improvement: float = 0.01
    #: "auto" (the default), "compiled" (numba) or "reference" (NumPy): same rules, same
    #: distribution. "auto" runs the compiled kernel when records times marginals (of all
    #: components together) reach :data:`COMPILED_GUM_FROM` (a block of 50,000 rows of a
    #: wide table with hundreds of marginals) when numba is installed, else the reference.
    #: On such blocks the
    #: reference's per-attribute copies of a blanket dominate: a 50,000-row block of the
    #: dense 600k x 100 table took 132 s of GUM with the reference, 34 s compiled; planted
    #: 58 s and 16 s (``benchmarks/evidence/gum-speed-2026-11-26.txt``). Why not compiled
    #: everywhere: on Adult-sized tables an update is dominated by per-marginal Python work
    #: both kernels share, so compiling saves nothing while importing numba and loading its
    #: cached kernels costs about half a second per process, a third of an Adult run.
    kernel: GumKernel = "auto"
    #: GUM's initial table: "tree" (default), columns drawn along a maximum spanning tree of
    #: the measured pairs, or the paper's "independent" columns from the 1-way marginals
    #: (:mod:`privsyn_core.generation.initial` says why)
    initial: Initial = "tree"
    #: return the table of the iteration (or the initial table) closest to what was measured
    #: (:func:`~privsyn_core.generation.target_scores.table_score`: the noisy targets, and
    #: the noisy InDif of the pairs no target covers), not the last: on dense wide tables
    #: GUM's updates can settle further from the targets than where they started, and its
    #: duplications make unmeasured pairs dependent
    keep_best: bool = True
    #: judge the kept table on the pairs no marginal covers too, by the noisy InDif scores
    #: (:mod:`privsyn_core.generation.dependence`); False judges the measured marginals alone
    judge_unmeasured: bool = True
    #: what a duplicated record carries into the row it overwrites: "blanket" (the default),
    #: only the marginal's attributes and those sharing a target with one of them
    #: (:func:`~privsyn_core.generation.gum.with_blankets`), or "row", the whole record (the
    #: paper). Whole-row copies make
    #: the pairs no target covers drift towards dependence on sparse wide tables (planted
    #: 100k x 40, epsilon 4: unmeasured independent pairs reach L1 0.35 after 100
    #: iterations). Over the five wide tables of ``benchmarks/wide.py`` at epsilon 0.5, 1
    #: and 4 (2 seeds) blanket copies are never worse by more than 0.0005 in 2-way L1 and
    #: up to 15% better (planted at 4, happiness at 1); adult-coded is unchanged within
    #: its seed spread (``benchmarks/evidence/gum-drift-2026-11-26.txt``).
    copy: CopyScope = "blanket"
    #: the noise-floor stop: end GUM once the table is within the measurement noise of the
    #: targets, i.e. when the mean L1 of the targets that know their noise
    #: (:attr:`~privsyn_core.generation.target_scores.GumTarget.noise_l1`, the expected L1
    #: of the raw DP noise, from public noise scales) is at most ``noise_floor`` times their
    #: mean expected noise L1. Nearer than that, GUM mostly fits noise. Post-processing of
    #: public quantities: it costs no
    #: budget. None turns it off (``iterations`` and the plateau rule alone). On by default
    #: at 0.5, by measurement (``benchmarks/evidence/gum-speed-2026-11-26.txt``, adult-coded
    #: at epsilon 1, 10 seeds): 3-5 iterations instead of 26-46, mean 2-way L1 0.0737 vs
    #: 0.0746, SVM 0.1486 vs 0.1496, range queries 0.00122 vs 0.00120; at 1.0 and 0.7 it
    #: stops after 1-2 iterations and range queries lose 13%. Consistency already removes
    #: part of the noise, hence a factor below 1. Wide 600k-row tables never reach their
    #: (smaller) floor; there the plateau rule stops GUM.
    noise_floor: float | None = 0.5

    def __post_init__(self) -> None:
        if self.noise_floor is not None and not (
            math.isfinite(self.noise_floor) and self.noise_floor >= 0
        ):
            raise InputError(f"noise_floor must be a number >= 0 or None, got {self.noise_floor}")
        if self.copy not in COPY_SCOPES:
            raise InputError(f"copy must be one of {', '.join(COPY_SCOPES)}, got {self.copy!r}")
        if self.initial not in INITIALS:
            raise InputError(f"initial must be one of {', '.join(INITIALS)}, got {self.initial!r}")
        check_iterations(self.iterations)  # the limit a bundle and the CLI check too
        if not 0 < self.alpha0 <= 1:
            raise InputError(f"alpha0 must lie in (0, 1], got {self.alpha0}")
        if not 0 < self.decay <= 1 or self.decay_every < 1:
            raise InputError("decay must lie in (0, 1] and decay_every be >= 1")
        if self.patience is not None and self.patience < 1:
            raise InputError(f"patience must be >= 1 or None, got {self.patience}")
        if not 0 <= self.min_improvement < 1:
            raise InputError(f"min_improvement must lie in [0, 1), got {self.min_improvement}")
        if self.kernel not in ("auto", "compiled", "reference"):
            raise InputError(
                f"kernel must be 'auto', 'compiled' or 'reference', got {self.kernel!r}"
            )
        if self.strategy in STRATEGY_NAMES:  # the paper's S1..S6 stand for the long names
            object.__setattr__(self, "strategy", STRATEGY_NAMES[self.strategy])
        if self.strategy not in _DUPLICATE_SHARE:
            raise InputError(
                f"unknown update strategy {self.strategy!r}; choose one of "
                f"{sorted(_DUPLICATE_SHARE)} or the paper's S1 to S6"
            )
        if self.decay_schedule not in DECAY_SCHEDULES:
            raise InputError(
                f"unknown decay schedule {self.decay_schedule!r}; choose one of "
                f"{', '.join(DECAY_SCHEDULES)}"
            )
        if self.decay_k is not None and not (math.isfinite(self.decay_k) and self.decay_k >= 0):
            raise InputError(f"decay_k must be a finite number >= 0 or None, got {self.decay_k}")

    def converged(self, mean_errors: Sequence[float]) -> bool:
        """Whether the last ``patience`` iterations failed to improve on the best before."""
        if self.patience is None or len(mean_errors) <= self.patience:
            return False
        best_before = min(mean_errors[: -self.patience])
        return min(mean_errors[-self.patience :]) > (1 - self.min_improvement) * best_before

    @property
    def rate(self) -> float:
        """The ``k`` of the exponential, linear and square-root schedules (see the class)."""
        if self.decay_k is not None:
            return self.decay_k
        t = DECAY_MATCHED_AT
        if self.decay_schedule == "exponential":
            return -math.log(self.decay) / self.decay_every
        reach = self.decay ** (t // self.decay_every)  # the step decay's alpha / alpha0 at t
        if self.decay_schedule == "linear":
            return (1 / reach - 1) / t
        if self.decay_schedule == "sqrt":
            return (1 / reach**2 - 1) / t
        return 0.0

    def alpha(self, iteration: int) -> float:
        """alpha at ``iteration`` under :attr:`decay_schedule` (paper section 5.3)."""
        t = iteration
        if self.decay_schedule == "step":
            return self.alpha0 * self.decay ** (t // self.decay_every)
        if self.decay_schedule == "exponential":
            return self.alpha0 * math.exp(-self.rate * t)
        if self.decay_schedule == "linear":
            return self.alpha0 / (1 + self.rate * t)
        if self.decay_schedule == "sqrt":
            return self.alpha0 / math.sqrt(1 + self.rate * t)
        return self.alpha0

    def duplicate_share(self, iteration: int) -> float:
        return _DUPLICATE_SHARE[self.strategy][iteration % 2]


def resolve_kernel(kernel: GumKernel, n_records: int, n_targets: int) -> GumKernel:
    """The kernel "auto" stands for on a component of ``n_records`` records and
    ``n_targets`` marginals (see :attr:`GumSettings.kernel`); other choices stand."""
    if kernel != "auto":
        return kernel
    if n_records * n_targets < COMPILED_GUM_FROM:
        return "reference"
    try:
        import numba  # noqa: F401
    except ImportError:
        return "reference"
    return "compiled"
