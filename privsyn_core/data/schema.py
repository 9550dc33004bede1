"""The public schema of a table: what each column is and what values it may take.

A schema is the data owner's declaration. Whatever it states (categories, bounds, bin edges,
whether values may be missing) is treated as public knowledge and costs no privacy budget;
whatever it leaves open is estimated privately from the data and paid for from the budget
(:mod:`privsyn_core.measuring.private_domain`). :func:`infer_schema` drafts a schema by reading the
data: such a draft is *not* public knowledge until the owner has reviewed it and decided that
nothing in it is sensitive, and it says so.

The JSON form (``version`` 1)::

    {"version": 1, "columns": [
        {"name": "age", "kind": "numeric", "integer": true, "lower": 17, "upper": 90,
         "bins": 74, "missing": false},
        {"name": "workclass", "kind": "categorical", "categories": ["Private", "State-gov"],
         "missing": true},
        {"name": "visit", "kind": "datetime", "datetime_format": "%Y-%m-%d"},
        {"name": "bill_length_mm", "decimals": 1},
        {"name": "id", "exclude": true},
        {"name": "income"}
    ]}

Every key but ``name`` is optional; absent means "not declared". An undeclared ``kind`` (and
``integer``, ``decimals`` and ``datetime_format``) is decided from DP counts of how the values
read (:mod:`privsyn_core.measuring.structure`); an undeclared ``missing`` gives the column a
missing code whose rate PrivSyn measures. ``"datetime_format": "datetime64"`` keeps pandas
datetimes in the output instead of text.

``decimals`` (0 .. 15) is the precision of a numeric column's output: decoded values carry no
more decimals than that, and 0 writes whole numbers. It is output formatting only (it changes
nothing that is measured), so it may be declared without the kind: it applies if the column
turns out numeric. Undeclared, it is counted privately with the kinds when the structure
step runs for the column (its kind or whole-number flag undeclared): the fewest decimals that
all but 1% of the numbers fit. Otherwise (``"integer": false`` declared with the kind), or when
the numbers have more than 4 decimals, the precision comes from the bin width
(:func:`privsyn_core.data.codecs.default_decimals`: a tenth of the narrowest bin), which is
public or DP. :func:`infer_schema` drafts ``decimals`` by the same rule, read off the data.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from enum import StrEnum
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from privsyn_core.data.inputs import read_declaration
from privsyn_core.data.rules import Rule, check_rules, rules_from_json
from privsyn_core.data.values import (
    canonical_text,
    fewest_decimals,
    parse_numbers,
    written_decimals,
)
from privsyn_core.errors import InputError
from privsyn_core.file_schemas import SCHEMA_COLUMN, SCHEMA_FILE, check_file
from privsyn_core.limits import MAX_MAGNITUDE, check_codes, check_pairs

SCHEMA_VERSION = 1

#: integer columns with at most this many distinct values are treated as categorical
CATEGORICAL_INTEGER_LIMIT = 20
#: a column whose distinct values are at least this share of its rows looks like an ID
ID_SHARE = 0.95
#: default number of bins for a numeric column whose bins are not declared
DEFAULT_BINS = 32
#: the most decimals a schema may declare (a double holds about 15 significant digits)
MAX_DECIMALS = 15


class Kind(StrEnum):
    CATEGORICAL = "categorical"
    NUMERIC = "numeric"
    DATETIME = "datetime"


class Provenance(StrEnum):
    """Where a column's domain comes from; shown next to every column in the dashboard."""

    DECLARED = "declared"
    PRIVATE = "private estimate"
    RAW = "raw data, not private"


