"""The frequent values of a number column with decimals, released as categories are, and
laid out among its bins: the values the synthetic column may draw exactly.

A column of prices or rates often holds a few values that most rows share (9.99, 0.5); bins
alone would spread those rows over the bin's width. Releasing them costs a share of the
categories' budget and delta (thresholded noisy counts,
:func:`~privsyn_core.measuring.private_domain.categories_from_counts`), so only columns of a
kind decided privately, whose budget already reserves a threshold's delta, get it.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from privsyn_core.data.codecs import BinnedCodec
from privsyn_core.data.column_domains import ColumnDomain, laid_codec
from privsyn_core.data.column_structure import StructureChoice
from privsyn_core.data.schema import ColumnSchema, Kind, Provenance
from privsyn_core.data.values import parse_numbers
from privsyn_core.measuring.private_domain import PrivateCategories, categories_from_counts
from privsyn_core.privacy.noise import NoiseSource


def releases_values(spec: ColumnSchema, choices: list[StructureChoice]) -> bool:
    """Whether a numeric column gets its frequent values released: numbers with decimals
    (whole numbers over a short range get a bin per value anyway), of a kind decided
    privately (a threshold needs delta, reserved for the columns that may be categorical)."""
    kind = next((c for c in choices if c.name == "kind"), None)
    return (
        spec.kind is Kind.NUMERIC
        and spec.integer is False
        and kind is not None
        and kind.provenance is Provenance.PRIVATE
    )


def released_values(
    name: str,
    texts: tuple[str, ...],
    counts: np.ndarray,
    rho: float,
    delta: float,
    rng: NoiseSource | np.random.Generator,
) -> PrivateCategories:
    """A numeric column's frequent values released as categories are
    (:func:`~privsyn_core.measuring.private_domain.categories_from_counts`: thresholded noisy
    counts of each distinct number, however it is written, in increasing order): the values
    the output may draw exactly. Values that do not read as numbers are left out."""
    numbers = parse_numbers(pd.Series(texts, dtype=object))
    finite = np.isfinite(numbers)
    values, where = np.unique(numbers[finite], return_inverse=True)
    by_value = np.bincount(
        where, weights=np.asarray(counts, dtype=float)[finite], minlength=values.size
    )
    found = categories_from_counts(name, [float(v) for v in values], by_value, rho, delta, rng)
    mechanism = f"{found.measurement.mechanism}; values of a number column"
    return replace(found, measurement=replace(found.measurement, mechanism=mechanism))


def with_released(
    spec: ColumnSchema,
    found: ColumnDomain,
    values: PrivateCategories,
    one_way_sigma: float | None,
) -> ColumnDomain:
    """A numeric column's domain with its released values laid out among its bins."""
    if found.item is None or found.range is None or not values.categories:
        return found
    by_number = {
        float(v): c  # type: ignore[arg-type]  # numbers: released_values gives floats
        for v, c in zip(values.categories, values.counts, strict=True)
    }
    codec = found.item.codec
    assert isinstance(codec, BinnedCodec)
    laid = laid_codec(
        spec,
        found.range,
        codec.missing,
        codec.unparsed == "missing",
        one_way_sigma,
        tuple(by_number.items()),
    )
    note = f"{found.item.note}; {len(by_number)} frequent values released"
    return replace(found, item=replace(found.item, codec=laid, note=note))
