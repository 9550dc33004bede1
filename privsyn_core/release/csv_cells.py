"""Cells a spreadsheet would execute ("CSV injection"): finding them, and escaping them on request.

A synthetic table repeats values of the real one, so a cell such as ``=HYPERLINK(...)`` or
``=cmd|' /C calc'!A0`` in the input can reach the output, and Excel, LibreOffice or Google
Sheets run it as a formula when the CSV is opened. OWASP's list of starting characters is
``=``, ``+``, ``-``, ``@``, tab and carriage return.

By default the CSV is written verbatim: escaping changes the data (``'=x`` is not ``=x``; a
program reading the CSV gets a value that was never in the table, and the round trip through
``privsyn evaluate`` or another tool breaks), and the CSV is first a data file. What a careful
tool owes the reader is to say so: :func:`find_formulas` names the columns, and the writer
prints one warning. ``--csv-escape-formulas`` (:func:`escape_formulas`) is for a CSV that is
going to be opened in a spreadsheet: it prefixes a single quote, OWASP's advice, which a
spreadsheet shows as text and does not display.

Numbers are never escaped: a numeric column's ``-3`` is written by pandas as a number, and a
text cell that is a plain number (``-3``, ``+1.5e3``) is a number to a spreadsheet too (it
computes nothing), so escaping it would only corrupt negative values.

A writer calls :class:`FormulaScan` on each frame or block of rows before it writes it (the
``prepare`` hook of :class:`privsyn_core.data.streamed.TableFile`), then prints
:meth:`FormulaScan.warning` once, after the last block.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from typing import TextIO

import pandas as pd

from privsyn_core.terminal import printable

#: OWASP's characters that make a spreadsheet treat a cell as a formula
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
#: a text cell that is a plain decimal number, or an infinity or NaN as pandas and NumPy spell
#: them (``-inf``): a number in the data's sense, from which a spreadsheet computes nothing
_PLAIN_NUMBER = re.compile(r"[+-]?((\d+\.?\d*|\.\d+)([eE][+-]?\d+)?|inf|infinity|nan)", re.I)
#: how many column names a warning lists before it says "and N more"
_NAMED = 5


def is_formula(value: object) -> bool:
    """Whether a spreadsheet would execute ``value`` as a cell: text that starts with one of
    :data:`FORMULA_STARTS` and is not a plain number. Anything but text (numbers, dates,
    missing values) is written as what it is and is never a formula."""
    return (
        isinstance(value, str)
        and value.startswith(FORMULA_STARTS)
        and _PLAIN_NUMBER.fullmatch(value) is None
    )


@dataclass(frozen=True)
class FormulaCells:
    """Where a table holds cells a spreadsheet would execute: the column names (header cells)
    that would, and per column the number of value cells that would. Immutable; merge the
    findings of a streamed writer's chunks with :meth:`merged`."""

    names: tuple[str, ...] = ()
    cells: tuple[tuple[str, int], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.names or self.cells)

    def merged(self, other: FormulaCells) -> FormulaCells:
        """This and ``other`` (a later chunk of the same table): counts added, order kept."""
        counts = dict(self.cells)
        for column, count in other.cells:
            counts[column] = counts.get(column, 0) + count
        names = self.names + tuple(n for n in other.names if n not in self.names)
        return FormulaCells(names, tuple(counts.items()))

    def warning(self, escaped: bool, remedy: str = "write it with --csv-escape-formulas") -> str:
        """One line for stderr or the dashboard that names the columns (escaped for a
        terminal), says what a spreadsheet does with them, and what was done about it;
        ``remedy`` says how to escape them (the CLI's option, or the dashboard's box)."""
        parts = []
        if self.cells:
            listed = ", ".join(printable(repr(c)) for c, _ in self.cells[:_NAMED])
            more = f" and {len(self.cells) - _NAMED} more" if len(self.cells) > _NAMED else ""
            total = sum(n for _, n in self.cells)
            parts.append(f"{total:,} cells of column(s) {listed}{more}")
        if self.names:
            listed = ", ".join(printable(repr(n)) for n in self.names[:_NAMED])
            more = f" and {len(self.names) - _NAMED} more" if len(self.names) > _NAMED else ""
            parts.append(f"the column name(s) {listed}{more}")
        where = " and ".join(parts)
        if escaped:
            return (
                f"{where} start with =, +, -, @, tab or carriage return: written with a "
                "leading ' so that a spreadsheet shows them as text (--csv-escape-formulas)"
            )
        return (
            f"{where} start with =, +, -, @, tab or carriage return: a spreadsheet would run "
            "them as formulas. The CSV holds them verbatim (it is data); to open it in a "
            f"spreadsheet, {remedy}"
        )


