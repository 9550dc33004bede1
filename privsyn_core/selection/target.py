"""A prediction target: the column people will predict, and the weight its marginals carry.

The paper treats every marginal alike: Algorithm 1 minimises the sum of dependency and noise
error over all pairs, and Equation 1 splits the budget by cell count alone. A user who names
the column they will predict (a public choice, made without looking at the data, so it costs
nothing) cares more about the marginals that carry it. We give each marginal that holds the
target a weight ``w`` and every other marginal weight 1, and minimise the *weighted* error:

* selection (Algorithm 1): a pair's dependency error counts ``w_i phi_i``;
* allocation (Equation 1): minimising ``sum_i w_i c_i / sqrt(rho_i)`` subject to
  ``sum_i rho_i = rho`` gives ``rho_i ~ (w_i c_i)^(2/3)``, and the weighted noise error of a
  set X becomes ``(sum_{j in X} (w_j c_j)^(2/3))^(3/2) / sqrt(pi rho)``.

Both steps are the paper's with ``c_i`` replaced by ``w_i c_i``, so ``w = 1`` is the paper
exactly. A pair with the target gains ``w`` in what it removes and ``w^(2/3)`` in what it costs,
so target pairs are favoured by about ``w^(1/3)``: strong enough to connect the target to the
attributes that predict it, too weak to crowd out the rest of the table.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from privsyn_core.errors import InputError


@dataclass(frozen=True)
class TargetEmphasis:
    """Weight ``weight`` for every marginal that holds ``column``, 1 for the others."""

    column: str
    weight: float

    def __post_init__(self) -> None:
        if not math.isfinite(self.weight) or self.weight < 1:
            raise InputError(f"target_weight must be a number >= 1, got {self.weight}")

    def weight_of(self, attributes: Sequence[str]) -> float:
        return self.weight if self.column in attributes else 1.0

    def check_column(self, columns: Sequence[str]) -> None:
        """Refuse a target that is not one of ``columns`` (free: column names are public)."""
        if self.column not in columns:
            raise InputError(
                f"the prediction target {self.column!r} is not a column of the table "
                f"(columns: {', '.join(map(str, columns))}); name one of them or leave the "
                "target out"
            )


def marginal_weights(
    marginals: Sequence[Sequence[str]], emphasis: TargetEmphasis | None
) -> list[float]:
    """Each marginal's weight in the objective (all 1 without a target)."""
    if emphasis is None:
        return [1.0] * len(marginals)
    return [emphasis.weight_of(m) for m in marginals]
