"""Data: load a table (the Adult sample is preloaded), preview it, edit its schema."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pandas as pd
import streamlit as st

from dashboard import state
from privsyn_core.errors import InputError
from privsyn_core.io import read_table
from privsyn_core.schema import ColumnSchema, Kind, Provenance, Schema

st.title("Data")
st.write(
    "Load the private table. Nothing leaves this machine; only the synthetic table and the DP "
    "artifacts may be shared."
)

upload = st.file_uploader(
    "Upload a CSV or Parquet file", type=["csv", "txt", "parquet", "pq"], key="upload"
)
if upload is not None and st.session_state.get("uploaded_name") != (upload.name, upload.size):
    suffix = Path(upload.name).suffix or ".csv"
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"upload{suffix}"
        path.write_bytes(upload.getvalue())
        try:
            loaded = read_table(path)
        except InputError as exc:
            st.error(f"Could not read {upload.name}: {exc}".replace(str(path), upload.name))
            loaded = None
    if loaded is not None:
        state.set_table(loaded, upload.name)
        st.session_state["uploaded_name"] = (upload.name, upload.size)
        st.success(f"Loaded {upload.name}.")

if st.button("Use the bundled Adult sample", key="use_sample"):
    state.set_table(state.load_sample(), state.SAMPLE_NAME)
    st.session_state.pop("uploaded_name", None)

table = state.table()
st.subheader(st.session_state["table_name"])
state.owner_badge()
st.caption(f"{table.shape[0]:,} rows x {table.shape[1]} columns (true counts: owner-only).")
st.dataframe(table.head(200), key="preview", width="stretch")

st.subheader("Columns")
st.write(
    "Each column's domain is either **declared** by you (public, free), a **private "
    "estimate** (paid from the budget), or read from the **raw data** (not private: only with "
    "the demo switch below). Declare categories (comma-separated) or bounds to make them public."
)


def _rows(schema: Schema, raw: bool) -> pd.DataFrame:
    rows = []
    for column in schema.columns:
        if column.has_domain:
            source = Provenance.DECLARED.value
        else:
            source = Provenance.RAW.value if raw else Provenance.PRIVATE.value
        rows.append(
            {
                "column": column.name,
                "include": not column.exclude,
                "kind": column.kind.value,
                "categories": ", ".join(str(c) for c in column.categories or ()),
                "lower": column.lower,
                "upper": column.upper,
                "bins": column.bins,
                "domain source": source,
            }
        )
    return pd.DataFrame(rows)


def _schema_from(rows: pd.DataFrame) -> Schema:
    columns = []
    for row in rows.to_dict("records"):
        text = str(row["categories"] or "").strip()
        categories = tuple(c.strip() for c in text.split(",") if c.strip()) or None
        lower = None if pd.isna(row["lower"]) else float(row["lower"])
        upper = None if pd.isna(row["upper"]) else float(row["upper"])
        bins = None if pd.isna(row["bins"]) else int(row["bins"])
        kind = Kind(row["kind"])
        columns.append(
            ColumnSchema(
                row["column"],
                kind,
                categories=categories if kind is Kind.CATEGORICAL else None,
                lower=lower if kind is not Kind.CATEGORICAL else None,
                upper=upper if kind is not Kind.CATEGORICAL else None,
                bins=bins if kind is not Kind.CATEGORICAL else None,
                exclude=not bool(row["include"]),
            )
        )
    return Schema(tuple(columns))


raw = st.toggle(
    "Read undeclared domains off the raw data (demo shortcut: NOT end-to-end DP)",
    key="raw_domains",
)
edited = st.data_editor(
    _rows(state.schema(), raw),
    key="schema_editor",
    hide_index=True,
    width="stretch",
    disabled=["column", "domain source"],
    column_config={
        "kind": st.column_config.SelectboxColumn(options=[k.value for k in Kind], required=True),
        "include": st.column_config.CheckboxColumn(),
        "bins": st.column_config.NumberColumn(min_value=1, step=1),
    },
)
try:
    updated = _schema_from(edited)
except (InputError, ValueError) as exc:
    st.error(f"That schema edit cannot be used: {exc}")
else:
    if updated != state.schema():
        st.session_state["schema"] = updated
        st.session_state["finished"] = None
        st.rerun()
if raw:
    st.warning(
        "Undeclared categories and bounds will be read off the data: the result is **not "
        "end-to-end differentially private** and will say so."
    )
