"""A run's noisy marginals (a zip of CSV files) and its release report (one HTML page) as
downloads. The engine makes both from the registry's stored bundle, exactly as ``privsyn
marginals`` and ``privsyn report`` make them from the downloaded one; this module only offers
them, labelled for what they are."""

from __future__ import annotations

import streamlit as st

from privsyn_core.privacy.noise import RELEASE
from privsyn_core.release.bundle import BundleError, Release, load_release
from privsyn_core.release.marginal_files import marginal_files, marginals_zip
from privsyn_core.release.report import release_report

from .downloads import ESCAPE_LABEL
from .review import literal
from .state import session


def _release(run_id: int, bundle: bytes) -> Release | None:
    """The run's bundle read back (once per session and run: the stored bundle never
    changes), or None after showing why it cannot be."""
    releases = session.releases
    if run_id not in releases:
        try:
            releases[run_id] = load_release(bundle)
        except BundleError as exc:
            st.error(literal(f"The release bundle of run {run_id} cannot be read: {exc}"))
            return None
    return releases[run_id]


def _name(run_id: int, randomness: str, what: str, suffix: str) -> str:
    debug = "" if randomness == RELEASE else "-DEBUG"
    return f"privsyn-run-{run_id}-{what}{debug}.{suffix}"


def offer_marginals(
    run_id: int, bundle: bytes | None, randomness: str, why_none: str, key: str
) -> None:
    """A download of the run's noisy marginals, as measured and after consistency, one CSV
    each with a README and an index; without a bundle, ``why_none``."""
    if bundle is None:
        st.info(why_none)
        return
    release = _release(run_id, bundle)
    if release is None:
        return
    folder = _name(run_id, randomness, "marginals", "zip").removesuffix(".zip")
    files, found = marginal_files(release.model, f"privsyn-run-{run_id}.zip")
    if found:
        st.warning(literal(found.warning(escaped=False, remedy=f"tick '{ESCAPE_LABEL}' below")))
        if st.checkbox(ESCAPE_LABEL, key=f"{key}_escape"):
            files, _ = marginal_files(release.model, f"privsyn-run-{run_id}.zip", True)
    release_run = randomness == RELEASE
    st.download_button(
        "Download the noisy marginals (CSV files, zip)"
        if release_run
        else "Download the noisy marginals (debug run, NOT for release)",
        data=lambda: marginals_zip(files, folder),
        file_name=f"{folder}.zip",
        mime="application/zip",
        key=key,
        on_click="ignore",
        icon=":material/table_view:",
    )
    columns = len(release.model.engine)
    st.caption(
        f"Every noisy marginal this run measured (each column's 1-way marginal, then the "
        f"{len(release.model.noisy) - columns} in the table above), as measured "
        "(dp-noisy-NN-...csv) "
        f"and after the consistency step (dp-consistent-NN-...csv), one CSV file each, in "
        "the table's own values (categories, and number ranges for binned columns). A "
        "README.txt and an index.csv label them a differentially private release. The "
        "budget of the run already paid for them: downloading spends nothing. The same as "
        "`privsyn marginals RELEASE.zip -o DIR`."
    )


def offer_report(run_id: int, bundle: bytes | None, randomness: str, key: str) -> None:
    """A download of the run's release report (nothing without a bundle: the bundle's
    section above says why)."""
    if bundle is None:
        return
    release = _release(run_id, bundle)
    if release is None:
        return
    reports = session.release_reports
    if run_id not in reports:
        reports[run_id] = release_report(release.model, convergence=release.convergence).encode()
    page = reports[run_id]
    st.download_button(
        "Download the release report (HTML page)"
        if randomness == RELEASE
        else "Download the release report (debug run, NOT for release)",
        data=page,
        file_name=_name(run_id, randomness, "report", "html"),
        mime="text/html",
        key=key,
        on_click="ignore",
        icon=":material/description:",
    )
    st.caption(
        "One page for anyone who receives the release: the budget and the ledger, the "
        "marginals selected and their dependency graph, GUM's convergence, and every "
        "structural choice with where it came from. Differentially private content and "
        "public settings only; it opens offline in any browser (no script, nothing "
        "fetched). The bundle holds the same page as report.html."
    )
