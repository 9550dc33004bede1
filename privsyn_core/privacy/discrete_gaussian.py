"""An exact, vectorised discrete Gaussian sampler (Canonne, Kamath and Steinke 2020).

Why not a rounded floating-point Gaussian: its low-order bits leak the input (Mironov 2012),
and its tails are not the ones the zCDP proof assumes. CKS show how to sample
``N_Z(0, sigma^2)`` (``P(y) ∝ exp(-y^2 / (2 sigma^2))`` on the integers) *exactly*, using only
uniform integers and rational arithmetic:

* Algorithm 1, ``Bernoulli(exp(-gamma))`` for rational ``gamma``;
* Algorithm 2, the discrete Laplace with scale ``t = floor(sigma) + 1``;
* Algorithm 3, rejection from that discrete Laplace with acceptance probability
  ``exp(-(|Y| - sigma^2/t)^2 / (2 sigma^2))``.

OpenDP implements the same algorithms one draw at a time (about 12 µs per draw). Here every
loop runs over a whole vector of draws at once in unsigned 64-bit integers, which is about a
hundred times faster; the algorithm, and so the distribution, is unchanged.

Exactness needs ``sigma^2`` to be rational: it is rounded *up* to ``p / 2^k`` with ``p`` of at
least 21 bits, so the noise is never smaller than calibrated (the relative increase in
variance is below 1e-6). When the integers involved could overflow 64 bits (``sigma`` below
0.25 or above about 6,000), :func:`exact_plan` returns ``None`` and the caller uses OpenDP instead.
Uniform bits come from ``os.urandom``, the operating system's secure randomness, unless a
``bits`` function is passed (tests do, to make draws reproducible).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

RandomBits = Callable[[int], np.ndarray]
"""``bits(n)`` returns ``n`` independent uniform ``uint64`` values."""

_PRECISION_BITS = 20
#: the sampler's sigma^2 is at most this factor above the one asked for (p >= 2^20, rounded up)
MAX_VARIANCE_ROUNDING = 1 + 2.0**-_PRECISION_BITS
# every integer the sampler forms stays below this, leaving headroom for the K loop's factor
_LIMIT = 2**58


def os_bits(n: int) -> np.ndarray:
    """``n`` uniform 64-bit words from the operating system's secure randomness."""
    return np.frombuffer(os.urandom(8 * n), dtype=np.uint64)


class _Pool:
    """Serves words from ``bits`` fetched in blocks: one system call per block, not per
    vector operation (each ``os.urandom`` call costs about 10 µs)."""

    def __init__(self, bits: RandomBits, block: int = 1024) -> None:
        self._bits, self._block = bits, block
        self._buffer = np.empty(0, dtype=np.uint64)

    def __call__(self, n: int) -> np.ndarray:
        if n > self._buffer.size:
            fresh = self._bits(max(self._block, n - self._buffer.size))
            self._buffer = np.concatenate([self._buffer, fresh])
        words, self._buffer = self._buffer[:n], self._buffer[n:]
        return words


@dataclass(frozen=True)
class ExactPlan:
    """``sigma^2 = p / q`` exactly (``q`` a power of two) and the Laplace scale ``t``."""

    p: int
    q: int
    t: int

    @property
    def variance_parameter(self) -> Fraction:
        return Fraction(self.p, self.q)


