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

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from privsyn_core.data.paths import duckdb_reader
from privsyn_core.domain import Domain
from privsyn_core.errors import InputError
from privsyn_core.marginals import MarginalTable
from privsyn_core.measuring.counters.sql_counting import (
    check_codes,
    count_by_grouping_sets,
    declared_domain,
)

if TYPE_CHECKING:
    import duckdb

#: DuckDB's own memory cap; past it, aggregation spills to a temporary folder
MEMORY_LIMIT = "2GB"


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def coded_columns(attributes: Sequence[str]) -> str:
    """The select list of a coded relation (:mod:`.sql_counting`): each attribute's code
    ``c{i}`` (``NULL`` where it is not a whole number) and its raw value ``r{i}``."""
    return ", ".join(
        f"TRY_CAST({_quoted(a)} AS BIGINT) AS c{i}, {_quoted(a)} AS r{i}"
        for i, a in enumerate(attributes)
    )


@dataclass(eq=False)
class DuckDBCounter:
    """Exact counts of attribute sets over a pre-coded table file (see the module docstring).

    ``domain`` declares each column's number of codes; its names must be the file's columns.
    """

    path: Path
    domain: Domain
    _connection: duckdb.DuckDBPyConnection = field(init=False, repr=False)
    #: where a pattern-free link to the file lies while the counter reads it (see
    #: :func:`~privsyn_core.data.paths.duckdb_path`); removed with the counter
    _folder: tempfile.TemporaryDirectory = field(init=False, repr=False)

    def __post_init__(self) -> None:
        import duckdb  # imported only when this backend is chosen

        self.path = Path(self.path)
        if not self.path.is_file():
            raise InputError(f"cannot read {self.path}: no such file")
        self._connection = duckdb.connect(config={"memory_limit": MEMORY_LIMIT})
        self._folder = tempfile.TemporaryDirectory(prefix="privsyn-duckdb-")
        source = duckdb_reader(self.path, Path(self._folder.name))
        try:
            names = [row[0] for row in self._sql(f"DESCRIBE SELECT * FROM {source}")]
        except duckdb.Error as exc:
            raise InputError(f"{self.path} is not a readable table ({exc})") from None
        missing = [a for a in self.domain.attributes if a not in names]
        if missing:
            raise InputError(
                f"the domain declares column {missing[0]!r}, which {self.path.name} does not "
                "have; fix the domain or the file"
            )
        codes = coded_columns(self.domain.attributes)
        self._sql(f"CREATE VIEW coded AS SELECT {codes} FROM {source}")
        self._check_codes()

    @classmethod
    def for_file(cls, path: Path, sizes: dict[str, int]) -> DuckDBCounter:
        """A counter over ``path`` with the file's columns in their order, each declared in
        ``sizes`` (a column the domain leaves out is an error, as in memory)."""
        import duckdb

        if not Path(path).is_file():
            raise InputError(f"cannot read {path}: no such file")
        try:
            with tempfile.TemporaryDirectory(prefix="privsyn-") as folder, duckdb.connect() as db:
                described = db.execute(
                    f"DESCRIBE SELECT * FROM {duckdb_reader(path, Path(folder))}"
                ).fetchall()
        except duckdb.Error as exc:
            raise InputError(f"{path} is not a readable table ({exc})") from None
        return cls(Path(path), declared_domain([row[0] for row in described], sizes))

    def _sql(self, query: str) -> list[tuple]:
        return self._connection.execute(query).fetchall()

    def _check_codes(self) -> None:
        check_codes(self.domain, lambda query: self._sql(query.format(table="coded"))[0])

    def count(self, attribute_sets: Sequence[tuple[str, ...]]) -> list[MarginalTable]:
        return count_by_grouping_sets(self.domain, attribute_sets, self._grouped)

    def _grouped(self, query: str) -> list[tuple]:
        return self._sql(query.format(table="coded", grouping="GROUPING"))
