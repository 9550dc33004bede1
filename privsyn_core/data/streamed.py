"""Writing a table block by block, atomically: CSV or Parquet.

A synthetic table of 100 million rows is never held whole: its blocks
(:meth:`~privsyn_core.generation.fitted.FittedModel.sample_blocks`) are written as they are
decoded, a Parquet row group or a run of CSV lines each, so memory is bounded by the blocks
in flight, not by the rows.

Atomic as the command line's other outputs: the rows go to a temporary file beside the
target (same folder, so the final rename never crosses file systems) and it is moved into
place only when the last block is written. A failure part-way (a block that fails, a full
disk, Ctrl-C) removes the temporary file and leaves an existing file at the target as it was.

Every block has the same columns and types (a decoder's type depends on its codec alone,
:func:`privsyn_core.data.codecs._typed`), so the Parquet schema is the first block's, with a
column that block holds only missing values for (Arrow's ``null`` type) written as text.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TextIO

import numpy as np
import pandas as pd

from privsyn_core.data.atomic import temporary_beside
from privsyn_core.data.paths import is_parquet
from privsyn_core.errors import InputError
from privsyn_core.generation.memory import size_text

#: what a CSV writer may do to each block's frame before it is written (the CSV cell
#: escaping of :mod:`privsyn_core.release.csv_cells` hooks in here)
FramePrep = Callable[[pd.DataFrame], pd.DataFrame]


class TableFile:
    """A table being written block by block to a temporary file beside ``target``.

    ``with TableFile(target) as out: out.write(blocks); ...; out.commit()``: :meth:`commit`
    moves the file into place; leaving the block without it (an error, Ctrl-C) removes the
    temporary file, and an existing file at ``target`` stays as it was. Writing and
    committing are apart so that a command can record the run before its output appears.
    ``prepare`` (CSV only) transforms each block before it is written; with ``rows``, the
    rows expected in all, a table the disk cannot hold is refused after its first block
    (:func:`check_disk`), not when the disk fills hours later.
    """

    def __init__(
        self, target: Path, *, rows: int | None = None, prepare: FramePrep | None = None
    ) -> None:
        self.target = target
        self.rows = rows
        self.prepare = prepare
        self.tmp: str | None = None
        self.written = 0

    def __enter__(self) -> TableFile:
        self.tmp = temporary_beside(self.target)
        return self

    def write(self, blocks: Iterable[pd.DataFrame]) -> int:
        """Write ``blocks`` (frames of the same columns, in order) as the whole table;
        returns the rows written."""
        assert self.tmp is not None, "write inside the with block"
        checked = _disk_checked(blocks, self.tmp, self.rows)
        try:
            if is_parquet(self.target):
                self.written = _parquet(checked, self.tmp)
            else:
                self.written = _csv(checked, self.tmp, self.prepare)
        except OSError as exc:  # a full disk, a folder gone: one line, as every output
            raise InputError(f"cannot write {self.target}: {exc.strerror or exc}") from None
        return self.written

    def commit(self) -> None:
        assert self.tmp is not None, "commit inside the with block"
        try:
            os.replace(self.tmp, self.target)
        except OSError as exc:
            raise InputError(f"cannot write {self.target}: {exc.strerror or exc}") from None

    def __exit__(self, *_: object) -> None:
        if self.tmp is not None and os.path.exists(self.tmp):
            os.unlink(self.tmp)


def write_blocks(
    blocks: Iterable[pd.DataFrame],
    target: Path,
    *,
    rows: int | None = None,
    prepare: FramePrep | None = None,
) -> int:
    """Write ``blocks`` as one table at ``target`` (a :class:`TableFile`, committed when
    the last block is written); returns the rows written."""
    with TableFile(target, rows=rows, prepare=prepare) as out:
        written = out.write(blocks)
        out.commit()
    return written


def _disk_checked(
    blocks: Iterable[pd.DataFrame], path: str, rows: int | None
) -> Iterator[pd.DataFrame]:
    """``blocks``, checking before the second one what the first took on disk."""
    written = 0
    for index, frame in enumerate(blocks):
        if index == 1 and rows is not None:
            check_disk(path, written, rows)
        yield frame
        written += len(frame)


def check_disk(path: str, written: int, rows: int) -> None:
    """Refuse (:class:`InputError`) to go on writing ``rows`` rows to ``path`` when the
    bytes its first ``written`` rows took, scaled, exceed the free disk space there."""
    size = os.path.getsize(path)
    if written < 1 or size < 1:
        return
    needed = size / written * (rows - written)
    free = shutil.disk_usage(os.path.dirname(path) or ".").free
    if needed <= free:
        return
    raise InputError(
        f"{rows:,} rows need about {size_text(needed + size)} of disk at "
        f"{os.path.dirname(path) or '.'} (the first {written:,} took {size_text(size)}), but "
        f"{size_text(free)} is free; ask for fewer rows (--rows) or write elsewhere"
    )


#: cells made into text at a time by :func:`write_csv`: a block's text is never held whole
_CSV_CELLS = 1_000_000


def _whole_numbers(frame: pd.DataFrame) -> bool:
    """Whether every column holds whole numbers (numpy integers: no missing values)."""
    return frame.shape[1] > 0 and all(
        isinstance(t, np.dtype) and t.kind in "iu" for t in frame.dtypes
    )


def csv_text(frame: pd.DataFrame, header: bool = True) -> str:
    """``frame.to_csv(index=False, header=header)``, the same text, faster where it can be.

    A frame of whole-number columns only (every pre-coded table's synthetic rows) has its
    rows written by Arrow's CSV writer: a quarter of pandas' time (0.025 s against 0.11 s on
    Adult's 48,842 rows x 14, written twice by every ``privsyn synthesize``: the output and
    the release bundle). Whole numbers have one spelling, so the text is pandas' to the byte;
    any other column (text, floats, missing values, booleans) goes to pandas as before.
    """
    if not _whole_numbers(frame) or len(frame) == 0 or os.linesep != "\n":
        return frame.to_csv(index=False, header=header)
    import pyarrow as pa
    import pyarrow.csv as arrow_csv

    columns = range(frame.shape[1])  # by position: the names are pandas' to write
    rows = pa.Table.from_arrays(
        [pa.array(frame.iloc[:, i].to_numpy()) for i in columns], names=[str(i) for i in columns]
    )
    sink = pa.BufferOutputStream()
    arrow_csv.write_csv(rows, sink, arrow_csv.WriteOptions(include_header=False))
    names = frame.iloc[:0].to_csv(index=False) if header else ""
    return names + sink.getvalue().to_pybytes().decode("ascii")


def write_csv(frame: pd.DataFrame, out: TextIO, header: bool) -> None:
    """``frame.to_csv(out, index=False, header=header)``: whole numbers through
    :func:`csv_text`, a million cells at a time; anything else streamed by pandas."""
    if not _whole_numbers(frame):
        frame.to_csv(out, index=False, header=header)
        return
    rows = max(1, _CSV_CELLS // frame.shape[1])
    for start in range(0, max(len(frame), 1), rows):
        out.write(csv_text(frame.iloc[start : start + rows], header and start == 0))


def _csv(blocks: Iterable[pd.DataFrame], path: str, prepare: FramePrep | None) -> int:
    rows = 0
    with open(path, "w", newline="", encoding="utf-8") as out:
        for index, frame in enumerate(blocks):
            if prepare is not None:
                frame = prepare(frame)
            write_csv(frame, out, header=index == 0)
            out.flush()  # what the disk check sees
            rows += len(frame)
    return rows


def _parquet(blocks: Iterable[pd.DataFrame], path: str) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = 0
    writer: pq.ParquetWriter | None = None
    try:
        for frame in blocks:
            if writer is None:
                schema = without_null_types(pa.Schema.from_pandas(frame, preserve_index=False))
                writer = pq.ParquetWriter(path, schema)
            table = pa.Table.from_pandas(frame, schema=writer.schema, preserve_index=False)
            writer.write_table(table)
            rows += len(frame)
    finally:
        if writer is not None:
            writer.close()
    return rows


def without_null_types(schema: Any) -> Any:  # a pyarrow Schema (pyarrow loads lazily)
    """``schema`` with Arrow's ``null`` type (a column of only missing values in the first
    block) replaced by text, which later blocks' values of that column are."""
    import pyarrow as pa

    for index, field in enumerate(schema):
        if pa.types.is_null(field.type):
            schema = schema.set(index, field.with_type(pa.string()))
    return schema