def exact_plan(sigma: float) -> ExactPlan | None:
    """The rational ``sigma^2`` (rounded up) the sampler will use, or ``None`` when 64-bit
    arithmetic cannot represent it with room to spare."""
    if not math.isfinite(sigma) or sigma <= 0:
        raise ValueError(f"sigma must be positive and finite, got {sigma}")
    variance = Fraction(sigma) ** 2
    k = 0
    while math.ceil(variance * 2**k) < 2**_PRECISION_BITS:
        k += 1
    q = 2**k
    p = math.ceil(variance * q)
    t = math.isqrt(p // q) + 1
    denominator = 2 * p * q * t * t  # of gamma in Algorithm 3
    if denominator * 64 >= _LIMIT or q * t >= 2**32:
        return None
    return ExactPlan(p, q, t)


def _uniform_below(bound: np.ndarray, bits: RandomBits) -> np.ndarray:
    """Exactly uniform integers in ``[0, bound)`` elementwise (rejection of the biased low
    range, as in OpenBSD's ``arc4random_uniform``; bounds here are far below 2^64, so a
    rejection is rare)."""
    bound = bound.astype(np.uint64)
    floor = (np.uint64(0) - bound) % bound  # 2^64 mod bound
    draw = np.array(bits(bound.size)).reshape(bound.shape)
    rejected = np.flatnonzero(draw < floor)
    while rejected.size:
        flat = draw.reshape(-1)
        flat[rejected] = bits(rejected.size)
        rejected = rejected[flat[rejected] < floor.reshape(-1)[rejected]]
    return draw % bound


def bernoulli_exp(numerator: np.ndarray, denominator: np.ndarray, bits: RandomBits) -> np.ndarray:
    """``Bernoulli(exp(-numerator / denominator))`` elementwise (CKS Algorithm 1).

    ``gamma > 1`` is split into ``floor(gamma)`` independent ``Bernoulli(exp(-1))`` trials
    and one for the remainder, as in the paper.
    """
    numerator = numerator.astype(np.uint64)
    denominator = denominator.astype(np.uint64)
    whole = numerator // denominator
    return _bernoulli_exp_split(whole, numerator - whole * denominator, denominator, bits)


def _bernoulli_exp_split(
    whole: np.ndarray, fraction: np.ndarray, denominator: np.ndarray, bits: RandomBits
) -> np.ndarray:
    """``Bernoulli(exp(-(whole + fraction / denominator)))``; ``whole`` may hold Python ints."""
    result = np.ones(whole.shape, dtype=bool)
    whole = whole.copy()
    alive = np.flatnonzero(whole > 0)
    while alive.size:
        survived = _bernoulli_exp_minus_one(alive.size, bits)
        result[alive[~survived]] = False
        whole[alive] = whole[alive] - 1
        alive = alive[survived & (whole[alive] > 0)]
    todo = np.flatnonzero(result)
    result[todo] = _bernoulli_exp_fraction(fraction[todo], denominator[todo], bits)
    return result


def _width(size: int) -> int:
    """K values tried per pass: small vectors pay per pass (a run reaches K = 7 with
    probability below 1/720), large ones pay per random word."""
    return 6 if size <= 1024 else 2


def _bernoulli_exp_fraction(
    numerator: np.ndarray, denominator: np.ndarray, bits: RandomBits
) -> np.ndarray:
    """CKS Algorithm 1 for ``gamma = numerator / denominator`` in ``[0, 1]``: draw
    ``A_K ~ Bernoulli(gamma / K)`` for K = 1, 2, ... until the first failure, and accept when
    that K is odd. Several consecutive K are drawn per pass; draws after the first failure
    are simply unused, which leaves the outcome's distribution unchanged."""
    result = np.empty(numerator.shape, dtype=bool)
    first_k = np.ones(numerator.shape, dtype=np.uint64)
    running = np.arange(numerator.size)
    while running.size:
        width = _width(running.size)
        k = first_k[running, None] + np.arange(width, dtype=np.uint64)
        success = _uniform_below(denominator[running, None] * k, bits) < numerator[running, None]
        failed = ~success
        stopped = failed.any(axis=1)
        stop_k = k[np.arange(running.size), failed.argmax(axis=1)]
        result[running[stopped]] = (stop_k[stopped] % np.uint64(2)) == 1
        first_k[running] += np.uint64(width)
        running = running[~stopped]
    return result


def _bernoulli_exp_minus_one(n: int, bits: RandomBits) -> np.ndarray:
    one = np.ones(n, dtype=np.uint64)
    return _bernoulli_exp_fraction(one, one, bits)


def _geometric_exp_minus_one(n: int, bits: RandomBits) -> np.ndarray:
    """The number of successes of ``Bernoulli(exp(-1))`` before the first failure, ``n``
    times (Algorithm 2's V). Small vectors draw several trials per pass, as in
    :func:`_bernoulli_exp_fraction`; trials after the first failure go unused."""
    v = np.zeros(n, dtype=np.uint64)
    going = np.arange(n)
    while going.size:
        width = 8 if going.size <= 1024 else 1
        success = _bernoulli_exp_minus_one(going.size * width, bits).reshape(-1, width)
        run = np.where(success.all(axis=1), width, success.argmin(axis=1)).astype(np.uint64)
        v[going] += run
        going = going[run == width]
    return v


def _discrete_laplace(t: int, n: int, bits: RandomBits) -> np.ndarray:
    """``n`` draws with ``P(y) ∝ exp(-|y| / t)`` (CKS Algorithm 2, with s = 1).

    Candidates are drawn in bulk and the accepted ones kept in order: the accepted draws of an
    i.i.d. stream are i.i.d. from the target, and one round usually suffices.
    """
    found: list[np.ndarray] = []
    have = 0
    scale = np.uint64(t)
    while have < n:
        m = int(1.7 * (n - have)) + 16  # about 0.63 of candidates pass for t >= 2
        u = _uniform_below(np.full(m, t, dtype=np.uint64), bits)
        u = u[bernoulli_exp(u, np.full(m, t, dtype=np.uint64), bits)]
        v = _geometric_exp_minus_one(u.size, bits)
        x = (u + scale * v).astype(np.int64)
        negative = (bits(x.size) & np.uint64(1)) == 1
        valid = ~(negative & (x == 0))
        found.append(np.where(negative, -x, x)[valid])
        have += int(valid.sum())
    return np.concatenate(found)[:n]


def sample_discrete_gaussian(plan: ExactPlan, n: int, bits: RandomBits = os_bits) -> np.ndarray:
    """``n`` independent draws from ``N_Z(0, p/q)`` (CKS Algorithm 3), candidates in bulk."""
    p, q, t = plan.p, plan.q, plan.t
    bits = _Pool(bits)
    denominator = 2 * p * q * t * t
    found: list[np.ndarray] = []
    have = 0
    while have < n:
        y = _discrete_laplace(t, int(1.4 * (n - have)) + 16, bits)  # 0.7-0.76 pass, sigma >= 3
        # gamma = (|y| - sigma^2/t)^2 / (2 sigma^2) = (|y| q t - p)^2 / (2 p q t^2)
        if _may_overflow(y, plan):
            accept = _accept_wide(np.abs(y).astype(object) * (q * t) - p, denominator, bits)
        else:
            gap = np.abs(np.abs(y) * (q * t) - p).astype(np.uint64)
            accept = bernoulli_exp(gap * gap, np.full(y.size, denominator, np.uint64), bits)
        found.append(y[accept])
        have += int(accept.sum())
    return np.concatenate(found)[:n]


def _may_overflow(y: np.ndarray, plan: ExactPlan) -> bool:
    largest = int(np.abs(y).max(initial=0)) * plan.q * plan.t + plan.p
    return largest * largest >= _LIMIT


def _accept_wide(offset: np.ndarray, denominator: int, bits: RandomBits) -> np.ndarray:
    """Algorithm 3's acceptance step for draws so far out in the tail that the squared gap
    exceeds 64 bits (beyond 500 sigma for sigma up to 1,000; beyond about 20 sigma at the
    largest scales): the whole part of gamma is computed with Python integers."""
    squared = offset * offset
    whole = squared // denominator
    remainder = (squared - whole * denominator).astype(np.uint64)
    return _bernoulli_exp_split(
        whole, remainder, np.full(offset.size, denominator, np.uint64), bits
    )
