"""How an attribute's declared codes map to the codes the engine synthesises, and back.

The grouping is decided from the noisy 1-way marginals (:mod:`privsyn_core.measuring.one_way`,
paper section 5.3: values below 3 sigma are combined or dropped); decoding a combined value
back to its members is post-processing, so both live here, beyond the private boundary.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from privsyn_core.generation.consistency import project_nonnegative
from privsyn_core.generation.sampling import conditional_column


@dataclass(frozen=True)
class ValueGrouping:
    """How an attribute's declared codes map to the codes the engine synthesises.

    ``code_of[v]`` is the engine code of declared code ``v``. ``members[k]`` lists the declared
    codes engine code ``k`` stands for, and ``member_weights[k]`` their noisy counts, used to
    split a combined value when decoding. ``merged_code`` is the engine code of
    the combined low-count values, if there is one; a numeric column's tails may make
    combined values of their own (:func:`~privsyn_core.measuring.one_way.group_low_counts`).
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


def decode(
    column: np.ndarray,
    grouping: ValueGrouping,
    rng: np.random.Generator,
    records_per_row: float = 1.0,
) -> np.ndarray:
    """Engine codes back to declared codes; combined values split by projected noisy counts
    (:func:`member_shares`).

    ``records_per_row`` converts synthetic rows to the scale of the noisy counts (the noisy
    total over the number of synthetic rows), so the projection sees a total on the scale
    the members were measured on.
    """
    declared = np.array([group[0] for group in grouping.members], dtype=column.dtype)
    out = declared[column]
    for code, group in enumerate(grouping.members):
        if len(group) == 1:
            continue
        rows = np.flatnonzero(column == code)
        members = np.array(group)
        shares = member_shares(np.array(grouping.member_weights[code]), rows.size * records_per_row)
        picks = conditional_column(np.zeros(rows.size, dtype=np.int64), shares[None, :], rng)
        out[rows] = members[picks]
    return out


def member_shares(counts: np.ndarray, total: float) -> np.ndarray:
    """How a combined value's ``total`` rows split over its members, from their noisy
    ``counts``: the closest non-negative counts with that total (the L2 projection, which
    sends the members the noise alone made positive to zero), except where the total exceeds
    what the members' positive counts hold. There the projection would lift every member by
    the same amount, the empty ones included (values beyond a column's bounds, widened to
    keep its tails: :mod:`privsyn_core.data.number_bins`), so the positive counts are scaled
    up instead and a member whose count is not positive gets nothing."""
    positive = np.maximum(counts, 0.0)
    if total > positive.sum() > 0:
        return positive * (total / positive.sum())
    return project_nonnegative(counts, total)


def declared_shares(engine_counts: np.ndarray, grouping: ValueGrouping) -> np.ndarray:
    """The share of rows in each declared code, from the consistent 1-way target on engine
    codes: a combined value's share split as decoding splits it, a dropped value's zero."""
    counts = np.clip(np.asarray(engine_counts, dtype=float), 0.0, None)
    total = counts.sum()
    shares = np.zeros(grouping.declared_size)
    if total <= 0:
        return shares
    for code, members in enumerate(grouping.members):
        weights = member_shares(np.asarray(grouping.member_weights[code]), 1.0)
        weights = weights / weights.sum() if weights.sum() > 0 else np.full(len(members), 0.0)
        shares[list(members)] += counts[code] / total * weights
    return shares
