"""Every page at 1280 px, after a run on a 12-column table: no text cut off, no table of
settings or numbers wider than its frame (issue 41). Tables of the user's rows (the previews)
may scroll sideways: a row is as wide as the table is."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from browser_support import Session, streamlit_server
from browser_support import chromium as chromium  # the fixture
from page_screenshots import CUT_OFF, PAGES, ROW_TABLES, twelve_columns


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[str]:
    with streamlit_server(tmp_path_factory.mktemp("pages")) as running:
        yield running.url


def test_no_page_cuts_text_off_at_1280_px(server, chromium):
    user = Session(chromium, server)
    user.page.set_viewport_size({"width": 1280, "height": 1000})
    user.upload("twelve.csv", twelve_columns())
    user.page.get_by_text("Loaded twelve.csv").wait_for(timeout=60_000)
    found: dict[str, list[str]] = {}
    for page in PAGES:
        user.open(page)
        if page == "Run":
            user.page.get_by_role("button", name="Run synthesis").click()
            user.page.get_by_text("Synthesised").first.wait_for(timeout=300_000)
            user.idle()
        user.page.wait_for_timeout(800)
        found[page] = user.page.evaluate(CUT_OFF, ROW_TABLES)
    assert all(not problems for problems in found.values()), found
    user.assert_offline()
    user.close()


def test_the_check_sees_a_cut_off_label(server, chromium):
    """The check is not blind: a label squeezed into a box with an ellipsis is found."""
    user = Session(chromium, server)
    user.page.evaluate(
        """() => {
        const e = document.createElement('div');
        e.style.cssText = 'width:40px;overflow:hidden;text-overflow:ellipsis;white-space:nowrap';
        e.textContent = 'a label far too long for its box';
        document.querySelector("[data-testid='stMain']").appendChild(e);
    }"""
    )
    assert any("far too long" in p for p in user.page.evaluate(CUT_OFF, ROW_TABLES))
    user.close()
