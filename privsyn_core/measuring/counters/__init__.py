"""The counting backends: where the private table is read, in memory, on DuckDB or on Spark.
They read rows, so they sit inside the private boundary; everything they return is an exact
aggregate that a measurement (:mod:`privsyn_core.measuring`) adds noise to before it leaves.

The interface, the only names code outside this package uses:

* :class:`Counter`: the exact marginals of batches of attribute sets over an encoded table,
  the one door to the rows for PrivSyn's own measurements (1-way marginals, InDif, the
  selected marginals). :class:`ArrayCounter` counts an in-memory code array;
  :class:`RecodedCounter` turns declared-code counts into engine-code counts (paper 5.3).
* :class:`RawTable`: what the preparation of a raw table reads (value-class counts, value
  counts, :class:`Numbers` on public grids, and its encoded :class:`Counter`).
  :class:`FrameTable` reads a pandas DataFrame.

The backends, each a module named for its engine: :mod:`.counting` and :mod:`.reading`
(memory), :mod:`.sql_encoding` (a raw table as a :class:`RawTable` in SQL, for DuckDB and
Spark: ``sql_table``), :mod:`.duckdb_counter` and :mod:`.spark_counter` (pre-coded files and
frames), :mod:`.sql_counting` (the ``GROUPING SETS`` queries and code checks they share).

What they need from :mod:`privsyn_core.data`, all public there: how a file is named to an
engine (:mod:`~privsyn_core.data.paths`), a CSV file's delimiter
(:func:`~privsyn_core.data.io.file_delimiter`), how each value reads
(:mod:`~privsyn_core.data.values`) and the codecs that encode it
(:mod:`~privsyn_core.data.codecs`).
"""

from privsyn_core.measuring.counters.counting import ArrayCounter, Counter, RecodedCounter
from privsyn_core.measuring.counters.reading import FrameTable, Numbers, RawTable

__all__ = ["ArrayCounter", "Counter", "FrameTable", "Numbers", "RawTable", "RecodedCounter"]
