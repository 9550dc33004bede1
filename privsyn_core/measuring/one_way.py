"""Noisy 1-way marginals and the filtering and combining of low-count values (paper 5.3).

The first tenth of the budget (rho_1 = 0.1 rho, Algorithm 3 line 1) buys every attribute's
1-way marginal at rho_1 / d each. The same noisy counts then serve three purposes, so the
table is measured once and charged once:

1. **Filter and combine.** Values whose noisy count is below ``theta = 3 sigma`` are grouped.
   If the group's noisy total reaches ``theta`` it becomes one new value standing for all of
   them; otherwise the group is dropped from the synthetic output. The paper does not say
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

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from privsyn_core.domain import Domain
from privsyn_core.generation.consistency import project_nonnegative
from privsyn_core.generation.sampling import conditional_column
from privsyn_core.marginals import MarginalTable
from privsyn_core.measuring.measurement import NoisyMarginal, measure_marginals
from privsyn_core.privacy.ledger import Measurement
from privsyn_core.privacy.noise import NoiseSource

if TYPE_CHECKING:
    from privsyn_core.measuring.counting import Counter


@dataclass(frozen=True)
class ValueGrouping:
    """How an attribute's declared codes map to the codes the engine synthesises.

    ``code_of[v]`` is the engine code of declared code ``v``. ``members[k]`` lists the declared
    codes engine code ``k`` stands for, and ``member_weights[k]`` their noisy counts, used to
    split a combined value when decoding. ``merged_code`` is the engine code of
    the combined low-count value, if there is one.
    """

    attribute: str
    code_of: np.ndarray
    members: tuple[tuple[int, ...], ...]
    member_weights: tuple[tuple[float, ...], ...]
    merged_code: int | None

    @property
    def declared_size(self) -> int:
        return int(self.code_of.size)

    @property
    def size(self) -> int:
        return len(self.members)

    @property
    def dropped(self) -> tuple[int, ...]:
        """Declared codes the synthetic output will never contain."""
        kept = {v for group in self.members for v in group}
        return tuple(v for v in range(self.declared_size) if v not in kept)

    @classmethod
    def identity(cls, attribute: str, size: int) -> ValueGrouping:
        return cls(
            attribute,
            np.arange(size),
            tuple((v,) for v in range(size)),
            tuple((1.0,) for _ in range(size)),
            None,
        )


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
    noisy: NoisyMarginal, threshold: float, solitary: int | None = None
) -> ValueGrouping:
    """Filter and combine values whose noisy count is below ``threshold`` (paper 5.3).

    ``solitary`` (a column's missing code) is never combined with other values: below the
    threshold it is dropped. A combined value is split back by its members' noisy counts, so a
    missing code grouped with rare categories would put missing values into a column that
    has none whenever its noise is positive; every column whose schema leaves "missing" open
    has such a code, and on Adult at epsilon 0.2 this cost 0.01 of 2-way L1.
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
    low_codes = np.flatnonzero(low)
    code_of = np.empty(counts.size, dtype=np.int64)
    code_of[kept] = np.arange(kept.size)
    members: list[tuple[int, ...]] = [(int(v),) for v in kept]
    weights: list[tuple[float, ...]] = [(1.0,) for _ in kept]
    merged_code = None
    others = np.ones(counts.size, dtype=bool)
    if alone:
        others[solitary] = False
    if low_codes.size:
        low_total = counts[low_codes].sum()
        # with nothing above the threshold the combined value is the attribute's only value
        if low_total >= threshold or kept.size == 0:
            merged_code = len(members)
            code_of[low_codes] = merged_code
            members.append(tuple(int(v) for v in low_codes))
            weights.append(tuple(float(w) for w in counts[low_codes]))
        else:
            largest = int(np.argmax(np.where(low | ~others, -np.inf, counts)))
            code_of[low_codes] = code_of[largest]
    if alone:
        # folded into the largest value for measuring, never output (a dropped value)
        code_of[solitary] = code_of[int(np.argmax(np.where(others, counts, -np.inf)))]
    return ValueGrouping(attribute, code_of, tuple(members), tuple(weights), merged_code)


def grouped_one_way(noisy: NoisyMarginal, grouping: ValueGrouping) -> NoisyMarginal:
    """The 1-way marginal on engine codes, summed from the same noisy counts (no new spend).

    A combined cell sums ``m`` noisy counts, so its variance is ``m sigma^2``; the returned
    ``rho`` is the budget whose variance equals the average per-cell variance, which is what
    the consistency step weighs this marginal by.
    """
    values = np.bincount(grouping.code_of, weights=noisy.table.values, minlength=grouping.size)
    kept_members = sum(len(m) for m in grouping.members)
    dropped = grouping.declared_size - kept_members
    if dropped:
        # dropped values were folded into a kept code for measuring only; their noisy counts
        # are noise around a tiny total, so they do not count towards the 1-way estimate.
        values = values - np.bincount(
            grouping.code_of[list(grouping.dropped)],
            weights=noisy.table.values[list(grouping.dropped)],
            minlength=grouping.size,
        )
    average_terms = kept_members / grouping.size
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


def decode(
    column: np.ndarray,
    grouping: ValueGrouping,
    rng: np.random.Generator,
    records_per_row: float = 1.0,
) -> np.ndarray:
    """Engine codes back to declared codes; combined values split by projected noisy counts.

    ``records_per_row`` converts synthetic rows to the scale of the noisy counts (the noisy
    total over the number of synthetic rows), so the projection sees a total on the scale
    the members were measured on.
    """
    declared = np.array([group[0] for group in grouping.members], dtype=column.dtype)
    out = declared[column]
    if grouping.merged_code is not None:
        rows = np.flatnonzero(column == grouping.merged_code)
        members = np.array(grouping.members[grouping.merged_code])
        shares = project_nonnegative(
            np.array(grouping.member_weights[grouping.merged_code]), rows.size * records_per_row
        )
        picks = conditional_column(np.zeros(rows.size, dtype=np.int64), shares[None, :], rng)
        out[rows] = members[picks]
    return out
