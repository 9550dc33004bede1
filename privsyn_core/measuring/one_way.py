"""Noisy 1-way marginals and the filtering and combining of low-count values (paper 5.3).

A share of the budget (rho_1 = ``one_way_share`` rho: 0.3 by evidence, the paper's Algorithm 3
line 1 says 0.1) buys every attribute's 1-way marginal at rho_1 / d each. The same noisy
counts then serve three purposes, so the table is measured once and charged once:

1. **Filter and combine.** Values whose noisy count is below ``theta = 3 sigma`` are grouped.
   If the group's noisy total reaches ``theta`` it becomes one new value standing for all of
   them; otherwise the group is dropped from the synthetic output. The paper's total is the
   sum of the members' noisy counts; we also use that every attribute counts the same rows
   (:func:`low_group_total`), which makes the estimate several times less noisy when the
   group has many members. The paper does not say
   what the real records holding a dropped value become when later marginals are measured;
   we fold them into the value with the largest noisy count, which moves at most about
   ``theta`` records and adds no cell (an extra near-empty cell would cost noise in every
   marginal of the attribute).
2. **GUM's initialisation** (section 5.3): the grouped counts are the starting 1-way targets.
3. **Decoding** a combined value back to its members. Their noisy counts are all below
   ``theta``, so noise dominates them; clipping negatives at zero (the research code) spreads
   mass over values that never occur. We split the value's synthetic rows by the L2
   projection of the members' noisy counts onto the non-negative counts with that total,
   the same maximum-likelihood projection the consistency step uses (paper 4.3), which sends
   the noise-only members to zero.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from privsyn_core.domain import Domain
from privsyn_core.generation.grouping import ValueGrouping
from privsyn_core.marginals import MarginalTable, NoisyMarginal
from privsyn_core.measuring.measurement import measure_marginals
from privsyn_core.privacy.ledger import Measurement
from privsyn_core.privacy.noise import NoiseSource

if TYPE_CHECKING:
    from privsyn_core.measuring.counters import Counter


@dataclass(frozen=True)
class RowCount:
    """An estimate of the table's number of rows and its variance."""

    value: float
    variance: float


def row_counts_without_each(one_way: Sequence[NoisyMarginal]) -> tuple[RowCount | None, ...]:
    """For each attribute, the table's row count estimated from the *other* attributes' noisy
    1-way totals (inverse-variance mean; a total over ``c`` cells has variance ``c sigma^2``).

    Leaving the attribute itself out keeps the estimate independent of its own noise, so
    :func:`low_group_total` can combine the two by their variances. None when there is no other
    attribute. Post-processing of DP counts: free.
    """
    precisions = [1.0 / (m.sigma**2 * m.table.cells) for m in one_way]
    totals = [m.table.total for m in one_way]
    estimates: list[RowCount | None] = []
    for i in range(len(one_way)):
        weight = sum(precisions) - precisions[i]
        if weight <= 0:
            estimates.append(None)
            continue
        mean = (
            sum(p * t for p, t in zip(precisions, totals, strict=True)) - precisions[i] * totals[i]
        )
        estimates.append(RowCount(mean / weight, 1.0 / weight))
    return tuple(estimates)


def low_group_total(
    noisy: NoisyMarginal, group: np.ndarray, rows: RowCount | None = None
) -> RowCount:
    """The number of rows holding one of the values in ``group`` (a boolean mask), estimated.

    The paper's estimate (section 5.3) sums the members' noisy counts: variance ``m sigma^2``
    for ``m`` members, most of them noise around a tiny count. A long tail of rare values
    makes it useless: on adult-coded at epsilon 1, capital-gain's ~90 rare codes hold 383
    rows, 79% of them earning over 50K, and their summed count has a standard deviation near
    380. It fell below ``theta`` (~120) in three of the first six seeds, which folded those
    rows into "no capital gain". Every attribute counts the same rows, so the table's row
    count ``rows`` (from the other attributes) minus the other values' noisy counts is a
    second, independent estimate, with variance ``var(rows) + (d - m) sigma^2``. The two are
    combined by inverse variance (standard deviation about 130 on that column).
    """
    counts = noisy.table.values
    variance = noisy.sigma**2
    members = int(group.sum())
    summed = RowCount(float(counts[group].sum()), members * variance)
    if rows is None or members == 0:
        return summed
    rest = RowCount(
        rows.value - float(counts[~group].sum()), rows.variance + (counts.size - members) * variance
    )
    weight = 1.0 / summed.variance + 1.0 / rest.variance
    value = (summed.value / summed.variance + rest.value / rest.variance) / weight
    return RowCount(value, 1.0 / weight)


def measure_one_way(
    counter: Counter, rho: float, rng: NoiseSource | np.random.Generator
) -> tuple[tuple[NoisyMarginal, ...], tuple[Measurement, ...]]:
    """Noisy 1-way marginals of every attribute, ``rho / d`` each (Algorithm 3, line 1),
    counted in one batch."""
    domain = counter.domain
    each = rho / len(domain)
    pairs = measure_marginals(
        counter, [(name,) for name in domain], [each] * len(domain), rng, step="one_way"
    )
    return tuple(p[0] for p in pairs), tuple(p[1] for p in pairs)


