"""Marginal tables: counts of records over every combination of values of a few attributes.

The private table and the synthetic table are both held as one integer array of shape
``(d, n)`` (one row per attribute, so a column of the table is a contiguous row of the array;
the engine reads columns far more often than records). A marginal on attributes ``A`` is the
histogram of the flattened cell index ``ravel_multi_index(codes[A], sizes[A])``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from math import prod

import numpy as np

from privsyn_core.domain import Domain


@dataclass(frozen=True)
class MarginalTable:
    """Counts (or noisy counts, or frequencies) over the cells of ``attributes``.

    ``values`` is flat, in C order of ``shape``; it is never modified in place.
    """

    attributes: tuple[str, ...]
    shape: tuple[int, ...]
    values: np.ndarray

    def __post_init__(self) -> None:
        if self.values.shape != (prod(self.shape),):
            raise ValueError(
                f"marginal on {self.attributes} needs {prod(self.shape)} cells, "
                f"got {self.values.shape}"
            )
        self.values.setflags(write=False)

    @property
    def cells(self) -> int:
        return int(self.values.size)

    @property
    def total(self) -> float:
        return float(self.values.sum())

    def with_values(self, values: np.ndarray) -> MarginalTable:
        return MarginalTable(self.attributes, self.shape, np.asarray(values, dtype=float))

    def normalised(self) -> MarginalTable:
        total = self.values.sum()
        if total <= 0:
            return self.with_values(np.full(self.cells, 1.0 / self.cells))
        return self.with_values(self.values / total)

    def project(self, attributes: Sequence[str]) -> MarginalTable:
        """Sum out every attribute not in ``attributes`` (kept in the order given)."""
        attributes = tuple(attributes)
        keep = [self.attributes.index(a) for a in attributes]
        drop = tuple(i for i in range(len(self.attributes)) if i not in keep)
        summed = self.values.reshape(self.shape).sum(axis=drop)
        # after summing, remaining axes are in self order; reorder to the requested order
        remaining = [i for i in range(len(self.attributes)) if i in keep]
        order = [remaining.index(i) for i in keep]
        arr = np.transpose(summed, order) if order else summed
        return MarginalTable(
            attributes, tuple(self.shape[i] for i in keep), np.asarray(arr, float).ravel()
        )


def indif_of_joint(joint: np.ndarray) -> float:
    """InDif of a pair (paper section 4.1) from its 2-way counts, the 1-way counts being their
    sums: the L1 distance in counts between the joint and the product of its margins."""
    n = joint.sum()
    if n == 0:
        return 0.0
    independent = np.outer(joint.sum(axis=1), joint.sum(axis=0)) / n
    return float(np.abs(joint - independent).sum())


def cell_index(records: np.ndarray, rows: Sequence[int], shape: Sequence[int]) -> np.ndarray:
    """Flat cell index of every record for the attributes at ``rows`` of ``records``.

    32-bit when the marginal has fewer than 2^31 cells (always, in practice): it halves the
    memory traffic of GUM's hottest line.
    """
    dtype = np.int32 if prod(shape) < 2**31 else np.int64
    if len(rows) == 0:
        return np.zeros(records.shape[1], dtype=dtype)
    columns = [records[row] for row in rows]
    if records.T.flags.c_contiguous and len(rows) > 1:
        # record-major storage (GUM's arrays): one gather of all needed attributes is about
        # three times faster than reading each strided attribute on its own
        gathered = np.take(records.T, list(rows), axis=1)
        columns = [gathered[:, i] for i in range(len(rows))]
    index = columns[0].astype(dtype)
    for column, size in zip(columns[1:], shape[1:], strict=True):
        index *= size
        index += column
    return index


#: below this many record visits (rows x sets) a batch is counted in NumPy: importing numba
#: (about half a second) would cost more than it saves, as on Adult's 105 pairs
COMPILED_BATCH_FROM = 50_000_000


def count_marginals(
    records: np.ndarray, domain: Domain, attribute_sets: Sequence[Sequence[str]]
) -> list[MarginalTable]:
    """Exact counts of each marginal in ``attribute_sets``: one compiled pass per set over
    the byte columns when the batch is large, numba is installed and ``records`` is a
    C-contiguous ``(d, n)`` array (see :mod:`privsyn_core.count_kernel`), else
    :func:`count_marginal` set by set. The counts are identical either way."""
    sets = [tuple(s) for s in attribute_sets]
    if records.shape[1] * len(sets) >= COMPILED_BATCH_FROM and records.flags.c_contiguous:
        try:
            from privsyn_core.count_kernel import count_sets
        except ImportError:  # numba is the optional 'compiled' extra
            pass
        else:
            shapes = [tuple(domain.size(a) for a in s) for s in sets]
            counts = count_sets(records, [[domain.index(a) for a in s] for s in sets], shapes)
            return [
                MarginalTable(s, shape, c.astype(float))
                for s, shape, c in zip(sets, shapes, counts, strict=True)
            ]
    return [count_marginal(records, domain, s) for s in sets]


def count_marginal(records: np.ndarray, domain: Domain, attributes: Sequence[str]) -> MarginalTable:
    """Exact counts of the marginal on ``attributes`` (the private quantity, before noise)."""
    attributes = tuple(attributes)
    shape = tuple(domain.size(a) for a in attributes)
    rows = [domain.index(a) for a in attributes]
    counts = np.bincount(cell_index(records, rows, shape), minlength=prod(shape))
    return MarginalTable(attributes, shape, counts.astype(float))


@dataclass(frozen=True)
class NoisyMarginal:
    """A DP marginal: noisy counts plus the budget that bought them.

    ``rho`` is the zCDP cost of the whole table; every cell carries independent noise of
    standard deviation ``sigma`` (for grouped 1-way marginals, ``rho`` is the *effective*
    budget matching their average per-cell variance, which is what consistency weighs by;
    likewise for Laplace marginals, whose variance ``2 b^2 = 1 / rho_spent`` is that of a
    Gaussian bought with ``rho_spent / 2``: their ``rho`` is half the ledger's charge).
    """

    table: MarginalTable
    rho: float
    sigma: float

    @property
    def attributes(self) -> tuple[str, ...]:
        return self.table.attributes

    @property
    def cells(self) -> int:
        return self.table.cells
