"""Measured pairs that are independent but for a few cells are drawn that way (issue 22).

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
   Gaussian: ``||Y - fit||^2 - ab sigma^2 + threshold p sigma^2`` with ``p = a + b - 1 + |S|``
   parameters and the independence rule's penalty per parameter (``threshold``, 2, Cp's own).
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
they were. It runs on wide tables only, as selection and synthesis "auto" count them
(:func:`quasi_independent_marginals`).

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
from privsyn_core.selection.methods import is_wide

#: the fit's estimated error must be under the consistent table's by this many standard
#: deviations of the misfit under noise alone (``sqrt(2 (ab - parameters)) sigma^2``); 1 by
#: evidence Q.7: against 2, the wide tables' 6-seed medians within 0.3% either way, and the
#: 600,000-row dense table at epsilon 4 under MST on two seeds of three (2: one)
CONFIDENCE = 1.0
#: proportional fitting stops once every row sum is within this share of the total (the
#: column sums are exact after each sweep), or after ``SWEEPS`` sweeps
TOLERANCE = 1e-9
SWEEPS = 200


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
    counts: np.ndarray, measured: np.ndarray, sigma: float, threshold: float
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
    fit_error = misfit - cells * sigma**2 + threshold * parameters * sigma**2
    kept_error = cells * sigma**2 - float(((measured - counts) ** 2).sum())
    if fit_error + CONFIDENCE * math.sqrt(2 * free) * sigma**2 >= kept_error:
        return None
    counts = np.maximum(counts, 0.0)
    return np.where(special, counts, quasi_independent_fit(counts, ~special))


def quasi_independent_marginals(
    marginals: Sequence[MarginalTable],
    measurements: Sequence[NoisyMarginal],
    threshold: float | None,
    independent: frozenset[tuple[str, ...]],
    n_attributes: int,
) -> tuple[tuple[MarginalTable, ...], int]:
    """``marginals`` with every 2-way table that is not ``independent`` and has a
    measurement in ``measurements`` replaced by its :func:`quasi_independent` estimate where
    it has one, and how many were. ``threshold`` None (the independence rule off) turns this
    off too, and so does a narrow table (fewer than
    :data:`~privsyn_core.selection.methods.WIDE_TABLE_ATTRIBUTES` modelled attributes, as
    selection and synthesis "auto" count them): on adult-coded at epsilon 1 the fit took 1
    or 2 of 41 pairs on 7 of 8 seeds, and the SVM error rose on 6 of them (mean 0.1488 to
    0.1506, past issue 12's 0.150) with the 2-way L1 and range the same (evidence Q)."""
    if threshold is None or not is_wide(n_attributes):
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
                threshold,
            )
        )
        if estimate is None:
            out.append(table)
        else:
            out.append(table.with_values(estimate.ravel()))
            replaced += 1
    return tuple(out), replaced


#: fits kept for later blocks: more than the 2-way marginals of the widest model (caravan
#: measures about 400), and the keys are digests, so what stays is at most this many fits
FITS_KEPT = 2048
_fits: OrderedDict[tuple[bytes, tuple[int, ...], float, float], np.ndarray | None] = OrderedDict()
_fits_lock = threading.Lock()


def _remembered_fit(
    counts: np.ndarray, measured: np.ndarray, sigma: float, threshold: float
) -> np.ndarray | None:
    """:func:`quasi_independent` of ``counts`` and ``measured``, remembered: every block of
    a sample (each a call of ``draw_block``, 2,000 of them for 100 million rows of
    adult-coded) asks for the same tables, and the fits cost about 50 ms a model there.
    Keyed by a digest of both tables, so the cache of a long-running server holds no table;
    the estimate is read-only, so no caller can change what the next one gets."""
    counts = np.ascontiguousarray(counts, dtype=float)
    measured = np.ascontiguousarray(measured, dtype=float)
    digest = hashlib.blake2b(counts.tobytes(), digest_size=16)
    digest.update(measured.tobytes())
    key = (digest.digest(), counts.shape + measured.shape, float(sigma), float(threshold))
    with _fits_lock:
        if key in _fits:
            _fits.move_to_end(key)
            return _fits[key]
    estimate = quasi_independent(counts, measured, sigma, threshold)
    if estimate is not None:
        estimate.setflags(write=False)
    with _fits_lock:
        _fits[key] = estimate
        while len(_fits) > FITS_KEPT:
            _fits.popitem(last=False)
    return estimate
