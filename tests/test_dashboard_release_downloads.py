"""The Marginals page offers the run's noisy marginals and the Results page its release report
(issue 26, items 3 and 5), both made by the engine from the registry's stored bundle."""

from __future__ import annotations

from test_dashboard_app import _clear_caches, app, go, run_once  # noqa: F401 - fixture
from test_dashboard_downloads import formula_csv

from dashboard.downloads import ESCAPE_LABEL


def test_marginals_and_report_downloads_are_offered_and_labelled():
    at = app()
    at.file_uploader(key="upload").set_value(("notes.csv", formula_csv(), "text/csv")).run()
    run_once(at)
    go(at, "marginals")
    assert not at.exception, [e.value for e in at.exception]
    labels = [b.label for b in at.get("download_button")]
    assert any("noisy marginals" in label for label in labels), labels
    captions = " ".join(c.value for c in at.caption)
    assert "differentially private release" in captions and "spends nothing" in captions
    # a category a spreadsheet would run: named, verbatim unless the box is ticked
    assert any("spreadsheet would run" in w.value for w in at.warning)
    box = at.checkbox(key="download_marginals_escape")
    assert box.value is False and box.label == ESCAPE_LABEL
    box.check().run()
    assert not at.exception, [e.value for e in at.exception]
    go(at, "results")
    assert not at.exception, [e.value for e in at.exception]
    labels = [b.label for b in at.get("download_button")]
    assert any("release report (HTML page)" in label for label in labels), labels
    assert "Release report" in [s.value for s in at.subheader]
