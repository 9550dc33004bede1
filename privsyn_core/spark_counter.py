"""Counting on Spark: exact marginals of a pre-coded table where it lives, on a cluster or in
``local[2]`` mode, with the same ``GROUPING SETS`` queries as the DuckDB backend.

The table is a Spark DataFrame: handed over through the API, a table of the session's
catalogue, or a Parquet or CSV path. Codes are checked against their declared domain in Spark
first (a value that is missing, not a whole number or outside ``0..k-1`` stops the run, with its
column and value); then every batch of attribute sets is one query. Only counts come back to
the driver, never rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from privsyn_core.domain import Domain
from privsyn_core.errors import InputError
from privsyn_core.marginals import MarginalTable
from privsyn_core.sql_counting import check_codes, count_by_grouping_sets

#: the master a session is started with when none is given: both cores of this machine
DEFAULT_MASTER = "local[2]"


def spark_session(master: str | None = None) -> Any:
    """A Spark session (the running one if there is one), quiet and without its web UI."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName("privsyn").config("spark.ui.enabled", "false")
    builder = builder.config("spark.sql.shuffle.partitions", "8")
    return builder.master(master or DEFAULT_MASTER).getOrCreate()


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


@dataclass(eq=False)
class SparkCounter:
    """Exact counts of attribute sets over a pre-coded Spark DataFrame (see the module
    docstring). ``domain`` declares each column's number of codes."""

    frame: Any
    domain: Domain
    _view: str = field(init=False, repr=False)

    def __post_init__(self) -> None:
        names = list(self.frame.columns)
        missing = [a for a in self.domain.attributes if a not in names]
        if missing:
            raise InputError(
                f"the domain declares column {missing[0]!r}, which the table does not have"
            )
        self._view = f"privsyn_coded_{id(self)}"
        selected = ", ".join(
            f"TRY_CAST({_quoted(a)} AS BIGINT) AS c{i}, CAST({_quoted(a)} AS STRING) AS r{i}"
            for i, a in enumerate(self.domain.attributes)
        )
        self.frame.createOrReplaceTempView(f"{self._view}_raw")
        self._spark.sql(
            f"CREATE OR REPLACE TEMP VIEW {self._view} AS SELECT {selected} FROM {self._view}_raw"
        )
        self._check_codes()

    @property
    def _spark(self) -> Any:
        return self.frame.sparkSession

    @classmethod
    def for_source(
        cls, source: Any, sizes: Mapping[str, int], *, spark: Any = None, master: str | None = None
    ) -> SparkCounter:
        """A counter over a Spark DataFrame, a catalogue table's name, or a Parquet or CSV path,
        with the table's columns in their order, each declared in ``sizes``."""
        if isinstance(source, str | Path):
            session = spark or spark_session(master)
            path = Path(source)
            if path.suffix.lower() in (".parquet", ".pq") or path.is_dir():
                frame = session.read.parquet(str(path))
            elif path.is_file():
                frame = session.read.option("header", "true").csv(str(path))
            else:
                frame = session.table(str(source))
        else:
            frame = source
        undeclared = [c for c in frame.columns if c not in sizes]
        if undeclared:
            raise InputError(
                f"column {undeclared[0]!r} has no declared domain: give its number of codes "
                "in the domain"
            )
        columns = tuple(frame.columns)
        return cls(frame, Domain(columns, tuple(int(sizes[c]) for c in columns)))

    def _check_codes(self) -> None:
        def first_row(query: str) -> tuple:
            return tuple(self._spark.sql(query.format(table=self._view)).collect()[0])

        check_codes(self.domain, first_row)

    def count(self, attribute_sets: Sequence[tuple[str, ...]]) -> list[MarginalTable]:
        return count_by_grouping_sets(self.domain, attribute_sets, self._grouped)

    def _grouped(self, query: str) -> list[tuple]:
        sql = query.format(table=self._view, grouping="grouping_id")
        return [tuple(row) for row in self._spark.sql(sql).collect()]
