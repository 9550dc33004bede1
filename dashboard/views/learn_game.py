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


def verdict(result: AuditResult) -> tuple[bool, str]:
    """(claim holds, one line saying why), from the audit's own numbers and test: the epsilon
    bound and the separation both shown, so a student sees which one gave a leak away."""
    measured = (
        f"measured epsilon >= {result.epsilon_lower_bound:.2f}, "
        f"claimed {result.claimed_epsilon:.2f}"
    )
    apart = f"{result.mu_estimate:.2f} ± {result.mu_standard_error:.2f} noise widths apart"
    if result.violates_claim:
        return False, (
            f"{measured}; the histograms sit {apart} where epsilon allows "
            f"{result.mu_claimed:.2f}: a leak beyond the claim, caught by the audit."
        )
    return True, (
        f"{measured}: no leak found beyond the claim (the histograms sit {apart}, consistent with "
        f"the {result.mu_claimed:.2f} epsilon allows)."
    )
