"""A column's domain: its categories or its bins, declared, estimated privately, or (the demo
shortcut, not DP) read off the data; and the codec that lays the column out in codes.

:func:`prepare_domain` runs one estimate for a column whose structure is settled
(:mod:`privsyn_core.data.column_structure`): thresholded noisy counts for categories
(:func:`~privsyn_core.measuring.private_domain.categories_from_counts`), a noisy log-grid
histogram for a range (:func:`~privsyn_core.measuring.private_domain.range_from_histogram`).
The order of the estimates and how the budget is split among them is the column plan's
(:func:`privsyn_core.data.columns.prepare_columns`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from privsyn_core.data.codecs import BinnedCodec, CategoryCodec, equal_width_edges
from privsyn_core.data.column_structure import PreparedColumn, StructureChoice, join
from privsyn_core.data.number_bins import (
    MAX_INTEGER_BINS,
    declared_amount_bins,
    estimated_bins,
)
from privsyn_core.data.schema import DEFAULT_BINS, ColumnSchema, Kind, Provenance
from privsyn_core.errors import InputError
from privsyn_core.measuring.counters import RawTable
from privsyn_core.measuring.private_domain import (
    NoisyEvidence,
    PrivateCategories,
    PrivateRange,
    categories_from_counts,
    range_from_histogram,
)
from privsyn_core.privacy.ledger import FailedAfterSpending, Measurement
from privsyn_core.privacy.noise import NoiseSource


@dataclass(frozen=True)
class ColumnDomain:
    """One column's domain: its codec (None: left out), the estimate it paid for, the
    threshold a category had to clear and what a second estimate builds on: for a range
    that found nothing its evidence, for categories the estimate."""

    item: PreparedColumn | None
    spend: Measurement | None = None
    evidence: NoisyEvidence | None = None
    threshold: float | None = None
    second: bool = False
    categories: PrivateCategories | None = None
    #: a numeric column's bounds (DP, declared, or the demo's raw ones)
    bounds: tuple[float, float] | None = None
    #: the noisy count of a numeric column's values inside its DP bounds
    mass: float | None = None
    #: a numeric column's range estimate, which its released values are laid out with
    range: PrivateRange | None = None


def estimates_categories(spec: ColumnSchema) -> bool:
    """Whether the settled ``spec`` leaves its categories to a private estimate."""
    return spec.kind is Kind.CATEGORICAL and spec.categories is None


def estimates_range(spec: ColumnSchema) -> bool:
    """Whether the settled ``spec`` leaves a bound to a private estimate."""
    return (
        spec.kind in (Kind.NUMERIC, Kind.DATETIME)
        and spec.edges is None
        and (spec.lower is None or spec.upper is None)
    )


def why_left_out(spec: ColumnSchema, found: ColumnDomain) -> str:
    """Why a column whose domain estimate released nothing is left out, in words (the
    threshold and the noise are public: they follow from the budget alone)."""
    second = ", even after a second estimate" if found.second else ""
    if spec.kind is Kind.CATEGORICAL:
        need = ""
        if found.threshold is not None:
            need = f" (a value needs about {found.threshold:,.0f} rows)"
        return (
            f"no value was frequent enough to release privately at this budget{need}"
            f"{second}: free text or an identifier? Declare its categories (Data page, or a "
            "schema) to keep it"
        )
    noise = ""
    if found.evidence is not None:
        noise = f" (noise sigma {found.evidence.sigma:,.0f} per doubling)"
    return (
        f"its range could not be estimated privately at this budget: no doubling of its values "
        f"held enough rows for the noise{noise}{second}; most rows missing, or too few rows. "
        "Declare its bounds (Data page, or a schema) or use a larger epsilon"
    )


def prepare_domain(
    spec: ColumnSchema,
    choices: list[StructureChoice],
    table: RawTable,
    value_counts: Callable[[str], tuple[tuple[str, ...], np.ndarray]],
    rho: float,
    delta: float,
    rng: NoiseSource | np.random.Generator,
    raw: bool,
    prior: ColumnDomain | None = None,
    one_way_sigma: float | None = None,
) -> ColumnDomain:
    """The codec of a column whose structure is settled, and the domain estimate it paid
    (None when declared); no codec when the estimate released nothing (left out). ``prior``
    is the column's first estimate, which a second one adds to."""
    # missing values: declared, or a missing code whose rate the 1-way marginal measures
    may_be_missing = spec.missing is not False
    choices = [
        *choices,
        StructureChoice(
            "missing values",
            "allowed (rate measured privately)" if may_be_missing else "none",
            Provenance.DECLARED if spec.missing is not None else Provenance.PRIVATE,
        ),
    ]
    lenient = any(c.name == "kind" and c.provenance is not Provenance.DECLARED for c in choices)
    if spec.kind is Kind.CATEGORICAL:
        first = None if prior is None else prior.categories
        found = _categorical(spec, value_counts, may_be_missing, rho, delta, rng, raw, first)
    else:
        evidence = None if prior is None else prior.evidence
        found = _binned(
            spec, table, may_be_missing, lenient, rho, rng, raw, evidence, one_way_sigma
        )
    item = found.item
    if item is None:
        return found
    choices.append(StructureChoice("domain", item.note or "declared", item.provenance))
    if isinstance(item.codec, BinnedCodec) and not item.codec.datetime:
        precision = _precision_choice(spec, item, choices)
        choices = [c for c in choices if c.name != "decimals"] + [precision]
    item = replace(item, note=join(spec.reason, item.note), choices=tuple(choices))
    return replace(found, item=item)


