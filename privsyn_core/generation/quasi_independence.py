"""Measured pairs that are independent but for a few cells are drawn that way.

A measured 2-way marginal carries Gaussian noise of standard deviation ``sigma`` in every one
of its ``a x b`` cells, and GUM copies all of it into the synthetic table. Many dependent pairs
are *quasi-independent* (Goodman): independent outside a few cells ``S``, such as a column
that copies another (its "diagonal") or a value that only occurs with one other. Outside ``S``
the table is then ``alpha_i beta_j``, which ``a + b - 1`` numbers describe; fitted to the
noisy cells, those numbers average the noise of whole rows and columns away. This is what
MST's Private-PGM estimate gained on the dense 600,000 x 100 table: on the cells off the
diagonal its copy pairs were closer to the real ones than ours, although measured with more
noise (``benchmarks/evidence/wide-2026-11-27-caravan-large.txt``, P.4 and Q).

For each measured pair not already drawn as independent
(:mod:`~privsyn_core.generation.independence`), with ``Y`` its measurement as made (the
noisy counts, Gaussian around the real ones) and ``T`` its consistent counts:

1. ``S`` grows from nothing: the cells whose residual from the quasi-independence fit of
   ``Y`` on the cells outside ``S`` exceeds ``sqrt(2 ln(ab)) sigma`` (noise alone passes that
   bound in about one table of ``ab`` cells) and at least half the largest residual, until
   none does.
2. The fit's squared error is estimated by Mallows' Cp on ``Y``, where the noise is
   Gaussian: ``||Y - fit||^2 - ab sigma^2 + penalty p sigma^2`` with ``p = a + b - 1 + |S|``
   parameters and ``penalty`` per parameter (:data:`DEFAULT_PENALTY`, 2: Cp's own;
   :attr:`~privsyn_core.generation.fitted_data.SamplingSettings.quasi_independence`).
3. ``T``'s squared error is estimated by Pythagoras: consistency projects the measurements
   onto consistent, non-negative tables, a convex set that holds the real counts, so ``T``
   is closer to them than ``Y`` by about ``||Y - T||^2``: ``ab sigma^2 - ||Y - T||^2``.
   Judged against ``Y`` alone (evidence Q), the fit was taken on caravan and loans where
   consistency had already halved the noise, and moved their targets farther from the
   real ones; judged on ``T`` the clipped cells near zero read as no noise at all.
4. The fit replaces ``T`` where its estimated error is lower by more than
   :data:`CONFIDENCE` standard deviations of the misfit under noise alone
   (``sqrt(2 (ab - p)) sigma^2``). ``S`` is chosen from the same counts, which flatters the
   misfit where few cells are left outside it.
5. What replaces ``T`` keeps ``T`` on ``S`` and fits ``alpha_i beta_j`` to ``T`` elsewhere
   (iterative proportional fitting on the cells outside ``S``), so it has ``T``'s margins
   and total: the other marginals stay consistent with it.

The first version (session five) judged the fit on ``T`` and only where every fitted cell
was 3 sigma clear of zero; that bound kept most copy pairs of the 600,000-row dense table
as measured at epsilon 0.5 and 1, where MST was closer. Without the bound the generators'
targets came 2-4 times closer to the real pairs, and steps 2-3 keep the real tables' as
they were. It runs on wide tables only
(:meth:`~privsyn_core.width_policy.WidthPolicy.quasi_independence`,
:func:`quasi_independent_marginals`).

It reads the measurements, their consistent tables and their public noise scales only:
post-processing, no budget. Everything here is in counts.
"""

from __future__ import annotations

import hashlib
import math
import threading
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from privsyn_core.marginals import MarginalTable, NoisyMarginal
from privsyn_core.width_policy import WIDTH_POLICY

