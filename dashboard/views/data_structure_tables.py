"""Tables of each column's structural choices (kind, whole numbers, date format, missing
values, domain, output decimals) and where each came from, for the Data page.

Before a run only the schema is known: a choice is declared, or will be estimated privately,
or (demo switch) read off the data. After a run the choices are the run's own, each with its
provenance; estimated ones are post-processing of DP measurements.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from privsyn_core.data.column_structure import PreparedColumn, needs_structure
from privsyn_core.data.schema import ColumnSchema, Kind, Provenance, Schema

DECLARED = Provenance.DECLARED.value

#: rows a table shows before it scrolls: a finished run has about six choices per column, so
#: a 15-column table's 90 rows would otherwise fill several screens
MAX_SHOWN_ROWS = 20
#: Streamlit's default height of a table row and of its header row, in pixels
ROW_PX = 35


def table_height(rows: int) -> int:
    """Pixels for a table of ``rows`` rows: all of them, up to :data:`MAX_SHOWN_ROWS` (its
    header and borders too), so a short table has no empty space and a long one scrolls."""
    return ROW_PX * (min(max(rows, 1), MAX_SHOWN_ROWS) + 1) + 3


def structure_frame(
    columns: Sequence[PreparedColumn], excluded: Sequence[tuple[str, str]]
) -> pd.DataFrame:
    """One row per column and choice of a finished run, with the value chosen and its source."""
    rows = [
        {
            "column": c.codec.name,
            "choice": ch.name,
            "value": ch.value,
            "source": ch.provenance.value,
        }
        for c in columns
        for ch in c.choices
    ]
    rows += [
        {"column": name, "choice": "left out", "value": why, "source": "the run"}
        for name, why in excluded
    ]
    return pd.DataFrame(rows, columns=["column", "choice", "value", "source"])


def structure_plan_frame(schema: Schema, *, raw: bool) -> pd.DataFrame:
    """One row per included column: for each choice, declared (with its value) or how the run
    will settle it."""
    open_source = Provenance.RAW.value if raw else Provenance.PRIVATE.value
    rows = []
    for column in schema.included():
        rows.append(
            {
                "column": column.name,
                "kind": _declared(column.kind.value if column.kind else None, open_source),
                "whole numbers / date format": _detail(column, open_source),
                # left open, a missing code is added and its rate measured privately, even
                # with the demo switch on
                "may be missing": (
                    f"{'yes' if column.missing else 'no'} ({DECLARED})"
                    if column.missing is not None
                    else Provenance.PRIVATE.value
                ),
                "domain": f"{DECLARED}" if column.has_domain else open_source,
                "decimals": _decimals(column, open_source),
            }
        )
    return pd.DataFrame(rows)


def _declared(value: str | None, open_source: str) -> str:
    return f"{value} ({DECLARED})" if value is not None else open_source


def _decimals(column: ColumnSchema, open_source: str) -> str:
    """The output's precision: declared, counted with the kind by the structure step, or
    (numbers only) from the bin width."""
    if column.kind in (Kind.CATEGORICAL, Kind.DATETIME):
        return "-"
    if column.decimals is not None:
        return f"{column.decimals} ({DECLARED})"
    if column.integer:
        return f"0: whole numbers ({DECLARED})"
    if needs_structure(column):
        return f"with the kind: {open_source}"  # whole numbers get 0
    return "a tenth of the narrowest bin"


def _detail(column: ColumnSchema, open_source: str) -> str:
    if column.kind is Kind.CATEGORICAL:
        return "-"
    if not needs_structure(column):
        if column.kind is Kind.NUMERIC:
            return f"whole numbers: {'yes' if column.integer else 'no'} ({DECLARED})"
        return f"{column.datetime_format} ({DECLARED})"
    return open_source
