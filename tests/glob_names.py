"""File names a reader could take as a pattern, each beside the decoys the pattern would match
(issue 21, "a path is a path"): DuckDB and Spark must read the named file alone.

Why decoys: a reader that globs the name reads them too, so the counts show it (the named
file's rows hold ``named``, every decoy's rows ``decoy``), where a name-only check would pass.
Each decoy is what one engine's pattern syntax matches: DuckDB's (``*``, ``?``, ``[...]``,
``**`` across folders, a backslash a plain character) or Hadoop's, Spark's (those, ``{a,b}``
and backslash escapes).
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

#: rows of the named file and of each decoy
ROWS = 40
DECOY_ROWS = 7


@dataclass(frozen=True)
class GlobName:
    """``name`` (a path under the test's folder, ending in ``.csv``) and the files beside it
    that the name, read as a pattern, matches."""

    name: str
    decoys: tuple[str, ...]

    def id(self) -> str:
        return repr(self.name)


GLOB_NAMES = [
    GlobName("g*.csv", ("g1.csv", "g2.csv")),
    GlobName("g?.csv", ("g1.csv",)),
    GlobName("g[12].csv", ("g1.csv", "g2.csv")),
    GlobName("g[.csv", ()),  # an unclosed bracket
    GlobName("g].csv", ()),
    GlobName("g{1,2}.csv", ("g1.csv", "g2.csv")),
    GlobName("g{.csv", ()),
    GlobName("g}.csv", ()),
    GlobName("g,1.csv", ("g.csv", "1.csv")),
    GlobName("g**.csv", ("g1.csv",)),
    GlobName("**/g.csv", ("g.csv", "sub/g.csv")),  # DuckDB's ** crosses folders
    GlobName("d*r/g.csv", ("dir/g.csv",)),  # a pattern in a folder's name
    GlobName("g\\*.csv", ("g*.csv", "g\\1.csv")),  # Hadoop: an escaped *; DuckDB: a glob
    GlobName("g\\1.csv", ("g1.csv",)),  # Hadoop drops the backslash
    GlobName("g'*.csv", ("g'1.csv",)),  # a quote in a SQL literal
    GlobName("-g ~*.csv", ("-g ~1.csv",)),  # a leading dash, a space, a tilde
    GlobName("g\n*.csv", ("g\n1.csv",)),  # a line break
]


def as_suffix(name: str, suffix: str) -> str:
    return name.removesuffix(".csv") + suffix


def write_table(path: Path, value: str, rows: int, column: str = "v") -> None:
    """A table of columns ``column`` (``value`` on every row) and ``n`` (0, 1, 0, ...), as CSV
    or Parquet by the suffix; written through a file object, so no writer globs the name."""
    path.parent.mkdir(parents=True, exist_ok=True)
    frame = pd.DataFrame({column: [value] * rows, "n": [str(i % 2) for i in range(rows)]})
    buffer = io.BytesIO()
    if path.suffix == ".parquet":
        frame.to_parquet(buffer, index=False)
    else:
        frame.to_csv(buffer, index=False)
    path.write_bytes(buffer.getvalue())


def beside_decoys(
    folder: Path,
    case: GlobName,
    suffix: str = ".csv",
    named: str = "x",
    decoy: str = "DECOY",
    decoy_column: str = "v",
) -> Path:
    """The case's named file under ``folder`` (``ROWS`` rows of ``named``) and its decoys
    (``DECOY_ROWS`` rows of ``decoy`` each, in a column ``decoy_column``: another name catches
    a reader that takes the header from a decoy); returns the named file's path."""
    for other in case.decoys:
        write_table(folder / as_suffix(other, suffix), decoy, DECOY_ROWS, decoy_column)
    path = folder / as_suffix(case.name, suffix)
    write_table(path, named, ROWS)
    return path
