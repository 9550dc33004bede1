"""Counting on DuckDB: exact marginals of a pre-coded table in a CSV or Parquet file, counted
out of core, so a table larger than memory never comes into Python.

DuckDB scans the file (streaming, spilling to disk past its memory limit) and answers each
batch of attribute sets with one ``GROUP BY GROUPING SETS`` query. Codes are checked against
their declared domain in SQL first: a value that is missing, not a whole number or outside
``0..k-1`` stops the run with its column and value, before anything is measured.

This backend reads integer-coded tables (``--domain`` with numbers of codes); raw tables,
whose encoding (categories, bins, the structure step) would also have to happen in SQL, are
read by the in-memory backend.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from privsyn_core.domain import Domain
from privsyn_core.errors import InputError
from privsyn_core.marginals import MarginalTable

#: attribute sets counted per query (one GROUPING SETS clause each)
BATCH = 64
#: DuckDB's own memory cap; past it, aggregation spills to a temporary folder
MEMORY_LIMIT = "2GB"


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _source(path: Path) -> str:
    literal = "'" + str(path).replace("'", "''") + "'"
    if path.suffix.lower() in (".parquet", ".pq"):
        return f"read_parquet({literal})"
    return f"read_csv({literal}, header = true, all_varchar = true)"


@dataclass(eq=False)
class DuckDBCounter:
    """Exact counts of attribute sets over a pre-coded table file (see the module docstring).

    ``domain`` declares each column's number of codes; its names must be the file's columns.
    """

    path: Path
    domain: Domain
    _connection: object = field(init=False, repr=False)

    def __post_init__(self) -> None:
        import duckdb  # imported only when this backend is chosen

        self.path = Path(self.path)
        if not self.path.is_file():
            raise InputError(f"cannot read {self.path}: no such file")
        self._connection = duckdb.connect(config={"memory_limit": MEMORY_LIMIT})
        try:
            names = [row[0] for row in self._sql(f"DESCRIBE SELECT * FROM {_source(self.path)}")]
        except duckdb.Error as exc:
            raise InputError(f"{self.path} is not a readable table ({exc})") from None
        missing = [a for a in self.domain.attributes if a not in names]
        if missing:
            raise InputError(
                f"the domain declares column {missing[0]!r}, which {self.path.name} does not "
                "have; fix the domain or the file"
            )
        codes = ", ".join(
            f"TRY_CAST({_quoted(a)} AS BIGINT) AS c{i}, {_quoted(a)} AS r{i}"
            for i, a in enumerate(self.domain.attributes)
        )
        self._sql(f"CREATE VIEW coded AS SELECT {codes} FROM {_source(self.path)}")
        self._check_codes()

    @classmethod
    def for_file(cls, path: Path, sizes: dict[str, int]) -> DuckDBCounter:
        """A counter over ``path`` with the file's columns in their order, each declared in
        ``sizes`` (a column the domain leaves out is an error, as in memory)."""
        import duckdb

        if not Path(path).is_file():
            raise InputError(f"cannot read {path}: no such file")
        try:
            with duckdb.connect() as connection:
                described = connection.execute(
                    f"DESCRIBE SELECT * FROM {_source(Path(path))}"
                ).fetchall()
        except duckdb.Error as exc:
            raise InputError(f"{path} is not a readable table ({exc})") from None
        names = [row[0] for row in described]
        undeclared = [n for n in names if n not in sizes]
        if undeclared:
            raise InputError(
                f"column {undeclared[0]!r} has no declared domain: give its number of codes "
                "in the domain"
            )
        return cls(Path(path), Domain(tuple(names), tuple(sizes[n] for n in names)))

    def _sql(self, query: str) -> list[tuple]:
        return self._connection.execute(query).fetchall()  # type: ignore[attr-defined]

    def _check_codes(self) -> None:
        """One scan: per column, the first value that is not a code of its declared domain."""
        checks = ", ".join(
            f"min(r{i}) FILTER (WHERE c{i} IS NULL OR c{i} < 0 OR c{i} >= {size} "
            f"OR TRY_CAST(r{i} AS DOUBLE) != c{i})"
            for i, size in enumerate(self.domain.sizes)
        )
        (row,) = self._sql(f"SELECT {checks} FROM coded")
        for name, size, bad in zip(self.domain.attributes, self.domain.sizes, row, strict=True):
            if bad is not None:
                raise InputError(
                    f"column {name!r} holds {bad!r}, not a code 0..{size - 1} of its declared "
                    "domain; fix the value or declare a larger domain"
                )
        (nulls,) = self._sql(
            "SELECT "
            + ", ".join(f"count(*) - count(r{i})" for i in range(len(self.domain)))
            + " FROM coded"
        )
        for name, count in zip(self.domain.attributes, nulls, strict=True):
            if count:
                raise InputError(
                    f"column {name!r} has a missing value; a pre-coded table needs a code in "
                    "every cell"
                )

    def count(self, attribute_sets: Sequence[tuple[str, ...]]) -> list[MarginalTable]:
        return count_by_grouping_sets(self.domain, attribute_sets, self._grouped)

    def _grouped(self, query: str) -> list[tuple]:
        return self._sql(query.format(table="coded", grouping="GROUPING"))


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
