"""Typed progress events the engine sends while it works.

``synthesize(..., on_progress=callback)`` calls ``callback(event)`` at the start and end of
every stage and after every GUM iteration (after every block, when the rows are made as
several blocks). A callback that returns ``False`` stops the run
cleanly: :class:`SynthesisCancelled` is raised, carrying the ledger of what was already spent
(measurements made before the stop cannot be taken back).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from privsyn_core.privacy.ledger import Measurement, PrivacyLedger


class Stage(StrEnum):
    ENCODE = "encode"
    ONE_WAY = "one_way"
    INDIF = "indif"
    SELECT = "select"
    COMBINE = "combine"
    MEASURE = "measure"
    CONSISTENCY = "consistency"
    GUM = "gum"
    APPEND = "append"
    DECODE = "decode"


STAGE_TITLES: dict[Stage, str] = {
    Stage.ENCODE: "Checking and encoding the table",
    Stage.ONE_WAY: "Noisy 1-way marginals and low-count filtering",
    Stage.INDIF: "Noisy InDif dependency scores",
    Stage.SELECT: "Greedy marginal selection",
    Stage.COMBINE: "Combining cliques into larger marginals",
    Stage.MEASURE: "Measuring the selected marginals",
    Stage.CONSISTENCY: "Making marginals consistent",
    Stage.GUM: "GUM synthesis",
    Stage.APPEND: "Appending degree-1 attributes",
    Stage.DECODE: "Decoding to the table's values",
}


@dataclass(frozen=True)
class StageStarted:
    stage: Stage
    title: str


@dataclass(frozen=True)
class StageFinished:
    stage: Stage
    seconds: float
    summary: str = ""
    #: everything charged so far: what a front end records if the run is then interrupted
    #: (anything it showed came from measurements already in this ledger)
    spent: PrivacyLedger | None = None


@dataclass(frozen=True)
class GumProgress:
    """One finished GUM iteration: L1 per marginal (frequencies) against its noisy target."""

    iteration: int
    iterations: int
    alpha: float
    mean_error: float
    errors: dict[tuple[str, ...], float] = field(repr=False)
    seconds: float
    #: "gum", or "mrf" for a sweep of the Markov random field that follows GUM on wide
    #: tables (``synthesis="auto"``)
    method: str = "gum"
    #: the whole table's error after the iteration, the score that picks the table GUM
    #: returns (:attr:`~privsyn_core.generation.gum.GumIterationRecord.table_error`)
    table_error: float | None = None
    #: the step each part of the table would return from if the run ended now (counted
    #: from 1, 0 the starting table; see
    #: :attr:`~privsyn_core.generation.gum.GumIterationRecord.kept`)
    kept: tuple[int, ...] = ()


@dataclass(frozen=True)
class BlockProgress:
    """One finished block of a sample made as several blocks
    (:mod:`privsyn_core.generation.blocks`). Blocks run GUM in worker processes, so their
    iterations are not reported one by one; a sample of one block reports
    :class:`GumProgress` instead."""

    block: int
    blocks: int
    rows: int
    #: GUM iterations this block ran
    iterations: int
    seconds: float


ProgressEvent = StageStarted | StageFinished | GumProgress | BlockProgress
ProgressCallback = Callable[[ProgressEvent], bool | None]


class SynthesisCancelled(RuntimeError):
    """The progress callback asked to stop. ``ledger`` lists what had been spent by then."""

    def __init__(self, stage: Stage, ledger: PrivacyLedger) -> None:
        super().__init__(
            f"synthesis stopped during {stage.value}; rho spent so far: {ledger.spent_rho:.6g}"
        )
        self.stage = stage
        self.ledger = ledger


class StageReporter:
    """Sends stage events and turns a ``False`` from the callback into a clean stop.

    Shared by measuring (:mod:`privsyn_core.pipeline`) and sampling
    (:mod:`privsyn_core.generation.fitted`), so both report stages the same way; ``seconds``
    collects each finished stage's duration.
    """

    def __init__(self, callback: ProgressCallback | None) -> None:
        self.callback = callback
        self.seconds: dict[str, float] = {}
        self.ledger: PrivacyLedger | None = None
        self._stage: Stage | None = None
        self._started = 0.0

    def charge(self, spends: Sequence[Measurement]) -> PrivacyLedger:
        """Add ``spends`` to the ledger (the one a stop reports) and return it."""
        assert self.ledger is not None
        self.ledger = self.ledger.charge_all(spends)
        return self.ledger

    def send(self, event: ProgressEvent) -> bool:
        return self.callback is None or self.callback(event) is not False

    def start(self, stage: Stage) -> None:
        self._stage, self._started = stage, time.perf_counter()
        if not self.send(StageStarted(stage, STAGE_TITLES[stage])):
            self.stop()

    def finish(self, summary: str = "") -> None:
        assert self._stage is not None
        seconds = time.perf_counter() - self._started
        self.seconds[self._stage.value] = seconds
        if not self.send(StageFinished(self._stage, seconds, summary, self.ledger)):
            self.stop()

    def stop(self) -> None:
        assert self._stage is not None and self.ledger is not None
        raise SynthesisCancelled(self._stage, self.ledger)
