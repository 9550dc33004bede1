"""Load on one dashboard server: ten browser sessions run a synthesis each at the same moment.

One server on loopback, started as the other browser tests start theirs, with the default cap
of two runs at once (``PRIVSYN_DASHBOARD_RUNS=2``). Two sessions start long runs that hold both
slots; the eight others are then started together and must each be seen waiting in line. Each
session is told apart by its own epsilon and seed (debug mode, so its result can be computed
again here, bit for bit), and must end with its own settings and result on its pages and in
the registry, which must hold exactly the ten runs. Then three sessions: two long runs hold
both slots, and the third, in line, is cancelled: it never runs and nothing is recorded.

The server's resident memory is read from ``/proc`` during the test (and its high-water mark,
``VmHWM``, at the end) and must stay within a bound computed from what the sessions keep and
what the capped runs use at once (see :func:`memory_bound`).

Nothing is timed against the machine's speed: the test fails when no session's run has moved
(a stage, a GUM iteration, an outcome) for :data:`STALL_LIMIT` seconds, a hang, and says what
each page still waiting shows; :data:`FINISH_LIMIT` is only a backstop. The ten runs took
60 s on the 2-core machine (450 s while Streamlit collected garbage after every poll).
"""

from __future__ import annotations

import re
import threading
import time
import tracemalloc
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from browser_support import SHOTS, Server, Session, streamlit_server
from browser_support import chromium as chromium  # the fixture
from conftest import ROOT
from playwright.sync_api import Browser

from dashboard.state import SAMPLE_NAME
from privsyn_core import synthesize
from privsyn_core.config import PrivSynConfig
from privsyn_core.data.io import read_table
from privsyn_core.generation.gum_settings import GumSettings
from privsyn_core.privacy.conversion import rho_from_epsilon_delta
from privsyn_core.release.bundle import bundle_bytes
from privsyn_core.release.registry import Registry

SESSIONS = 10
CAP = 2
#: GUM iterations per run (the plateau stop off, so every run does the same work), and of the
#: two runs that hold both slots while the others are started (15 s each, alone)
ITERATIONS = 10
HOLD_ITERATIONS = 300
DELTA = 1e-9
#: limits, in seconds: the server's start; no run of any session moving (a hang); everything
START_LIMIT = 60
STALL_LIMIT = 300
FINISH_LIMIT = 2400
MB = 2**20


def epsilon_of(i: int) -> float:
    return round(0.5 + 0.25 * i, 2)


def seed_of(i: int) -> int:
    return 1000 + i


def config(iterations: int = ITERATIONS) -> PrivSynConfig:
    return PrivSynConfig(gum=GumSettings(iterations=iterations, patience=None, noise_floor=None))


def rss_bytes(pid: int, field: str = "VmRSS") -> int:
    """A process's resident set (or its high-water mark, ``VmHWM``) from /proc, in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no {field} for process {pid}")


class Sampler:
    """Reads a process's RSS every ``every`` seconds in a thread, until stopped."""

    def __init__(self, pid: int, every: float = 0.1) -> None:
        self.pid, self.every = pid, every
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.samples.append((time.monotonic(), rss_bytes(self.pid)))
            self._stop.wait(self.every)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    @property
    def peak(self) -> int:
        return max(rss for _, rss in self.samples)


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("soak")
    env = {"PRIVSYN_DASHBOARD_RUNS": str(CAP), "PRIVSYN_DASHBOARD_QUEUE": None}
    with streamlit_server(folder, env=env, start_limit=START_LIMIT) as running:
        yield running


