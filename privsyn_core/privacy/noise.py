"""Where the privacy noise comes from: release mode or debug mode.

* **Release mode** (the default when no generator is given): noise from the operating
  system's secure randomness. Integer counts (every marginal, every domain histogram) get
  *discrete* Gaussian noise from an exact sampler (Canonne, Kamath and Steinke 2020), immune
  to the floating-point attacks on sampled Gaussians: our vectorised implementation
  (:mod:`privsyn_core.privacy.discrete_gaussian`, about 100 times faster than one draw at a time)
  or, for scales it cannot represent in 64 bits, OpenDP's. The real-valued InDif scores get
  OpenDP's floating-point-safe Gaussian. Never reproducible.
* **Debug mode** (a seeded ``numpy.random.Generator`` was given): NumPy's floating-point
  Gaussian, reproducible run to run, and marked "not for release" in the ledger.

Both are calibrated the same way: noise of standard deviation ``sigma`` on a query of L2
sensitivity ``Delta`` is ``Delta^2 / (2 sigma^2)``-zCDP (the discrete Gaussian with scale
``sigma`` satisfies the same bound, CKS 2020 Theorem 14).

Every source carries the run's :class:`~privsyn_core.privacy.ledger.PrivacyUnit`: a step
cannot draw noise without the unit at hand, and each calibrates with ``noise.unit.sigma``
(per row, or K times that for a person with at most K rows).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from privsyn_core.privacy.discrete_gaussian import (
    MAX_VARIANCE_ROUNDING,
    exact_plan,
    sample_discrete_gaussian,
)
from privsyn_core.privacy.ledger import ROW, PrivacyUnit, upper_quantile

RELEASE = "release"
DEBUG = "debug (seeded; not for release)"


class NoiseSource(Protocol):
    # read-only: every source is a frozen dataclass (the planner recalibrates one by replace)
    @property
    def mode(self) -> str: ...

    @property
    def unit(self) -> PrivacyUnit:
        """Whose privacy the noise is calibrated for (see the module docstring)."""
        ...

    def add(self, values: np.ndarray, sigma: float, *, integer: bool) -> np.ndarray:
        """``values`` plus independent Gaussian noise of standard deviation ``sigma``."""
        ...

    def mechanism(self, *, integer: bool) -> str: ...

    def tail_quantile(self, probability: float) -> float:
        """z such that noise exceeds z * sigma with probability at most ``probability``."""
        ...

    def add_laplace(self, values: np.ndarray, scale: float, *, integer: bool) -> np.ndarray:
        """``values`` plus independent Laplace noise of scale ``scale`` (the paper's appendix
        B mechanism; standard deviation ``sqrt(2) * scale``)."""
        ...

    def laplace_mechanism(self, *, integer: bool) -> str: ...

    def choose(self, scores: np.ndarray, scale: float) -> int:
        """The exponential mechanism (paper appendix A) as report-noisy-max with Gumbel noise
        of scale ``scale``: index ``i`` is returned with probability proportional to
        ``exp(scores[i] / scale)``."""
        ...

    def choice_mechanism(self) -> str: ...


@dataclass(frozen=True)
class SeededNoise:
    """Debug mode: NumPy's Gaussian from a seeded generator (reproducible, not for release)."""

    rng: np.random.Generator
    mode: str = DEBUG
    unit: PrivacyUnit = ROW

    def add(self, values: np.ndarray, sigma: float, *, integer: bool) -> np.ndarray:
        return np.asarray(values, dtype=float) + self.rng.normal(0.0, sigma, size=np.shape(values))

    def mechanism(self, *, integer: bool) -> str:
        return "gaussian (seeded NumPy; not for release)"

    def tail_quantile(self, probability: float) -> float:
        return float(upper_quantile(probability))

    def add_laplace(self, values: np.ndarray, scale: float, *, integer: bool) -> np.ndarray:
        return np.asarray(values, dtype=float) + self.rng.laplace(0.0, scale, size=np.shape(values))

    def laplace_mechanism(self, *, integer: bool) -> str:
        return "laplace (seeded NumPy; not for release)"

    def choose(self, scores: np.ndarray, scale: float) -> int:
        scores = np.asarray(scores, dtype=float)
        return int(np.argmax(scores / scale + self.rng.gumbel(size=scores.shape)))

    def choice_mechanism(self) -> str:
        return "exponential (Gumbel noisy max, seeded NumPy; not for release)"