#: the fit's estimated error must be under the consistent table's by this many standard
#: deviations of the misfit under noise alone (``sqrt(2 (ab - parameters)) sigma^2``); 1 by
#: evidence Q.7: against 2, the wide tables' 6-seed medians within 0.3% either way, and the
#: 600,000-row dense table at epsilon 4 under MST on two seeds of three (2: one)
CONFIDENCE = 1.0
#: proportional fitting stops once every row sum is within this share of the total (the
#: column sums are exact after each sweep), or after ``SWEEPS`` sweeps
TOLERANCE = 1e-9
SWEEPS = 200
#: the penalty per fitted parameter in Mallows' Cp (step 2 of the module docstring): 2 is
#: Cp's own, and the value the rule ran with when it shared the independence rule's
#: threshold (whose default is also 2), so seeded samples stay as they were
DEFAULT_PENALTY = 2.0


def quasi_pairs_message(count: int) -> str:
    """What the replacement did, for the GUM stage's summary."""
    return (
        f"{count} measured pair{'s' if count != 1 else ''} drawn as quasi-independent: "
        "independent but for a few cells"
    )


def quasi_independent_fit(counts: np.ndarray, outside: np.ndarray) -> np.ndarray:
    """``alpha_i beta_j`` on the cells ``outside`` (zero elsewhere) with the row and column
    sums ``counts`` has there (a noisy sum below zero as zero): iterative proportional
    fitting from a flat table."""
    inside_rows = np.maximum(np.where(outside, counts, 0.0).sum(axis=1), 0.0)
    inside_cols = np.maximum(np.where(outside, counts, 0.0).sum(axis=0), 0.0)
    fit = outside.astype(float)
    tolerance = TOLERANCE * max(float(inside_rows.sum()), 1.0)
    for _ in range(SWEEPS):
        sums = fit.sum(axis=1)
        fit *= np.divide(inside_rows, sums, out=np.zeros_like(sums), where=sums > 0)[:, None]
        sums = fit.sum(axis=0)
        fit *= np.divide(inside_cols, sums, out=np.zeros_like(sums), where=sums > 0)[None, :]
        if float(np.abs(fit.sum(axis=1) - inside_rows).max()) <= tolerance:
            break
    return fit


def quasi_independent(
    counts: np.ndarray, measured: np.ndarray, sigma: float, penalty: float
) -> np.ndarray | None:
    """The quasi-independent estimate of the consistent 2-way ``counts``, whose measurement
    as made is ``measured`` (noise ``sigma`` per cell), where its estimated error is clearly
    below theirs (module docstring), else None."""
    a, b = counts.shape
    cells = a * b
    if min(a, b) < 2 or sigma <= 0 or measured.shape != counts.shape:
        return None
    bound = math.sqrt(2 * math.log(cells)) * sigma
    special = np.zeros(counts.shape, dtype=bool)
    while True:
        fit = quasi_independent_fit(measured, ~special)
        residual = np.where(special, 0.0, np.abs(measured - fit))
        largest = float(residual.max())
        if largest <= bound:
            break
        special |= residual >= max(bound, largest / 2)
        if special.all():
            return None
    misfit = float(((measured - np.where(special, measured, fit)) ** 2).sum())
    parameters = a + b - 1 + int(special.sum())
    free = max(cells - parameters, 1)
    fit_error = misfit - cells * sigma**2 + penalty * parameters * sigma**2
    kept_error = cells * sigma**2 - float(((measured - counts) ** 2).sum())
    if fit_error + CONFIDENCE * math.sqrt(2 * free) * sigma**2 >= kept_error:
        return None
    counts = np.maximum(counts, 0.0)
    return np.where(special, counts, quasi_independent_fit(counts, ~special))


def quasi_independent_marginals(
    marginals: Sequence[MarginalTable],
    measurements: Sequence[NoisyMarginal],
    penalty: float | None,
    independent: frozenset[tuple[str, ...]],
    n_attributes: int,
) -> tuple[tuple[MarginalTable, ...], int]:
    """``marginals`` with every 2-way table that is not ``independent`` and has a
    measurement in ``measurements`` replaced by its :func:`quasi_independent` estimate where
    it has one, and how many were. ``penalty`` (Cp's per parameter) None turns this off,
    and so does a narrow table (fewer than
    :attr:`~privsyn_core.width_policy.WidthPolicy.quasi_independence_from` modelled
    attributes): on adult-coded at epsilon 1 the fit took 1
    or 2 of 41 pairs on 7 of 8 seeds, and the SVM error rose on 6 of them (mean 0.1488 to
    0.1506, past the 0.150 target set for it) with the 2-way L1 and range the same (evidence Q)."""
    if penalty is None or not WIDTH_POLICY.quasi_independence(n_attributes):
        return tuple(marginals), 0
    measured = {m.attributes: m for m in measurements}
    out, replaced = [], 0
    for table in marginals:
        made = measured.get(table.attributes)
        estimate = (
            None
            if len(table.shape) != 2 or made is None or table.attributes in independent
            else _remembered_fit(
                table.values.reshape(table.shape),
                made.table.values.reshape(made.table.shape),
                made.sigma,
                penalty,
            )
        )
        if estimate is None:
            out.append(table)
        else:
            out.append(table.with_values(estimate.ravel()))
            replaced += 1
    return tuple(out), replaced


