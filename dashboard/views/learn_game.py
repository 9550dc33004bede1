"""The distinguishing game on the Learn page: its inputs, one play, and the verdict in words.

Glue only: every statistic comes from :func:`privsyn_core.privacy.audit.audit_engine`. The noise is
debug mode (seeded NumPy) on purpose: both tables are generated, nothing private is measured,
debug noise is fast, and a seed lets a whole class reproduce the same picture. A play is kept
in the session (``state.Session.learn_game``) with the inputs it was played with, never
behind ``st.cache_*``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from privsyn_core.privacy.audit import AuditResult, audit_engine
from privsyn_core.privacy.noise import SeededNoise

#: fixed, so the page has one knob that matters (epsilon); stated on the page
DELTA = 1e-6
#: the steps in the order :func:`audit_engine` returns them
STEPS = ("1-way marginals", "InDif scores", "a 2-way marginal", "column kinds")
#: "break the noise": 4x rho is half the noise standard deviation, while rho is still claimed
BROKEN_RHO_MULTIPLIER = 4.0


@dataclass(frozen=True)
class GameInputs:
    """Everything a play depends on: same inputs, same play (the seed fixes the noise)."""

    epsilon: float
    trials: int
    broken: bool
    seed: int


@dataclass(frozen=True)
class GamePlay:
    """One play of every step, the inputs it answers, and how long it took."""

    inputs: GameInputs
    results: tuple[AuditResult, ...]
    seconds: float

    def step(self, name: str) -> AuditResult:
        return self.results[STEPS.index(name)]


def play(inputs: GameInputs) -> GamePlay:
    """Play all four steps at once: switching the step shown then needs no new play."""
    tables, noise = (np.random.default_rng(s) for s in np.random.SeedSequence(inputs.seed).spawn(2))
    started = time.perf_counter()
    results = audit_engine(
        inputs.epsilon,
        DELTA,
        SeededNoise(noise),
        inputs.trials,
        tables,
        rho_multiplier=BROKEN_RHO_MULTIPLIER if inputs.broken else 1.0,
    )
    return GamePlay(inputs, tuple(results), time.perf_counter() - started)


@dataclass(frozen=True)
class Verdict:
    """The game's outcome in words: ``leak`` when the audit proved one, a bold ``headline``
    and the ``reason`` that compares the measured numbers with what epsilon allows."""

    leak: bool
    headline: str
    reason: str

    @property
    def text(self) -> str:
        return f"**{self.headline}** {self.reason}"


def _shown(value: float, against: float) -> tuple[str, str]:
    """Two numbers to two decimals, or more where two decimals would show different numbers
    as equal (a range's end just above the bound must not read as the bound itself)."""
    digits = 2
    while digits < 6 and f"{value:.{digits}f}" == f"{against:.{digits}f}" and value != against:
        digits += 1
    return f"{value:.{digits}f}", f"{against:.{digits}f}"


def verdict(result: AuditResult) -> Verdict:
    """The audit's own decision (:attr:`AuditResult.violates_claim`) in plain words.

    The measured separation is an estimate from finitely many runs, so it comes with a range
    (:attr:`AuditResult.mu_range`). A leak is shown only when that whole range lies above the
    separation epsilon allows, or when the attacker's error rates prove a larger epsilon than
    the claim; a measured value above the bound whose range still reaches it is within the
    measurement's noise, and is said to be so."""
    low, high = result.mu_range
    allowed = result.mu_claimed
    if result.separation == "above":
        low_text, allowed_text = _shown(low, allowed)
        return Verdict(
            True,
            "Leak caught.",
            f"Epsilon allows the two histograms to sit at most {allowed_text} noise widths "
            f"apart. We measured {result.mu_estimate:.2f}, and even the low end of the "
            f"measurement's range ({low_text} to {high:.2f}) is above {allowed_text}: the code "
            "leaks more than it claims."
            + (
                ""
                if result.epsilon_refuted
                else f" (The attacker's error rates alone prove only epsilon ≥ "
                f"{result.epsilon_lower_bound:.2f}: from a few thousand runs the separation is "
                "the sharper test.)"
            ),
        )
    if result.epsilon_refuted:
        return Verdict(
            True,
            "Leak caught.",
            f"The attacker's error rates prove epsilon is at least "
            f"{result.epsilon_lower_bound:.2f}, more than the {result.claimed_epsilon:.2f} "
            "claimed: the code leaks more than it claims.",
        )
    epsilon = (
        f"The attacker's error rates show epsilon is at least "
        f"{result.epsilon_lower_bound:.2f}, within the {result.claimed_epsilon:.2f} claimed."
    )
    if result.separation == "below":
        high_text, allowed_text = _shown(high, allowed)
        return Verdict(
            False,
            "No leak shown.",
            f"Epsilon allows the two histograms to sit at most {allowed_text} noise widths "
            f"apart. We measured {result.mu_estimate:.2f} (range {low:.2f} to {high_text}), "
            "below the bound even at the top of its range: on these two tables this step "
            f"gives the person away less than epsilon would allow. {epsilon}",
        )
    side = "above" if result.mu_estimate > allowed else "below"
    if result.mu_of_neighbours >= allowed * (1 - 1e-9):
        honest = (
            "Honest code puts these two tables exactly at the bound, so a measurement lands "
            "above it about half the time."
        )
    else:
        honest = f"Honest code puts these two tables {result.mu_of_neighbours:.2f} apart."
    return Verdict(
        False,
        "No leak shown.",
        f"Epsilon allows the two histograms to sit at most {allowed:.2f} noise widths apart. "
        f"We measured {result.mu_estimate:.2f}, {side} the bound by less than the "
        f"measurement's own noise: from {result.trials:,} runs the true separation lies "
        f"somewhere from {low:.2f} to {high:.2f}, and that range includes {allowed:.2f}. "
        f"{honest} {epsilon}",
    )
