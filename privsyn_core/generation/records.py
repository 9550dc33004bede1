"""The synthetic table's layout in memory: record-major codes.

GUM's duplications copy whole records, so a record's codes lie next to each other (one
record a row of ``n_attributes`` small integers): a copy moves bytes proportional to the
record, not strided writes across every attribute's column. Callers convert to and from
attribute-major columns here only.
"""

from __future__ import annotations

import numpy as np


def record_words(records: np.ndarray) -> np.ndarray:
    """Records as rows of 64-bit words when each is a whole number of words stored
    contiguously (as :func:`record_major` builds them); else an empty array."""
    by_record = records.T
    if by_record.flags.c_contiguous and (by_record.shape[1] * by_record.itemsize) % 8 == 0:
        return by_record.view(np.uint64)
    return np.empty((0, 0), dtype=np.uint64)


def record_major(n_attributes: int, n_records: int, dtype: np.dtype) -> np.ndarray:
    """An attribute-by-record array view stored record by record, each record padded to
    whole 8-byte words, so GUM's duplications copy words instead of bytes. The padding
    attributes (rows ``n_attributes`` and up) stay zero and no target refers to them.

    Reading one attribute is a strided gather, slower than from an attribute-major array,
    but a GUM update reads two or three attributes and may duplicate tens of thousands of
    records of all attributes, so on wide tables this layout is about twice as fast.
    """
    itemsize = np.dtype(dtype).itemsize
    padded = -(-n_attributes * itemsize // 8) * 8 // itemsize
    return np.zeros((n_records, padded), dtype=dtype).T


#: records per block of the transposing copies below (a block of both layouts stays in cache)
_TRANSPOSE_BLOCK = 8192


def columns_of(records: np.ndarray, n_attributes: int | None = None) -> np.ndarray:
    """The first ``n_attributes`` (default all) attributes of ``records`` as a C-contiguous
    attribute-major ``(attributes, n)`` array.

    Copied block by block of records: NumPy's own transposing copy of a record-major byte
    array walks one attribute at a time across the whole table and is ten times slower
    (seconds at 600,000 x 100).
    """
    k = records.shape[0] if n_attributes is None else n_attributes
    n = records.shape[1]
    out = np.empty((k, n), dtype=records.dtype)
    for lo in range(0, n, _TRANSPOSE_BLOCK):
        out[:, lo : lo + _TRANSPOSE_BLOCK] = records[:k, lo : lo + _TRANSPOSE_BLOCK]
    return out


def fill_record_major(records: np.ndarray, columns: np.ndarray) -> None:
    """``records[:k] = columns`` for a record-major ``records``, block by block (see
    :func:`columns_of`)."""
    k, n = columns.shape
    for lo in range(0, n, _TRANSPOSE_BLOCK):
        records[:k, lo : lo + _TRANSPOSE_BLOCK] = columns[:, lo : lo + _TRANSPOSE_BLOCK]
