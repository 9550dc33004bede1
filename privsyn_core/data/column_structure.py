"""A column's structure: its kind, whole-number flag, date format and decimals, each declared
by the schema or settled by the structure step, with where the choice came from.

:func:`needs_structure` says whether a schema leaves a column's structure open (the
structure step then measures it privately, :mod:`privsyn_core.measuring.structure`), and
:func:`resolve` fills the open choices from that step's decision. A :class:`PreparedColumn`
carries the choices to the user: every page and message that shows what a run decided reads
them, with their provenance, from here.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import pandas as pd

from privsyn_core.data.codecs import ColumnCodec
from privsyn_core.data.schema import ColumnSchema, Kind, Provenance, Schema, kind_from_type
from privsyn_core.measuring.structure import StructureDecision


@dataclass(frozen=True)
class StructureChoice:
    """One structural choice about a column (its kind, whole numbers, date format, missing
    values, domain), what was chosen, and where the choice came from."""

    name: str
    value: str
    provenance: Provenance


@dataclass(frozen=True)
class PreparedColumn:
    """A column's codec, where its domain came from, a note for the user, and every
    structural choice with its provenance."""

    codec: ColumnCodec
    provenance: Provenance
    note: str = ""
    choices: tuple[StructureChoice, ...] = ()


def needs_structure(spec: ColumnSchema) -> bool:
    """Whether a structural choice of ``spec`` is left open (and must be measured)."""
    if spec.kind is None:
        return True
    if spec.kind is Kind.NUMERIC:
        return spec.integer is None
    if spec.kind is Kind.DATETIME:
        return spec.datetime_format is None
    return False


def schema_from_dtypes(table: pd.DataFrame) -> Schema:
    """A schema that *declares* each column's kind from its pandas type, with the reason.

    Only for types that are public: set by the data owner, or a typed file's declared
    types the owner confirms as public. Types pandas inferred from the values are not: one
    record can change them. Without a schema the engine decides kinds privately instead.
    """
    columns = []
    for name in table.columns:
        kind, reason = _kind_of_dtype(table[name])
        columns.append(ColumnSchema(str(name), kind, reason=reason))
    return Schema(tuple(columns))


def _kind_of_dtype(column: pd.Series) -> tuple[Kind, str]:
    dtype = column.dtype
    decided = kind_from_type(dtype)
    if decided is not None:
        return decided
    if pd.api.types.is_integer_dtype(dtype):
        return Kind.NUMERIC, (
            "integer column type -> numeric (one bin per value over a short range, so small "
            "codes behave as categories)"
        )
    if pd.api.types.is_numeric_dtype(dtype):
        return Kind.NUMERIC, "number column type -> numeric, binned"
    return Kind.CATEGORICAL, "text column type -> categorical"


def resolve(
    spec: ColumnSchema, decision: StructureDecision, source: Provenance
) -> tuple[ColumnSchema, list[StructureChoice]]:
    """``spec`` with its open structural choices filled in from ``decision``."""
    kind = spec.kind if spec.kind is not None else decision.kind
    kind_source = Provenance.DECLARED if spec.kind is not None else source
    integer, fmt, decimals = spec.integer, spec.datetime_format, spec.decimals
    choices = [StructureChoice("kind", kind.value, kind_source)]
    decided_decimals: StructureChoice | None = None
    if kind is Kind.NUMERIC:
        if integer is None and spec.decimals:
            # declared decimals say the values have fractional parts: that is public, and a
            # noisy "whole numbers" (likely on a small table) must not contradict it
            integer = False
            choices.append(StructureChoice("whole numbers", "no", Provenance.DECLARED))
        elif integer is None:
            integer = decision.integer
            choices.append(StructureChoice("whole numbers", _yes(integer), source))
        else:
            choices.append(StructureChoice("whole numbers", _yes(integer), Provenance.DECLARED))
        if not integer and decimals is None and decision.decimals:
            # the decimals the structure step counted (None: more than it counts, or a
            # declared "integer": false it contradicts: the bins' precision then)
            decimals = decision.decimals
            decided_decimals = StructureChoice(
                "decimals", f"{decimals} (counted with the kinds)", source
            )
    elif kind is Kind.DATETIME:
        if fmt is None:
            fmt = decision.datetime_format
            choices.append(StructureChoice("date format", fmt, source))
        else:
            choices.append(StructureChoice("date format", fmt, Provenance.DECLARED))
    if decided_decimals is not None:
        choices.append(decided_decimals)
    reason = join(spec.reason, decision.reason if source is not Provenance.DECLARED else "")
    resolved = replace(
        spec, kind=kind, integer=integer, datetime_format=fmt, decimals=decimals, reason=reason
    )
    return resolved, choices


def declared_choices(spec: ColumnSchema) -> list[StructureChoice]:
    """The structural choices of a column the schema settles in full, all declared."""
    assert spec.kind is not None
    choices = [StructureChoice("kind", spec.kind.value, Provenance.DECLARED)]
    if spec.kind is Kind.NUMERIC:
        choices.append(StructureChoice("whole numbers", _yes(spec.integer), Provenance.DECLARED))
    elif spec.kind is Kind.DATETIME:
        choices.append(
            StructureChoice("date format", str(spec.datetime_format), Provenance.DECLARED)
        )
    return choices


def _yes(flag: bool | None) -> str:
    return "yes" if flag else "no"


def join(*parts: str) -> str:
    """The non-empty ``parts`` as one note, separated by semicolons."""
    return "; ".join(p for p in parts if p)