def _text_columns(frame: pd.DataFrame) -> list[str]:
    """The columns that can hold text: numbers, booleans and dates are never formulas."""
    return [
        c
        for c in frame.columns
        if not (
            pd.api.types.is_numeric_dtype(frame[c])
            or pd.api.types.is_bool_dtype(frame[c])
            or pd.api.types.is_datetime64_any_dtype(frame[c])
        )
    ]


def _formula_mask(column: pd.Series) -> pd.Series:
    """True where the cell is a formula; tested once per distinct value (a synthetic column
    repeats a few values many times)."""
    values = column.cat.categories if isinstance(column.dtype, pd.CategoricalDtype) else None
    if values is None:
        values = pd.unique(column.dropna())
    bad = [v for v in values if is_formula(v)]
    if not bad:
        return pd.Series(False, index=column.index)
    return column.isin(bad)


def find_formulas(frame: pd.DataFrame) -> FormulaCells:
    """The header cells and value cells of ``frame`` that a spreadsheet would execute."""
    names = tuple(str(c) for c in frame.columns if is_formula(str(c)))
    cells = []
    for column in _text_columns(frame):
        count = int(_formula_mask(frame[column]).sum())
        if count:
            cells.append((str(column), count))
    return FormulaCells(names, tuple(cells))


def escape_formulas(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``frame`` with a ``'`` before every header and text cell that
    :func:`is_formula` finds (OWASP's escape); numbers and other cells as they were. Returns
    ``frame`` itself when there is nothing to escape (no copy of a large table)."""
    out = frame
    for column in _text_columns(frame):
        mask = _formula_mask(frame[column])
        if mask.any():
            out = out.copy(deep=False) if out is frame else out
            values = frame[column].astype(object)
            out[column] = values.where(~mask, "'" + values[mask].astype(str))
    if any(is_formula(str(c)) for c in frame.columns):
        out = out.copy(deep=False) if out is frame else out
        out.columns = [f"'{c}" if is_formula(str(c)) else c for c in frame.columns]
    return out


def csv_ready(frame: pd.DataFrame, escape: bool) -> tuple[pd.DataFrame, FormulaCells]:
    """What a CSV writer calls on each frame or chunk before ``to_csv``: the frame to write
    (escaped only when ``escape``) and what it found, for the one warning."""
    found = find_formulas(frame)
    return (escape_formulas(frame) if escape and found else frame), found


class FormulaScan:
    """A CSV writer's hook, called on each block of rows before it is written: returns the
    block to write (escaped with ``escape``) and adds what it found to :attr:`found`, so that
    a table written in a million blocks still gets one warning. Its one mutable field is
    :attr:`found`, replaced (never changed in place) at each block."""

    def __init__(self, escape: bool) -> None:
        self.escape = escape
        self.found = FormulaCells()

    def __call__(self, frame: pd.DataFrame) -> pd.DataFrame:
        frame, found = csv_ready(frame, self.escape)
        if found:
            self.found = self.found.merged(found)
        return frame

    def warning(self) -> str | None:
        """The one warning line, or None when no cell would run."""
        return self.found.warning(escaped=self.escape) if self.found else None

    def report(self, stream: TextIO | None = None) -> None:
        """Print the warning, if any, as one ``privsyn: warning:`` line (stderr)."""
        line = self.warning()
        if line is not None:
            print(f"privsyn: warning: {line}", file=stream or sys.stderr)
