"""Reading the user's settings from the session, with clear errors."""

from __future__ import annotations

from typing import Any

from privsyn_core.config import PrivSynConfig
from privsyn_core.errors import InputError
from privsyn_core.generation.gum_settings import GumSettings
from privsyn_core.privacy.conversion import check_epsilon_delta

from .state import session


def small_number(value: float) -> str:
    """A small number (a delta) as the user types it: 1e-9, not 1e-09."""
    return f"{value:.2g}".replace("e-0", "e-")


def parse_epsilon(value: object) -> float:
    """The session's epsilon by the command line's rule and message (positive and finite).
    The Privacy page's box has no bounds and no default of its own: a bounded box keeps a value
    outside them unapplied behind a red outline, and Streamlit resets an emptied box, or one
    given no finite number, to the box's default (its minimum) silently; here it is None."""
    if value is None:
        raise InputError(
            "epsilon is empty (or was not a finite number): type a positive finite number such "
            "as 1 (smaller means more privacy and more noise)"
        )
    try:
        epsilon = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise InputError(f"epsilon must be a number such as 1, got {value!r}") from None
    check_epsilon_delta(epsilon, 1e-9)  # the epsilon half of the rule
    return epsilon


def parse_delta(text: str) -> float:
    try:
        delta = float(text)
    except ValueError:
        raise InputError(f"delta must be a number such as 1e-9, got {text!r}") from None
    check_epsilon_delta(1.0, delta)  # the command line's rule and message (0 < delta <= 1e-3)
    return delta


def parse_seed(text: str) -> int | None:
    text = text.strip()
    if not text:
        return None
    if not text.isdigit():
        raise InputError(
            f"the seed must be a whole number (or empty for a fresh one), got {text!r}"
        )
    return int(text)


def current_config() -> PrivSynConfig:
    if session.one_way_share + session.indif_share >= 0.95:
        raise InputError("the 1-way and InDif shares leave too little for the marginals")
    return PrivSynConfig(
        one_way_share=session.one_way_share,
        indif_share=session.indif_share,
        domain_share=session.domain_share,
        gum=_gum(int(session.iterations), stop_early=session.stop_at_plateau),
        target=session.target,
    )


def _gum(iterations: int, *, stop_early: bool) -> GumSettings:
    """GUM with the engine's early stops (the noise floor and the plateau) or, unticked,
    every iteration asked for (to watch it converge, or to compare)."""
    if stop_early:
        return GumSettings(iterations=iterations)
    return GumSettings(iterations=iterations, patience=None, noise_floor=None)


def public_settings(delta: float, seed: int | None) -> dict[str, Any]:
    """The run's settings as the registry stores them: public choices only. The seed's value
    stays out (it would let anyone replay a debug run's noise); only whether one was given."""
    return {
        "epsilon": parse_epsilon(session.epsilon),
        "delta": delta,
        "one_way_share": float(session.one_way_share),
        "indif_share": float(session.indif_share),
        "domain_share": float(session.domain_share),
        "iterations": int(session.iterations),
        "stop_at_plateau": bool(session.stop_at_plateau),
        "seed_given": seed is not None,
        "raw_domains": bool(session.raw_domains),
        "target": session.target,
        "person": session.person,
        "max_rows_per_person": None if session.person is None else session.max_rows_per_person,
    }
