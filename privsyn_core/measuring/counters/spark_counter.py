"""Counting on Spark: exact marginals of a pre-coded table where it lives, on a cluster or in
local mode (``local[N]``, N the cores this process may use).

The table is a Spark DataFrame: handed over through the API, a table of the session's
catalogue, or a Parquet or CSV path. Codes are checked against their declared domain in Spark
SQL first (a value that is missing, not a whole number or outside ``0..k-1`` stops the run,
with its column and value, named by the same query as the DuckDB backend's).

Why not the DuckDB backend's ``GROUPING SETS`` queries: Spark plans ``GROUPING SETS`` as an
``Expand`` that copies every row once per attribute set of the query before aggregating, so a
batch of 64 pairs moves 64 times the table through the aggregation (a 1M x 50 table on
``local[2]`` had not finished after 9 minutes; DuckDB counted it in about a minute). Instead,
each batch of attribute sets is one scan that counts partition by partition in NumPy
(``DataFrame.mapInArrow``). Spark packs the codes of the columns the batch needs into a few
63-bit words a row (:func:`_packing`; moving values to Python costs per value), and a task
gathers its Arrow batches of words into chunks of
:data:`CHUNK_ROWS` rows, turns them into a mixed-radix cell index per attribute set (the same
C-order index as :func:`privsyn_core.marginals.cell_index`) and adds ``np.bincount`` of it to
one count array per set. At the end of its partition it emits one row per set (the counts as
int64 bytes, dense, or as nonzero cells and their counts when that is smaller); an empty
partition emits nothing. The driver sums the partial counts. Counting is integer arithmetic,
so the sums are exact and do not depend on how the table is partitioned.

Memory stays bounded: a batch holds at most :data:`MAX_CELLS` cells of count arrays (a set
larger than that is counted alone), so a task needs ``8 * MAX_CELLS`` bytes of counts plus one
chunk of codes, and the driver receives at most one partial per set and partition. Only counts
come back to the driver, never rows. The function shipped to the executors is built here as a
closure over plain numbers that imports only NumPy and PyArrow, so executors need a Python
with those two (PySpark's own requirements for Arrow) and not this package; in local mode
:func:`spark_session` runs the workers on this interpreter.

Spark reads a Parquet file in parallel by row groups: a file written as one row group is
counted by one task, whatever the number of cores.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from math import prod
from pathlib import Path
from typing import Any

import numpy as np

from privsyn_core.data.io import file_delimiter
from privsyn_core.data.paths import is_parquet, spark_path
from privsyn_core.domain import Domain
from privsyn_core.errors import InputError
from privsyn_core.marginals import MarginalTable
from privsyn_core.measuring.counters.sql_counting import check_codes, declared_domain
from privsyn_core.spark_session import spark_session

#: count cells per scan: bounds each task's count arrays (8 bytes a cell) and each partial
#: sent to the driver; all 2-way marginals of a 50-column table with 40 codes a column are
#: about 2 million cells
MAX_CELLS = 1 << 22

#: bits of a word that carries packed codes from Spark to Python (see :func:`_packing`)
WORD_BITS = 63

#: rows a task gathers before one NumPy pass (Spark's Arrow batches are 10,000 rows by
#: default, too few to amortise a pass per attribute set)
CHUNK_ROWS = 1 << 16

#: the rows a counting task emits: attribute set (its position in the batch), whether the
#: payload is sparse, and the payload (int64 counts, or nonzero cells then their counts)
_PARTIAL_SCHEMA = "s INT, sparse BOOLEAN, payload BINARY"


def spark_frame(source: Any, *, spark: Any = None, master: str | None = None) -> tuple[Any, bool]:
    """A Spark DataFrame for ``source`` (a DataFrame, a catalogue table's name, or a Parquet
    or CSV path) and whether it was read from CSV text. A CSV file is read with its header and
    the delimiter the header line shows, as the in-memory reader does. A path is read as
    itself, never as a pattern (:func:`~privsyn_core.data.paths.spark_path`); a folder is read
    as Parquet parts."""
    if not isinstance(source, str | Path):
        return source, False
    session = spark or spark_session(master)
    path = Path(source)
    if is_parquet(path) or path.is_dir():
        return session.read.parquet(spark_path(path)), False
    if not path.is_file():
        return session.table(str(source)), False
    reader = (
        session.read.option("header", "true")
        .option("sep", file_delimiter(path))
        .option("quote", '"')
        .option("escape", '"')
    )
    # the columns from the header, read line by line: reading by records (quoted line breaks)
    # finds the header by listing the file's own path again as a pattern, so ``g[.csv`` fails
    # and ``g?.csv`` could take a header from ``g1.csv``; given the columns, it reads only rows
    name = spark_path(path)
    columns = reader.csv(name).schema
    return reader.option("multiLine", "true").schema(columns).csv(name), True


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


@dataclass(eq=False)
class SparkCounter:
    """Exact counts of attribute sets over a pre-coded Spark DataFrame (see the module
    docstring). ``domain`` declares each column's number of codes."""

    frame: Any
    domain: Domain
    #: count cells per scan (see :data:`MAX_CELLS`)
    max_cells: int = MAX_CELLS
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
        frame, _ = spark_frame(source, spark=spark, master=master)
        return cls(frame, declared_domain(frame.columns, sizes))

    def _check_codes(self) -> None:
        """Refuse values that are not codes of their column. One aggregation counts the rows
        with any value missing, outside ``0..k-1`` or (for a column that is not of an integer
        type: CSV text, doubles) not a whole number; a single output column keeps it in Spark's
        generated code, which is switched off past 100 output columns (``min``, ``max`` and
        missing count of 50 columns took about a minute on 1M rows). Only when it finds a bad
        row does the shared SQL check run, to name the column and the value."""
        from pyspark.sql.types import ByteType, IntegerType, LongType, ShortType

        def first_row(query: str) -> tuple:
            return tuple(self._spark.sql(query.format(table=self._view)).collect()[0])

        types = {f.name: f.dataType for f in self.frame.schema.fields}
        integral = (ByteType, ShortType, IntegerType, LongType)
        valid = " AND ".join(
            f"c{i} >= 0 AND c{i} < {size}"
            + ("" if isinstance(types[a], integral) else f" AND TRY_CAST(r{i} AS DOUBLE) = c{i}")
            for i, (a, size) in enumerate(
                zip(self.domain.attributes, self.domain.sizes, strict=True)
            )
        )
        (bad,) = first_row(f"SELECT count_if(NOT coalesce({valid}, false)) FROM {{table}}")
        if bad:
            check_codes(self.domain, first_row)
            raise InputError(f"the table has {bad} rows with a value outside its declared codes")

    def count(self, attribute_sets: Sequence[tuple[str, ...]]) -> list[MarginalTable]:
        sets = [tuple(s) for s in attribute_sets]
        out: dict[tuple[str, ...], MarginalTable] = {}
        for batch in _batches(self.domain, list(dict.fromkeys(sets)), self.max_cells):
            out.update(self._count_batch(batch))
        return [out[s] for s in sets]

    def _count_batch(self, sets: list[tuple[str, ...]]) -> dict[tuple[str, ...], MarginalTable]:
        """One scan: the sets' counts, partition by partition, summed on the driver."""
        index = {a: i for i, a in enumerate(self.domain.attributes)}
        used = list(dict.fromkeys(index[a] for s in sets for a in s))
        position = {i: k for k, i in enumerate(used)}
        shapes = [tuple(self.domain.size(a) for a in s) for s in sets]
        columns = [[position[index[a]] for a in s] for s in sets]
        layout = _packing([self.domain.sizes[i] for i in used])
        words = [
            " | ".join(
                f"shiftleft(c{used[k]}, {offset})"
                for k, (w, offset, _) in enumerate(layout)
                if w == j
            )
            for j in range(layout[-1][0] + 1 if layout else 0)
        ]
        selected = (
            ", ".join(f"{word} AS w{j}" for j, word in enumerate(words))
            or "0 AS w0"  # a batch of only the empty set still counts rows
        )
        frame = self._spark.sql(f"SELECT {selected} FROM {self._view}")
        partials = frame.mapInArrow(
            _partition_counter(layout, shapes, columns, CHUNK_ROWS), _PARTIAL_SCHEMA
        ).collect()
        totals = [np.zeros(prod(shape), dtype=np.int64) for shape in shapes]
        for k, sparse, payload in partials:
            values = np.frombuffer(payload, dtype="<i8")
            if sparse:
                half = values.size // 2
                totals[k][values[:half]] += values[half:]
            else:
                totals[k] += values
        return {
            s: MarginalTable(s, shape, counts.astype(float))
            for s, shape, counts in zip(sets, shapes, totals, strict=True)
        }


