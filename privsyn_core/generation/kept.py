"""Which of the tables a run made it returned, in words a page or the command line can show.

GUM's error against the noisy marginals need not fall to the end: it can go down and back up
(a step size too large for the table, duplications that disturb other marginals). The paper
returns the last table (Algorithm 3); this engine returns the closest one it saw
(:attr:`~privsyn_core.generation.gum_settings.GumSettings.keep_best`), judged by
:func:`~privsyn_core.generation.target_scores.table_score` against the noisy marginals and the noisy
InDif scores. Those are the run's own DP outputs, already released, so choosing among the
tables is post-processing and costs no privacy budget. A user who watches the curve go back
up deserves to be told which table came out; this module says so.

GUM runs on each independent part of the table separately (separate and join, paper 5.3),
and each part keeps its own closest table, so the parts may keep different iterations.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

#: where a part's table came from: GUM's iterations, the MRF's sweeps that follow GUM on
#: wide tables, or the guard's independent columns
KeptSource = Literal["gum", "mrf", "independent"]


@dataclass(frozen=True)
class KeptPart:
    """One independent part of the table (a GUM component with targets)."""

    source: KeptSource
    #: the step of the run's history (GUM's iterations, then the MRF's sweeps, counted from 1)
    #: after which this part's table was made; 0: the starting table
    at: int
    #: how many selected marginals the part must match
    marginals: int = 1


@dataclass(frozen=True)
class KeptTable:
    """What a run returned: each part's source and step, and the scores that chose it.

    ``score`` is the returned table's
    :func:`~privsyn_core.generation.target_scores.table_score`, the
    parts weighted by their number of marginals as GUM's ``table_error`` is; None when GUM
    returned its last table without judging (``keep_best`` off, or MCF).
    """

    parts: tuple[KeptPart, ...]
    #: GUM's iterations, then the MRF's sweeps, as in the run's history
    iterations: int
    sweeps: int = 0
    score: float | None = None
    start_score: float | None = None

    @property
    def steps(self) -> int:
        return self.iterations + self.sweeps

    @property
    def at(self) -> int | None:
        """The one step every part's table came from, or None when the parts differ (or a
        part was replaced by independent columns)."""
        steps = {(p.source, p.at) for p in self.parts}
        if len(steps) != 1:
            return None
        source, at = next(iter(steps))
        return None if source == "independent" else at

    @property
    def is_last(self) -> bool:
        return self.at == self.steps

    def step_name(self, at: int) -> str:
        """A step of the history in words: "iteration 9", "MRF sweep 3", "the starting table"."""
        if at == 0:
            return "the starting table"
        if at > self.iterations:
            return f"MRF sweep {at - self.iterations}"
        return f"iteration {at}"

    def words(self) -> str:
        """One sentence for the page and the command line, e.g. "Kept the table from
        iteration 9 of 14: the lowest error against the noisy marginals (0.0326). Later
        iterations moved away again.\""""
        score = "" if self.score is None else f" ({self.score:.4f}, lower is better)"
        lowest = f"the lowest error against the noisy measurements{score}"
        at = self.at
        if at is not None and self.score is None:
            return f"Kept the table from the last {self.step_name(at)} (of {self.steps})."
        if at == 0:
            return (
                f"Kept the starting table: {lowest}; no iteration came closer to the noisy "
                "marginals."
            )
        if at is not None and at == self.steps:
            return f"Kept the table from the last step, {self.step_name(at)}: {lowest}."
        if at is not None:
            return (
                f"Kept the table from {self.step_name(at)} of {self.steps}: {lowest}. "
                "No later step came closer."
            )
        return self._mixed(lowest)

    def _mixed(self, lowest: str) -> str:
        parts = len(self.parts)
        if all(p.source == "independent" for p in self.parts):
            return (
                "Kept independent columns drawn from the 1-way marginals: they came closer "
                f"to the noisy measurements than any table GUM made ({lowest})."
            )
        made = sorted({p.at for p in self.parts if p.source != "independent"})
        replaced = sum(p.source == "independent" for p in self.parts)
        text = (
            f"The table's {parts} independent parts (GUM runs each one separately) each kept "
            f"their own closest table"
        )
        if made:
            text += f": {_listed([self.step_name(at) for at in made])}"
        if replaced:
            text += (
                f"; {replaced} of them independent columns drawn from the 1-way marginals, "
                "which came closer"
            )
        return text + f". Together: {lowest}."


def _listed(names: Sequence[str]) -> str:
    """Names joined as "a", "a and b", "a, b and c"."""
    if len(names) <= 1:
        return "".join(names)
    return ", ".join(names[:-1]) + " and " + names[-1]
