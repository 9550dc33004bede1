"""Turning target frequencies into exact integer counts and shuffled columns.

Sampling each synthetic value independently adds multinomial noise of order sqrt(c / N) in L1
on top of the DP noise; allocating counts by largest remainder instead reproduces the target
to within one record per cell. Every place that draws values from a distribution (GUM's 1-way
initialisation, attribute appending, decoding of merged values) uses these helpers.
"""

from __future__ import annotations

import numpy as np


def quota_counts(weights: np.ndarray, total: int | np.ndarray) -> np.ndarray:
    """Non-negative integers summing to ``total``, proportional to ``weights`` (last axis).

    Largest-remainder rounding. Negative weights count as zero; a row whose weights are all
    zero is spread uniformly. Works row-wise on 2-D input with ``total`` broadcast per row.
    """
    w = np.clip(np.asarray(weights, dtype=float), 0.0, None)
    if w.ndim == 1 and np.ndim(total) == 0:
        return _quota_counts_1d(w, int(total))
    squeeze = w.ndim == 1
    w = np.atleast_2d(w)
    totals = np.broadcast_to(np.asarray(total, dtype=np.int64), (w.shape[0],))
    sums = w.sum(axis=1, keepdims=True)
    w = np.where(sums > 0, w, 1.0)
    ideal = w / w.sum(axis=1, keepdims=True) * totals[:, None]
    counts = np.floor(ideal).astype(np.int64)
    short = totals - counts.sum(axis=1)
    remainder = ideal - counts
    order = np.argsort(-remainder, axis=1, kind="stable")
    ranks = np.empty_like(order)
    np.put_along_axis(ranks, order, np.arange(w.shape[1])[None, :].repeat(w.shape[0], 0), axis=1)
    counts += ranks < short[:, None]
    return counts[0] if squeeze else counts


def _quota_counts_1d(w: np.ndarray, total: int) -> np.ndarray:
    """:func:`quota_counts` for one row, without the 2-D bookkeeping (GUM calls it once per
    marginal per iteration); the same counts, ties broken the same way."""
    weight = w.sum()
    if weight <= 0:
        w, weight = np.ones_like(w), float(w.size)
    ideal = w / weight * total
    counts = np.floor(ideal).astype(np.int64)
    short = total - int(counts.sum())
    if short > 0:
        counts[np.argsort(counts - ideal, kind="stable")[:short]] += 1
    return counts


def shuffled_column(weights: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """A column of ``n`` codes whose histogram is ``quota_counts(weights, n)``, in random order."""
    counts = quota_counts(weights, n)
    column = np.repeat(np.arange(counts.size), counts)
    rng.shuffle(column)
    return column


def conditional_column(
    anchor: np.ndarray, conditional: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """Draw a new column given an existing one, reproducing ``conditional`` row by row.

    ``conditional[v]`` holds the weights of the new attribute among rows whose anchor value is
    ``v``. Rows are assigned in an order randomised afresh for this call, so two columns
    appended to the same anchor are not correlated through row positions (a pitfall of the
    research code, which filled rows in positional order).
    """
    n = anchor.size
    group_sizes = np.bincount(anchor, minlength=conditional.shape[0])
    counts = quota_counts(conditional, group_sizes)
    values = np.repeat(
        np.tile(np.arange(conditional.shape[1]), conditional.shape[0]), counts.ravel()
    )
    # rows grouped by anchor value, in random order within each group
    permutation = rng.permutation(n)
    order = permutation[np.argsort(anchor[permutation], kind="stable")]
    column = np.empty(n, dtype=np.int64)
    column[order] = values
    return column