class User(Session):
    """One browser context (one person) with its own settings, every request recorded."""

    def __init__(
        self, browser: Browser, url: str, epsilon: float, seed: int, iterations: int = ITERATIONS
    ) -> None:
        super().__init__(browser, url, open_now=False)
        self.epsilon, self.seed, self.iterations = epsilon, seed, iterations
        self.saw_line = False
        self.run_id: int | None = None

    def prepare(self) -> None:
        """The sample table, this user's epsilon, seed and iterations, no plateau stop."""
        self.page.goto(self.url)
        self.idle()
        self.page.get_by_role("heading", name="UCI Adult sample").wait_for(timeout=60_000)
        self.open("Privacy")
        self.fill("epsilon", f"{self.epsilon:g}")
        self.open("Run")
        self.fill("GUM iterations (at most)", str(self.iterations))
        self.page.get_by_text("stop early (at the noise level").click()
        self.idle()
        self.fill("seed (debug mode", str(self.seed))
        assert self.page.get_by_text(f"epsilon {self.epsilon:g}").count() >= 1

    def finished(self) -> bool:
        if self.page.get_by_text("Waiting for a free slot").count():
            self.saw_line = True
        return self.page.get_by_text("Synthesised").count() > 0

    def progress(self) -> tuple[str, ...]:
        """What the Run page says of the run's progress now: its progress bars' texts (the
        stage, the GUM iteration) and its error and warning boxes. Not the seconds it has
        run or waited, which change while it is stuck."""
        shown = self.page.locator(
            "[data-testid='stProgress'], [data-testid='stAlertContentError'], "
            "[data-testid='stAlertContentWarning'], [data-testid='stException']"
        )
        return tuple(shown.all_inner_texts())

    def failed(self) -> str | None:
        """The text of an error on the page (a failed or refused run, an exception)."""
        shown = self.page.locator(
            "[data-testid='stAlertContentError'], [data-testid='stException']"
        )
        return " | ".join(shown.all_inner_texts()) or None

    def describe(self) -> str:
        main = self.page.locator("[data-testid='stMain']").first.inner_text()[:400]
        return f"session at epsilon {self.epsilon:g} ({self.page.url}): {main!r}"


def wait_for_every_run(users: list[User], server: Server) -> None:
    """Until every session's page shows its result: fails at once on an error on a page, and
    when no run moved for STALL_LIMIT seconds (or, as a backstop, after FINISH_LIMIT), with
    what each page still waiting shows and the end of the server's log."""
    started = moved = time.monotonic()
    seen: dict[int, tuple[str, ...]] = {}
    pending = list(users)
    while pending:
        now = time.monotonic()
        for user in pending:
            assert (error := user.failed()) is None, f"{user.describe()}: {error}"
            if (shown := user.progress()) != seen.get(id(user)):
                seen[id(user)], moved = shown, now
        still = [user for user in pending if not user.finished()]
        if len(still) < len(pending):
            moved = now
        pending = still
        stalled, over = now - moved > STALL_LIMIT, now - started > FINISH_LIMIT
        if pending and (stalled or over):
            why = f"no run moved for {STALL_LIMIT} s" if stalled else f"over {FINISH_LIMIT} s"
            pages = "\n".join(user.describe() for user in pending)
            log = server.log.read_text(errors="replace")[-2000:]
            raise AssertionError(f"{len(pending)} runs not done, {why}:\n{pages}\n{log}")
        time.sleep(0.5)


def expected_csv(table, user: User) -> bytes:
    """The synthetic CSV a session's run must give (debug mode: replayable)."""
    result = synthesize(
        table,
        user.epsilon,
        DELTA,
        config=config(user.iterations),
        rng=np.random.default_rng(user.seed),
    )
    return result.synthetic.to_csv(index=False).encode()


@dataclass(frozen=True)
class Footprint:
    """Bytes one run allocates at its peak, and what a session keeps once it has finished."""

    run_peak: int
    kept: int