@dataclass(frozen=True)
class SecureNoise:
    """Release mode: an exact discrete Gaussian (integers) and OpenDP's Gaussian (reals),
    drawn from the operating system's secure randomness."""

    unit: PrivacyUnit = ROW
    mode: str = RELEASE

    def add(self, values: np.ndarray, sigma: float, *, integer: bool) -> np.ndarray:
        flat = np.asarray(values, dtype=float).ravel()
        if flat.size == 0:
            return flat.reshape(np.shape(values))
        if integer:
            counts = np.rint(flat).astype(np.int64)
            plan = exact_plan(float(sigma))
            if plan is not None:
                noisy = counts + sample_discrete_gaussian(plan, counts.size)
            else:
                noisy = _opendp_gaussian(counts.tolist(), float(sigma), int)
        else:
            noisy = _opendp_gaussian(flat.tolist(), float(sigma), float)
        return np.asarray(noisy, dtype=float).reshape(np.shape(values))

    def mechanism(self, *, integer: bool) -> str:
        if integer:
            return "discrete gaussian (exact sampler after CKS 2020, OS randomness)"
        return "gaussian (OpenDP, OS randomness)"

    def tail_quantile(self, probability: float) -> float:
        # the discrete Gaussian is sub-Gaussian with parameter sigma: P(Z >= t) <=
        # exp(-t^2 / (2 sigma^2)), a bound that also holds for the continuous one; the exact
        # sampler's sigma^2 is rounded up by a factor of at most MAX_VARIANCE_ROUNDING
        return math.sqrt(2.0 * math.log(1.0 / probability) * MAX_VARIANCE_ROUNDING)

    def add_laplace(self, values: np.ndarray, scale: float, *, integer: bool) -> np.ndarray:
        flat = np.asarray(values, dtype=float).ravel()
        if flat.size == 0:
            return flat.reshape(np.shape(values))
        if integer:
            noisy = _opendp_laplace(np.rint(flat).astype(np.int64).tolist(), float(scale), int)
        else:
            noisy = _opendp_laplace(flat.tolist(), float(scale), float)
        return np.asarray(noisy, dtype=float).reshape(np.shape(values))

    def laplace_mechanism(self, *, integer: bool) -> str:
        kind = "discrete laplace" if integer else "laplace"
        return f"{kind} (OpenDP, OS randomness)"

    def choose(self, scores: np.ndarray, scale: float) -> int:
        from opendp import domains, measurements, measures, metrics, mod

        mod.enable_features("contrib")
        measurement = measurements.make_noisy_max(
            domains.vector_domain(domains.atom_domain(T=float, nan=False)),
            metrics.linf_distance(T=float),
            measures.zero_concentrated_divergence(),
            scale=float(scale),
        )
        return int(measurement([float(v) for v in np.asarray(scores, dtype=float)]))

    def choice_mechanism(self) -> str:
        return "exponential (OpenDP Gumbel noisy max, OS randomness)"


def shuffling_rng(noise: NoiseSource) -> np.random.Generator:
    """The generator that picks which rows of a person are kept: the debug mode's own
    (reproducible), or one seeded from the operating system's secure randomness."""
    if isinstance(noise, SeededNoise):
        return noise.rng
    import secrets

    return np.random.default_rng(secrets.randbits(128))


def as_noise(source: NoiseSource | np.random.Generator) -> NoiseSource:
    """A seeded generator means debug mode; anything else is already a noise source."""
    if isinstance(source, np.random.Generator):
        return SeededNoise(source)
    return source


def _opendp_laplace(values: list, scale: float, kind: type) -> list:
    """OpenDP's Laplace measurement on a vector (the discrete Laplace for ``int``)."""
    from opendp import domains, measurements, metrics, mod

    mod.enable_features("contrib")
    atoms = domains.atom_domain(T=int) if kind is int else domains.atom_domain(T=float, nan=False)
    measurement = measurements.make_laplace(
        domains.vector_domain(atoms), metrics.l1_distance(T=kind), scale=scale
    )
    return measurement(values)


def _opendp_gaussian(values: list, sigma: float, kind: type) -> list:
    """OpenDP's Gaussian measurement on a vector (discrete for ``int``). Imported here, and
    module by module: ``opendp.prelude`` pulls in scikit-learn extras and takes 2 s."""
    from opendp import domains, measurements, metrics, mod

    mod.enable_features("contrib")
    atoms = domains.atom_domain(T=int) if kind is int else domains.atom_domain(T=float, nan=False)
    measurement = measurements.make_gaussian(
        domains.vector_domain(atoms), metrics.l2_distance(T=kind), scale=sigma
    )
    return measurement(values)
