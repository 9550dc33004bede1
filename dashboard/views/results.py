"""Results: download the synthetic table and its release bundle; compare it with the real
one and check it for copied real rows (owner-only)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from privsyn_core.data.columns import coded_frame
from privsyn_core.evaluation import encode_tables, fidelity_report, pairwise_l1
from privsyn_core.release.changes import KINDS, changes

# Streamlit runs a page as a script, without a package: it is named after its folders
# ("dashboard" in a checkout, "privsyn_dashboard" installed) for the imports below.
__package__ = f"{Path(__file__).resolve().parent.parent.name}.views"

from .. import downloads, records, release_downloads, resample, state
from ..charts import pair_error_heatmap, side_by_side
from ..state import session
from .results_copies import copied_rows_panel

st.title("Results")
finished = state.finished_or_stop("Run a synthesis first (Run page).")
result = finished.result
synthetic = result.synthetic

st.subheader("Synthetic table")
state.dp_badge()
if not result.end_to_end_dp:
    st.warning("NOT end-to-end DP: some domains were read off the raw data.")
with st.container(key="synthetic_rows"):  # rows as wide as the table: may scroll sideways
    st.dataframe(synthetic.head(200), key="synthetic_preview", width="stretch")
downloads.offer_csv("Download the synthetic CSV", synthetic, "synthetic.csv", key="download")

st.subheader("What the synthetic table changes")
state.dp_badge()
found = (
    changes(result.model, result.excluded, result.dropped_rules) if result.model is not None else ()
)
if not found:
    st.caption("Nothing beyond the noise: every column keeps its declared or estimated values.")
else:
    st.caption(
        "Read off the release's DP content (its bins, categories and consistent marginals): "
        "each share is an estimate, as every number of a release is."
    )
for kind, heading in KINDS.items():
    group = [c for c in found if c.kind == kind]
    if not group:
        continue
    with st.expander(f"{heading.capitalize()} ({len(group)})", expanded=len(group) <= 6):
        st.caption(f"To avoid: {group[0].fix}.")
        # a static table: long lines wrap (text from the table's names: never markdown)
        st.table(
            pd.DataFrame(
                {"column": [c.column for c in group], "what changed": [c.detail for c in group]}
            ).set_index("column")
        )
declarable = [c.declare for c in found if c.declare is not None]
if declarable and st.button(
    "Put these estimates in the Data page's column editor",
    key="declare_changes",
    help="Copies the estimated bounds, the released categories and the row ids into the "
    "schema on the Data page, to correct or complete there before the next run (declared "
    "values cost nothing and are used as they are).",
):
    schema = session.schema
    for entry in declarable:
        schema = schema.with_declared(entry)
    session.schema = schema
    st.success("The Data page's column editor now holds them: check and complete them there.")

st.subheader("Release bundle")
state.dp_badge()
records.offer_bundle(
    finished.run_id,
    finished.bundle,
    result.ledger.randomness,
    records.no_bundle_reason(finished.run_id, result.ledger.not_private),
    key="download_bundle",
)
if finished.bundle is not None:
    st.subheader("Release report")
    state.dp_badge()
    release_downloads.offer_report(
        finished.run_id, finished.bundle, result.ledger.randomness, key="download_report"
    )

st.subheader(f"Sample again from run {finished.run_id}'s release")
state.dp_badge()
resample.sample_again(
    result.model if result.end_to_end_dp else None,
    finished.run_id,
    key="results_resample",
    why_not="This run read domains off the raw data (the raw-domains switch): it is not a "
    "release, so there is nothing to sample again from.",
    heading=False,
)

st.subheader("Fidelity against the real table")
state.owner_badge()
st.caption(
    "These numbers and charts read the real table: they are for the data owner only and are "
    "never part of the release."
)
real = session.table
if real is None:
    st.info(
        "The table is a file on disk, counted where it lies: the dashboard does not load it, "
        "so it cannot compare it row by row with the synthetic table, nor check the synthetic "
        "rows for copies of real ones. On the command line, `privsyn evaluate` does both."
    )
    st.stop()
if st.toggle("Show the owner-only comparison", key="show_fidelity"):
    column = st.selectbox("Column", list(synthetic.columns), key="fidelity_column")
    st.plotly_chart(side_by_side(real[column], synthetic[column]), key="histograms")

    real_codes = coded_frame(result.columns, real)
    syn_codes = coded_frame(result.columns, synthetic)
    real_array, syn_array, sizes = encode_tables(real_codes, syn_codes)
    errors = pd.DataFrame(
        pairwise_l1(real_array, syn_array, sizes),
        index=real_codes.columns,
        columns=real_codes.columns,
    )
    st.plotly_chart(pair_error_heatmap(errors), key="pair_errors")
    label = st.selectbox("Classifier label", ["(none)", *real_codes.columns], key="label")
    report = fidelity_report(real_codes, syn_codes, label=None if label == "(none)" else label)
    left, middle, right = st.columns(3)
    left.metric("average 2-way L1 (0..2)", f"{report.two_way_l1:.4f}")
    middle.metric("3-way range queries, mean error", f"{report.range_query_error:.4f}")
    if report.svm_misclassification is not None:
        right.metric(
            "SVM trained on synthetic, misclassified",
            f"{report.svm_misclassification:.3f}",
            help=f"trained on real rows: {report.nonprivate_svm_misclassification:.3f}; "
            f"majority class: {report.majority_misclassification:.3f}",
        )

copied_rows_panel(real, finished)