@dataclass(frozen=True)
class ColumnSchema:
    """One column's declaration. ``None`` means "not declared" for every optional field."""

    name: str
    #: None: not declared, decided privately from DP counts
    #: (:mod:`privsyn_core.measuring.structure`)
    kind: Kind | None = None
    categories: tuple[Any, ...] | None = None
    lower: float | None = None
    upper: float | None = None
    bins: int | None = None
    edges: tuple[float, ...] | None = None
    integer: bool | None = None
    datetime_format: str | None = None
    missing: bool | None = None
    exclude: bool = False
    reason: str = field(default="", compare=False)
    #: decimals of the output's numbers (numeric columns); None: from the bin width
    decimals: int | None = None
    #: a row id: not modelled, written as fresh ids 1..n (True); never one (False); None:
    #: decided privately for text and whole-number columns
    #: (:mod:`privsyn_core.measuring.identifiers`)
    identifier: bool | None = None

    def __post_init__(self) -> None:
        self._check_types()
        if self.kind is None:
            declared = [
                key
                for key in ("categories", "lower", "upper", "edges", "bins", "integer",
                            "datetime_format")
                if getattr(self, key) is not None
            ]  # fmt: skip
            if declared:
                raise InputError(
                    f"column {self.name!r} declares {declared[0]!r} but not its kind; "
                    f'add "kind": one of {", ".join(k.value for k in Kind)}'
                )
        elif not isinstance(self.kind, Kind):
            try:
                object.__setattr__(self, "kind", Kind(self.kind))
            except ValueError:
                raise InputError(
                    f"column {self.name!r}: unknown kind {self.kind!r}; use one of "
                    f"{', '.join(k.value for k in Kind)}"
                ) from None
        if self.categories is not None:
            categories = tuple(self.categories)
            if len(set(categories)) != len(categories):  # linear: a set, never list.count
                raise InputError(f"column {self.name!r}: a category is listed twice")
            if not categories:
                raise InputError(f"column {self.name!r}: the list of categories is empty")
            object.__setattr__(self, "categories", categories)
        if self.edges is not None:
            edges = tuple(float(e) for e in self.edges)
            if len(edges) < 2 or any(b <= a for a, b in pairwise(edges)):
                raise InputError(
                    f"column {self.name!r}: bin edges must be at least two increasing numbers"
                )
            object.__setattr__(self, "edges", edges)
        if self.lower is not None and self.upper is not None and self.lower > self.upper:
            raise InputError(
                f"column {self.name!r}: lower bound {self.lower} is above upper bound {self.upper}"
            )
        if self.bins is not None and self.bins < 1:
            raise InputError(f"column {self.name!r}: bins must be at least 1, got {self.bins}")
        if self.decimals is not None:
            if self.kind in (Kind.CATEGORICAL, Kind.DATETIME):
                raise InputError(
                    f"column {self.name!r}: 'decimals' applies to numeric columns only, but "
                    f"the column is declared {self.kind.value}; remove 'decimals' or declare "
                    f'"kind": "numeric"'
                )
            if self.integer and self.decimals > 0:
                raise InputError(
                    f'column {self.name!r}: declared whole numbers ("integer": true) with '
                    f"{self.decimals} decimals; set 'decimals' to 0 or remove one of them"
                )

    def _check_types(self) -> None:
        def fail(key: str, wanted: str) -> None:
            raise InputError(
                f"column {self.name!r}: {key!r} must be {wanted}, got {getattr(self, key)!r}"
            )

        def number(value: object) -> bool:
            return (
                isinstance(value, int | float | np.integer | np.floating)
                and not isinstance(value, bool)
                and abs(float(value)) <= MAX_MAGNITUDE  # also refuses inf and NaN
            )

        if not isinstance(self.name, str) or not self.name:
            raise InputError(f"a schema column needs a non-empty text name, got {self.name!r}")
        if self.categories is not None and (
            isinstance(self.categories, str | bytes)
            or not isinstance(self.categories, list | tuple)
        ):
            fail("categories", "a list of values")
        if self.categories is not None:
            # before anything is built from the list: its length, then what it holds
            check_codes(self.name, len(self.categories), "categories")
            if not all(isinstance(c, _CATEGORY_TYPES) for c in self.categories):
                wrong = next(c for c in self.categories if not isinstance(c, _CATEGORY_TYPES))
                raise InputError(
                    f"column {self.name!r}: a category must be text, a number or true/false, "
                    f"got {type(wrong).__name__} {_short(wrong)}"
                )
        for key in ("lower", "upper"):
            if getattr(self, key) is not None and not number(getattr(self, key)):
                fail(key, _WITHIN)
        if self.bins is not None and (
            isinstance(self.bins, bool) or not isinstance(self.bins, int | np.integer)
        ):
            fail("bins", "a whole number")
        if self.bins is not None:
            check_codes(self.name, int(self.bins), "bins")
        if self.edges is not None and not isinstance(self.edges, list | tuple):
            fail("edges", f"a list of numbers, each {_WITHIN}")
        if self.edges is not None:
            check_codes(self.name, len(self.edges), "bin edges")
            if not all(number(e) for e in self.edges):
                fail("edges", f"a list of numbers, each {_WITHIN}")
        for key in ("integer", "missing", "identifier"):
            if getattr(self, key) is not None and not isinstance(getattr(self, key), bool):
                fail(key, "true, false or absent")
        if not isinstance(self.exclude, bool):
            fail("exclude", "true or false")
        if self.decimals is not None and (
            isinstance(self.decimals, bool)
            or not isinstance(self.decimals, int | np.integer)
            or not 0 <= self.decimals <= MAX_DECIMALS
        ):
            fail("decimals", f"a whole number from 0 to {MAX_DECIMALS}")
        if self.datetime_format is not None and not isinstance(self.datetime_format, str):
            fail("datetime_format", "a strftime format such as %Y-%m-%d")

    @property
    def declared_codes(self) -> int | None:
        """How many codes the declaration fixes (categories, bins or bin edges), None if it
        fixes none; a missing code, if any, comes on top."""
        if self.exclude or self.kind is None:
            return None
        if self.kind is Kind.CATEGORICAL:
            return None if self.categories is None else len(self.categories)
        if self.edges is not None:
            return len(self.edges) - 1
        return self.bins

    @property
    def has_domain(self) -> bool:
        """Whether the declaration fixes the column's values without looking at the data."""
        if self.kind is None:
            return False
        if self.kind is Kind.CATEGORICAL:
            return self.categories is not None
        if self.edges is not None:
            return True
        return self.lower is not None and self.upper is not None

    def to_json(self) -> dict[str, Any]:
        out = {k: v for k, v in asdict(self).items() if v is not None and k != "reason"}
        if self.kind is not None:
            out["kind"] = self.kind.value
        if not self.exclude:
            out.pop("exclude")
        for key in ("categories", "edges"):
            if key in out:
                out[key] = list(out[key])
        if self.reason:
            out["reason"] = self.reason
        return out