def _packing(sizes: list[int]) -> list[tuple[int, int, int]]:
    """Where each column's codes travel: ``(word, bit offset, mask)``, codes packed into 63-bit
    words (``BIGINT`` columns, sign bit unused), each column in as many bits as its largest
    code needs. Spark fills the words in generated code; the Arrow transfer to Python, which
    costs per value and column, carries a few words a row instead of one value a column
    (50 columns of up to 40 codes: 5 words)."""
    layout: list[tuple[int, int, int]] = []
    word, free = -1, 0
    for size in sizes:
        bits = max(1, (size - 1).bit_length())
        if bits > free:
            word, free = word + 1, WORD_BITS
        layout.append((word, WORD_BITS - free, (1 << bits) - 1))
        free -= bits
    return layout


def _batches(
    domain: Domain, sets: list[tuple[str, ...]], max_cells: int
) -> Iterator[list[tuple[str, ...]]]:
    """``sets`` in order, grouped so that a group's marginals hold at most ``max_cells`` cells
    (a larger set alone)."""
    batch: list[tuple[str, ...]] = []
    cells = 0
    for s in sets:
        size = domain.cells(s)
        if batch and cells + size > max_cells:
            yield batch
            batch, cells = [], 0
        batch.append(s)
        cells += size
    if batch:
        yield batch