def _precision_choice(
    spec: ColumnSchema, item: PreparedColumn, choices: list[StructureChoice]
) -> StructureChoice:
    """The decimals of the column's output: 0 for whole numbers (as sourced as that choice),
    declared, decided by the structure step (from its noisy counts of decimals), or else a
    tenth of the narrowest bin (:func:`~privsyn_core.data.codecs.default_decimals`), which
    comes from the edges and so has the domain's provenance."""
    codec = item.codec
    assert isinstance(codec, BinnedCodec)
    if codec.integer:
        whole = next(c.provenance for c in choices if c.name == "whole numbers")
        return StructureChoice("decimals", "0 (whole numbers)", whole)
    decided = next((c for c in choices if c.name == "decimals"), None)
    if decided is not None:
        return decided
    if spec.decimals is not None:
        return StructureChoice("decimals", str(spec.decimals), Provenance.DECLARED)
    return StructureChoice(
        "decimals", f"{codec.precision} (a tenth of the narrowest bin)", item.provenance
    )


def _categorical(
    spec: ColumnSchema,
    value_counts: Callable[[str], tuple[tuple[str, ...], np.ndarray]],
    may_be_missing: bool,
    rho: float,
    delta: float,
    rng: NoiseSource | np.random.Generator,
    raw: bool,
    prior: PrivateCategories | None = None,
) -> ColumnDomain:
    """A categorical column's categories: declared, read off the data (``raw``), or the
    values whose thresholded noisy counts clear the threshold; none released: left out."""
    if spec.categories is not None:
        codec = CategoryCodec(spec.name, spec.categories, False, may_be_missing)
        return ColumnDomain(PreparedColumn(codec, Provenance.DECLARED))
    values, counts = value_counts(spec.name)
    if raw:
        codec = CategoryCodec(spec.name, tuple(values), False, may_be_missing)
        return ColumnDomain(PreparedColumn(codec, Provenance.RAW, "categories read off the data"))
    estimate = categories_from_counts(spec.name, values, counts, rho, delta, rng, prior)
    found = ColumnDomain(
        None, estimate.measurement, threshold=estimate.threshold, categories=estimate
    )
    if not estimate.categories:
        return found
    codec = CategoryCodec(spec.name, estimate.categories, True, may_be_missing)
    note = f"{len(estimate.categories)} categories released; rarer values become '(other)'"
    if prior is not None and not prior.categories:
        note += " (second estimate)"
    return replace(found, item=PreparedColumn(codec, Provenance.PRIVATE, note))


