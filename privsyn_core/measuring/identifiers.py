"""Row identifiers found privately: columns whose values are (almost) all distinct.

A row id (``rownames``, ``uid``, a case number) holds no information about the other columns,
yet modelled as data it comes back with duplicates and shows dependence with every column in
the InDif heatmap (sorted ids follow whatever the file was sorted by). Such a column is not
modelled: the synthetic table gets fresh ids (1 to n, unique over the whole sample,
:mod:`privsyn_core.generation.identifiers`).

Whether a column is one is decided from a DP measurement, never from the values themselves:
the column's number of distinct present values and its number of present values, each with
Gaussian noise. One row moves each count by at most one, so the pair has L2 sensitivity
``sqrt(2)`` per row (``K sqrt(2)`` for a person of at most K rows), charged to the ledger as
step ``identifier``. The column is an identifier when its noisy distinct values are at least
:data:`NOISY_ID_SHARE` of its noisy present values, and those clear :data:`MIN_SIGMAS` sigmas (a
share of a handful of rows means nothing). Only the columns the domain estimates point to are
checked, from a reserve of the domain budget (:data:`IDENTIFIER_RESERVE`): text that released
no category (an id's values are all too rare to release), and whole numbers laid out as ids
(:func:`laid_out_as_ids`: unique amounts or timestamps are data). A schema may declare it
instead (``"identifier": true`` or ``false``), at no cost.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from privsyn_core.privacy.ledger import IDENTIFIER_SENSITIVITY as SENSITIVITY
from privsyn_core.privacy.ledger import Measurement
from privsyn_core.privacy.noise import NoiseSource, as_noise

#: share of the domain estimates' budget kept for the identifier checks, shared by the
#: columns the estimates point to (:func:`~privsyn_core.data.columns.prepare_columns`); a
#: run with none leaves it to PrivSyn's own steps
IDENTIFIER_RESERVE = 0.02
#: the noisy present values must exceed this many sigmas for the share to be read
MIN_SIGMAS = 20.0
#: the noisy distinct values must be at least this share of the noisy present values: under
#: the exact rule's 0.95 (:data:`~privsyn_core.data.schema.ID_SHARE`) by about two standard
#: deviations of the share's noise for one candidate of 5,574 rows at epsilon 1 (4.7%), so an
#: id of that size is found in about 98 runs in 100 (at 0.95, medexp's ids were missed in 2 of
#: 8 runs). Values drawn at random from four times as many numbers as rows are 88% distinct:
#: id-like, whatever they mean
NOISY_ID_SHARE = 0.9
#: a column of whole numbers is laid out as ids only over at least this many numbers (a
#: year or a code of a few values is not an id, whatever a small noisy count says)
MIN_ID_NUMBERS = 100
#: a column of whole numbers is laid out as ids when its range holds at most this many
#: numbers per row: the DP range reaches a power of two, often one doubling further
#: (medexp's ids 1 to 5,574 got [256, 16383], 2.9 numbers per row, and were modelled in 1 of
#: 3 runs at 2.0); amounts and timestamps spread over hundreds per row
RANGE_PER_VALUE = 4.0


@dataclass(frozen=True)
class DistinctCount:
    """A column's noisy counts of distinct and of present values, and their ledger entry."""

    column: str
    distinct: float
    present: float
    measurement: Measurement

    @property
    def unique(self) -> bool:
        """Whether the counts say the values are (almost) all distinct."""
        sigma = self.measurement.sigma
        return self.present > MIN_SIGMAS * sigma and self.distinct >= NOISY_ID_SHARE * self.present


def laid_out_as_ids(lower: float, upper: float, rows: float) -> bool:
    """Whether the whole numbers of the range ``[lower, upper]`` (DP) are about as many as
    the column's ``rows`` (noisy): from half as many (ids cut at a DP bound) to
    :data:`RANGE_PER_VALUE` times as many; amounts and dates spread over far more numbers,
    codes and counts over far fewer."""
    numbers = upper - lower + 1
    return numbers >= MIN_ID_NUMBERS and 0.5 * rows <= numbers <= RANGE_PER_VALUE * max(rows, 1.0)


def noisy_distinct(
    name: str, distinct: int, present: int, rho: float, noise: NoiseSource | np.random.Generator
) -> DistinctCount:
    """The exact ``distinct`` and ``present`` counts of column ``name`` with Gaussian noise
    of ``rho``-zCDP (see the module docstring)."""
    source = as_noise(noise)
    sigma = source.unit.sigma(rho, SENSITIVITY)
    noisy = source.add(np.array([distinct, present], dtype=float), sigma, integer=True)
    measurement = Measurement(
        step="identifier",
        attributes=(name,),
        sensitivity=source.unit.sensitivity(SENSITIVITY),
        rho=rho,
        sigma=sigma,
        n_queries=1,
        mechanism=f"{source.mechanism(integer=True)} on the counts of distinct and of "
        "present values",
    )
    return DistinctCount(name, float(noisy[0]), float(noisy[1]), measurement)
