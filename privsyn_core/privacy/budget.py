"""A privacy cost, or an allowance for one, as the pair (rho, delta) from a run to a lifetime.

PrivSyn's measurements are Gaussian and priced in rho-zCDP (paper section 2.3, appendix C);
the private category and value releases are thresholded, which is approximate DP: each also
spends a delta, paid from a share of the user's delta set aside before rho is converted
(:meth:`~privsyn_core.privacy.ledger.PrivacyLedger.from_epsilon_delta`). Such a mechanism is
delta-approximately rho-zCDP, and approximate zCDP composes by adding both parts (Bun and
Steinke 2016, Definition 8.1 and Lemma 8.2). So one run's cost, a history of runs and the
lifetime allowance of a dataset are all a :class:`Budget`: runs add up part by part, and a
history fits its lifetime when both parts do.

Stated as (epsilon, delta)-DP, a cost of (rho, delta_a) converted at a delta ``d`` is
``(epsilon(rho, d), d + delta_a)``-DP (:meth:`Budget.guarantee`): the thresholded releases'
deltas add to the conversion's, they are not part of it. Front ends state it at the user's
delta (:meth:`Budget.stated`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from privsyn_core.privacy.conversion import (
    Conversion,
    check_epsilon_delta,
    epsilon_from_rho,
    rho_from_epsilon_delta,
)

#: relative slack for float round-off when comparing a sum of costs with an allowance
_ROUNDOFF = 1e-12


@dataclass(frozen=True)
class Budget:
    """rho of zCDP and delta of the approximate-DP parts: a cost, or an allowance.

    ``delta`` is only what thresholded releases spend (or may spend), never the delta at
    which rho is converted to epsilon; that one is chosen where a guarantee is stated. An
    allowance may leave delta unbounded (``math.inf``): a lifetime set before deltas were
    counted."""

    rho: float
    delta: float = 0.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.rho) and self.rho >= 0):
            raise ValueError(f"a budget's rho must be a finite number >= 0, got {self.rho!r}")
        if not self.delta >= 0:  # also NaN
            raise ValueError(f"a budget's delta must be >= 0, got {self.delta!r}")

    @classmethod
    def for_epsilon_delta(
        cls,
        epsilon: float,
        delta: float,
        approximate_share: float = 0.0,
        conversion: Conversion = "tight",
    ) -> Budget:
        """The allowance of an (epsilon, delta) guarantee that sets ``approximate_share`` of
        delta aside for thresholded releases and converts rho at the rest: whatever fits it
        is (epsilon, delta)-DP."""
        check_epsilon_delta(epsilon, delta)
        if not 0 <= approximate_share < 1:
            raise ValueError(f"the approximate share must lie in [0, 1), got {approximate_share}")
        aside = approximate_share * delta
        return cls(rho_from_epsilon_delta(epsilon, delta - aside, conversion), aside)

    def __add__(self, other: Budget) -> Budget:
        """Composition: both parts add (Bun and Steinke 2016, Lemma 8.2)."""
        return Budget(self.rho + other.rho, self.delta + other.delta)

    def fits(self, allowance: Budget) -> bool:
        """Whether this cost stays within ``allowance`` in both parts (up to round-off)."""
        return self.rho <= allowance.rho * (1 + _ROUNDOFF) and (
            self.delta <= allowance.delta * (1 + _ROUNDOFF)
        )

    def left_of(self, allowance: Budget) -> Budget:
        """What is left of ``allowance`` once this cost is taken from it (never below 0)."""
        return Budget(max(0.0, allowance.rho - self.rho), max(0.0, allowance.delta - self.delta))

    def guarantee(
        self, conversion_delta: float, conversion: Conversion = "tight"
    ) -> tuple[float, float]:
        """The (epsilon, delta) this cost guarantees when rho is converted at
        ``conversion_delta``: the thresholded releases' delta is added on top."""
        return epsilon_from_rho(self.rho, conversion_delta, conversion), (
            conversion_delta + self.delta
        )

    def stated(self, delta: float, conversion: Conversion = "tight") -> tuple[float, float]:
        """The (epsilon, delta) to state for this cost at the ``delta`` a user chose: rho
        converted at what the thresholds' delta leaves of it, so that the total is ``delta``
        itself (one run reads as the (epsilon, delta) it was asked for); once the
        thresholds have spent ``delta`` or more, rho converted at ``delta`` and theirs added
        on top (:meth:`guarantee`)."""
        if self.delta < delta:
            return self.guarantee(delta - self.delta, conversion)
        return self.guarantee(delta, conversion)

    @property
    def words(self) -> str:
        """The pair as every front end prints it: "rho 0.0118, delta 5e-10"."""
        if math.isinf(self.delta):
            return f"rho {self.rho:.4g}, delta not capped"
        return f"rho {self.rho:.4g}, delta {self.delta:.2g}"


#: nothing spent
NOTHING = Budget(0.0, 0.0)