def _binned(
    spec: ColumnSchema,
    table: RawTable,
    may_be_missing: bool,
    lenient: bool,
    rho: float,
    rng: NoiseSource | np.random.Generator,
    raw: bool,
    prior: NoisyEvidence | None = None,
    one_way_sigma: float | None = None,
) -> ColumnDomain:
    """A numeric or datetime column's bins: over declared edges or bounds, over the data's
    own bounds (``raw``), or over a range estimated privately from a noisy histogram (one
    bound may be declared); no range found: left out."""
    is_datetime = spec.kind is Kind.DATETIME
    integer = True if is_datetime else bool(spec.integer)
    probe = _binned_codec(spec, (0.0, 1.0), integer, may_be_missing, lenient)
    numbers = table.numbers(probe)  # refuses values that do not read, if declared so
    if spec.edges is not None:
        edges = spec.edges
        if integer:  # whole-number columns need whole-number edges
            edges = tuple(float(e) for e in np.unique(np.ceil(spec.edges)))
            if len(edges) < 2:
                raise InputError(
                    f"column {spec.name!r}: its bin edges hold no whole number; widen them"
                )
        codec = _binned_codec(spec, edges, integer, may_be_missing, lenient)
        return ColumnDomain(PreparedColumn(codec, Provenance.DECLARED))
    lower, upper = spec.lower, spec.upper
    if lower is not None and upper is not None:
        return _declared_bins(spec, lower, upper, integer, may_be_missing, lenient)
    if raw:
        bounds = numbers.bounds()
        if bounds is None:
            return ColumnDomain(None)
        lower = bounds[0] if lower is None else lower
        upper = bounds[1] if upper is None else upper
        found = _declared_bins(spec, lower, upper, integer, may_be_missing, lenient)
        assert found.item is not None
        item = replace(found.item, provenance=Provenance.RAW, note="bounds read off the data")
        return replace(found, item=item, bounds=(lower, upper))
    estimate = range_from_histogram(
        numbers.histogram, rho, rng, integer=integer, prior=prior, zero_spike=not is_datetime
    )
    spend = replace(estimate.measurement, attributes=(spec.name,))
    if estimate.lower is None or estimate.upper is None:
        return ColumnDomain(None, spend, estimate.evidence)
    if spec.lower is not None or spec.upper is not None:
        # one bound declared: it holds as declared, the other is estimated
        lower = estimate.lower if spec.lower is None else spec.lower
        upper = estimate.upper if spec.upper is None else spec.upper
        if lower > upper:
            raise FailedAfterSpending.holding(
                InputError(
                    f"column {spec.name!r}: the lower bound {lower:g} is above the upper "
                    f"bound {upper:g}; fix the bounds in the schema"
                ),
                (spend,),
            )
        found = _declared_bins(spec, lower, upper, integer, may_be_missing, lenient)
        assert found.item is not None
        note = f"bounds [{lower:g}, {upper:g}], one estimated privately"
        item = replace(found.item, provenance=Provenance.PRIVATE, note=note)
        return ColumnDomain(item, spend)
    note = f"bounds [{estimate.lower:g}, {estimate.upper:g}] estimated privately"
    if prior is not None:
        note += " (second estimate)"
    elif estimate.evidence is not None:
        note += " (coarse: whole doublings)"
    if estimate.zeros is not None:
        note += "; zero kept as a value of its own"
    codec = laid_codec(spec, estimate, may_be_missing, lenient, one_way_sigma)
    bounds = (estimate.lower, estimate.upper)
    mass = float(sum(estimate.cell_counts)) + (estimate.zeros or 0.0)
    item = PreparedColumn(codec, Provenance.PRIVATE, note)
    return ColumnDomain(
        item, spend, bounds=bounds, mass=mass if estimate.cell_counts else None, range=estimate
    )


def laid_codec(
    spec: ColumnSchema,
    estimate: PrivateRange,
    may_be_missing: bool,
    lenient: bool,
    one_way_sigma: float | None,
    values: tuple[tuple[float, float], ...] = (),
) -> BinnedCodec:
    """The codec of a column whose range (and frequent values) were estimated privately,
    its bins laid out by :func:`~privsyn_core.data.number_bins.estimated_bins`."""
    is_datetime = spec.kind is Kind.DATETIME
    integer = True if is_datetime else bool(spec.integer)
    step = 1.0 if integer else (10.0**-spec.decimals if spec.decimals else None)
    laid = estimated_bins(
        estimate,
        integer=integer,
        step=step,
        bins=spec.bins,
        one_way_sigma=one_way_sigma,
        tails=not is_datetime,
        values=values,
    )
    return replace(
        _binned_codec(spec, laid.edges, integer, may_be_missing, lenient),
        points=laid.points,
        log=laid.log,
        fall=laid.fall,
        rise=laid.rise,
        bounds=laid.bounds,
    )


def _declared_bins(
    spec: ColumnSchema,
    lower: float,
    upper: float,
    integer: bool,
    may_be_missing: bool,
    lenient: bool,
) -> ColumnDomain:
    """Bins over bounds that cost nothing (declared, or the demo's raw ones): equal widths,
    or, from zero over at least three orders of magnitude without declared bins (amounts:
    :func:`~privsyn_core.data.number_bins.declared_amount_bins`), zero alone and the rest on
    the log scale."""
    if lower > upper:
        raise InputError(
            f"column {spec.name!r}: the lower bound {lower:g} is above the upper bound "
            f"{upper:g}; fix the bounds in the schema"
        )
    step = 1.0 if integer else (10.0**-spec.decimals if spec.decimals else None)
    amounts = declared_amount_bins(lower, upper, integer=integer, step=step)
    if spec.bins is None and amounts is not None:
        codec = replace(
            _binned_codec(spec, amounts.edges, integer, may_be_missing, lenient),
            points=amounts.points,
            log=amounts.log,
        )
        return ColumnDomain(PreparedColumn(codec, Provenance.DECLARED))
    bins = spec.bins or (MAX_INTEGER_BINS if integer else DEFAULT_BINS)
    edges = equal_width_edges(lower, upper, bins, integer=integer)
    codec = _binned_codec(spec, edges, integer, may_be_missing, lenient)
    return ColumnDomain(PreparedColumn(codec, Provenance.DECLARED))


def _binned_codec(
    spec: ColumnSchema,
    edges: tuple[float, ...],
    integer: bool,
    may_be_missing: bool,
    lenient: bool,
) -> BinnedCodec:
    return BinnedCodec(
        spec.name,
        tuple(edges),
        integer=integer,
        missing=may_be_missing,
        datetime=spec.kind is Kind.DATETIME,
        datetime_format=spec.datetime_format,
        unparsed="missing" if lenient else "error",
        decimals=None if spec.kind is Kind.DATETIME else spec.decimals,
    )
