"""The reviewed-schema path on the Data page: draft a schema from the table, tick what is public.

A small table cannot afford private domain estimates: at epsilon 1 a category needs hundreds
of records to clear the threshold (the Privacy page says how many), so penguins' 344 rows lose
every column after paying for the estimates. What the owner would publish anyway (the species
names, a plausible range of body mass) can be declared instead, for free. The draft is read off
the raw data, so nothing in it is public until the owner ticks its line: only ticked lines are
declared, every other column stays as it was (estimated privately when the run starts).
"""

from __future__ import annotations

import re
from dataclasses import replace

import pandas as pd
import streamlit as st

from privsyn_core.data.schema import DRAFT_WARNING, ColumnSchema, Kind, Schema, infer_schema

from . import state
from .state import session

TICKS = "review_ticks"


def literal(text: object) -> str:
    """``text`` as literal markdown: column names and values come from the uploaded file, and a
    widget label renders markdown (a value like ``![x](http://...)`` would load an image from
    another machine)."""
    return re.sub(r"([\\`*_{}\[\]()#+\-.!|~<>$:&])", r"\\\1", str(text))


def declared_line(column: ColumnSchema) -> str:
    """What ticking ``column``'s line declares, in words."""
    if column.exclude:
        return "leave the column out"
    if column.kind is Kind.CATEGORICAL:
        values = ", ".join(str(c) for c in column.categories or ())
        return f"categorical: {values}"
    if column.kind is Kind.DATETIME:
        return f"dates from {column.lower:g} to {column.upper:g} s, format {column.datetime_format}"
    whole = "whole numbers" if column.integer else "numbers"
    return f"{whole} from {column.lower:g} to {column.upper:g} in {column.bins} bins"


def apply_ticks(schema: Schema, draft: Schema, ticked: set[str]) -> Schema:
    """``schema`` with the ticked columns' drafted lines declared, and nothing else changed.

    The missing flag is not taken from the draft: left open it costs nothing extra (PrivSyn's
    noisy 1-way marginal measures the missing rate), while declaring it from the data would
    say whether anyone's value is missing.
    """
    for column in draft.columns:
        if column.name in ticked:
            declared = replace(column, missing=None, reason="declared from the reviewed draft")
            schema = schema.with_column(declared)
    return schema


def section(table: pd.DataFrame, busy: bool) -> None:
    """The Data page's "Review a drafted schema" section (in-memory tables only)."""
    draft = session.review_draft
    if draft is not None and draft.names() != tuple(str(c) for c in table.columns):
        draft = session.review_draft = None  # a new table was loaded
    applied = session.review_applied
    session.review_applied = None
    st.subheader("Declare what is public: review a drafted schema")
    state.owner_badge()
    st.write(
        "A small table loses its columns to the private domain estimates: each category "
        "needs many records to survive their noise (the Privacy page says how many at your "
        "budget). Categories and ranges you would publish anyway can be **declared** "
        "instead, which costs nothing. The draft below is **read off the raw data** and is "
        "shown to you, the owner, only. **Only the lines you tick are declared**; every "
        "other column stays as it is in the schema below."
    )
    if st.button("Draft a schema from this table", key="review_draft_button", disabled=busy):
        session.review_draft = draft = infer_schema(table)
        for index in range(len(draft.columns)):
            session.forget(f"{TICKS}_{index}")
    if applied:
        st.success(
            f"Declared {len(applied)} column(s): {literal(', '.join(applied))}. See the schema "
            "below."
        )
    if draft is None:
        return
    st.error(
        f"**Read off the data: review every line.** {DRAFT_WARNING} Here, leaving a line "
        "unticked is how you delete it."
    )
    st.caption(
        "Tick a line only if you would publish it as it stands (for example, the species "
        "names of a public study). Ranges: the draft's minimum and maximum are the most "
        "extreme records; round them outwards in the schema below if you declare them."
    )
    ticked = set()
    for index, column in enumerate(draft.columns):
        if st.checkbox(
            f"**{literal(column.name)}**: {literal(declared_line(column))}",
            key=f"{TICKS}_{index}",
            help=f"how the draft read it: {literal(column.reason)}" if column.reason else None,
            disabled=busy,
        ):
            ticked.add(column.name)
    label = f"Declare the {len(ticked)} ticked line(s) in the schema"
    if st.button(label, key="review_apply", disabled=busy or not ticked, type="primary"):
        session.schema = apply_ticks(session.schema, draft, ticked)
        session.finished = None
        session.forget("schema_editor")  # their edits were made on the old schema
        session.forget("schema_values_editor")
        session.review_draft = None
        session.review_applied = sorted(ticked)
        st.rerun()
