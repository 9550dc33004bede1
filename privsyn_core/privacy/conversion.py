"""Converting between (epsilon, delta)-DP and rho-zCDP, and checking a user's (epsilon, delta).

The user states ``(epsilon, delta)``; PrivSyn converts it once to a total rho (paper section
2.3 and appendix C) and states a spent rho back as epsilon at a delta.

Two conversions are offered:

* ``"tight"`` (default): the bound of Canonne, Kamath and Steinke (2020, Proposition 12 of
  "The Discrete Gaussian for Differential Privacy"): rho-zCDP implies (epsilon, delta)-DP with
  ``delta = inf_{a>1} exp((a-1)(a*rho - epsilon)) / (a-1) * (1 - 1/a)^a``. It gives the largest
  rho for a given (epsilon, delta), hence the least noise.
* ``"proposition"``: the paper's Proposition C.2, ``epsilon = rho + 2 sqrt(rho ln(1/delta))``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Literal

from privsyn_core.errors import InputError

Conversion = Literal["tight", "proposition"]

#: The largest delta accepted. (epsilon, delta)-DP allows a mechanism to publish a record
#: outright with probability delta, so delta must sit well below 1/n for a table of n rows
#: (1/n^2 is the usual choice, and the paper's). The check cannot use n (it runs before the
#: table is read, and must not depend on it), so the bound is fixed: delta >= 1 gives no
#: privacy at all, and 1e-3 is already 1/n for a table of a thousand rows. A user who knows
#: n should go far lower: the message says how.
MAX_DELTA = 1e-3

_DELTA_ADVICE = "about 1/n^2 for a table of n rows (the default 1e-9 suits up to 30,000 rows)"


def check_epsilon_delta(epsilon: float, delta: float) -> None:
    """Refuse an (epsilon, delta) that is not a privacy guarantee, saying what to use instead.

    Front ends call it on the user's values before reading any data, so a bad parameter
    costs nothing; the ledger calls it again on the delta the user gave (before any share is
    reserved, so the message quotes the user's own number)."""
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise InputError(
            f"epsilon must be a positive finite number such as 1 (smaller means more privacy "
            f"and more noise), got {epsilon!r}"
        )
    if not delta > 0:  # also NaN
        raise InputError(
            f"delta must be positive, got {delta!r}: the Gaussian noise PrivSyn adds gives "
            f"(epsilon, delta)-DP only with delta > 0; use {_DELTA_ADVICE}"
        )
    if delta >= 1:
        raise InputError(
            f"delta must be far below 1, got {delta!r}: delta is the chance that the "
            f"guarantee fails outright, so delta >= 1 gives no privacy at all; use {_DELTA_ADVICE}"
        )
    if delta > MAX_DELTA:
        raise InputError(
            f"delta {delta!r} is too large: delta is the chance that the guarantee fails "
            f"outright and must stay well below 1/n; use at most {MAX_DELTA:g}, better "
            f"{_DELTA_ADVICE}"
        )


def _bisect(above: Callable[[float], bool], lo: float, hi: float) -> tuple[float, float]:
    """``[lo, hi]`` halved up to 200 times toward the point where ``above`` (the point lies
    above x) turns false. Halving stops once it no longer moves an end (the ends are
    adjacent floats, after about 60 halvings on the budgets met here): the remaining
    halvings would not move them either, so the ends are those of all 200, at a quarter of
    the cost (these conversions run several times in every command)."""
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if above(mid):
            if mid == lo:
                break
            lo = mid
        else:
            if mid == hi:
                break
            hi = mid
    return lo, hi


def delta_for(rho: float, epsilon: float) -> float:
    """Smallest delta such that rho-zCDP implies (epsilon, delta)-DP (CKS 2020, Prop. 12).

    The objective is convex in ``a``; its minimiser is where
    ``(2a - 1) rho - epsilon + ln(1 - 1/a) = 0``, found by bisection.
    """
    if rho <= 0:
        return 0.0
    lo, hi = _bisect(
        lambda a: (2 * a - 1) * rho - epsilon + math.log1p(-1.0 / a) < 0,
        1.0 + 1e-12,
        max(2.0, (epsilon + 1.0) / (2.0 * rho) + 2.0),
    )
    a = 0.5 * (lo + hi)
    log_delta = (a - 1) * (a * rho - epsilon) + a * math.log1p(-1.0 / a) - math.log(a - 1)
    return 1.0 if log_delta >= 0 else math.exp(log_delta)  # exp overflows past ~709


def rho_from_epsilon_delta(epsilon: float, delta: float, conversion: Conversion = "tight") -> float:
    """Largest rho whose zCDP guarantee implies (epsilon, delta)-DP."""
    check_epsilon_delta(epsilon, delta)
    if conversion == "proposition":
        root = math.sqrt(math.log(1 / delta) + epsilon) - math.sqrt(math.log(1 / delta))
        return root * root
    if conversion != "tight":
        raise InputError(f"unknown conversion {conversion!r}; use 'tight' or 'proposition'")
    # delta_for is increasing in rho: bisect for the largest rho with delta_for(rho) <= delta.
    return _bisect(lambda rho: delta_for(rho, epsilon) <= delta, 0.0, epsilon + 1.0)[0]


def epsilon_from_rho(rho: float, delta: float, conversion: Conversion = "tight") -> float:
    """Smallest epsilon such that rho-zCDP implies (epsilon, delta)-DP."""
    if not (0 < delta < 1):
        raise InputError(f"delta must lie strictly between 0 and 1, got {delta!r}")
    if rho <= 0:
        return 0.0
    if conversion == "proposition":
        return rho + 2 * math.sqrt(rho * math.log(1 / delta))
    loose = rho + 2 * math.sqrt(rho * math.log(1 / delta))  # an upper end
    return _bisect(lambda epsilon: delta_for(rho, epsilon) > delta, 0.0, loose)[1]
