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
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import cached_property
from itertools import pairwise
from typing import Literal

import numpy as np

from privsyn_core.cores import threads
from privsyn_core.errors import InputError
from privsyn_core.generation.dependence import UnmeasuredPairs
from privsyn_core.generation.initial import INITIALS, Initial
from privsyn_core.generation.sampling import quota_counts
from privsyn_core.limits import check_iterations
from privsyn_core.marginals import COMPILED_BATCH_FROM, cell_index

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

#: the compiled update gives each thread at least this many records or additions
_ITEMS_PER_PART = 2**14

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
    #: (:func:`table_score`: the noisy targets, and the noisy InDif of the pairs no target
    #: covers), not the last: on dense wide tables GUM's updates can settle further from the
    #: targets than where they started, and its duplications make unmeasured pairs dependent
    keep_best: bool = True
    #: judge the kept table on the pairs no marginal covers too, by the noisy InDif scores
    #: (:mod:`privsyn_core.generation.dependence`); False judges the measured marginals alone
    judge_unmeasured: bool = True
    #: what a duplicated record carries into the row it overwrites: "blanket" (the default),
    #: only the marginal's attributes and those sharing a target with one of them
    #: (:func:`with_blankets`), or "row", the whole record (the paper). Whole-row copies make
    #: the pairs no target covers drift towards dependence on sparse wide tables (planted
    #: 100k x 40, epsilon 4: unmeasured independent pairs reach L1 0.35 after 100
    #: iterations). Over the five wide tables of ``benchmarks/wide.py`` at epsilon 0.5, 1
    #: and 4 (2 seeds) blanket copies are never worse by more than 0.0005 in 2-way L1 and
    #: up to 15% better (planted at 4, happiness at 1); adult-coded is unchanged within
    #: its seed spread (``benchmarks/evidence/gum-drift-2026-11-26.txt``).
    copy: CopyScope = "blanket"
    #: the noise-floor stop: end GUM once the table is within the measurement noise of the
    #: targets, i.e. when the mean L1 of the targets that know their noise
    #: (:attr:`GumTarget.noise_l1`, the expected L1 of the raw DP noise, from public noise
    #: scales) is at most ``noise_floor`` times their mean expected noise L1. Nearer than
    #: that, GUM mostly fits noise. Post-processing of public quantities: it costs no
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


#: below this many records the 65,536-entry tables of pair codes cost more than they save
_PAIR_CODES_FROM = 2**18
_LOW_BYTE = np.arange(2**16, dtype=np.int32) & 0xFF
_HIGH_BYTE = np.arange(2**16, dtype=np.int32) >> 8


@dataclass(frozen=True)
class GumTarget:
    """A marginal for GUM: attribute rows of the component's array and target frequencies."""

    attributes: tuple[str, ...]
    rows: tuple[int, ...]
    shape: tuple[int, ...]
    frequencies: np.ndarray
    #: the attribute rows a duplicated record copies; empty: the whole record
    copied: tuple[int, ...] = ()
    #: the expected L1 (in frequencies) between the noisy measurement and the true marginal,
    #: from the public noise scale: ``cells * sigma * sqrt(2 / pi) / total``; None: unknown
    #: (the target then takes no part in :attr:`GumSettings.noise_floor`)
    noise_l1: float | None = None

    @cached_property
    def pair_code_cells(self) -> np.ndarray:
        """For a pair of byte-sized attributes: the cell of each 16-bit code (low byte the
        first attribute). Codes outside the domain never occur and map to cell 0."""
        cells = _LOW_BYTE * self.shape[1] + _HIGH_BYTE
        cells[(self.shape[0] <= _LOW_BYTE) | (self.shape[1] <= _HIGH_BYTE)] = 0
        return cells


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


def l1_error(records: np.ndarray, target: GumTarget) -> float:
    n = records.shape[1]
    counts = np.bincount(
        cell_index(records, target.rows, target.shape), minlength=target.frequencies.size
    )
    return float(np.abs(counts / n - target.frequencies).sum())


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


def initial_errors(records: np.ndarray, targets: Sequence[GumTarget]) -> list[float]:
    """The L1 error of every target on ``records``, all at once (they order GUM's first
    iteration)."""
    n = records.shape[1]
    counts = table_counts(records, [t.rows for t in targets], [t.shape for t in targets])
    return [
        float(np.abs(c / n - t.frequencies).sum()) for c, t in zip(counts, targets, strict=True)
    ]


