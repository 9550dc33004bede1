""" "Sample again": a new synthetic table from a stored release's fitted model, for free.

Shared by the Results page (the run just finished) and the History page (any recorded run,
from the registry's stored bundle). The model holds DP measurements and public metadata only
(:mod:`privsyn_core.generation.fitted`), so sampling reads no data, measures nothing and is
never recorded as a spend: the page says so next to the button. A condition (``sex=Female,
age=30..40``) draws only rows that satisfy it (:mod:`privsyn_core.generation.conditional`),
still for free. The new table lives in the session (keyed by run, rows, seed, iterations and
condition), never in a cache: nothing here is a noisy measurement, but a session's table
should not be served to another session.
"""

from __future__ import annotations

from dataclasses import replace

import streamlit as st

from privsyn_core.errors import InputError
from privsyn_core.generation.conditional import split_where
from privsyn_core.generation.fitted import FittedModel
from privsyn_core.release.bundle import BundleError, load_model

from . import downloads
from .state import session

#: the largest table the page makes (the CLI's ``privsyn generate`` has no such cap)
MAX_ROWS = 2_000_000

NO_SPEND = (
    "**No new privacy spend.** A new table is drawn from the measurements this release "
    "already paid for (post-processing): the private table is not read, nothing is measured, "
    "and the run registry's totals do not change. Any number of rows, any seed."
)


WHERE_HELP = (
    "Draw only rows that satisfy these conditions, on the release's own values: a category "
    "(`sex=Female`, several as `race=White|Black`) or a range of a numeric or date column "
    "(`age=30..40` with both ends included, `age>=30`, `age<40`). Separate conditions with "
    "commas; all must hold. Rows are drawn from the release's model and those that match "
    "are kept, so they follow its conditional distribution. Still no privacy spend."
)


def model_from_bundle(bundle: bytes | None) -> tuple[FittedModel | None, str]:
    """The model in a stored bundle, or None and why it cannot be sampled."""
    if bundle is None:
        return None, ""
    try:
        return load_model(bundle), ""
    except BundleError as exc:
        return None, f"This release cannot be sampled again: {exc}."


def sample_again(
    model: FittedModel | None, run_id: int, key: str, why_not: str = "", heading: bool = True
) -> None:
    """Rows, seed and condition inputs, a Generate button and, once drawn, a download and a
    preview (``heading`` False when the page has its own heading for this section)."""
    if heading:
        st.markdown(f"**Sample again from run {run_id}'s release**")
    if model is None:
        st.info(why_not or "This run has no release to sample from.")
        return
    st.caption(NO_SPEND)
    if "not for release" in model.ledger.randomness:
        st.caption(
            "This release's measurements used debug-mode noise (a seed was set): tables drawn "
            "from it are NOT for release either."
        )
    left, middle, right = st.columns(3)
    rows = left.number_input(
        "rows",
        min_value=1,
        max_value=MAX_ROWS,
        value=min(model.default_rows, MAX_ROWS),
        step=1000,
        key=f"{key}_rows",
        help="Default: the release's noisy row count. Any size costs nothing.",
    )
    seed = middle.number_input(
        "seed",
        min_value=0,
        value=0,
        step=1,
        key=f"{key}_seed",
        help="The same seed and settings give the same table.",
    )
    iterations = right.number_input(
        "GUM iterations",
        min_value=0,
        max_value=1000,
        value=model.defaults.gum.iterations,
        key=f"{key}_iterations",
        help="Generation only: more iterations fit the release's marginals more closely.",
    )
    condition = st.text_input(
        "only rows where (optional)",
        key=f"{key}_where",
        placeholder="sex=Female, age=30..40",
        help=WHERE_HELP,
    ).strip()
    where = split_where(condition) if condition else None
    wanted = (run_id, int(rows), int(seed), int(iterations), condition)
    store = session.resampled
    if st.button("Generate a new table (no privacy spend)", key=f"{key}_go"):
        gum = replace(model.defaults.gum, iterations=int(iterations))
        try:
            with st.spinner(f"Drawing {int(rows):,} rows from the release's measurements"):
                table = model.sample(int(rows), seed=int(seed), gum=gum, where=where)
                store[key] = (wanted, table)
        except InputError as exc:
            store.pop(key, None)
            st.error(f"Cannot draw that table: {exc}")
            return
    drawn = store.get(key)
    if drawn is None or drawn[0] != wanted:
        return
    table = drawn[1]
    st.success(
        f"Drew {len(table):,} rows from run {run_id}'s release with seed {int(seed)}"
        + (f", all where {condition}" if condition else "")
        + "; privacy spent: none."
    )
    downloads.offer_csv(
        f"Download the new table ({len(table):,} rows, CSV)",
        table,
        f"privsyn-run-{run_id}-sample-seed{int(seed)}-{len(table)}rows"
        + ("-conditional" if condition else "")
        + ".csv",
        key=f"{key}_download",
    )
    st.caption("Its first rows:")
    st.dataframe(table.head(100), key=f"{key}_preview", width="stretch", height=250)
