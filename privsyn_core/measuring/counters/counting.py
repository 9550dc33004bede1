"""Exact counts over the encoded private table: the one door through which PrivSyn's own
measurements (1-way marginals, the all-pairs counts behind InDif, the selected marginals) read
rows.

A :class:`Counter` answers "the exact counts of these attribute sets", in batches, so a backend
that keeps the table elsewhere (an out-of-core database, a cluster) can count many sets in one
scan. Everything after counting (noise, selection, consistency, GUM) sees counts only.

* :class:`ArrayCounter`: the in-memory backend, over the ``(attributes, rows)`` code array.
* :class:`RecodedCounter`: counts on the engine's codes (after low-count values are grouped,
  paper 5.3) derived from counts on the declared codes by summing cells. No new pass over the
  rows, and the same numbers as counting recoded rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from math import prod
from typing import Protocol

import numpy as np

from privsyn_core.domain import Domain
from privsyn_core.generation.grouping import ValueGrouping
from privsyn_core.marginals import MarginalTable, count_marginals


class Counter(Protocol):
    """Exact counts of attribute sets over an encoded table (private: only measurements, which
    add noise before anything leaves, may call it)."""

    @property
    def domain(self) -> Domain: ...

    def count(self, attribute_sets: Sequence[tuple[str, ...]]) -> list[MarginalTable]:
        """The exact marginal of each attribute set, in order."""
        ...


@dataclass(frozen=True, eq=False)
class ArrayCounter:
    """Counts over an in-memory ``(attributes, rows)`` array of codes."""

    records: np.ndarray
    domain: Domain

    def count(self, attribute_sets: Sequence[tuple[str, ...]]) -> list[MarginalTable]:
        return count_marginals(self.records, self.domain, attribute_sets)


@dataclass(frozen=True, eq=False)
class RecodedCounter:
    """Counts on engine codes: each declared-code marginal of ``base`` summed over the cells
    that ``groupings`` map to one engine code."""

    base: Counter
    groupings: tuple[ValueGrouping, ...]

    @property
    def domain(self) -> Domain:
        return Domain(self.base.domain.attributes, tuple(g.size for g in self.groupings))

    def count(self, attribute_sets: Sequence[tuple[str, ...]]) -> list[MarginalTable]:
        by_name = {g.attribute: g for g in self.groupings}
        return [
            _recoded(table, [by_name[a] for a in table.attributes])
            for table in self.base.count(attribute_sets)
        ]


def _recoded(table: MarginalTable, groupings: Sequence[ValueGrouping]) -> MarginalTable:
    shape = tuple(g.size for g in groupings)
    maps = np.meshgrid(*[g.code_of for g in groupings], indexing="ij")
    engine_cells = np.ravel_multi_index(tuple(m.ravel() for m in maps), shape)
    counts = np.bincount(engine_cells, weights=table.values.ravel(), minlength=prod(shape))
    return MarginalTable(table.attributes, shape, counts.astype(float))