def footprint(table) -> Footprint:
    """Measured here with tracemalloc (NumPy reports its buffers to it) on the same run as the
    sessions': the peak of a run with its bundle, and what a finished session keeps (its
    result and bundle)."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        result = synthesize(table, 1.0, DELTA, config=config(), rng=np.random.default_rng(0))
        bundle = bundle_bytes(result, config())
        current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert bundle and result.n_records > 0
    return Footprint(run_peak=peak - before, kept=current - before)


def memory_bound(base: int, print_: Footprint) -> int:
    """What the server may hold at its peak, with the line doing its job.

    ``base`` is the server once every session has loaded the sample (their tables are
    counted in it). On top: every session's finished result and bundle (``kept``, which stays
    by design until the session ends or runs again), ``CAP`` runs at their peak at once, each
    doubled for what Streamlit and pandas copy on the way (the Arrow tables of the pages'
    previews, the allocator's freed but unreturned pages), and 150 MB for the pages drawn for
    ten sessions. Measured: base 485 MB, peak 613 MB, bound 783 MB (peak 597 MB while
    Streamlit still collected garbage after every script run). With these small runs
    (13 MB each) the bound would not by itself catch more than ``CAP`` runs at once (the
    worker tests check the cap exactly); it catches what grows with the polling and the
    sessions, e.g. a copy of the table or of a result kept per page run or per poll.
    """
    return base + SESSIONS * 2 * print_.kept + CAP * 2 * print_.run_peak + 150 * MB


def test_ten_sessions_at_once_each_get_their_own_run(server, chromium, capsys):
    table = read_table(ROOT / "privsyn_core" / "samples" / "adult.csv")
    users = [
        User(
            chromium,
            server.url,
            epsilon_of(i),
            seed_of(i),
            HOLD_ITERATIONS if i < CAP else ITERATIONS,
        )
        for i in range(SESSIONS)
    ]
    holders, others = users[:CAP], users[CAP:]
    for user in users:
        user.prepare()
    base = rss_bytes(server.process.pid)

    with Sampler(server.process.pid) as sampler:
        started = time.monotonic()
        for user in holders:
            user.page.get_by_role("button", name="Run synthesis").click()
        for user in holders:  # both slots taken: the runs are in GUM
            gum = user.page.get_by_text(re.compile(r"GUM iteration \d+ of at most"))
            gum.first.wait_for(timeout=STALL_LIMIT * 1000)
        for user in others:
            user.page.get_by_role("button", name="Run synthesis").click()
        wait_for_every_run(users, server)
        all_done = time.monotonic() - started
    peak = max(sampler.peak, rss_bytes(server.process.pid, "VmHWM"))

    success = re.compile(
        rf"Synthesised [\d,]+ rows from {re.escape(SAMPLE_NAME)} at epsilon "
        r"([\d.]+) .* Recorded as run (\d+) "
    )
    for user in users:
        text = user.page.get_by_text("Synthesised").first.inner_text()
        match = success.search(text)
        assert match, text
        assert float(match.group(1)) == user.epsilon, (user.epsilon, text)
        user.run_id = int(match.group(2))
        assert user.page.locator("[data-testid='stException']").count() == 0

    runs = {run.id: run for run in Registry(server.registry).runs()}
    assert sorted(runs) == sorted(user.run_id for user in users), "exactly the ten runs"
    for user in users:
        run = runs[user.run_id]
        assert run.epsilon == pytest.approx(user.epsilon) and run.delta == DELTA
        assert run.config["epsilon"] == user.epsilon and run.config["seed_given"] is True
        assert run.config["iterations"] == user.iterations and "outcome" not in run.config
        assert 0 < run.rho <= rho_from_epsilon_delta(user.epsilon, DELTA) * (1 + 1e-9)
        assert run.has_bundle and run.randomness != "release"

    # each session's pages show its own ledger and its own table: the one its settings give
    for user in users:
        user.open("Marginals")
        # the session's own ledger: the spend its run recorded (it grows with epsilon)
        spent = f"rho {runs[user.run_id].rho:.4g} of "
        user.page.get_by_text(re.compile(r"zCDP\): " + re.escape(spent))).first.wait_for(
            timeout=60_000
        )
        user.open("Results")
        with user.page.expect_download() as download:
            user.page.get_by_role("button", name="Download the synthetic CSV").click()
        downloaded = Path(download.value.path()).read_bytes()
        assert downloaded == expected_csv(table, user), (
            f"session at epsilon {user.epsilon} got another session's table"
        )
        user.assert_offline()

    print_ = footprint(table)
    bound = memory_bound(base, print_)
    for user in users:
        user.context.close()
    with capsys.disabled():
        print(
            f"\n[soak] {SESSIONS} sessions, cap {CAP}, {ITERATIONS} GUM iterations each "
            f"({HOLD_ITERATIONS} for the {CAP} that hold the slots): all "
            f"finished in {all_done:.1f} s; server RSS before the runs {base / MB:.0f} MB, peak "
            f"{peak / MB:.0f} MB (bound {bound / MB:.0f} MB; one run's peak "
            f"{print_.run_peak / MB:.0f} MB, a finished session keeps {print_.kept / MB:.0f} MB); "
            f"{sum(user.saw_line for user in users)} of them seen waiting in line"
        )
    assert peak <= bound, (peak / MB, bound / MB)
    waited = [user.saw_line for user in others]
    assert all(waited), f"only {sum(waited)} of the {len(others)} runs started past the cap waited"


def test_cancel_takes_a_waiting_run_out_of_line(server, chromium):
    """Two long runs hold both slots; a third session waits in line, says so, and its Cancel
    takes it out: nothing of it is recorded. The long runs are cancelled afterwards."""
    before = len(Registry(server.registry).runs())
    holders = [User(chromium, server.url, 1.0, 7 + i) for i in range(CAP)]
    late = User(chromium, server.url, 9.0, 99)
    for user in [*holders, late]:
        user.prepare()
    for user in holders:
        user.fill("GUM iterations (at most)", "500")
        user.page.get_by_role("button", name="Run synthesis").click()
    for user in holders:
        gum = user.page.get_by_text(re.compile(r"GUM iteration \d+ of at most"))
        gum.first.wait_for(timeout=300_000)
    late.page.get_by_role("button", name="Run synthesis").click()
    late.page.get_by_text("Waiting for a free slot").first.wait_for(timeout=120_000)
    assert late.page.get_by_text("Your run is next in line").count()
    late.page.get_by_role("button", name="Cancel").last.wait_for(timeout=60_000)
    if SHOTS:
        late.page.get_by_text(re.compile(r"Waiting for \d+ s")).first.wait_for(timeout=60_000)
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        late.page.screenshot(path=str(Path(SHOTS) / "run-waiting.png"))
    late.page.get_by_role("button", name="Cancel").last.click()
    late.page.get_by_text("cancelled while it waited for a free slot").first.wait_for(
        timeout=120_000
    )
    assert late.page.get_by_text("It never started: nothing was spent").count()
    for user in holders:
        user.page.get_by_role("button", name="Cancel").last.click()
        user.page.get_by_text("The last run was cancelled").first.wait_for(timeout=120_000)
    runs = Registry(server.registry).runs()[before:]
    assert len(runs) == CAP and all(run.config.get("outcome") == "cancelled" for run in runs)
    assert all(run.epsilon == 1.0 for run in runs), "nothing of the epsilon-9 session"
    for user in [*holders, late]:
        assert user.page.locator("[data-testid='stException']").count() == 0
        user.assert_offline()
        user.context.close()


class _StuckPage:
    """A session whose run never moves (the hang the soak test must report), or one that
    shows an error."""

    def __init__(self, error: str | None = None) -> None:
        self.epsilon, self.saw_line, self.error = 1.0, False, error

    def finished(self) -> bool:
        return False

    def progress(self) -> tuple[str, ...]:
        return ("Stage 8 of 10: GUM synthesis",)

    def failed(self) -> str | None:
        return self.error

    def describe(self) -> str:
        return "session at epsilon 1 (stuck)"


def test_the_wait_fails_on_a_run_that_stops_moving_and_on_an_error(monkeypatch, tmp_path):
    log = tmp_path / "streamlit.log"
    log.write_text("the server's last words")
    server = Server("http://127.0.0.1:1", None, tmp_path / "registry.sqlite3", log)
    monkeypatch.setattr(f"{__name__}.STALL_LIMIT", 1)
    with pytest.raises(AssertionError, match=r"(?s)no run moved for 1 s.*stuck.*last words"):
        wait_for_every_run([_StuckPage()], server)
    with pytest.raises(AssertionError, match="internal error"):
        wait_for_every_run([_StuckPage("The run stopped with an internal error")], server)