def group_low_counts(
    noisy: NoisyMarginal,
    threshold: float,
    solitary: int | None = None,
    rows: RowCount | None = None,
    apart: Sequence[Sequence[int]] = (),
) -> ValueGrouping:
    """Filter and combine values whose noisy count is below ``threshold`` (paper 5.3).

    The combined value is kept when its estimated total reaches ``threshold``: with ``rows``
    (:func:`row_counts_without_each`) the estimate of :func:`low_group_total`, without it the
    paper's sum of noisy counts.

    ``solitary`` (a column's missing code) is never combined with other values: below the
    threshold it is dropped. A combined value is split back by its members' noisy counts, so a
    missing code grouped with rare categories would put missing values into a column that
    has none whenever its noise is positive; every column whose schema leaves "missing" open
    has such a code, and on Adult at epsilon 0.2 this cost 0.01 of 2-way L1.

    The codes of each set in ``apart`` (a numeric column's tails beyond its DP bounds,
    :meth:`~privsyn_core.data.codecs.BinnedCodec.tail_codes`) combine among themselves only,
    kept when their summed noisy counts reach ``threshold`` times the square root of their
    number (as many sigmas of the sum's own noise): grouped with the column's other rare
    values, a tail the noise alone made positive would take their rows (Adult's
    ``education-num`` 1, 51 rows, split into 17 to 21 years of school, which no one has).
    """
    (attribute,) = noisy.attributes
    counts = noisy.table.values
    low = counts < threshold
    alone = solitary is not None and bool(low[solitary]) and counts.size > 1
    if alone:
        low[solitary] = False  # handled below, outside the group
    kept = np.flatnonzero(~low)
    if alone:
        kept = kept[kept != solitary]
    code_of = np.empty(counts.size, dtype=np.int64)
    code_of[kept] = np.arange(kept.size)
    members: list[tuple[int, ...]] = [(int(v),) for v in kept]
    weights: list[tuple[float, ...]] = [(1.0,) for _ in kept]
    merged_code = None
    others = np.ones(counts.size, dtype=bool)
    if alone:
        others[solitary] = False
    set_apart = np.zeros(counts.size, dtype=bool)
    for codes in apart:
        set_apart[list(codes)] = True
    groups = [np.flatnonzero(low & ~set_apart)]
    groups += [np.asarray([c for c in codes if low[c]], dtype=np.int64) for codes in apart]
    folded: list[np.ndarray] = []
    for index, group in enumerate(groups):
        if group.size == 0:
            continue
        in_group = np.zeros(counts.size, dtype=bool)
        in_group[group] = True
        if index == 0:
            total, bar = low_group_total(noisy, in_group, rows).value, threshold
        else:  # a tail's summed noise: its bar is the threshold's sigmas of that sum
            total, bar = float(counts[group].sum()), threshold * math.sqrt(group.size)
        # with nothing above the threshold the combined value is the attribute's only value
        if total >= bar or (kept.size == 0 and index == 0):
            if index == 0:
                merged_code = len(members)
            code_of[group] = len(members)
            members.append(tuple(int(v) for v in group))
            weights.append(tuple(float(w) for w in counts[group]))
        else:
            folded.append(group)
    if folded or alone:
        # folded into the largest value for measuring, never output (dropped values)
        largest = int(np.argmax(np.where(low | ~others, -np.inf, counts)))
        if low[largest] or not others[largest]:  # nothing kept: the first group's code
            largest = int(members[0][0]) if members else 0
        for group in folded:
            code_of[group] = code_of[largest]
        if alone:
            code_of[solitary] = code_of[largest]
    return ValueGrouping(attribute, code_of, tuple(members), tuple(weights), merged_code)


def grouped_one_way(
    noisy: NoisyMarginal, grouping: ValueGrouping, rows: RowCount | None = None
) -> NoisyMarginal:
    """The 1-way marginal on engine codes, summed from the same noisy counts (no new spend).

    A combined cell sums ``m`` noisy counts, so its variance is ``m sigma^2``; with ``rows`` it
    holds :func:`low_group_total`'s estimate instead, of smaller variance. The returned
    ``rho`` is the budget whose variance equals the average per-cell variance, which is what
    the consistency step weighs this marginal by.
    """
    values = np.bincount(grouping.code_of, weights=noisy.table.values, minlength=grouping.size)
    if grouping.dropped:
        # dropped values were folded into a kept code for measuring only; their noisy counts
        # are noise around a tiny total, so they do not count towards the 1-way estimate.
        values = values - np.bincount(
            grouping.code_of[list(grouping.dropped)],
            weights=noisy.table.values[list(grouping.dropped)],
            minlength=grouping.size,
        )
    terms = [float(len(m)) for m in grouping.members]  # noise variances, in sigma^2
    if grouping.merged_code is not None and rows is not None:
        in_group = np.zeros(grouping.declared_size, dtype=bool)
        in_group[list(grouping.members[grouping.merged_code])] = True
        merged = low_group_total(noisy, in_group, rows)
        values[grouping.merged_code] = merged.value
        terms[grouping.merged_code] = merged.variance / noisy.sigma**2
    average_terms = sum(terms) / grouping.size
    table = MarginalTable(noisy.attributes, (grouping.size,), values)
    return NoisyMarginal(table, noisy.rho / average_terms, noisy.sigma * np.sqrt(average_terms))


def recode(
    records: np.ndarray, domain: Domain, groupings: tuple[ValueGrouping, ...]
) -> tuple[np.ndarray, Domain]:
    """Map declared codes to engine codes, column by column."""
    out = np.empty_like(records)
    for row, grouping in enumerate(groupings):
        out[row] = grouping.code_of[records[row]]
    return out, Domain(domain.attributes, tuple(g.size for g in groupings))
