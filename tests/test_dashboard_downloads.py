"""The dashboard's CSV downloads warn about cells a spreadsheet would run and escape them only
when asked (issue 24, item 2), as the command line does."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from test_dashboard_app import _clear_caches, app, go, run_once  # noqa: F401 - fixture

from dashboard.downloads import ESCAPE_LABEL

# slow as a whole: each test runs a synthesis through the dashboard first (AppTest)
pytestmark = pytest.mark.slow

LINK = '=HYPERLINK("http://example.invalid","see")'


def formula_csv(rows: int = 3000) -> bytes:
    rng = np.random.default_rng(4)
    return (
        pd.DataFrame(
            {
                "note": np.array([LINK, "@SUM(A1)", "plain"])[rng.integers(0, 3, rows)],
                "delta": np.array([-2, -1, 3])[rng.integers(0, 3, rows)],
            }
        )
        .to_csv(index=False)
        .encode()
    )


def test_results_names_the_formula_columns_and_offers_the_escape():
    at = app()
    at.file_uploader(key="upload").set_value(("notes.csv", formula_csv(), "text/csv")).run()
    run_once(at)
    go(at, "results")
    warnings = [w.value for w in at.warning if "spreadsheet would run" in w.value]
    assert len(warnings) == 1 and "note" in warnings[0] and "delta" not in warnings[0]
    assert ESCAPE_LABEL in warnings[0], "the warning names the way to escape"
    box = at.checkbox(key="download_escape")
    assert box.value is False, "verbatim unless asked"
    box.check().run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.get("download_button")[0].label == "Download the synthetic CSV"


def test_a_table_without_formulas_gets_no_warning():
    at = run_once(app())
    go(at, "results")
    assert not [w.value for w in at.warning if "spreadsheet would run" in w.value]
    assert not [c for c in at.checkbox if c.key == "download_escape"]
