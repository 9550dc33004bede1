"""Counting in SQL engines (DuckDB, Spark): the queries both backends share.

Both see the table as a relation whose columns ``c0, c1, ...`` hold the codes of the domain's
attributes (``NULL`` where a value is not a whole number) and ``r0, r1, ...`` the raw values,
so a bad value can be named.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from privsyn_core.domain import Domain
from privsyn_core.errors import InputError
from privsyn_core.marginals import MarginalTable

#: attribute sets counted per query (one GROUPING SETS clause each)
BATCH = 64


def declared_domain(columns: Sequence[str], sizes: Mapping[str, int]) -> Domain:
    """A pre-coded table's domain: its ``columns`` in their order, each with its number of
    codes in ``sizes`` (a column the domain leaves out is an error, as in memory)."""
    undeclared = [c for c in columns if c not in sizes]
    if undeclared:
        raise InputError(
            f"column {undeclared[0]!r} has no declared domain: give its number of codes "
            "in the domain"
        )
    return Domain(tuple(columns), tuple(int(sizes[c]) for c in columns))


def check_codes(domain: Domain, first_row: Callable[[str], Sequence[object]]) -> None:
    """Refuse a table with a value that is not a code ``0..k-1`` of its column, or a missing
    one, naming the column and the value (two scans). ``first_row`` runs a query (with a
    ``{table}`` placeholder) and returns its one row."""
    checks = ", ".join(
        f"min(r{i}) FILTER (WHERE c{i} IS NULL OR c{i} < 0 OR c{i} >= {size} "
        f"OR TRY_CAST(r{i} AS DOUBLE) != c{i})"
        for i, size in enumerate(domain.sizes)
    )
    row = first_row(f"SELECT {checks} FROM {{table}}")
    for name, size, bad in zip(domain.attributes, domain.sizes, row, strict=True):
        if bad is not None:
            raise InputError(
                f"column {name!r} holds {bad!r}, not a code 0..{size - 1} of its declared "
                "domain; fix the value or declare a larger domain"
            )
    nulls = ", ".join(f"count(*) - count(r{i})" for i in range(len(domain)))
    for name, count in zip(
        domain.attributes, first_row(f"SELECT {nulls} FROM {{table}}"), strict=True
    ):
        if count:
            raise InputError(
                f"column {name!r} has a missing value; a pre-coded table needs a code in every cell"
            )


def count_by_grouping_sets(
    domain: Domain,
    attribute_sets: Sequence[tuple[str, ...]],
    run: Callable[[str], list[tuple]],
) -> list[MarginalTable]:
    """Exact marginals of ``attribute_sets`` from SQL engines that speak ``GROUPING SETS``:
    :data:`BATCH` sets a query, on a relation whose columns ``c0, c1, ...`` hold the codes of
    ``domain``'s attributes. ``run`` fills ``{table}`` and ``{grouping}`` (the engine's name
    for the bitmask of left-out columns) and returns the rows."""
    sets = [tuple(s) for s in attribute_sets]
    unique = list(dict.fromkeys(sets))
    out: dict[tuple[str, ...], MarginalTable] = {}
    for start in range(0, len(unique), BATCH):
        out.update(_count_batch(domain, unique[start : start + BATCH], run))
    return [out[s] for s in sets]


def _count_batch(
    domain: Domain, sets: list[tuple[str, ...]], run: Callable[[str], list[tuple]]
) -> dict[tuple[str, ...], MarginalTable]:
    index = {a: i for i, a in enumerate(domain.attributes)}
    # columns in order of first appearance in the sets: the order Spark derives its grouping
    # columns in, which its grouping_id() must follow
    used = list(dict.fromkeys(index[a] for s in sets for a in s))
    columns = ", ".join(f"c{i}" for i in used)
    groups = ", ".join("(" + ", ".join(f"c{index[a]}" for a in s) + ")" for s in sets)
    rows = run(
        f"SELECT {columns}, {{grouping}}({columns}) AS g, count(*) AS n FROM {{table}} "
        f"GROUP BY GROUPING SETS ({groups})"
    )
    # the bitmask sets bit k (from the right, last column first) for each column left out
    bit = {i: 1 << (len(used) - 1 - k) for k, i in enumerate(used)}
    full = (1 << len(used)) - 1
    by_mask = {full & ~sum(bit[index[a]] for a in s): s for s in sets}
    counts = {s: np.zeros(domain.cells(s)) for s in sets}
    for row in rows:
        s = by_mask[int(row[-2])]
        codes = [int(row[used.index(index[a])]) for a in s]
        counts[s][np.ravel_multi_index(codes, tuple(domain.size(a) for a in s))] += row[-1]
    return {s: MarginalTable(s, tuple(domain.size(a) for a in s), counts[s]) for s in sets}
