"""Typed progress events the engine sends while it works.

``synthesize(..., on_progress=callback)`` calls ``callback(event)`` at the start and end of
every stage and after every GUM iteration. A callback that returns ``False`` stops the run
cleanly: :class:`SynthesisCancelled` is raised, carrying the ledger of what was already spent
(measurements made before the stop cannot be taken back).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

from privsyn_core.privacy.ledger import PrivacyLedger


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


ProgressEvent = StageStarted | StageFinished | GumProgress
ProgressCallback = Callable[[ProgressEvent], bool | None]


class SynthesisCancelled(RuntimeError):
    """The progress callback asked to stop. ``ledger`` lists what had been spent by then."""

    def __init__(self, stage: Stage, ledger: PrivacyLedger) -> None:
        super().__init__(
            f"synthesis stopped during {stage.value}; rho spent so far: {ledger.spent_rho:.6g}"
        )
        self.stage = stage
        self.ledger = ledger
