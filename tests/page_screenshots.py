"""Screenshots of every dashboard page, at 1280 and 1920 px, on a 12-column and a 50-column
table, for the README and for a person to look at (issue 41):

    .venv/bin/python tests/page_screenshots.py assets/screenshots/pages

Each page is also checked for text cut off at its width (:data:`CUT_OFF`); what is found is
printed. Not a test (it makes files); tests/test_dashboard_pages_browser.py checks the same
on every page at 1280 px.
"""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
from browser_support import CHROMIUM, Session, streamlit_server
from conftest import ROOT
from PIL import Image
from playwright.sync_api import sync_playwright

PAGES = ("Data", "Privacy", "Run", "Marginals", "Results", "History", "Lab", "Learn")
WIDTHS = ((1280, 1000), (1920, 1080))
#: what each page is shown after: a button pressed, and the text that says it is done (the
#: Lab's first press asks to confirm and spends nothing)
ACTIONS = {
    "Run": ("Run synthesis", "Synthesised"),
    "Results": ("Check for copied rows", re.compile("copied rows|copies of real")),
    "Lab": ("Run the comparison", "This comparison will spend up to epsilon"),
    "Learn": ("Play the game", re.compile("No leak shown|Leak caught")),
}
TALLEST = 4000

#: The keys of the containers of the tables that show the user's rows: a row is as wide as
#: the table, so these may scroll sideways
ROW_TABLES = ("preview_rows", "synthetic_rows")

#: DOM text wider than its box where the box hides the rest (an ellipsis or a clip; icons,
#: drawn from a font of ligatures, and labels only screen readers read are not text), and
#: data grids whose columns run past their frame (a horizontal scrollbar), but for
#: :data:`ROW_TABLES`
CUT_OFF = """(rowTables) => {
    const main = document.querySelector("[data-testid='stMain']") || document.body;
    const found = [];
    for (const e of main.querySelectorAll('*')) {
        if (!e.childNodes.length || e.closest('[data-testid="stIFrame"]')) continue;
        const style = getComputedStyle(e);
        const text = [...e.childNodes].some(n => n.nodeType === 3 && n.textContent.trim());
        if (e.closest('[data-testid="stIconMaterial"]') ||
            e.querySelector('[data-testid="stIconMaterial"]')) continue;
        if (e.getBoundingClientRect().width <= 2) continue;  // a screen reader's label
        if (text && e.scrollWidth > e.clientWidth + 1 &&
            (style.textOverflow === 'ellipsis' || style.overflowX === 'hidden')) {
            found.push('text: ' + e.textContent.trim().slice(0, 60));
        }
    }
    for (const grid of main.querySelectorAll('[data-testid="stDataFrame"] .dvn-scroller')) {
        if (grid.scrollWidth > grid.clientWidth + 1) {
            if (rowTables.some(key => grid.closest('.st-key-' + key))) continue;
            const frame = grid.closest('[data-testid="stDataFrame"]');
            found.push('grid wider than its frame: ' +
                       (frame.getAttribute('aria-label') || frame.textContent.slice(0, 40)));
        }
    }
    return found;
}"""


def twelve_columns() -> bytes:
    """The bundled Adult sample less three columns: a real 12-column table."""
    sample = pd.read_csv(ROOT / "privsyn_core" / "samples" / "adult.csv")
    return (
        sample.drop(columns=["fnlwgt", "education-num", "native-country"])
        .to_csv(index=False)
        .encode()
    )


def fifty_columns(rows: int = 6000, seed: int = 50) -> bytes:
    """50 columns shaped like a survey: ten themes of four answers that follow the theme,
    five amounts and five free columns."""
    rng = np.random.default_rng(seed)
    columns: dict[str, np.ndarray] = {}
    themes = ("health", "housing", "income", "work", "school", "family", "travel", "media",
              "civic", "leisure")  # fmt: skip
    answers = np.array(["never", "rarely", "sometimes", "often", "always"])
    for theme in themes:
        latent = rng.integers(0, 5, rows)
        for q in range(4):
            keep = rng.random(rows) < 0.75
            columns[f"{theme}_q{q + 1}"] = answers[np.where(keep, latent, rng.integers(0, 5, rows))]
    for i in range(5):
        columns[f"amount_{i + 1}"] = np.round(rng.lognormal(8, 1, rows)).astype(int)
    for i in range(5):
        columns[f"free_{i + 1}"] = rng.integers(0, 3, rows)
    return pd.DataFrame(columns).to_csv(index=False).encode()


def shoot(user: Session, folder: Path, table: str, page: str) -> list[str]:
    """The page at each width, as tall as its content (up to ``TALLEST`` px): Streamlit
    scrolls its main block itself, so a taller window is the way to see the whole page."""
    problems = []
    for width, height in WIDTHS:
        user.page.set_viewport_size({"width": width, "height": height})
        user.page.wait_for_timeout(700)
        if width == 1280:
            problems += [f"{table} {page}: {p}" for p in user.page.evaluate(CUT_OFF, ROW_TABLES)]
        tall = user.page.evaluate("document.querySelector(\"[data-testid='stMain']\").scrollHeight")
        user.page.set_viewport_size({"width": width, "height": min(TALLEST, max(height, tall))})
        user.page.wait_for_timeout(1200)
        path = folder / f"{table}-{page.lower()}-{width}.png"
        user.page.screenshot(path=str(path))
        with Image.open(path) as image:  # 256 colours: a page's text and charts stay sharp
            small = image.convert("RGB").quantize(256)
        small.save(path, optimize=True)
    return problems


def main(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    problems: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu", "--no-first-run"]
        )
        for table, data in (("12-columns", twelve_columns()), ("50-columns", fifty_columns())):
            with streamlit_server(Path(tempfile.mkdtemp())) as server:
                user = Session(browser, server.url)
                user.upload(f"{table}.csv", data)
                user.page.get_by_text(f"Loaded {table}.csv").wait_for(timeout=60_000)
                for page in PAGES:
                    user.open(page)
                    if page in ACTIONS:
                        button, shown = ACTIONS[page]
                        user.page.get_by_role("button", name=button).click()
                        user.page.get_by_text(shown).first.wait_for(timeout=300_000)
                        user.idle()
                    user.page.wait_for_timeout(1500)
                    problems += shoot(user, folder, table, page)
                user.close()
        browser.close()
    print("\n".join(problems) or "no text cut off at 1280 px")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
