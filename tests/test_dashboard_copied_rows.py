"""The Results page's owner-only check for copied rows (AppTest, in-process; no browser).

One run on the bundled sample, then: the check finds no copies in the run's synthetic rows,
finds them when the synthetic table is swapped for resampled real rows, is labelled
owner-only, and leaves every download (the synthetic CSV, the release bundle) as it was.
"""

from __future__ import annotations

import dataclasses
import io
import time
import zipfile

import pytest
from streamlit.testing.v1 import AppTest
from test_dashboard_app import APP, _clear_caches, go  # noqa: F401 - fixture

# slow as a whole: a synthesis through the dashboard, then the Results page's check on its rows
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def finished_run() -> AppTest:
    """The app after one short seeded run on the sample (shared: a run takes a while)."""
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    go(at, "run")
    at.number_input(key="iterations").set_value(5).run()
    at.text_input(key="seed_text").set_value("3").run()
    at.button(key="run").click().run()
    deadline = time.monotonic() + 300
    while at.session_state["run_state"] == "running" and time.monotonic() < deadline:
        time.sleep(0.2)
        at.run()
    assert at.session_state["run_state"] == "done"
    return at


def texts(at: AppTest) -> str:
    parts = [e.value for kind in ("success", "error", "caption", "markdown") for e in at.get(kind)]
    return "\n".join(str(p) for p in parts)


def test_the_check_finds_no_copies_in_a_run_and_says_owner_only(finished_run):
    at = go(finished_run, "results")
    headings = [h.value for h in at.subheader]
    assert "Did any real row come through?" in headings
    assert "copied_rows" not in at.session_state  # not run until asked
    # two owner-only badges: the fidelity panel's and this one's
    badges = [m.value for m in at.markdown if "owner-only: reads the raw data" in str(m.value)]
    assert len(badges) == 2, badges
    labels_before = [b.label for b in at.get("download_button")]
    bundle_before = at.session_state["finished"].bundle

    at.button(key="check_copied_rows").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert "check_copied_rows" not in [b.key for b in at.button]  # done: no button left
    fingerprint, report = at.session_state["copied_rows"]
    assert fingerprint == at.session_state["finished"].fingerprint
    assert not report.suspicious
    assert any(s.value.startswith("No sign of copied rows") for s in at.success)
    table = at.table[-1].value
    assert list(table.columns) == ["synthetic rows", "real rows held out"]
    assert "for the data owner only" in texts(at)

    # nothing of the check is offered for download or enters the release
    assert [b.label for b in at.get("download_button")] == labels_before
    assert at.session_state["finished"].bundle == bundle_before
    with zipfile.ZipFile(io.BytesIO(bundle_before)) as archive:
        content = b"".join(archive.read(name) for name in archive.namelist())
    assert b"copied" not in content.lower() and b"closest real" not in content.lower()

    # kept with its run: a rerun shows it again without a click
    at.run()
    assert any(s.value.startswith("No sign of copied rows") for s in at.success)


def test_a_synthetic_table_of_resampled_real_rows_is_warned_about(finished_run):
    at = finished_run
    finished = at.session_state["finished"]
    real = at.session_state["table"]
    copying = real.sample(n=len(real), replace=True, random_state=1).reset_index(drop=True)
    at.session_state["finished"] = dataclasses.replace(
        finished,
        result=dataclasses.replace(finished.result, synthetic=copying),
        fingerprint=finished.fingerprint + "-copying",
    )
    go(at, "results")
    assert not at.error  # the earlier run's report is not shown for this one
    at.button(key="check_copied_rows").click().run()
    assert not at.exception, [e.value for e in at.exception]
    (warning,) = at.error
    assert warning.value.startswith("Warning:") and "exact copies" in warning.value
    assert any(m.label.startswith("Synthetic rows identical to some row") for m in at.metric)
    assert next(m for m in at.metric if m.label.startswith("Synthetic rows")).value == "100.0%"