@dataclass(frozen=True)
class Schema:
    """All columns of a table, in order, and the rules the synthetic rows keep
    (:mod:`privsyn_core.data.rules`)."""

    columns: tuple[ColumnSchema, ...]
    version: int = SCHEMA_VERSION
    rules: tuple[Rule, ...] = ()

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for column in self.columns:  # linear: a set, never list.count
            if column.name in seen:
                raise InputError(f"the schema lists column {column.name!r} more than once")
            seen.add(column.name)
        synthesised = [c.name for c in self.columns if not c.exclude and not c.identifier]
        check_rules(self.rules, synthesised)
        check_pairs(
            (c.name, c.declared_codes) for c in self.columns if c.declared_codes is not None
        )

    def __getitem__(self, name: str) -> ColumnSchema:
        for column in self.columns:
            if column.name == name:
                return column
        raise KeyError(name)

    @classmethod
    def undeclared(cls, names: Sequence[object]) -> Schema:
        """Every column with nothing declared: its structure and domain are decided privately."""
        return cls(tuple(ColumnSchema(str(name)) for name in names))

    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    def included(self) -> tuple[ColumnSchema, ...]:
        return tuple(c for c in self.columns if not c.exclude)

    def with_column(self, column: ColumnSchema) -> Schema:
        return replace(
            self, columns=tuple(column if c.name == column.name else c for c in self.columns)
        )

    def with_declared(self, entry: Mapping[str, Any]) -> Schema:
        """This schema with the fields of ``entry`` (a schema column's JSON, with its name)
        declared on that column, its other declarations kept; unknown names change nothing."""
        name = entry.get("name")
        if name not in self.names():
            return self
        current = {k: v for k, v in asdict(self[str(name)]).items() if v is not None}
        return self.with_column(ColumnSchema(**{**current, **entry}))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "version": self.version,
            "columns": [c.to_json() for c in self.columns],
        }
        if self.rules:
            out["rules"] = [rule.to_json() for rule in self.rules]
        return out

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2, default=_json_scalar)

    @classmethod
    def from_json(cls, data: Any) -> Schema:
        if not isinstance(data, dict) or not isinstance(data.get("columns"), list):
            raise InputError('a schema must be a JSON object with a "columns" list')
        check_file(data, SCHEMA_FILE, "the schema", _FIX)  # its parts' types and sizes
        unknown_keys = sorted(set(data) - {"version", "columns", "rules"})
        if unknown_keys:
            raise InputError(
                f"the schema has an unknown key {unknown_keys[0]!r}; known keys are columns, "
                "rules and version"
            )
        version = data.get("version", SCHEMA_VERSION)
        if version != SCHEMA_VERSION:
            raise InputError(
                f"schema version {version!r} is not supported; this version reads "
                f"version {SCHEMA_VERSION}"
            )
        known = set(ColumnSchema.__dataclass_fields__)
        columns = []
        for i, entry in enumerate(data["columns"]):
            if not isinstance(entry, dict) or "name" not in entry:
                raise InputError(f'schema column {i} needs at least a "name"')
            named = repr(entry["name"]) if isinstance(entry["name"], str) else str(i)
            check_file(entry, SCHEMA_COLUMN, f"schema column {named}", _FIX, whole="it")
            unknown = sorted(set(entry) - known)
            if unknown:
                raise InputError(
                    f"schema column {entry['name']!r}: unknown key {unknown[0]!r}; known keys "
                    f"are {', '.join(sorted(known))}"
                )
            columns.append(ColumnSchema(**entry))
        names = [c.name for c in columns]
        return cls(tuple(columns), version, rules_from_json(data.get("rules"), names))

    @classmethod
    def load(cls, path: str | Path) -> Schema:
        return cls.from_json(read_declaration(path, "schema file"))