def table_counts(
    records: np.ndarray, rows: Sequence[Sequence[int]], shapes: Sequence[Sequence[int]]
) -> list[np.ndarray]:
    """The flat counts of the attribute sets at ``rows`` (of ``shapes``) of ``records``.

    One by one on a record-major table each set would stream the whole table (hundreds
    of sets, 60 MB each at 600,000 x 100: tens of seconds). Instead the table is copied
    once to attribute-major order, where a set reads only its own two or three byte
    columns, and counted in one batch (compiled when numba is installed, see
    :mod:`privsyn_core.count_kernel`).
    """
    if not rows:
        return []
    n = records.shape[1]
    columns = columns_of(records)
    # below, not worth importing numba (Adult), unless it is already in use (the compiled
    # GUM update): a 2-way set counted compiled costs a tenth of NumPy's passes
    if n * len(rows) >= min(COMPILED_BATCH_FROM, COMPILED_GUM_FROM) or "numba" in sys.modules:
        try:
            from privsyn_core.count_kernel import count_sets
        except ImportError:  # numba is the optional 'compiled' extra
            pass
        else:
            return list(count_sets(columns, [tuple(r) for r in rows], [tuple(s) for s in shapes]))
    wide = columns.astype(np.int32 if max(int(np.prod(s)) for s in shapes) < 2**31 else np.int64)
    out = []
    for r, s in zip(rows, shapes, strict=True):  # each attribute widened once, not per set
        index = wide[r[0]] if len(r) == 1 else wide[r[0]] * s[1] + wide[r[1]]
        for row, size in zip(r[2:], s[2:], strict=True):
            index = index * size + wide[row]
        out.append(np.bincount(index, minlength=int(np.prod(s))))
    return out


def table_score(
    records: np.ndarray, targets: Sequence[GumTarget], unmeasured: UnmeasuredPairs | None
) -> float:
    """How far a component's table is from everything measured, per attribute set: each
    target's L1 and, for the ``unmeasured`` pairs, the estimated gap between the table's InDif
    and the noisy one (:mod:`privsyn_core.generation.dependence`), weighted by their count."""
    return score_below(records, targets, unmeasured, math.inf)[0]


def score_below(
    records: np.ndarray,
    targets: Sequence[GumTarget],
    unmeasured: UnmeasuredPairs | None,
    bound: float,
) -> tuple[float, bool]:
    """:func:`table_score` and True, or a lower bound of it at or above ``bound`` and False:
    the measured part is counted first, and the unmeasured pairs (a gap of at least 0) only
    when it leaves room under ``bound``. GUM's kept table needs the exact score of candidates
    only, and most iterations are not."""
    return _score_below(records, targets, unmeasured, bound, target_errors(records, targets))


def target_errors(records: np.ndarray, targets: Sequence[GumTarget]) -> np.ndarray:
    """Each target's L1 (frequencies) on ``records``, counted in one batch."""
    n = records.shape[1]
    counts = table_counts(records, [t.rows for t in targets], [t.shape for t in targets])
    return np.array(
        [float(np.abs(c / n - t.frequencies).sum()) for c, t in zip(counts, targets, strict=True)]
    )


def _score_below(
    records: np.ndarray,
    targets: Sequence[GumTarget],
    unmeasured: UnmeasuredPairs | None,
    bound: float,
    errors: np.ndarray,
) -> tuple[float, bool]:
    total = float(errors.sum())
    weight = len(targets) + (unmeasured.count if unmeasured is not None else 0)
    if not weight:
        return 0.0, True
    if total / weight >= bound:
        return total / weight, False
    if unmeasured is not None:
        judged = table_counts(records, unmeasured.rows, unmeasured.shapes)
        total += unmeasured.count * unmeasured.gap(judged)
    return total / weight, True


