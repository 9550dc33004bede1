"""What the browser tests share: a dashboard server on a free local port, Debian's Chromium
(driven by Playwright), and a browser session that records every request it makes.

``playwright install`` cannot download a browser on these offline machines, so Debian's
Chromium is launched from ``/usr/bin/chromium``; the server is polled on ``/_stcore/health``
instead of slept for. A test module uses the ``chromium`` fixture by
importing it (``from browser_support import chromium as chromium``) and starts its server with
:func:`streamlit_server` in a fixture of its own (each has its own registry and options). Set
PRIVSYN_SCREENSHOTS to a folder to keep the screenshots (assets/screenshots/ has the README's).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import ROOT
from playwright.sync_api import Browser, Page, sync_playwright

CHROMIUM = "/usr/bin/chromium"
SHOTS = os.environ.get("PRIVSYN_SCREENSHOTS")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass(frozen=True)
class Server:
    url: str
    process: subprocess.Popen
    registry: Path
    log: Path


@contextmanager
def streamlit_server(
    folder: Path,
    *options: str,
    registry: Path | None = None,
    env: dict[str, str | None] | None = None,
    start_limit: float = 60,
) -> Iterator[Server]:
    """``streamlit run dashboard/app.py`` from the repository root on a free port, with its
    output in ``folder``/streamlit.log and a run registry of its own (never the user's).
    ``options`` are more ``--server...`` arguments; ``env`` sets (or, with None, removes)
    environment variables of the server."""
    port = free_port()
    log = folder / "streamlit.log"
    registry = registry or folder / "registry.sqlite3"
    environ = {**os.environ, "PRIVSYN_REGISTRY": str(registry)}
    for name, value in (env or {}).items():
        if value is None:
            environ.pop(name, None)
        else:
            environ[name] = value
    with log.open("w") as out:
        process = subprocess.Popen(
            [
                sys.executable, "-m", "streamlit", "run", "dashboard/app.py",
                "--server.headless", "true", "--server.port", str(port),
                "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false",
                "--server.fileWatcherType", "none", *options,
            ],
            cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env=environ,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + start_limit
        while time.time() < deadline:
            try:
                if urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).read() == b"ok":
                    break
            except OSError:
                time.sleep(0.3)
        else:
            raise RuntimeError(f"streamlit did not start: {log.read_text()[-2000:]}")
        yield Server(url, process, registry, log)
    finally:
        process.terminate()
        process.wait(timeout=20)


@pytest.fixture(scope="module")
def chromium() -> Iterator[Browser]:
    assert Path(CHROMIUM).exists(), "Debian's chromium is needed: apt-get install -y chromium"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--no-first-run", "--disable-sync",
            ],
        )  # fmt: skip
        yield browser
        browser.close()


#: Counts, in the page, every time Streamlit's app root turns to ``running`` (a rerun or a
#: page switch starting): :meth:`Session.idle` waits on the count, not on a pause.
RUN_WATCH = """
window.__privsynRuns = 0;
new MutationObserver(records => {
    for (const record of records) {
        if (record.target.getAttribute('data-test-script-state') === 'running') {
            window.__privsynRuns += 1;
        }
    }
}).observe(document, {subtree: true, attributes: true,
                      attributeFilter: ['data-test-script-state']});
"""

#: True (and the count reset) once a counted run has ended, or after ``grace`` ms without one.
IDLE = """(grace) => {
    const app = document.querySelector("[data-testid='stApp']");
    const now = performance.now();
    if (window.__privsynSince === undefined) window.__privsynSince = now;
    if (!app || app.getAttribute('data-test-script-state') !== 'notRunning') return false;
    if (window.__privsynRuns > 0 || now - window.__privsynSince > grace) {
        window.__privsynRuns = 0;
        window.__privsynSince = undefined;
        return true;
    }
    return false;
}"""


class Session:
    """One browser context (one user) with every request it makes recorded. ``open_now``:
    load the app at once."""

    def __init__(self, browser: Browser, url: str, open_now: bool = True) -> None:
        self.url = url
        self.context = browser.new_context(
            accept_downloads=True, viewport={"width": 1400, "height": 1000}
        )
        self.requests: list[str] = []
        self.dialogs: list[str] = []
        self.context.add_init_script(RUN_WATCH)
        self.page: Page = self.context.new_page()
        self.page.on("request", lambda request: self.requests.append(request.url))
        self.page.on(
            "dialog", lambda dialog: (self.dialogs.append(dialog.message), dialog.dismiss())
        )
        if open_now:
            self.page.goto(url)
            self.idle()

    def idle(self, timeout: float = 120_000, grace: float = 2_000) -> None:
        """Wait until the rerun that the last action started has finished.

        A fixed pause before looking for ``notRunning`` (the old way) returns too early on a
        loaded machine, where the server takes longer than the pause to start the rerun, and
        the test then reads the previous run's page. Instead :data:`RUN_WATCH` counts in the
        page every start of a run: this returns once a run has started since the last
        ``idle()`` and the app is not running, or, for an action that starts no run (an
        expander, a refused upload), once ``grace`` ms have passed with the app not running.
        """
        self.page.wait_for_function(IDLE, arg=grace, timeout=timeout, polling=50)

    def open(self, title: str) -> None:
        self.page.get_by_role("link", name=title).first.click()
        self.idle()

    def fill(self, label: str, value: str) -> None:
        """Type ``value`` into the input labelled ``label`` (not its help button, labelled
        "Help for <label>") and apply it."""
        field = self.page.get_by_label(label).and_(self.page.locator("input"))
        field.fill(value)
        field.press("Enter")
        self.idle()

    def pick(self, label: str, option: str) -> None:
        """Choose ``option`` in the selectbox labelled ``label``."""
        self.page.get_by_label(label, exact=True).click()
        self.page.get_by_role("option", name=option, exact=True).click()
        self.idle()

    def upload(self, name: str, data: bytes) -> None:
        self.page.locator("[data-testid='stFileUploaderDropzoneInput']").set_input_files(
            {"name": name, "mimeType": "text/csv", "buffer": data}
        )
        self.idle()

    def shot(self, name: str) -> None:
        if SHOTS:
            Path(SHOTS).mkdir(parents=True, exist_ok=True)
            self.page.screenshot(path=str(Path(SHOTS) / name), full_page=False)

    def assert_offline(self) -> None:
        foreign = [
            u for u in self.requests
            if not u.startswith((self.url, "data:", "blob:", "about:"))
        ]  # fmt: skip
        assert not foreign, foreign[:5]

    def close(self) -> None:
        self.context.close()