#: what to do about a schema file of the wrong shape
_FIX = "fix that field ('privsyn schema infer' drafts a schema with every field in its type)"

#: what a declared bound or bin edge must be
_WITHIN = f"a number from -{MAX_MAGNITUDE:.3g} to {MAX_MAGNITUDE:.3g} (2^62; rescale larger values)"

#: what a declared category may be (JSON's text, numbers and true/false, or numpy's)
_CATEGORY_TYPES = (str, int, float, bool, np.generic)


def _short(value: object) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 40 else text[:37] + "..."


def _json_scalar(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"cannot write {type(value).__name__} to JSON")


DRAFT_WARNING = (
    "This schema was read off the data. It is NOT public knowledge: categories, bounds and "
    "missing-value flags can reveal individuals. Review every column; keep only what you "
    "would publish anyway, and delete the rest so it is estimated privately."
)


def infer_schema(
    table: pd.DataFrame,
    *,
    categorical_limit: int = CATEGORICAL_INTEGER_LIMIT,
    id_share: float = ID_SHARE,
    bins: int = DEFAULT_BINS,
) -> Schema:
    """Draft a schema from the data, with the reason for each column's kind.

    The draft declares what it saw (categories, bounds, missing values); read
    :data:`DRAFT_WARNING` before treating any of it as public.
    """
    columns = []
    for name in table.columns:
        columns.append(_infer_column(str(name), table[name], categorical_limit, id_share, bins))
    return Schema(tuple(columns))


def kind_from_type(dtype: object) -> tuple[Kind, str] | None:
    """The kind a column type fixes on its own (booleans, categoricals, datetimes), or None
    when the values or the caller must decide."""
    if pd.api.types.is_bool_dtype(dtype):
        return Kind.CATEGORICAL, "boolean column type -> categorical"
    if isinstance(dtype, pd.CategoricalDtype):
        return Kind.CATEGORICAL, "categorical column type -> categorical"
    if pd.api.types.is_datetime64_any_dtype(dtype):
        return Kind.DATETIME, "datetime column type -> datetime"
    return None


def detect_kind(
    column: pd.Series,
    *,
    categorical_limit: int = CATEGORICAL_INTEGER_LIMIT,
) -> tuple[Kind, str]:
    """The kind a column's values suggest, and why (in words a data owner can check)."""
    values = column.dropna()
    distinct = int(values.nunique())
    dtype = column.dtype
    decided = kind_from_type(dtype)
    if decided is not None:
        return decided
    if pd.api.types.is_integer_dtype(dtype):
        if distinct <= categorical_limit:
            return (
                Kind.CATEGORICAL,
                f"integer with {distinct} distinct values (<= {categorical_limit}) -> categorical",
            )
        return Kind.NUMERIC, f"integer with {distinct} distinct values -> numeric"
    if pd.api.types.is_float_dtype(dtype):
        whole = bool(len(values)) and bool(np.all(np.mod(values.to_numpy(), 1) == 0))
        if whole and distinct <= categorical_limit:
            return (
                Kind.CATEGORICAL,
                f"whole numbers with {distinct} distinct values (<= {categorical_limit}) "
                f"-> categorical",
            )
        return Kind.NUMERIC, f"numbers with {distinct} distinct values -> numeric"
    text = values.astype(str)
    if len(text) and _looks_like_dates(text):
        return Kind.DATETIME, "text that parses as dates -> datetime"
    numeric = pd.to_numeric(text, errors="coerce")
    if len(text) and numeric.notna().all():
        if distinct <= categorical_limit:
            return (
                Kind.CATEGORICAL,
                f"numbers written as text, {distinct} distinct values -> categorical",
            )
        return Kind.NUMERIC, "numbers written as text -> numeric"
    return Kind.CATEGORICAL, f"text with {distinct} distinct values -> categorical"