#: the bytes of estimates kept for later blocks: the 2-way fits of the widest model measured
#: (caravan, about 400 pairs of up to 100 cells of 8 bytes: 0.3 MB) many times over, and
#: little next to a block (100,000 rows of 100 columns: 10 MB of codes)
FITS_BYTES = 64 * 2**20
#: what an entry costs besides its estimate (its key and the dictionary's slot), counted so
#: that the fits that found nothing (None) are bounded too
ENTRY_BYTES = 256

_Key = tuple[bytes, tuple[int, ...], float, float]


class FitCache:
    """Estimates by key, the least recently used dropped first, holding at most ``limit``
    bytes (each entry its estimate's bytes and :data:`ENTRY_BYTES`); an estimate larger
    than the bound is not kept. Safe to share between threads."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._entries: OrderedDict[_Key, np.ndarray | None] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    @property
    def bytes(self) -> int:
        """The bytes the entries count for now (never above ``limit``)."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._entries)

    def held(self) -> list[_Key]:
        """The keys held, least recently used first."""
        with self._lock:
            return list(self._entries)

    def get(self, key: _Key) -> tuple[bool, np.ndarray | None]:
        """Whether ``key`` is kept, and its estimate (marked most recently used)."""
        with self._lock:
            if key not in self._entries:
                return False, None
            self._entries.move_to_end(key)
            return True, self._entries[key]

    def put(self, key: _Key, estimate: np.ndarray | None) -> None:
        size = _size(estimate)
        if size > self.limit:
            return
        with self._lock:
            if key in self._entries:
                self._bytes -= _size(self._entries.pop(key))
            self._entries[key] = estimate
            self._bytes += size
            while self._bytes > self.limit:
                _, dropped = self._entries.popitem(last=False)
                self._bytes -= _size(dropped)


def _size(estimate: np.ndarray | None) -> int:
    return ENTRY_BYTES + (0 if estimate is None else int(estimate.nbytes))


#: the fits of this process, shared by every sample it draws (every session of a dashboard
#: server): see :func:`_remembered_fit`
_fits = FitCache(FITS_BYTES)


def _remembered_fit(
    counts: np.ndarray, measured: np.ndarray, sigma: float, penalty: float
) -> np.ndarray | None:
    """:func:`quasi_independent` of ``counts`` and ``measured``, remembered: every block of
    a sample (each a call of ``draw_block``, 2,000 of them for 100 million rows of
    adult-coded) asks for the same tables, and the fits cost about 50 ms a model there.

    What is kept is the estimates, at most :data:`FITS_BYTES` of them in one process,
    shared by every session of a long-running server: post-processing of a model's released
    DP measurements, keyed by a digest of the consistent and measured tables (never the
    tables themselves), so only a caller that holds the same model's tables finds one. An
    estimate is read-only, so no caller can change what the next one gets."""
    counts = np.ascontiguousarray(counts, dtype=float)
    measured = np.ascontiguousarray(measured, dtype=float)
    digest = hashlib.blake2b(counts.tobytes(), digest_size=16)
    digest.update(measured.tobytes())
    key = (digest.digest(), counts.shape + measured.shape, float(sigma), float(penalty))
    found, estimate = _fits.get(key)
    if found:
        return estimate
    estimate = quasi_independent(counts, measured, sigma, penalty)
    if estimate is not None:
        estimate.setflags(write=False)
    _fits.put(key, estimate)
    return estimate