def _partition_counter(
    layout: list[tuple[int, int, int]],
    shapes: list[tuple[int, ...]],
    columns: list[list[int]],
    chunk_rows: int,
) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The function each task runs over its partition's Arrow batches of packed words: exact
    counts of the attribute sets whose domain sizes are ``shapes`` and whose codes are the
    columns ``columns`` (positions in ``layout``, see :func:`_packing`), as partial rows of
    :data:`_PARTIAL_SCHEMA`.

    Built as a closure over plain lists and importing only NumPy and PyArrow, so Spark ships it
    by value and executors do not need this package."""

    def count_partition(batches: Iterator[Any]) -> Iterator[Any]:
        from math import prod

        import numpy as np
        import pyarrow as pa

        counts = [np.zeros(prod(shape), dtype=np.int64) for shape in shapes]
        seen = 0

        def add(chunk: list[Any]) -> None:
            table = pa.Table.from_batches(chunk)
            n = table.num_rows
            words = [table.column(j).to_numpy() for j in range(table.num_columns)]
            codes = [(words[w] >> offset) & mask for w, offset, mask in layout]
            cell = np.empty(n, dtype=np.int64)
            for total, shape, cols in zip(counts, shapes, columns, strict=True):
                if not cols:
                    total[0] += n
                    continue
                if len(cols) == 1:
                    total += np.bincount(codes[cols[0]], minlength=total.size)
                    continue
                np.multiply(codes[cols[0]], shape[1], out=cell, dtype=np.int64)
                np.add(cell, codes[cols[1]], out=cell, dtype=np.int64)
                for col, size in zip(cols[2:], shape[2:], strict=True):
                    np.multiply(cell, size, out=cell)
                    np.add(cell, codes[col], out=cell, dtype=np.int64)
                total += np.bincount(cell, minlength=total.size)

        pending: list[Any] = []
        rows = 0
        for batch in batches:
            if batch.num_rows == 0:
                continue
            pending.append(batch)
            rows += batch.num_rows
            if rows >= chunk_rows:
                add(pending)
                seen += rows
                pending, rows = [], 0
        if pending:
            add(pending)
            seen += rows
        if not seen:
            return  # an empty partition adds nothing
        out_sets: list[int] = []
        out_sparse: list[bool] = []
        out_payload: list[bytes] = []
        size = 0
        for k, total in enumerate(counts):
            nonzero = np.flatnonzero(total)
            sparse = 2 * nonzero.size < total.size
            payload = np.concatenate([nonzero, total[nonzero]]) if sparse else total
            out_sets.append(k)
            out_sparse.append(bool(sparse))
            out_payload.append(payload.astype("<i8").tobytes())
            size += len(out_payload[-1])
            if size >= 1 << 26 or k == len(counts) - 1:  # Arrow batches of at most ~64 MB
                yield pa.RecordBatch.from_arrays(
                    [
                        pa.array(out_sets, pa.int32()),
                        pa.array(out_sparse, pa.bool_()),
                        pa.array(out_payload, pa.binary()),
                    ],
                    names=["s", "sparse", "payload"],
                )
                out_sets, out_sparse, out_payload, size = [], [], [], 0

    return count_partition