def _looks_like_dates(text: pd.Series) -> bool:
    sample = text.head(200)
    if not sample.str.contains(r"\d{1,4}[-/.]\d{1,2}[-/.]\d{1,4}", regex=True).all():
        return False
    parsed = pd.to_datetime(sample, errors="coerce", format="mixed")
    return bool(parsed.notna().all())


def _infer_column(
    name: str, column: pd.Series, categorical_limit: int, id_share: float, bins: int
) -> ColumnSchema:
    kind, reason = detect_kind(column, categorical_limit=categorical_limit)
    values = column.dropna()
    missing = bool(column.isna().any())
    distinct = int(values.nunique())
    if distinct <= 1:
        return ColumnSchema(
            name,
            kind,
            exclude=True,
            missing=missing,
            reason=f"{reason}; excluded: constant column (one value), nothing to learn",
        )
    if kind is Kind.CATEGORICAL and len(values) >= 20 and distinct >= id_share * len(values):
        return ColumnSchema(
            name,
            kind,
            missing=missing,
            identifier=True,
            reason=f"{reason}; {distinct} distinct values in {len(values)} rows looks like "
            "an identifier: written as fresh ids 1..n, not modelled",
        )
    if kind is Kind.CATEGORICAL:
        categories = tuple(_plain(v) for v in sorted(values.unique(), key=_sort_key))
        return ColumnSchema(name, kind, categories=categories, missing=missing, reason=reason)
    if kind is Kind.DATETIME:
        stamps = pd.to_datetime(values, errors="coerce", format="mixed")
        is_text = not pd.api.types.is_datetime64_any_dtype(values.dtype)
        fmt = _guess_format(str(values.iloc[0])) if is_text else None
        seconds = pd.Series((stamps - pd.Timestamp("1970-01-01")) / pd.Timedelta(seconds=1))
        return ColumnSchema(
            name,
            kind,
            lower=float(seconds.min()),
            upper=float(seconds.max()),
            bins=bins,
            datetime_format=fmt,
            missing=missing,
            reason=reason,
        )
    numbers = pd.to_numeric(values, errors="coerce")
    integer = bool(np.all(np.mod(numbers.to_numpy(dtype=float), 1) == 0))
    lower, upper = float(numbers.min()), float(numbers.max())
    # whole numbers over a short range get one bin per value
    column_bins = int(upper - lower + 1) if integer and upper - lower + 1 <= bins else bins
    return ColumnSchema(
        name,
        kind,
        lower=lower,
        upper=upper,
        bins=column_bins,
        integer=integer,
        missing=missing,
        reason=reason,
        decimals=None if integer else _draft_decimals(values),
    )


def _draft_decimals(values: pd.Series) -> int | None:
    """The decimals of a draft's numeric column: the fewest that all but
    :data:`~privsyn_core.data.values.DECIMAL_SHARE` of its numbers fit, as written (the
    structure step's rule, on exact counts); None (undeclared) beyond :data:`MAX_DECIMALS`."""
    text = canonical_text(values)
    text = text[~np.isnan(parse_numbers(text))]
    places = written_decimals(text)
    if not len(places):
        return None
    by_places = np.bincount(np.minimum(places, MAX_DECIMALS + 1), minlength=MAX_DECIMALS + 2)
    decimals = fewest_decimals(by_places[1:], float(len(places)))
    return None if decimals is None or decimals > MAX_DECIMALS else decimals


def _guess_format(example: str) -> str | None:
    for fmt in (
        "%Y-%m-%d",
        "%Y-%m-%d %H:%M:%S",
        "%d/%m/%Y",
        "%m/%d/%Y",
        "%Y/%m/%d",
        "%Y/%m/%d %H:%M:%S",
    ):
        try:
            pd.to_datetime(example, format=fmt)
        except (ValueError, TypeError):
            continue
        return fmt
    return None


def _plain(value: Any) -> Any:
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return value


def _sort_key(value: Any) -> tuple[str, Any]:
    return (type(value).__name__, value)
