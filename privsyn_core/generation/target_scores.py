"""How far a synthetic table is from its targets: the noisy marginals, as frequencies.

GUM's stop and kept-table rules, the MRF's kept sweep and the guard against independent
columns all weigh tables with these scores, so all three judge by one rule. They read the
synthetic table and DP outputs only (post-processing).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from privsyn_core.generation.dependence import UnmeasuredPairs
from privsyn_core.generation.gum_settings import COMPILED_GUM_FROM
from privsyn_core.generation.records import columns_of
from privsyn_core.marginals import COMPILED_BATCH_FROM, cell_index

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


def l1_error(records: np.ndarray, target: GumTarget) -> float:
    n = records.shape[1]
    counts = np.bincount(
        cell_index(records, target.rows, target.shape), minlength=target.frequencies.size
    )
    return float(np.abs(counts / n - target.frequencies).sum())


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
    return score_from_errors(records, targets, unmeasured, bound, target_errors(records, targets))


def target_errors(records: np.ndarray, targets: Sequence[GumTarget]) -> np.ndarray:
    """Each target's L1 (frequencies) on ``records``, counted in one batch."""
    n = records.shape[1]
    counts = table_counts(records, [t.rows for t in targets], [t.shape for t in targets])
    return np.array(
        [float(np.abs(c / n - t.frequencies).sum()) for c, t in zip(counts, targets, strict=True)]
    )


def score_from_errors(
    records: np.ndarray,
    targets: Sequence[GumTarget],
    unmeasured: UnmeasuredPairs | None,
    bound: float,
    errors: np.ndarray,
) -> tuple[float, bool]:
    """:func:`score_below` from each target's L1 already counted (``errors``, as
    :func:`target_errors` counts them): GUM counts them once per iteration for both."""
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
