"""Measured pairs that are independent but for a few cells are drawn that way (issue 22).

A measured 2-way marginal carries Gaussian noise of standard deviation ``sigma`` in every one
of its ``a x b`` cells, and GUM copies all of it into the synthetic table. Many dependent pairs
are *quasi-independent* (Goodman): independent outside a few cells ``S``, such as a column
that copies another (its "diagonal") or a value that only occurs with one other. Outside ``S``
the table is then ``alpha_i beta_j``, which ``a + b - 1`` numbers describe; fitted to the
noisy cells, those numbers average the noise of whole rows and columns away. This is what
MST's Private-PGM estimate gained on the dense 600,000 x 100 table at epsilon 4: on the
cells off the diagonal its copy pairs were 19% closer to the real ones than ours (L1 0.0142
against 0.0176), although measured with more noise
(``benchmarks/evidence/wide-2026-11-27-caravan-large.txt``, P.4).

For each measured pair not already drawn as independent
(:mod:`~privsyn_core.generation.independence`), with ``T`` its consistent counts:

1. ``S`` grows from nothing: the cells whose residual from the quasi-independence fit on the
   cells outside ``S`` exceeds ``sqrt(2 ln(ab)) sigma`` (noise alone passes that bound in
   about one table of ``ab`` cells) and at least half the largest residual, until none does.
2. The fit ``E`` keeps ``T`` on ``S`` and ``alpha_i beta_j`` elsewhere (iterative
   proportional fitting on the cells outside ``S``), so it has ``T``'s margins and total:
   the other marginals stay consistent with it.
3. ``E`` replaces ``T`` where Mallows' Cp prefers it clearly, with the penalty per
   parameter that the independence rule uses (``threshold``, 2): Cp's estimated gain
   ``threshold a b sigma^2 - (||T - E||^2 + threshold p sigma^2)`` (``p = a + b - 1 + |S|``
   parameters) must exceed the standard deviation that noise alone gives the misfit,
   ``sqrt(2 (ab - p)) sigma^2``. ``S`` is chosen from the same counts, which flatters the
   misfit most where few cells are left outside ``S``: on happiness (17,000 x 33) at
   epsilon 4, plain Cp took 3 x 3 to 10 x 3 pairs whose fit was farther from the real
   table than the counts. A cell wrongly put in ``S`` keeps its measured value, so it costs
   what it costs as measured and no more.
4. Only where every fitted cell outside ``S`` is at least ``3 sigma``: Cp reads the noise as
   Gaussian, and consistency's non-negative projection makes the cells near zero otherwise
   (on the 10,000-row loans table at epsilon 1 the fit without this bound moved 19 pairs'
   targets 16% farther from the real ones).

It reads the consistent marginals and their public noise scales only: post-processing, no
budget. Everything here is in counts.
"""

from __future__ import annotations

import hashlib
import math
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence

import numpy as np

from privsyn_core.marginals import MarginalTable

#: fitted cells outside ``S`` must hold at least this many noise standard deviations
CLEAR_OF_ZERO = 3.0
#: Cp's gain must exceed this many standard deviations of the misfit under noise alone
#: (``sqrt(2 (ab - parameters)) sigma^2``): on small tables the misfit says little. 1 by
#: evidence P.4 (2 left the 600,000-row dense table over MST on two seeds of three)
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
    sums ``counts`` has there: iterative proportional fitting from a flat table."""
    inside_rows = np.where(outside, counts, 0.0).sum(axis=1)
    inside_cols = np.where(outside, counts, 0.0).sum(axis=0)
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


def quasi_independent(counts: np.ndarray, sigma: float, threshold: float) -> np.ndarray | None:
    """The quasi-independent estimate of the 2-way ``counts`` (noise ``sigma`` per cell)
    where Cp prefers it to the counts as measured and its fitted cells are clear of zero
    (module docstring), else None."""
    a, b = counts.shape
    cells = a * b
    if min(a, b) < 2 or sigma <= 0:
        return None
    counts = np.maximum(counts, 0.0)
    bound = math.sqrt(2 * math.log(cells)) * sigma
    special = np.zeros(counts.shape, dtype=bool)
    while True:
        fit = quasi_independent_fit(counts, ~special)
        residual = np.where(special, 0.0, np.abs(counts - fit))
        largest = float(residual.max())
        if largest <= bound:
            break
        special |= residual >= max(bound, largest / 2)
        if special.all():
            return None
    outside = ~special
    if not outside.any() or float(fit[outside].min()) < CLEAR_OF_ZERO * sigma:
        return None
    estimate = np.where(special, counts, fit)
    misfit = float(((counts - estimate) ** 2).sum())
    parameters = a + b - 1 + int(special.sum())
    free = max(cells - parameters, 1)
    gain = threshold * cells * sigma**2 - (misfit + threshold * parameters * sigma**2)
    if gain <= CONFIDENCE * math.sqrt(2 * free) * sigma**2:
        return None
    return estimate


def quasi_independent_marginals(
    marginals: Sequence[MarginalTable],
    sigmas: Mapping[tuple[str, ...], float],
    threshold: float | None,
    independent: frozenset[tuple[str, ...]],
) -> tuple[tuple[MarginalTable, ...], int]:
    """``marginals`` with every measured 2-way table that is not ``independent`` replaced by
    its :func:`quasi_independent` estimate where it has one, and how many were. ``threshold``
    None (the independence rule off) turns this off too."""
    if threshold is None:
        return tuple(marginals), 0
    out, replaced = [], 0
    for table in marginals:
        sigma = sigmas.get(table.attributes)
        estimate = (
            None
            if len(table.shape) != 2 or sigma is None or table.attributes in independent
            else _remembered_fit(table.values.reshape(table.shape), sigma, threshold)
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


def _remembered_fit(counts: np.ndarray, sigma: float, threshold: float) -> np.ndarray | None:
    """:func:`quasi_independent` of ``counts``, remembered: every block of a sample (each a
    call of ``draw_block``, 2,000 of them for 100 million rows of adult-coded) asks for the
    same tables, and the fits cost about 50 ms a model there. Keyed by a digest of the
    counts, so the cache of a long-running server holds no table; the estimate is read-only,
    so no caller can change what the next one gets."""
    counts = np.ascontiguousarray(counts, dtype=float)
    digest = hashlib.blake2b(counts.tobytes(), digest_size=16).digest()
    key = (digest, counts.shape, float(sigma), float(threshold))
    with _fits_lock:
        if key in _fits:
            _fits.move_to_end(key)
            return _fits[key]
    estimate = quasi_independent(counts, sigma, threshold)
    if estimate is not None:
        estimate.setflags(write=False)
    with _fits_lock:
        _fits[key] = estimate
        while len(_fits) > FITS_KEPT:
            _fits.popitem(last=False)
    return estimate
