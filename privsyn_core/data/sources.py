"""Where the private table comes from, and which engine counts it.

A run's source is a pandas DataFrame, the path of a CSV (with a header) or Parquet file, or,
on Spark, a Spark DataFrame or a catalogue table. The engine says where it is counted:

* ``"numpy"``: in memory (a path is read with :func:`privsyn_core.data.io.read_table`);
* ``"duckdb"``: out of core, where the file lies
  (:mod:`privsyn_core.measuring.counters.sql_encoding`);
* ``"spark"``: where the data lives, on a cluster or in local mode (``local[N]``, N the
  cores this process may use).

A path is a path: both engines' file readers take a path as a glob pattern, so a file named
``g*.csv`` was read together with ``g1.csv`` and ``g2.csv`` beside it while the privacy budget
was charged to ``g*.csv`` alone. :func:`duckdb_path` and :func:`spark_path` give each engine a
name that reads exactly the file named (:mod:`privsyn_core.data.paths`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, TypeAlias

import pandas as pd

from privsyn_core.data.table import require_frame
from privsyn_core.errors import InputError

Engine = Literal["numpy", "duckdb", "spark"]
ENGINES: tuple[str, ...] = ("numpy", "duckdb", "spark")
#: a pandas DataFrame, a file path, or (engine spark) a Spark DataFrame or table name
Source: TypeAlias = pd.DataFrame | str | Path | Any


def is_path(source: object) -> bool:
    return isinstance(source, str | Path)


def load_source(source: Source) -> pd.DataFrame:
    """The source as a DataFrame in memory (the numpy engine)."""
    if is_path(source):
        from privsyn_core.data.io import read_table

        return read_table(source)
    if not isinstance(source, pd.DataFrame):
        raise InputError(
            f"the numpy engine takes a pandas DataFrame or a file path, not "
            f"{type(source).__name__}; a Spark DataFrame needs engine='spark'"
        )
    return require_frame(source)


def source_width(source: Source, engine: str) -> int:
    """The number of columns of ``source`` (public: the names are in the output), read
    without loading rows; 0 when it cannot be told cheaply."""
    if isinstance(source, pd.DataFrame):
        return len(source.columns)
    if is_path(source):
        if not Path(source).is_file():
            return 0
        from privsyn_core.data.io import file_columns

        return len(file_columns(source).columns)
    columns = getattr(source, "columns", None)
    return len(columns) if columns is not None else 0
