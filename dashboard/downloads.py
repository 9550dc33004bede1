"""The synthetic table as a CSV download, with the same care as the command line's: cells a
spreadsheet would run as formulas are named in a warning, and escaped only when the user
ticks the box (see :mod:`privsyn_core.release.csv_cells` for why verbatim is the default)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from privsyn_core.release.csv_cells import escape_formulas, find_formulas

from .review import literal

#: the box's label, also named by the warning as the way to escape
ESCAPE_LABEL = "Escape formulas for a spreadsheet"


def offer_csv(label: str, table: pd.DataFrame, file_name: str, key: str) -> None:
    """A download button for ``table`` as CSV; above it, when some cells would run in a
    spreadsheet, a warning naming their columns and a box that escapes them (off)."""
    found = find_formulas(table)
    escape = False
    if found:
        st.warning(literal(found.warning(escaped=False, remedy=f"tick '{ESCAPE_LABEL}' below")))
        escape = st.checkbox(
            ESCAPE_LABEL,
            key=f"{key}_escape",
            help="Writes a ' before each such text cell (OWASP's advice): a spreadsheet then "
            "shows it as text. Numbers are never changed. Leave it off for a file that a "
            "program reads: the ' would become part of the value.",
        )
    st.download_button(
        label,
        data=lambda: (escape_formulas(table) if escape else table).to_csv(index=False).encode(),
        file_name=file_name,
        mime="text/csv",
        key=key,
        on_click="ignore",
    )
