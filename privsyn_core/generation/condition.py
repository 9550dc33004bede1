"""One column's condition on released values, resolved against a model
(:mod:`privsyn_core.generation.conditional` parses and resolves it, and draws the rows).

A value of its own so that a sample's plan (:class:`~privsyn_core.generation.sample_blocks.
BlockPlan`) can carry its conditions to worker processes and Spark's tasks without the
module that draws blocks knowing how conditions are parsed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from privsyn_core.data.codecs import BinnedCodec
from privsyn_core.data.values import canonical_text


@dataclass(frozen=True)
class Condition:
    """One column's condition, resolved against a model: the released values it keeps and,
    per engine code, the share of that code's decoded values that satisfy it.

    Exactly one of ``labels`` (canonical text of the categories kept) and a range
    (``low``/``high`` numbers, seconds for datetimes, with open ends as ``low_open`` and
    ``high_open``) is set."""

    column: str
    #: as the user wrote it, for messages
    text: str
    labels: frozenset[str] | None = None
    low: float = -math.inf
    high: float = math.inf
    low_open: bool = False
    high_open: bool = False
    #: one weight per engine code of the column, in [0, 1]
    weights: tuple[float, ...] = ()

    def contains(self, numbers: np.ndarray) -> np.ndarray:
        """Which of ``numbers`` lie in the range (NaN, a missing value, never does)."""
        above = numbers > self.low if self.low_open else numbers >= self.low
        below = numbers < self.high if self.high_open else numbers <= self.high
        return np.asarray(above & below)

    def matches(self, column: pd.Series, decoder: object) -> np.ndarray:
        """Which decoded values of ``column`` satisfy the condition."""
        if self.labels is not None:
            return canonical_text(column).isin(self.labels).to_numpy()
        assert isinstance(decoder, BinnedCodec)
        return self.contains(decoder.numbers(column))
