"""What the ``privsyn`` commands show on the terminal while they run and when they end: the
progress bar (which also remembers what an interrupted run had spent), the registry's budget
warnings as one line each, and what a release changed of the table.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from privsyn_core.privacy.ledger import PrivacyLedger
from privsyn_core.progress import (
    STAGE_TITLES,
    BlockProgress,
    GumProgress,
    ProgressEvent,
    StageFinished,
    StageStarted,
)
from privsyn_core.release.changes import Change, change_lines
from privsyn_core.release.registry import BudgetWarning
from privsyn_core.terminal import printable


class _NoBar:
    """The progress bar when none is drawn (no terminal, or ``--quiet``): tqdm's calls that
    :class:`ProgressBar` makes, doing nothing."""

    total = 0

    def set_description_str(self, text: str) -> None:
        pass

    def update(self, steps: int) -> None:
        pass

    def close(self) -> None:
        pass


class ProgressBar:
    """One tqdm bar over all stages and GUM iterations, on stderr. It also keeps the ledger of
    the last finished stage: what an interrupted run had spent (the bar has shown results of
    those measurements, such as GUM's error against the noisy marginals)."""

    def __init__(self, iterations: int, enabled: bool, stages: int = len(STAGE_TITLES)) -> None:
        self.spent: PrivacyLedger | None = None
        self.iterations = iterations
        self.blocks = 0
        self.bar: Any = _NoBar()
        if enabled and sys.stderr.isatty():  # tqdm loads only to draw: 20 ms of every run
            from tqdm import tqdm

            self.bar = tqdm(
                total=stages + iterations,
                file=sys.stderr,
                leave=False,
                unit="step",
                bar_format="{desc:<44} {percentage:3.0f}%|{bar}| {elapsed}<{remaining}",
            )

    def __call__(self, event: ProgressEvent) -> bool:
        if isinstance(event, StageStarted):
            self.bar.set_description_str(event.title)
        elif isinstance(event, StageFinished):
            self.spent = event.spent
            self.bar.update(1)
        elif isinstance(event, GumProgress):
            if not self.blocks and event.iterations > self.iterations:  # MRF sweeps follow
                self.bar.total += event.iterations - self.iterations
                self.iterations = event.iterations
            step = "MRF" if event.method == "mrf" else "GUM"
            self.bar.set_description_str(
                f"{step} {event.iteration + 1}/{event.iterations}, mean L1 {event.mean_error:.4f}"
            )
            self.bar.update(1)
        elif isinstance(event, BlockProgress):
            if not self.blocks:  # several blocks: a step per block, not per iteration
                self.blocks = event.blocks
                self.bar.total = self.bar.total - self.iterations + event.blocks
            self.bar.set_description_str(
                f"GUM block {event.block}/{event.blocks} ({event.iterations} iterations)"
            )
            self.bar.update(1)
        return True

    def close(self) -> None:
        self.bar.close()


@contextmanager
def budget_warnings_as_lines() -> Iterator[None]:
    """The registry's lifetime-budget warnings, each as one ``privsyn: warning:`` line."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", BudgetWarning)
        yield
    for item in caught:
        if issubclass(item.category, BudgetWarning):
            print(f"privsyn: warning: {item.message}", file=sys.stderr)
        else:
            warnings.warn_explicit(item.message, item.category, item.filename, item.lineno)


def print_changes(found: tuple[Change, ...]) -> None:
    """What the release changed of the table (DP content only), a few lines a kind."""
    if not found:
        return
    print("what the synthetic table changes (from the release's DP content):", file=sys.stderr)
    for line in change_lines(found, most=5):
        print(printable(line), file=sys.stderr)
