"""Fresh row ids for the columns that are identifiers
(:mod:`privsyn_core.measuring.identifiers`).

An identifier is not modelled: nothing of its values reaches the model, so the synthetic
table gets new ones, the whole numbers 1 to n in row order, unique over the whole sample
however it is made (one table, blocks on several workers, blocks on Spark, rows kept by a
condition): row ``r`` of a sample, counted from 0, holds ``r + 1``.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from privsyn_core.generation.fitted import Sample


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


def numbered(
    identifiers: Sequence[Identifier], blocks: Iterator[Sample], first_row: int = 0
) -> Generator[Sample, None, None]:
    """``blocks`` as they come, their identifier columns numbered on from ``first_row``;
    closing this closes ``blocks`` (a consumer that stops early stops the workers)."""
    row = first_row
    try:
        for block in blocks:
            if identifiers:
                block = replace(block, table=with_identifiers(block.table, identifiers, row))
            row += len(block.table)
            yield block
    finally:
        close = getattr(blocks, "close", None)
        if close is not None:
            close()
