"""Where the privacy noise comes from: release mode or debug mode.

* **Release mode** (the default when no generator is given): OpenDP's Gaussian measurements,
  which draw from the operating system's secure randomness. Integer counts (every marginal,
  every domain histogram) get *discrete* Gaussian noise from an exact sampler (Canonne,
  Kamath and Steinke 2020), immune to the floating-point attacks on sampled Gaussians; the
  real-valued InDif scores get OpenDP's floating-point-safe Gaussian. Never reproducible.
* **Debug mode** (a seeded ``numpy.random.Generator`` was given): NumPy's floating-point
  Gaussian, reproducible run to run, and marked "not for release" in the ledger.

Both are calibrated the same way: noise of standard deviation ``sigma`` on a query of L2
sensitivity ``Delta`` is ``Delta^2 / (2 sigma^2)``-zCDP (the discrete Gaussian with scale
``sigma`` satisfies the same bound, CKS 2020 Theorem 14).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from scipy.stats import norm

RELEASE = "release"
DEBUG = "debug (seeded; not for release)"


class NoiseSource(Protocol):
    mode: str

    def add(self, values: np.ndarray, sigma: float, *, integer: bool) -> np.ndarray:
        """``values`` plus independent Gaussian noise of standard deviation ``sigma``."""
        ...

    def mechanism(self, *, integer: bool) -> str: ...

    def tail_quantile(self, probability: float) -> float:
        """z such that noise exceeds z * sigma with probability at most ``probability``."""
        ...


@dataclass(frozen=True)
class SeededNoise:
    """Debug mode: NumPy's Gaussian from a seeded generator (reproducible, not for release)."""

    rng: np.random.Generator
    mode: str = DEBUG

    def add(self, values: np.ndarray, sigma: float, *, integer: bool) -> np.ndarray:
        return np.asarray(values, dtype=float) + self.rng.normal(0.0, sigma, size=np.shape(values))

    def mechanism(self, *, integer: bool) -> str:
        return "gaussian (seeded NumPy; not for release)"

    def tail_quantile(self, probability: float) -> float:
        return float(norm.isf(probability))


class SecureNoise:
    """Release mode: OpenDP's exact discrete Gaussian (integers) and Gaussian (reals), drawn
    from the operating system's secure randomness."""

    mode = RELEASE

    def __init__(self) -> None:
        import opendp.prelude as dp

        dp.enable_features("contrib")
        self._dp = dp

    def add(self, values: np.ndarray, sigma: float, *, integer: bool) -> np.ndarray:
        dp = self._dp
        flat = np.asarray(values, dtype=float).ravel()
        if flat.size == 0:
            return flat.reshape(np.shape(values))
        if integer:
            counts = np.rint(flat).astype(np.int64)
            space = dp.vector_domain(dp.atom_domain(T=int)), dp.l2_distance(T=int)
            noisy = np.asarray((space >> dp.m.then_gaussian(scale=float(sigma)))(counts.tolist()))
        else:
            space = (
                dp.vector_domain(dp.atom_domain(T=float, nan=False)),
                dp.l2_distance(T=float),
            )
            noisy = np.asarray((space >> dp.m.then_gaussian(scale=float(sigma)))(flat.tolist()))
        return noisy.astype(float).reshape(np.shape(values))

    def mechanism(self, *, integer: bool) -> str:
        if integer:
            return "discrete gaussian (OpenDP, exact sampler, OS randomness)"
        return "gaussian (OpenDP, OS randomness)"

    def tail_quantile(self, probability: float) -> float:
        # the discrete Gaussian is sub-Gaussian with parameter sigma: P(Z >= t) <=
        # exp(-t^2 / (2 sigma^2)), a bound that also holds for the continuous one
        return math.sqrt(2.0 * math.log(1.0 / probability))


def as_noise(source: NoiseSource | np.random.Generator) -> NoiseSource:
    """A seeded generator means debug mode; anything else is already a noise source."""
    if isinstance(source, np.random.Generator):
        return SeededNoise(source)
    return source
