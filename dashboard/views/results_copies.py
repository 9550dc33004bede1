"""The Results page's owner-only check for copied rows: did any real row come through?

The check itself is the engine's (:mod:`privsyn_core.copied_rows`); this draws it. It reads the
real rows, so everything here is labelled owner-only and nothing here is offered for download
or written into a release: the report lives in the session only, with the run it belongs to.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from privsyn_core.copied_rows import CopiedRowsReport, copied_rows_report

from .. import state
from ..state import Finished, session


def copied_rows_panel(real: pd.DataFrame, finished: Finished) -> None:
    """The section: what the check does, a button that runs it, and its finding."""
    st.subheader("Did any real row come through?")
    state.owner_badge()
    st.caption(
        "Compares the synthetic rows one by one with the real rows, the way a careful analyst "
        "would before sharing the table: a synthesizer that copied real rows, whole or nearly, "
        "is caught here. It reads the real rows, so these numbers are for the data owner only: "
        "they are never part of the release nor of any download."
    )
    stored = session.copied_rows
    report = stored[1] if stored is not None and stored[0] == finished.fingerprint else None
    if report is None:
        if not st.button(
            "Check for copied rows",
            key="check_copied_rows",
            help="Takes a few seconds: every synthetic row is looked up among the real rows, "
            "and the distance to the closest real row is measured for a sample of 2,000.",
        ):
            return
        with st.spinner("Comparing the synthetic rows with the real rows..."):
            report = copied_rows_report(real, finished.result.synthetic, seed=0)
        session.copied_rows = (finished.fingerprint, report)
        st.rerun()  # drawn again without the button: the finding stays with its run
    _show(report)


def _show(report: CopiedRowsReport) -> None:
    if report.suspicious:
        st.error(report.verdict(), icon=":material/warning:")
    else:
        st.success(report.verdict(), icon=":material/check_circle:")
    share = report.copies_of_real / report.synthetic_rows
    st.metric(
        "Synthetic rows identical to some row of the whole real table",
        f"{share:.1%}" if share == 0 or share >= 0.001 else "<0.1%",
        help=f"{report.copies_of_real:,} of the {report.synthetic_rows:,} synthetic rows equal "
        f"one of the {report.real_rows:,} real rows in every column (missing equals missing). "
        "Against the whole table, so more than in the comparison below, which counts against "
        "half of it on both sides so that the two shares can be compared.",
    )
    st.markdown(
        "**Against real rows held out.** Some identical or very close rows are natural: people "
        "share ages, jobs and hours. To see how many to expect, the real rows are split at "
        f"random into two halves of {report.reference_rows:,} and {report.held_out.rows:,}. "
        "The synthetic rows and the second half are each compared with the first half: a "
        "synthesizer that copies rows shows far more copies than the held-out real rows do."
    )
    st.table(_comparison(report))
    st.caption(
        "Distance between two rows: the average over the columns of 0 (same value) to 1 (a "
        "different category, numbers a whole range apart, or missing against a value), so 0 is "
        "an identical row. The distance to the closest real row is what the literature calls "
        f"DCR. Distances are measured for {report.synthetic.sampled:,} synthetic and "
        f"{report.held_out.sampled:,} held-out rows against {report.distance_reference_rows:,} "
        "real rows; exact copies are counted on every row. "
        f"A warning needs a difference that chance explains less than {report.alpha:.0%} of "
        "the time (Fisher's exact tests)."
    )


def _comparison(report: CopiedRowsReport) -> pd.DataFrame:
    syn, held = report.synthetic, report.held_out

    def pct(share: float) -> str:
        return "<0.1%" if 0 < share < 0.001 else f"{share:.1%}"

    same = syn.sampled == held.sampled
    measured = f"of the {syn.sampled:,} measured" if same else "of the rows measured"
    rows = {
        "identical to a real row (exact copies), of all rows": (
            pct(syn.copy_share),
            pct(held.copy_share),
        ),
        "distance to the closest real row, median": (f"{syn.median:.4f}", f"{held.median:.4f}"),
        "the same, closest 5% (5th percentile)": (f"{syn.p5:.4f}", f"{held.p5:.4f}"),
        f"at distance 0 (identical), {measured}": (pct(syn.zero_share), pct(held.zero_share)),
        f"very close: distance {report.near_distance:.4f} or less (the closest 5% of both), "
        f"{measured}": (pct(syn.near_share), pct(held.near_share)),
    }
    return pd.DataFrame.from_dict(
        rows, orient="index", columns=["synthetic rows", "real rows held out"]
    )
