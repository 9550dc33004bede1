"""What the preparation of a raw table reads from it: exact aggregates, never rows.

The structure step, the private domain estimates and the encoding of a raw table
(:mod:`privsyn_core.data.columns`) read the private table through :class:`RawTable` alone:

* per column, the counts of its values' classes (:class:`~privsyn_core.data.values.ValueClass`);
* per column, the count of each distinct value (canonical text), for the category estimate,
  and how many distinct and present values it holds, for the identifier check;
* per numeric or datetime column, the counts of its numbers in the cells of a public grid (the
  range estimate's histograms), or their minimum and maximum (the raw-domains demo only);
* the encoded table, as a :class:`~privsyn_core.measuring.counters.counting.Counter`.

Every backend gives the same exact numbers, so the noisy steps, and the decisions made from
them, are the same code fed the same counts: in memory (:class:`FrameTable`, over a pandas
DataFrame) or in a SQL engine (:mod:`privsyn_core.measuring.counters.sql_encoding`: DuckDB,
Spark), where raw rows never come into Python.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import pandas as pd

from privsyn_core.data.codecs import BinnedCodec, ColumnCodec
from privsyn_core.data.values import canonical_text, class_counts
from privsyn_core.domain import Domain
from privsyn_core.measuring.counters.counting import ArrayCounter, Counter
from privsyn_core.measuring.private_domain import histogram_of


class Numbers(Protocol):
    """A numeric or datetime column read as numbers by one codec (seconds for datetimes)."""

    def histogram(self, edges: np.ndarray, clip: bool) -> np.ndarray:
        """Exact counts in the cells cut by ``edges`` (see
        :data:`~privsyn_core.measuring.private_domain.Histogram`)."""
        ...

    def bounds(self) -> tuple[float, float] | None:
        """The exact minimum and maximum (NOT private: the raw-domains demo only)."""
        ...


class RawTable(Protocol):
    """A raw table as the preparation may read it (see the module docstring)."""

    @property
    def names(self) -> tuple[str, ...]: ...

    def class_counts(self, name: str) -> np.ndarray:
        """How many values of the column fall in each value class (exact; private)."""
        ...

    def value_counts(self, name: str) -> tuple[tuple[str, ...], np.ndarray]:
        """The column's distinct present values (canonical text, sorted) and their counts."""
        ...

    def distinct_counts(self, name: str) -> tuple[int, int]:
        """How many distinct present values the column holds, and how many present values."""
        ...

    def numbers(self, codec: BinnedCodec) -> Numbers:
        """The column read by ``codec`` (raising :class:`~privsyn_core.data.table.TableError`
        when a value does not read and the codec says that is an error)."""
        ...

    def encoded(self, codecs: Sequence[ColumnCodec], dtype: np.dtype) -> Counter:
        """A counter over the table encoded by ``codecs`` (one column each, in order)."""
        ...


@dataclass(frozen=True)
class _FrameNumbers:
    values: np.ndarray

    def histogram(self, edges: np.ndarray, clip: bool) -> np.ndarray:
        return histogram_of(self.values)(edges, clip)

    def bounds(self) -> tuple[float, float] | None:
        present = self.values[~np.isnan(self.values)]
        if present.size == 0:
            return None
        return float(present.min()), float(present.max())


@dataclass(eq=False)
class FrameTable:
    """A raw table in memory: a pandas DataFrame, read value by value
    (:mod:`privsyn_core.data.values`)."""

    frame: pd.DataFrame
    _texts: dict[str, pd.Series] = field(default_factory=dict, repr=False)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(str(c) for c in self.frame.columns)

    def text(self, name: str) -> pd.Series:
        if name not in self._texts:
            self._texts[name] = canonical_text(self.frame[name])
        return self._texts[name]

    def class_counts(self, name: str) -> np.ndarray:
        return class_counts(self.text(name))

    def value_counts(self, name: str) -> tuple[tuple[str, ...], np.ndarray]:
        counts = self.text(name).dropna().value_counts(sort=False).sort_index()
        return tuple(counts.index), counts.to_numpy(dtype=float)

    def distinct_counts(self, name: str) -> tuple[int, int]:
        present = self.text(name).dropna()
        return int(present.nunique()), int(present.size)

    def numbers(self, codec: BinnedCodec) -> Numbers:
        return _FrameNumbers(codec.numbers(self.frame[codec.name]))

    def encoded(self, codecs: Sequence[ColumnCodec], dtype: np.dtype) -> Counter:
        records = np.empty((len(codecs), len(self.frame)), dtype=dtype)
        for row, codec in enumerate(codecs):
            records[row] = codec.encode(self.frame[codec.name])
        domain = Domain(tuple(c.name for c in codecs), tuple(c.size for c in codecs))
        return ArrayCounter(records, domain)
