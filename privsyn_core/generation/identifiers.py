"""Fresh row ids for the columns that are identifiers
(:mod:`privsyn_core.measuring.identifiers`).

An identifier is not modelled: nothing of its values reaches the model, so the synthetic
table gets new ones, the whole numbers 1 to n in row order, unique over the whole sample
however it is made (one table, blocks on several workers, blocks on Spark, rows kept by a
condition): row ``r`` of a sample, counted from 0, holds ``r + 1``
(:func:`~privsyn_core.generation.sample_blocks.numbered` numbers them on over the blocks).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class Identifier:
    """A column written as fresh ids, and its place among the synthetic table's columns."""

    name: str
    position: int


def with_identifiers(
    table: pd.DataFrame, identifiers: Sequence[Identifier], first_row: int = 0
) -> pd.DataFrame:
    """``table`` with each identifier column (re)written as ``first_row + 1`` onwards, at its
    position."""
    if not identifiers:
        return table
    ids = np.arange(first_row + 1, first_row + 1 + len(table), dtype=np.int64)
    table = table.drop(columns=[i.name for i in identifiers if i.name in table.columns])
    for identifier in sorted(identifiers, key=lambda i: i.position):
        position = min(identifier.position, table.shape[1])
        table.insert(position, identifier.name, pd.Series(ids, index=table.index))
    return table
