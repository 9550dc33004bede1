"""From a user's table to the engine's integer array and back.

This issue's inputs: integer-coded columns with a declared number of codes (as in
``adult-domain.json``) and categorical columns whose categories are declared (a list in the
domain, or a pandas ``Categorical`` dtype). Domains are declared by the data owner and are
public; nothing here reads a domain off the private values, and every value is checked
against its declaration with an error that names the column and the value.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from privsyn_core.data.codecs import CodesCodec
from privsyn_core.data.values import canonical_text, categories_as_text
from privsyn_core.domain import Domain, code_dtype
from privsyn_core.errors import TableError
from privsyn_core.limits import check_codes, check_pairs

DomainSpec = Mapping[str, int | Sequence[object]]


def _codec_for(name: str, column: pd.Series, spec: int | Sequence[object] | None) -> CodesCodec:
    if spec is None:
        if isinstance(column.dtype, pd.CategoricalDtype):
            categories = tuple(column.dtype.categories)
            return CodesCodec(name, len(categories), categories, column.dtype)
        raise TableError(
            f"column {name!r} has no declared domain: give its number of codes "
            f"(integer-coded columns) or its list of categories in the domain"
        )
    if (
        isinstance(spec, bool)
        or not isinstance(spec, int | np.integer | Sequence)
        or isinstance(spec, str)
    ):
        raise TableError(
            f"domain of column {name!r} must be a number of codes or a list of categories, "
            f"got {spec!r}"
        )
    if isinstance(spec, int | np.integer):
        if spec < 1:
            raise TableError(f"column {name!r} is declared with {spec} codes; it needs at least 1")
        return CodesCodec(name, int(spec), None, column.dtype)
    categories = tuple(spec)
    if not categories:
        raise TableError(f"column {name!r} is declared with an empty list of categories")
    repeated = _repeated(categories)
    if repeated is not None:
        raise TableError(
            f"column {name!r} lists the category {repeated!r} more than once; "
            f"list each category once in the domain"
        )
    return CodesCodec(name, len(categories), categories, column.dtype)


def _repeated(categories: Sequence[object]) -> str | None:
    """The first category listed twice (as text), or None; linear (a set, never list.count:
    a million categories once took minutes)."""
    seen: set[object] = set()
    for category in categories:
        key = category if isinstance(category, str | int | float | bool) else str(category)
        if key in seen:
            return str(category)
        seen.add(key)
    return None


def check_domain_spec(spec: DomainSpec) -> None:
    """Refuse a declared domain that asks for more codes than a column, or a pair of
    columns, may have (:mod:`privsyn_core.limits`), before anything is built from it."""
    sizes = []
    for name, declared in spec.items():
        if isinstance(declared, int | np.integer) and not isinstance(declared, bool):
            check_codes(str(name), int(declared), "codes")
            sizes.append((str(name), int(declared)))
        elif isinstance(declared, Sequence) and not isinstance(declared, str):
            check_codes(str(name), len(declared), "categories")
            sizes.append((str(name), len(declared)))
    check_pairs(sizes)


def _encode_column(column: pd.Series, codec: CodesCodec) -> np.ndarray:
    name = codec.name
    values = column.to_numpy()
    # a pre-coded column read as text is factorised once (parsed once per distinct value: it
    # holds few), and its codes mark the missing values (-1) as isna would, without a
    # second pass over the text
    as_text = codec.categories is None and values.dtype.kind not in "iuf"
    if as_text:
        positions, distinct = pd.factorize(column)
        missing = positions < 0
    else:
        missing = column.isna().to_numpy()
    if missing.any():
        row = int(np.flatnonzero(missing)[0])
        raise TableError(
            f"column {name!r} has a missing value (first at row {row}, counting from 0); "
            f"this version needs "
            f"complete rows: drop or fill the missing values first"
        )
    if codec.categories is None:
        if as_text:
            parsed = pd.to_numeric(pd.Series(distinct, dtype=object), errors="coerce")
            numeric = pd.Series(parsed.to_numpy()[positions], index=column.index)
            if numeric.isna().any() or values.dtype.kind == "b":
                at = (
                    int(np.flatnonzero(numeric.isna().to_numpy())[0]) if numeric.isna().any() else 0
                )
                raise TableError(
                    f"column {name!r} is declared with {codec.size} integer codes but holds "
                    f"the non-numeric value {_plain(values[at])!r} (row {at}); declare its "
                    f"categories instead"
                )
            values = numeric.to_numpy()
        if values.dtype.kind == "f" and not np.all(np.mod(values, 1) == 0):
            bad = values[np.flatnonzero(np.mod(values, 1) != 0)[0]]
            raise TableError(
                f"column {name!r} holds the non-integer value {_plain(bad)!r}; "
                f"codes must be whole numbers 0..{codec.size - 1}"
            )
        codes = values.astype(np.int64)
        outside = (codes < 0) | (codes >= codec.size)
        if outside.any():
            at = int(np.flatnonzero(outside)[0])
            raise TableError(
                f"column {name!r} holds the code {_plain(codes[at])} (row {at}), outside its "
                f"declared range 0..{codec.size - 1}; fix the value or declare a larger domain"
            )
        return codes
    # matched by canonical text, one value at a time: "1", 1 and 1.0 are the same category
    as_objects = canonical_text(column).to_numpy(dtype=object)
    codes = pd.Index(categories_as_text(codec.categories)).get_indexer(as_objects)
    codes = codes.astype(np.int64)
    if (codes < 0).any():
        unknown = sorted({str(v) for v in as_objects[codes < 0]})[:5]
        raise TableError(
            f"column {name!r} holds values not among its declared categories: "
            f"{', '.join(repr(u) for u in unknown)}; add them to the domain or fix the data"
        )
    return codes


def _plain(value: object) -> object:
    """A numpy scalar as the Python value it holds, so messages read 2.5, not np.float64(2.5)."""
    return value.item() if isinstance(value, np.generic) else value


def require_frame(table: object) -> pd.DataFrame:
    """``table`` if it is a DataFrame with rows and columns; else a :class:`TableError`."""
    if not isinstance(table, pd.DataFrame):
        raise TableError(f"expected a pandas DataFrame, got {type(table).__name__}")
    if table.shape[1] == 0:
        raise TableError("the table has no columns")
    if table.shape[0] == 0:
        raise TableError("the table has no rows: there is nothing to synthesise from")
    return table


def encode_table(
    table: pd.DataFrame, domain: DomainSpec | None = None
) -> tuple[np.ndarray, Domain, tuple[CodesCodec, ...]]:
    """Check ``table`` against its declared domain and return ``(records, domain, codecs)``.

    ``records`` has shape ``(d, n)``, smallest unsigned dtype that holds every code.
    """
    require_frame(table)
    names = [str(c) for c in table.columns]
    if len(set(names)) != len(names):
        raise TableError("column names must be unique")
    spec = dict(domain or {})
    check_domain_spec(spec)
    extra = [k for k in spec if k not in names]
    if extra:
        raise TableError(
            f"the domain declares columns the table does not have: {', '.join(map(repr, extra))}"
        )
    codecs = tuple(
        _codec_for(name, table.iloc[:, i], spec.get(name)) for i, name in enumerate(names)
    )
    largest = max(c.size for c in codecs)
    dtype = code_dtype(largest)
    records = np.empty((len(codecs), table.shape[0]), dtype=dtype)
    for i, codec in enumerate(codecs):
        records[i] = _encode_column(table.iloc[:, i], codec)
    return records, Domain(tuple(names), tuple(c.size for c in codecs)), codecs


def decode_table(records: np.ndarray, codecs: Sequence[CodesCodec]) -> pd.DataFrame:
    """Build the output DataFrame once, from the final array (columns in input order)."""
    return pd.concat([codec.decode(records[i]) for i, codec in enumerate(codecs)], axis=1)
