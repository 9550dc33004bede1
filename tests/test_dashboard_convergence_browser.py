"""The Run page, in Debian's Chromium: after a run it names the table GUM kept, in words and
with a star on the convergence chart (issue 41). Set PRIVSYN_SCREENSHOTS to keep
screenshots."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import pytest
from browser_support import Session, streamlit_server
from browser_support import chromium as chromium  # the fixture

#: the text of each SVG element a locator finds (SVG text has no innerText)
TEXTS = "elements => elements.map(e => e.textContent)"


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[str]:
    with streamlit_server(tmp_path_factory.mktemp("server")) as running:
        yield running.url


def test_after_a_run_the_page_names_the_kept_iteration(server, chromium):
    user = Session(chromium, server)
    user.page.set_viewport_size({"width": 1280, "height": 1000})
    user.open("Run")
    user.fill("GUM iterations (at most)", "20")
    user.page.get_by_role("button", name="Run synthesis").click()
    user.page.get_by_text("Synthesised").first.wait_for(timeout=240_000)
    user.idle()
    said = user.page.get_by_text("Which table came out.").locator("..").inner_text()
    # "... Kept the table from iteration 9 of 14: ..." or "... Kept the starting table ..."
    named = re.search(
        r"Kept the (table from (the last step, )?iteration (\d+)|starting table)", said
    )
    assert named, said
    chart = user.page.locator("[data-testid='stPlotlyChart']").last
    chart.locator(".main-svg").first.wait_for(timeout=30_000)
    labels = chart.locator(".annotation-text").evaluate_all(TEXTS)
    kept = [t for t in labels if t.startswith("kept:")]
    assert kept, labels
    if named.group(3):  # the chart's star names the same iteration as the words
        assert kept == [f"kept: iteration {named.group(3)}"]
    else:
        assert kept == ["kept: the starting table"]
    legend = chart.locator(".legendtext").evaluate_all(TEXTS)
    assert "each selected marginal" in legend and "the table kept" in legend
    time.sleep(0.5)
    user.shot("run-convergence-1280.png")
    user.assert_offline()
    user.close()
