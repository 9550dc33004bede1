"""The Privacy page in Debian's Chromium at 1280 and 1920 px: no text is cut off, the noise
table needs no sideways scrolling, and every help icon opens its text."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from browser_support import Session, streamlit_server
from browser_support import chromium as chromium  # the fixture

#: the text elements Streamlit clips with an ellipsis (or hides) when they do not fit
TEXT = ", ".join(
    f"[data-testid='stMain'] [data-testid='{name}']"
    for name in (
        "stMetricLabel",
        "stMetricValue",
        "stWidgetLabel",
        "stCaptionContainer",
        "stMarkdownContainer",
        "stHeading",
        "stExpander",
    )
)

#: the elements of ``TEXT`` whose text is wider than their box, with both widths
CLIPPED = """els => els
    .filter(e => e.scrollWidth > e.clientWidth + 1)
    .map(e => `${e.innerText.slice(0, 60)}: ${e.scrollWidth} > ${e.clientWidth}`)"""


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[str]:
    with streamlit_server(tmp_path_factory.mktemp("server")) as running:
        yield running.url


@pytest.mark.parametrize("width", [1280, 1920])
def test_the_privacy_page_cuts_no_text_off(server, chromium, width):
    user = Session(chromium, server)
    user.page.set_viewport_size({"width": width, "height": 1000})
    user.open("Privacy")
    page = user.page
    page.get_by_role("heading", name="How the budget is spent").wait_for(timeout=30_000)
    page.get_by_text("What each step does, in plain").click()
    user.idle()
    page.get_by_text("In detail:").first.wait_for(timeout=30_000)
    assert page.locator(TEXT).count() > 20
    assert page.locator(TEXT).evaluate_all(CLIPPED) == []
    # the noise table's cells never wrap: it must fit without a sideways scroll
    scroller = page.locator("[data-testid='stDataFrame'] .dvn-scroller").first
    scroll, client = scroller.evaluate("e => [e.scrollWidth, e.clientWidth]")
    assert scroll <= client + 1, (scroll, client)
    # each metric and slider has a help icon, and the rho's help names its epsilon
    for name in ("stMetric", "stSlider"):
        blocks = page.locator(f"[data-testid='stMain'] [data-testid='{name}']")
        assert blocks.count() >= 3
        for i in range(blocks.count()):
            assert blocks.nth(i).locator("[data-testid='stTooltipHoverTarget']").count() == 1
    page.locator("[data-testid='stMetric']").first.locator(
        "[data-testid='stTooltipHoverTarget']"
    ).hover()
    tooltip = page.locator("[data-testid='stTooltipContent']").first
    tooltip.wait_for(timeout=10_000)
    assert "epsilon 1 at delta 1e-9" in tooltip.inner_text()
    user.shot(f"privacy-{width}.png")
    user.assert_offline()
    user.close()
