"""Data: load a table (the Adult sample is preloaded), preview it, edit its schema."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pandas as pd
import streamlit as st

from privsyn_core.data.io import read_table
from privsyn_core.data.schema import MAX_DECIMALS, ColumnSchema, Kind, Schema
from privsyn_core.errors import InputError, TooBigToLoad
from privsyn_core.generation.memory import size_text
from privsyn_core.release.registry import bytes_fingerprint

# Streamlit runs a page as a script, without a package: it is named after its folders
# ("dashboard" in a checkout, "privsyn_dashboard" installed) for the imports below.
__package__ = f"{Path(__file__).resolve().parent.parent.name}.views"

from .. import records, review, sources, state
from ..state import session
from .data_structure_tables import structure_frame, structure_plan_frame, table_height

#: the suffixes of the files the Data page reads (also left out of a table's name in an example)
TABLE_SUFFIXES = (".csv", ".txt", ".parquet", ".pq")

st.title("Data")
st.write(
    "Load the private table. Nothing leaves this machine; only the synthetic table and the DP "
    "artifacts may be shared."
)

busy = state.running()
if busy:
    st.info(
        "A synthesis of this table is running (Run page): load another table when it has "
        "finished or been cancelled."
    )
LIMIT_MB = st.get_option("server.maxUploadSize")
upload = st.file_uploader(
    "Upload a CSV or Parquet file",
    type=[suffix[1:] for suffix in TABLE_SUFFIXES],
    key="upload",
    disabled=busy,
)
st.caption(
    f"Files up to {LIMIT_MB:,} MB (this server's limit, server.maxUploadSize). **A file marked "
    "red was not uploaded**: it is over the limit (hover the mark). For a bigger file, or one "
    "too big to load into memory, put it on this server and use **Table on disk** below: a run "
    "reads it where it lies."
)


def load_upload(name: str, data: bytes) -> pd.DataFrame:
    """The uploaded file as the command line reads it (:func:`read_table`, from a temporary
    copy under the upload's suffix). Before a row is parsed, read_table refuses a file too wide
    for PrivSyn or too big for the free memory, from the Parquet footer or the CSV's size
    (``memory.check_load_fits``), so a few kilobytes that expand to gigabytes never reach
    pandas. Every refusal names the upload, not the temporary copy."""
    suffix = Path(name).suffix.lower() or ".csv"
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"upload{suffix}"
        path.write_bytes(data)
        try:
            return read_table(path)
        except TooBigToLoad as exc:
            raise InputError(
                f"it is too big to load on this server: it holds about {exc.rows:,} rows "
                f"x {exc.columns:,} column{'s' * (exc.columns != 1)}, which need about "
                f"{size_text(exc.needed)} of memory, but only about {size_text(exc.usable)} of "
                f"the {size_text(exc.free)} free may be used. Put the file on this server and "
                "use Table on disk (below): a run then counts it where it lies, through "
                "DuckDB, without loading it"
            ) from None
        except InputError as exc:
            message = str(exc)
            for own, short in ((f"{path}: ", ""), (f"{path} ", "it ")):  # "it is empty"
                if message.startswith(own):
                    message = short + message[len(own) :]
                    break
            raise InputError(message.replace(str(path), name)) from None


# An upload is read once: its outcome (loaded, or the refusal) is kept under the upload's id,
# so reruns neither parse a large file again nor lose the message while the file is still
# shown in the uploader, and a file left in the uploader does not come back over the sample or
# a table on disk chosen after it (uploading it again does). A refused upload leaves the table
# in use as it was, and says so.
if upload is not None and not busy:
    seen = upload.file_id
    if session.upload_seen != seen:
        data = upload.getvalue()
        try:
            loaded = load_upload(upload.name, data)
        except InputError as exc:
            session.upload_refused = (seen, str(exc))
        else:
            state.set_table(loaded, upload.name, bytes_fingerprint(data))
            session.upload_refused = None
            st.success(f"Loaded {upload.name}.")
        session.upload_seen = seen
    refused = session.upload_refused
    if refused is not None and refused[0] == seen:
        st.error(
            f"Could not use {upload.name}: {refused[1].rstrip('.')}. The table in use is still "
            f"{session.table_name}."
        )

if st.button("Use the bundled Adult sample", key="use_sample", disabled=busy):
    state.use_sample()

with st.expander(
    "Table on disk: a file on this server, too big to upload", expanded=session.disk is not None
):
    st.write(
        "Type the full path of a CSV or Parquet file on the machine that runs this dashboard. "
        "It is not loaded: a run reads it where it lies, through DuckDB, out of core."
        + (
            f" This server reads tables only from {sources.allowed_root()}."
            if sources.allowed_root() is not None
            else ""
        )
    )
    st.text_input(
        "Path of the file", key="disk_path", placeholder="/data/census.parquet", disabled=busy
    )
    if st.button("Use this file", key="use_disk", disabled=busy):
        try:
            described = sources.describe(session.disk_path or "")
        except InputError as exc:
            st.error(f"Cannot use that path: {exc}.")
        else:
            state.set_disk(described)


def short_name(table_name: str) -> str:
    """A table's name without its file's suffix or a closing remark in brackets, for an
    example: "UCI Adult sample (bundled adult.csv)" reads "UCI Adult sample", "raw.csv" "raw"."""
    bare = re.sub(r"\s*\([^()]*\)$", "", table_name).strip() or table_name
    path = Path(bare)
    return path.stem if path.suffix.lower() in TABLE_SUFFIXES and path.stem else bare


def name_field(columns: int, rows: int | None) -> None:
    """The owner's own name for the table, kept with its dataset in the run registry, and its
    size (``rows`` None: a file on disk, never counted outside a run): History names the
    table's runs by them, so two files both called raw.csv are told apart. A fingerprint is
    computed here only to store a name typed for a table not yet fingerprinted (a file on
    disk is hashed whole); an unusable registry leaves the field without a stored name."""
    known = session.dataset_fingerprint
    stored = None
    if known is not None:
        records.describe_table(known, session.table_name, columns, rows)
        found = records.known_table(known)
        stored = found.label if found is not None else None
    field, _ = st.columns([3, 2])
    typed = field.text_input(
        "Your name for this table (optional)",
        value=stored or "",
        max_chars=60,
        placeholder=f"e.g. {short_name(session.table_name)} 2024, second extract",
        # a field per table: the next table starts from its own stored name
        key=f"table_label_{session.table_token}",
        help="Shown in History with the runs on this table, so that two files with the same "
        "name are told apart. Kept in the run registry on this machine, never in a release.",
    ).strip()
    if typed == (stored or ""):
        return
    with st.spinner("Reading the table to recognise it"):
        dataset = state.dataset_fingerprint()
    problem = records.name_table(dataset, session.table_name, typed)
    if problem is not None:
        st.error(problem)
    else:
        records.describe_table(dataset, session.table_name, columns, rows)
        st.caption("Name kept: History shows it with this table's runs.")


def codes_editor(on_disk: sources.DiskTable) -> None:
    """Numbers of codes per column of a pre-coded file on disk, typed or from a domain file."""
    st.subheader("Number of codes per column")
    st.write(
        "In a **pre-coded** file every value is a whole number from 0 to its column's number "
        "of codes minus 1. Declare each column's number of codes (public, like a schema: it "
        "costs no budget), here or from a domain file such as "
        '`assets/adult-coded-domain.json` (`{"column": codes, ...}`). A value outside its '
        "range stops the run before anything is measured."
    )
    domain_file = st.file_uploader(
        "Domain file (JSON)", type=["json"], key="disk_domain", disabled=busy
    )
    codes = dict(session.disk_codes)
    if domain_file is not None and session.disk_domain_name != (
        domain_file.name,
        domain_file.size,
    ):
        try:
            declared = sources.domain_codes(domain_file.getvalue(), on_disk.columns)
        except InputError as exc:
            st.error(f"Cannot use {domain_file.name}: {exc}")
        else:
            codes = declared
            session.disk_codes = codes
            session.disk_domain_name = (domain_file.name, domain_file.size)
            session.forget("disk_codes_editor")
    edited = st.data_editor(
        pd.DataFrame({"column": list(codes), "codes": [codes[c] for c in codes]}),
        key="disk_codes_editor",
        hide_index=True,
        width="stretch",
        disabled=["column"] if not busy else True,
        column_config={
            "codes": st.column_config.NumberColumn(
                "number of codes", min_value=1, step=1, help="values run from 0 to this minus 1"
            )
        },
    )
    updated = {
        row["column"]: None if pd.isna(row["codes"]) else int(row["codes"])
        for row in edited.to_dict("records")
    }
    if updated != session.disk_codes and not busy:
        session.disk_codes = updated
        session.finished = None
    open_columns = [c for c, k in updated.items() if not k]
    if open_columns:
        st.info(
            f"{len(open_columns)} of {len(updated)} columns have no number of codes yet: a run "
            "needs all of them."
        )
    else:
        st.success("Every column has its number of codes: ready to run (Run page).")


#: how the preview shows a cell with no value: pale, so that no value of the file (drawn dark),
#: not even the text "None" (Streamlit's own mark for a missing cell), reads like it
MISSING = "(missing)"
PRECODED = "pre-coded: whole numbers 0..k-1 (declare k per column)"
RAW = "raw values: text, numbers, dates (encoded in SQL with the schema below)"

on_disk = session.disk
if on_disk is not None:
    st.subheader(on_disk.name)
    state.owner_badge()
    st.caption(
        f"{on_disk.kind} file on disk: {on_disk.path}, {sources.human_size(on_disk.size)}, "
        f"{len(on_disk.columns)} columns. Its rows are never shown and never counted here (the "
        "number of rows is private too); a run reads them through DuckDB, where the file lies."
    )
    name_field(len(on_disk.columns), None)
    names, mode = st.columns([1, 2])
    names.dataframe(
        pd.DataFrame({"column": list(on_disk.columns)}),
        key="disk_columns",
        hide_index=True,
        height=min(300, 38 + 35 * len(on_disk.columns)),
    )
    coded = mode.radio(
        "What the file holds",
        [RAW, PRECODED],
        index=1 if session.disk_precoded else 0,
        key="disk_mode",
        disabled=busy,
        help="raw values get the same schema as an uploaded table (below); pre-coded files "
        "need each column's number of codes",
    )
    if (coded == PRECODED) != session.disk_precoded:
        session.disk_precoded = coded == PRECODED
        session.finished = None
    if coded == PRECODED:
        codes_editor(on_disk)
        st.stop()
else:
    table = session.table
    assert table is not None, "without a file on disk the table is in memory"
    st.subheader(session.table_name)
    state.owner_badge()
    st.caption(f"{table.shape[0]:,} rows x {table.shape[1]} columns (true counts: owner-only).")
    name_field(table.shape[1], table.shape[0])
    with st.container(key="preview_rows"):  # rows as wide as the table: may scroll sideways
        st.dataframe(table.head(200), key="preview", width="stretch", placeholder=MISSING)
    st.caption(
        f"The first {min(200, table.shape[0]):,} rows. A gray *{MISSING}* is a cell with no "
        "value (empty in the file, or a spelling read as missing: NA, null, None, NaN...); "
        "whatever is in dark text is a value of the file, even one that reads None."
    )

if on_disk is None:
    review.section(table, busy)  # the reviewed-schema path (dashboard/review.py)

PRIVATE = "decide privately"
FLAG_OPTIONS = [PRIVATE, "yes", "no"]


def _flag(value: bool | None) -> str:
    return PRIVATE if value is None else "yes" if value else "no"


def _rows(schema: Schema) -> pd.DataFrame:
    rows = []
    for column in schema.columns:
        rows.append(
            {
                "column": column.name,
                "include": not column.exclude,
                "kind": column.kind.value if column.kind is not None else PRIVATE,
                "whole numbers": _flag(column.integer),
                "date format": column.datetime_format or "",
                "may be missing": _flag(column.missing),
                "categories": ", ".join(str(c) for c in column.categories or ()),
                "lower": column.lower,
                "upper": column.upper,
                "bins": column.bins,
                "decimals": column.decimals,
                "row id": _flag(column.identifier),
            }
        )
    return pd.DataFrame(rows)


def _declared_flag(text: object) -> bool | None:
    return None if text in (None, PRIVATE) or pd.isna(text) else text == "yes"


def _schema_from(rows: pd.DataFrame, rules: tuple = ()) -> Schema:
    columns = []
    for row in rows.to_dict("records"):
        text = str(row["categories"] or "").strip()
        categories = tuple(c.strip() for c in text.split(",") if c.strip()) or None
        lower = None if pd.isna(row["lower"]) else float(row["lower"])
        upper = None if pd.isna(row["upper"]) else float(row["upper"])
        bins = None if pd.isna(row["bins"]) else int(row["bins"])
        decimals = None if pd.isna(row["decimals"]) else int(row["decimals"])
        kind = None if row["kind"] in (None, PRIVATE) else Kind(row["kind"])
        fmt = str(row["date format"] or "").strip() or None
        columns.append(
            ColumnSchema(
                row["column"],
                kind,
                categories=categories if kind is Kind.CATEGORICAL else None,
                lower=lower if kind in (Kind.NUMERIC, Kind.DATETIME) else None,
                upper=upper if kind in (Kind.NUMERIC, Kind.DATETIME) else None,
                bins=bins if kind in (Kind.NUMERIC, Kind.DATETIME) else None,
                integer=_declared_flag(row["whole numbers"]) if kind is Kind.NUMERIC else None,
                datetime_format=fmt if kind is Kind.DATETIME else None,
                missing=_declared_flag(row["may be missing"]),
                exclude=not bool(row["include"]),
                decimals=decimals if kind in (None, Kind.NUMERIC) else None,
                identifier=_declared_flag(row.get("row id", PRIVATE)),
            )
        )
    return Schema(tuple(columns), rules=rules)


st.subheader("Columns")
st.write(
    "Everything about a column is either **declared** by you (public, free), **estimated "
    "privately** when you run (paid from the budget), or **read off the data** (not private: "
    "only with the demo switch below). Left open, a column's kind, whether its numbers are "
    "whole, their decimals and its date format are decided from noisy counts of how its "
    "values read (numbers by their decimals, dates, text), so one record cannot change them; "
    "its categories or bounds are estimated privately. Declare what you would publish "
    "anyway: it costs nothing."
)
raw = st.toggle(
    "Read undeclared structure and domains off the raw data (demo shortcut: NOT end-to-end DP)",
    key="raw_domains",
    persist_state="session",
)
# Two editors of one schema, so that every column of each is on screen at 1280 px: what each
# column is, then its values. Both start from the session's schema and are read together.
WHAT = ["column", "include", "kind", "whole numbers", "date format", "may be missing", "row id"]
VALUES = ["column", "categories", "lower", "upper", "bins", "decimals"]
declared = _rows(session.schema)
st.markdown("**What each column is**")
what = st.data_editor(
    declared[WHAT],
    key="schema_editor",
    hide_index=True,
    width="stretch",
    height=table_height(len(declared)),
    disabled=["column"],
    column_config={
        "include": st.column_config.CheckboxColumn(),
        "kind": st.column_config.SelectboxColumn(
            options=[PRIVATE, *(k.value for k in Kind)], required=True
        ),
        "whole numbers": st.column_config.SelectboxColumn(
            options=FLAG_OPTIONS, required=True, help="numeric columns only"
        ),
        "date format": st.column_config.TextColumn(
            help="datetime columns only, e.g. %Y-%m-%d; empty: decided privately"
        ),
        "may be missing": st.column_config.SelectboxColumn(
            options=FLAG_OPTIONS,
            required=True,
            help="left open, the column gets a missing code and its rate is measured privately",
        ),
        "row id": st.column_config.SelectboxColumn(
            options=FLAG_OPTIONS,
            required=True,
            help="a row id is not modelled: the synthetic table gets fresh ids 1 to n; left "
            "open, text and whole-number columns whose values are almost all distinct are "
            "found privately",
        ),
    },
)
st.markdown("**Its values: categories, bounds, bins and decimals** (empty: estimated privately)")
values = st.data_editor(
    declared[VALUES],
    key="schema_values_editor",
    hide_index=True,
    width="stretch",
    height=table_height(len(declared)),
    disabled=["column"],
    placeholder="",  # an open cell is empty, as in the text columns, never "None"
    column_config={
        "categories": st.column_config.TextColumn(
            width="medium",
            help="categorical columns: every category, separated by commas",
        ),
        "lower": st.column_config.NumberColumn(
            help="numeric and datetime columns: the smallest value (a date: seconds since "
            "1970-01-01)"
        ),
        "upper": st.column_config.NumberColumn(
            help="numeric and datetime columns: the largest value (a date: seconds since "
            "1970-01-01)"
        ),
        "bins": st.column_config.NumberColumn(
            min_value=1, step=1, help="numeric and datetime columns: intervals to count in"
        ),
        "decimals": st.column_config.NumberColumn(
            min_value=0,
            max_value=MAX_DECIMALS,
            step=1,
            help="numeric columns: decimals in the output (0: whole numbers); empty: counted "
            "privately with the kind (a tenth of the narrowest bin when the kind and whole "
            "numbers are declared)",
        ),
    },
)
try:
    updated = _schema_from(
        pd.concat([what, values.drop(columns="column")], axis=1), session.schema.rules
    )
except (InputError, ValueError) as exc:
    st.error(f"That schema edit cannot be used: {exc}")
else:
    if updated != session.schema:
        session.schema = updated
        session.finished = None
        st.rerun()
if raw:
    st.warning(
        "Undeclared kinds, formats, categories and bounds will be read off the data: the "
        "result is **not end-to-end differentially private** and will say so."
    )

st.subheader("Whose privacy")
column_names = [c.name for c in session.schema.columns]
if session.person not in (None, *column_names):
    session.person = None  # a column of another table
person_column, rows_per_person = st.columns([2, 1])
person_column.selectbox(
    "Person column (a person-level guarantee)",
    [None, *column_names],
    format_func=lambda name: "none: the guarantee is per row" if name is None else name,
    # Streamlit shows the placeholder, not format_func(None), while the value is None
    placeholder="none: the guarantee is per row",
    key="person",
    help="The column that says whose row each is. At most K rows of each person are kept "
    "(chosen at random), every measurement's noise is calibrated for K rows, and the column "
    "is never synthesised nor released.",
)
rows_per_person.number_input(
    "At most K rows per person",
    min_value=1,
    max_value=10_000,
    step=1,
    key="max_rows_per_person",
    disabled=session.person is None,
    help="Public: the noise is K times the per-row noise for the same epsilon. Choose about "
    "the number of rows a typical person has (see the README).",
)
if session.person is not None:
    st.caption(
        f"The guarantee: {state.unit().words}. The noise of every step is "
        f"{session.max_rows_per_person} times the per-row noise; the column "
        f"{session.person!r} is left out of the schema above for the run."
    )

st.subheader("Where each structural choice comes from")
finished = session.finished
if finished is not None and finished.result.columns:
    if finished.result.end_to_end_dp:
        state.dp_badge()
    else:
        state.owner_badge()
        st.warning(
            "Choices marked 'raw data, not private' were read off the data (demo switch): "
            "this run is **not end-to-end DP**."
        )
    st.caption(
        "As decided by the last run on this table. Estimated choices come from that run's DP "
        "measurements (the ledger's structure and domain steps)."
    )
    decided = structure_frame(finished.result.columns, finished.result.excluded)
    st.dataframe(
        decided,
        # keyed by the table: another table's choices start at the top, not where these were
        key=f"structure_decided_{session.table_token}",
        hide_index=True,
        width="stretch",
        height=table_height(len(decided)),
    )
else:
    st.caption("Before a run: what is declared, and what the run will estimate or read.")
    plan = structure_plan_frame(session.schema, raw=raw)
    st.dataframe(
        plan,
        key=f"structure_plan_{session.table_token}",
        hide_index=True,
        width="stretch",
        height=table_height(len(plan)),
    )