def _uniform_u32(rng: np.random.Generator, n: int) -> np.ndarray:
    """``n`` uniform 32-bit integers straight from the bit generator (twice as fast as
    ``rng.random``; GUM draws one per record per update)."""
    raw = rng.bit_generator.random_raw((n + 1) // 2)
    return raw.view(np.uint32)[:n]


def _thresholds_u32(probability: np.ndarray) -> np.ndarray:
    """Thresholds t with P(uniform u32 < t) = probability, to within 2^-32."""
    return np.minimum(np.round(probability * 2.0**32), 2.0**32 - 1).astype(np.uint32)


def _removal_rate(s: np.ndarray, excess: np.ndarray, wanted: float) -> float:
    """beta such that sum(min(excess, beta s)) == wanted, for over-filled cells (s > 0).

    The sum is piecewise linear in beta with a breakpoint at each cell's ``excess / s``: below
    it the cell gives ``beta s``, above it its whole excess. Sorting the breakpoints gives the
    sum at each of them, and the segment holding ``wanted`` gives beta exactly, in one sort
    instead of a bisection's dozens of passes (GUM solves this once per marginal per
    iteration). ``wanted`` is at most ``excess.sum()``, the sum at the last breakpoint.
    """
    ratio = excess / s
    order = np.argsort(ratio, kind="stable")
    ratio, excess, s = ratio[order], excess[order], s[order]
    capped_before = np.cumsum(excess) - excess
    uncapped_from = np.cumsum(s[::-1])[::-1]
    at_breakpoints = capped_before + ratio * uncapped_from
    k = min(int(np.searchsorted(at_breakpoints, wanted)), ratio.size - 1)
    beta = (wanted - capped_before[k]) / uncapped_from[k]
    return float(min(max(beta, 0.0), 1.0))


def _fine_index(records: np.ndarray, target: GumTarget) -> tuple[np.ndarray, np.ndarray | None]:
    """A per-record code and the map from code to the target's cell.

    For a pair of byte-sized attributes in record-major storage, the two bytes gathered side
    by side already form a 16-bit code, so GUM works on that code and a 65,536-entry map
    instead of computing a cell index per record (one pass over the table fewer). Otherwise
    the code is the cell index and the map is None (identity).
    """
    if (
        len(target.rows) == 2
        and records.shape[1] >= _PAIR_CODES_FROM
        and records.dtype == np.uint8
        and records.T.flags.c_contiguous
        and np.little_endian
    ):
        pair = np.take(records.T, list(target.rows), axis=1)
        code = pair.view(np.uint16)[:, 0]
        return code, target.pair_code_cells
    return cell_index(records, target.rows, target.shape), None


@dataclass(frozen=True)
class CellPlan:
    """What one update does to each cell of a marginal, from the current counts alone.

    ``add`` are the frequencies each under-filled cell gains (alpha rule), ``over`` marks the
    over-filled cells and ``thresholds`` give each cell's per-record selection rate as a
    32-bit threshold: the removal rate ``min(s - a, beta s) / s`` in over-filled cells, twice
    the wanted duplication rate (capped at 1) in the others, so the Bernoulli sample of
    duplication sources is rarely short.
    """

    add: np.ndarray
    over: np.ndarray
    occupied: np.ndarray
    thresholds: np.ndarray


def plan_update(
    counts: np.ndarray, target: np.ndarray, alpha: float, duplicate_share: float
) -> tuple[float, CellPlan | None]:
    """The L1 error of ``counts`` against ``target`` and the per-cell plan of the update, or
    None when the update would move less than half a record or nothing is over-filled.

    Shared by the reference and the compiled update so both follow the same rules.
    """
    n = counts.sum()
    s = counts / n
    a = target
    error = float(np.abs(s - a).sum())

    add = np.where(s > 0, np.minimum(a - s, alpha * s), alpha * a)
    add = np.where(a > s, add, 0.0)
    over = s > a
    wanted = float(add.sum())
    if wanted * n < 0.5 or not over.any():
        return error, None
    excess = np.where(over, s - a, 0.0)
    wanted = min(wanted, float(excess.sum()))
    beta = _removal_rate(s[over], excess[over], wanted)
    removal = np.minimum(excess, beta * s)

    # one uniform draw per record decides removals (over cells) and duplication sources
    # (under cells); the two sets of cells are disjoint
    duplicate_wanted = np.where(s > 0, add * duplicate_share, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = np.where(over, removal / s, np.minimum(1.0, 2.0 * duplicate_wanted / s))
    rate = np.nan_to_num(rate)
    return error, CellPlan(add, over, s > 0, _thresholds_u32(rate))


def update_towards(
    records: np.ndarray,
    target: GumTarget,
    alpha: float,
    duplicate_share: float,
    rng: np.random.Generator,
    pool: ThreadPoolExecutor | None = None,
    kernel: GumKernel = "reference",
    scratch: UpdateScratch | None = None,
) -> float:
    """One GUM step for one marginal, in place on ``records``; returns the L1 before it.

    ``kernel="compiled"`` runs the fused numba loops of :mod:`privsyn_core.generation.gum_kernel`
    ("auto" decides by the table's size alone, see :func:`resolve_kernel`);
    ``"reference"`` the NumPy passes. Both draw every random number from ``rng`` and agree in
    distribution, not record for record (they turn the Generator's bits into draws
    differently).
    """
    if resolve_kernel(kernel, records.shape[1], 1) == "compiled":
        return compiled_update(records, target, alpha, duplicate_share, rng, pool, scratch)
    return reference_update(records, target, alpha, duplicate_share, rng, pool)


@dataclass(frozen=True, eq=False)
class UpdateScratch:
    """Record-sized work arrays of the compiled update, made once per table and reused by
    every update of a run: the cell of each record and the rows selected. Allocating them
    afresh per update (7 MB at 600,000 records, hundreds of updates per iteration) costs a
    page fault per 4 kB touched, about a millisecond per update."""

    cells: np.ndarray
    selected: np.ndarray

    @classmethod
    def for_records(cls, n: int) -> UpdateScratch:
        return cls(np.empty(n, dtype=np.int32), np.empty(n, dtype=np.int64))


def compiled_update(
    records: np.ndarray,
    target: GumTarget,
    alpha: float,
    duplicate_share: float,
    rng: np.random.Generator,
    pool: ThreadPoolExecutor | None = None,
    scratch: UpdateScratch | None = None,
) -> float:
    """:func:`reference_update` with its per-record passes fused into compiled loops, each
    split over the threads of ``pool`` (the kernels release the GIL).

    ``scratch`` (see :class:`UpdateScratch`) lends the record-sized work arrays; without it
    they are allocated for this update. The removed rows keep their record order and the new
    cells are shuffled instead (the pairing of rows to cells is uniformly random either way),
    so the rewrite sweeps the table in one direction.
    """
    try:  # numba: an optional extra, imported only by those who ask for the compiled kernel
        from privsyn_core.generation import gum_kernel
    except ImportError:
        raise InputError(
            "the compiled GUM kernel needs numba: pip install 'privsyn-studio[compiled]', "
            "or use kernel='reference'"
        ) from None

    n = records.shape[1]
    n_cells = target.frequencies.size
    rows = np.asarray(target.rows, dtype=np.int64)
    shape = np.asarray(target.shape, dtype=np.int64)
    strides = np.cumprod(np.r_[1, shape[:0:-1]])[::-1].copy()
    bounds = _part_bounds(n, pool)
    scratch = scratch if scratch is not None else UpdateScratch.for_records(n)
    cells = scratch.cells if n_cells < 2**31 else np.empty(n, dtype=np.int64)
    counts = np.zeros((bounds.size - 1, n_cells), dtype=np.int64)

    def count(part: int, lo: int, hi: int) -> None:
        gum_kernel.count_cells(records, rows, strides, cells, counts[part], lo, hi)

    _in_parts(count, bounds, pool)
    error, plan = plan_update(counts.sum(axis=0), target.frequencies, alpha, duplicate_share)
    if plan is None:
        return error

    selection_seed, addition_seed, pairing_seed = rng.bit_generator.random_raw(3)
    thresholds = plan.thresholds.astype(np.uint64)
    buffer = scratch.selected

    def select(part: int, lo: int, hi: int) -> tuple[int, int]:
        return gum_kernel.select_rows(cells, thresholds, plan.over, selection_seed, buffer, lo, hi)

    found = np.array(_in_parts(select, bounds, pool), dtype=np.int64).reshape(-1, 2)
    removed, sources, start, available = gum_kernel.gather_selection(
        cells, buffer, bounds, found, n_cells
    )
    if removed.size == 0:
        return error
    new_cells = gum_kernel.shuffled_cells(quota_counts(plan.add, removed.size), pairing_seed)
    words = _record_words(records)
    flat_words = words.reshape(-1)
    copied = np.asarray(target.copied, dtype=np.int64)

    def rewrite(part: int, lo: int, hi: int) -> None:
        gum_kernel.apply_additions(
            records,
            words,
            flat_words,
            removed,
            new_cells,
            plan.occupied,
            float(duplicate_share),
            addition_seed,
            sources,
            start,
            available,
            rows,
            shape,
            copied,
            lo,
            hi,
        )

    # removed rows are distinct and never sources, so parts cannot write the same record
    _in_parts(rewrite, _part_bounds(removed.size, pool), pool)
    return error


def _record_words(records: np.ndarray) -> np.ndarray:
    """Records as rows of 64-bit words when each is a whole number of words stored
    contiguously (as :func:`record_major` builds them); else an empty array."""
    by_record = records.T
    if by_record.flags.c_contiguous and (by_record.shape[1] * by_record.itemsize) % 8 == 0:
        return by_record.view(np.uint64)
    return np.empty((0, 0), dtype=np.uint64)


def _part_bounds(size: int, pool: ThreadPoolExecutor | None) -> np.ndarray:
    """Boundaries splitting ``size`` items into one part per worker of ``pool`` (a single
    part without a pool or when parts would be too small to repay a thread hand-off)."""
    parts = 1 if pool is None else max(1, min(threads(), size // _ITEMS_PER_PART))
    if parts == 1:  # a block worker's single thread: no linspace per update
        return np.array([0, size], dtype=np.int64)
    return np.linspace(0, size, parts + 1).astype(np.int64)


def _in_parts(
    work: Callable[[int, int, int], object],
    bounds: np.ndarray,
    pool: ThreadPoolExecutor | None,
) -> list:
    """``work(part, lo, hi)`` for every part, on the pool's threads when there are several."""
    spans = [(p, int(bounds[p]), int(bounds[p + 1])) for p in range(bounds.size - 1)]
    if pool is None or len(spans) == 1:
        return [work(*span) for span in spans]
    return list(pool.map(lambda span: work(*span), spans))


def reference_update(
    records: np.ndarray,
    target: GumTarget,
    alpha: float,
    duplicate_share: float,
    rng: np.random.Generator,
    pool: ThreadPoolExecutor | None = None,
) -> float:
    """One GUM step in NumPy passes over the records (the reference implementation)."""
    n = records.shape[1]
    cells = target.frequencies.size
    fine, cell_of = _fine_index(records, target)
    counts = np.bincount(fine, minlength=cells if cell_of is None else cell_of.size)
    if cell_of is not None:
        counts = np.bincount(cell_of, weights=counts, minlength=cells)
    error, plan = plan_update(counts, target.frequencies, alpha, duplicate_share)
    if plan is None:
        return error
    over = plan.over
    thresholds = plan.thresholds
    if cell_of is not None:
        thresholds = thresholds[cell_of]
    chosen = np.flatnonzero(_uniform_u32(rng, n) < thresholds[fine])
    chosen_cells = fine[chosen] if cell_of is None else cell_of[fine[chosen]]
    is_removed = over[chosen_cells]
    removed = chosen[is_removed]
    if removed.size == 0:
        return error
    rng.shuffle(removed)
    additions = quota_counts(plan.add, removed.size)
    new_cells = np.repeat(np.arange(cells), additions)

    duplicate = plan.occupied[new_cells] & (rng.random(new_cells.size) < duplicate_share)
    if duplicate.any():
        sources = chosen[~is_removed]
        source_cells = chosen_cells[~is_removed]
        # 16-bit keys take numpy's radix sort, several times faster than a comparison sort
        keys = source_cells.astype(np.int16) if cells <= 2**15 else source_cells
        order = np.argsort(keys, kind="stable")
        sources, source_cells = sources[order], source_cells[order]
        available = np.bincount(source_cells, minlength=cells)
        start = np.cumsum(available) - available
        wanted_cells = new_cells[duplicate]
        has_source = available[wanted_cells] > 0
        picks = start[wanted_cells] + (
            rng.random(wanted_cells.size) * available[wanted_cells]
        ).astype(np.int64)
        dup_rows = removed[duplicate][has_source]
        if target.copied:
            for row in target.copied:
                records[row, dup_rows] = records[row, sources[picks[has_source]]]
        else:
            _copy_records(records, dup_rows, sources[picks[has_source]], pool)
        duplicate[np.flatnonzero(duplicate)[~has_source]] = False

    replace = ~duplicate
    if replace.any():
        values = np.unravel_index(new_cells[replace], target.shape)
        rows = removed[replace]
        for row, column in zip(target.rows, values, strict=True):
            records[row, rows] = column
    return error


def _copy_records(
    records: np.ndarray, rows: np.ndarray, sources: np.ndarray, pool: ThreadPoolExecutor | None
) -> None:
    """``records[:, rows] = records[:, sources]``: duplicate whole records (the bulk of GUM's
    time on wide tables).

    When ``records`` is the transposed view of a record-major array whose records are a whole
    number of 8-byte words (as :func:`record_major` builds), a record is copied as a few
    machine words; otherwise attribute by attribute, with 1-D gathers (several times faster
    than numpy's 2-D fancy indexing) split over threads for large copies.
    """
    by_record = records.T
    if by_record.flags.c_contiguous and (by_record.shape[1] * by_record.itemsize) % 8 == 0:
        # each record as one opaque block of bytes: numpy copies it with a single memcpy
        blocks = by_record.view(np.dtype((np.void, by_record.shape[1] * by_record.itemsize)))[:, 0]

        def copy_words(part: slice) -> None:
            blocks[rows[part]] = blocks[sources[part]]

        if pool is None or rows.size < 20_000:
            copy_words(slice(None))
        else:  # rows are distinct and never among the sources, so parts cannot collide
            bounds = np.linspace(0, rows.size, threads() + 1).astype(np.int64)
            list(pool.map(copy_words, [slice(lo, hi) for lo, hi in pairwise(bounds)]))
        return

    def copy(block: np.ndarray) -> None:
        for attribute in block:
            attribute[rows] = attribute[sources]

    if pool is None or records.shape[0] < 8 or rows.size * records.shape[0] < 2_000_000:
        copy(records)
        return
    parts = np.array_split(np.arange(records.shape[0]), min(threads(), records.shape[0]))
    list(pool.map(copy, [records[p[0] : p[-1] + 1] for p in parts if p.size]))


def record_major(n_attributes: int, n_records: int, dtype: np.dtype) -> np.ndarray:
    """An attribute-by-record array view stored record by record, each record padded to
    whole 8-byte words, so GUM's duplications copy words instead of bytes. The padding
    attributes (rows ``n_attributes`` and up) stay zero and no target refers to them.

    Reading one attribute is a strided gather, slower than from an attribute-major array,
    but a GUM update reads two or three attributes and may duplicate tens of thousands of
    records of all attributes, so on wide tables this layout is about twice as fast.
    """
    itemsize = np.dtype(dtype).itemsize
    padded = -(-n_attributes * itemsize // 8) * 8 // itemsize
    return np.zeros((n_records, padded), dtype=dtype).T


#: records per block of the transposing copies below (a block of both layouts stays in cache)
_TRANSPOSE_BLOCK = 8192


def columns_of(records: np.ndarray, n_attributes: int | None = None) -> np.ndarray:
    """The first ``n_attributes`` (default all) attributes of ``records`` as a C-contiguous
    attribute-major ``(attributes, n)`` array.

    Copied block by block of records: NumPy's own transposing copy of a record-major byte
    array walks one attribute at a time across the whole table and is ten times slower
    (seconds at 600,000 x 100).
    """
    k = records.shape[0] if n_attributes is None else n_attributes
    n = records.shape[1]
    out = np.empty((k, n), dtype=records.dtype)
    for lo in range(0, n, _TRANSPOSE_BLOCK):
        out[:, lo : lo + _TRANSPOSE_BLOCK] = records[:k, lo : lo + _TRANSPOSE_BLOCK]
    return out


def fill_record_major(records: np.ndarray, columns: np.ndarray) -> None:
    """``records[:k] = columns`` for a record-major ``records``, block by block (see
    :func:`columns_of`)."""
    k, n = columns.shape
    for lo in range(0, n, _TRANSPOSE_BLOCK):
        records[:k, lo : lo + _TRANSPOSE_BLOCK] = columns[:, lo : lo + _TRANSPOSE_BLOCK]


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
            score, exact = _score_below(
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
