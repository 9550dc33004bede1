"""Gaussian measurements of marginals: where the private table's counts meet noise.

The counts come from a :class:`~privsyn_core.measuring.counters.Counter`, the one interface
that reads rows.

A marginal's count vector has L2 sensitivity 1 under add/remove-one neighbours (paper
Theorem 4.3), so adding N(0, 1/(2 rho)) to every cell is rho-zCDP (Proposition C.3).

Its L1 sensitivity is 1 too, so the paper's "equal Laplace" competitor (section 6.4) adds
Laplace noise of scale ``1 / epsilon_i`` to every cell; bought from the same zCDP ledger,
``epsilon_i = sqrt(2 rho_i)`` (:func:`~privsyn_core.privacy.ledger.laplace_scale`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

import numpy as np

from privsyn_core.marginals import NoisyMarginal
from privsyn_core.privacy.ledger import Measurement, laplace_scale
from privsyn_core.privacy.noise import NoiseSource, as_noise

if TYPE_CHECKING:
    from privsyn_core.measuring.counters import Counter

#: the noise a marginal gets: Gaussian (PrivSyn) or Laplace (the paper's section 6.4 competitor)
Mechanism = Literal["gaussian", "laplace"]


def measure_marginal(
    counter: Counter,
    attributes: Sequence[str],
    rho: float,
    rng: NoiseSource | np.random.Generator,
    step: str,
) -> tuple[NoisyMarginal, Measurement]:
    """Count the marginal on ``attributes`` and add Gaussian noise calibrated to ``rho``
    (discrete Gaussian in release mode, see :mod:`privsyn_core.privacy.noise`)."""
    ((noisy, record),) = measure_marginals(counter, [tuple(attributes)], [rho], rng, step)
    return noisy, record


def measure_marginals(
    counter: Counter,
    attribute_sets: Sequence[tuple[str, ...]],
    rhos: Sequence[float],
    rng: NoiseSource | np.random.Generator,
    step: str,
    mechanism: Mechanism = "gaussian",
) -> list[tuple[NoisyMarginal, Measurement]]:
    """:func:`measure_marginal` for many attribute sets, counted in one batch (one pass of a
    backend that scans the table once for all of them).

    ``mechanism="laplace"`` adds Laplace noise instead, each marginal spending pure
    ``epsilon_i = sqrt(2 rho_i)`` (charged as ``rho_i``); the record's ``sigma`` is the noise's
    standard deviation ``sqrt(2) b`` and its mechanism says Laplace."""
    if mechanism not in ("gaussian", "laplace"):
        raise ValueError(f"unknown noise mechanism {mechanism!r}")
    noise = as_noise(rng)
    out = []
    for exact, rho in zip(counter.count(attribute_sets), rhos, strict=True):
        if mechanism == "laplace":
            scale = laplace_scale(rho, l1_sensitivity=noise.unit.sensitivity())
            noisy = noise.add_laplace(exact.values, scale, integer=True)
            sigma, effective = math.sqrt(2.0) * scale, rho / 2.0
            name = noise.laplace_mechanism(integer=True)
        else:
            sigma, effective = noise.unit.sigma(rho), rho
            noisy = noise.add(exact.values, sigma, integer=True)
            name = noise.mechanism(integer=True)
        record = Measurement(
            step=step,
            attributes=exact.attributes,
            sensitivity=noise.unit.sensitivity(),
            rho=rho,
            sigma=sigma,
            n_queries=exact.cells,
            mechanism=name,
        )
        out.append((NoisyMarginal(exact.with_values(noisy), effective, sigma), record))
    return out
