"""The table's structure decided privately: each column's kind, whole numbers, decimals and
date format.

Without a schema, someone must decide whether ``age`` is a number or text, whether its numbers
are whole, how its dates are written. Deciding that from pandas' dtypes, or from any look at
the values, lets one record change the released structure (one ``unknown`` would make ``age``
text and drop it from the output) with certainty: an unbounded privacy loss. Here the decision
is a post-processing of a DP measurement:

1. **Measure.** Every value of the column is read on its own (:mod:`privsyn_core.data.values`) and
   falls in exactly one :class:`~privsyn_core.data.values.ValueClass` (missing, integer, a
   number with 1, 2, 3, 4 or more decimals, each date format, text). The column's class counts
   get Gaussian noise. One record moves one count by one, so the histogram has L2 sensitivity
   1 per column: ``rho = 1 / (2 sigma^2)`` per column, charged to the ledger as step
   ``structure``. Counting the decimals in the same histogram (finer classes of the same
   partition) costs nothing more than counting "decimal" alone did.
2. **Decide** (:func:`decide_structure`, a pure function of the noisy counts and public
   constants), by noisy shares of the present (non-missing) values, where a class whose noisy
   count is at most :data:`NOISE_FLOOR` sigmas counts as empty (summed, the noise of the
   classes a column leaves empty would otherwise move the shares: on a wide table the noise
   is large, and one numeric column in thirteen read as categorical):

   * numeric when at least :data:`KIND_SHARE` of them are numbers; values that are not
     numbers are then read as missing;
   * datetime when at least :data:`KIND_SHARE` of them are dates, in the format with the
     largest noisy count (ambiguous ``01/02/2020`` dates follow the larger of d/m and m/d);
   * categorical otherwise;
   * when the classes heard over the floor hold too few values for shares to mean much (at
     most :data:`MIN_SIGNAL` sigmas: a few hundred rows at epsilon 1), the largest of the
     noisy counts of numbers, dates and text decides instead: on a small table a numeric
     column read as categorical would lose every value to the threshold of the category
     estimate. (The heard total, not the sum of all fourteen noisy counts, whose noise
     ``sigma sqrt(13)`` would send a large column here now and then);
   * the **decimals** of its numbers: the fewest ``d`` such that the numbers with more than
     ``d`` decimals are at most :data:`~privsyn_core.data.values.DECIMAL_SHARE` (1%) of the
     numbers, so that written to ``d`` places at most 1% of the values would lose a digit
     (one outlier cannot add a decimal to a column); ``d = 0`` is whole numbers. A decimal
     class counts as empty under :data:`DECIMAL_FLOOR` sigmas, a little above
     :data:`NOISE_FLOOR`, so that noise in the five of them passes it together as rarely as
     noise in one class passes :data:`NOISE_FLOOR` (0.13%): counting decimals finely does not
     turn whole numbers into decimals more often. When more than 1% of the numbers have more
     than :data:`~privsyn_core.data.values.MAX_COUNTED_DECIMALS` decimals (floats written in
     full) the count gives no answer (None) and the output takes the precision of its bins
     (:func:`~privsyn_core.data.codecs.default_decimals`). On few values the noise makes the
     vote err towards fewer decimals (a class under its floor is read as empty), and to more
     only when noise alone passes a floor.

Whether a column may hold missing values is not decided here: every column whose schema does
not say otherwise gets a "missing" code, and PrivSyn's own noisy 1-way marginal measures its
rate (a near-zero rate is filtered out with the other low counts, paper 5.3). The paper has
no such step: it assumes a public domain. The thresholds are ours, chosen so that a record
cannot move a share by more than ``1/n`` and the noise, not the record, decides near a
threshold.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import pandas as pd

from privsyn_core.data.schema import Kind
from privsyn_core.data.values import (
    DATE_CLASSES,
    DATE_FORMATS,
    DECIMAL_CLASSES,
    MAX_COUNTED_DECIMALS,
    NUMBER_CLASSES,
    ValueClass,
    class_counts,
    fewest_decimals,
)
from privsyn_core.privacy.ledger import Measurement
from privsyn_core.privacy.noise import NoiseSource, as_noise

#: share of the present values that must be numbers (dates) for a numeric (datetime) column
KIND_SHARE = 0.8
#: the present values heard over the noise floor must exceed this many sigmas to decide by
#: shares
MIN_SIGNAL = 10.0
#: a class whose noisy count is at most this many sigmas is read as empty when shares are
#: taken (pure noise passes it with probability 0.13% per class)
NOISE_FLOOR = 3.0
#: the floor of each decimal class (3.46 sigmas): noise alone passes it in one of the five
#: classes as rarely as it passes :data:`NOISE_FLOOR` in one class (0.13%), so counting
#: decimals finely does not make a whole-number column fractional more often
DECIMAL_FLOOR = -NormalDist().inv_cdf(NormalDist().cdf(-NOISE_FLOOR) / len(DECIMAL_CLASSES))


@dataclass(frozen=True)
class StructureDecision:
    """What the counts say of a column: its kind, whether its numbers are whole, their
    decimals, the format of its dates (all but the kind are decided whatever the kind, for
    schemas that declare the kind and leave them open), and why, in words.

    ``decimals`` is 0 for whole numbers, 1 to
    :data:`~privsyn_core.data.values.MAX_COUNTED_DECIMALS`, or None when the numbers have more
    (the output then takes the precision of the bins)."""

    kind: Kind
    integer: bool
    datetime_format: str
    reason: str
    decimals: int | None = 0


@dataclass(frozen=True)
class StructureEstimate:
    """The noisy class counts of one column, what they decided, and their ledger entry."""

    column: str
    noisy_counts: np.ndarray
    decision: StructureDecision
    measurement: Measurement


def decide_structure(counts: np.ndarray, sigma: float) -> StructureDecision:
    """Kind, whole numbers and date format from (noisy) class counts; ``sigma`` is their noise
    (0 for exact counts). Pure: it reads nothing but its arguments (see the module docstring).
    """
    # sums of the noisy counts themselves (unbiased), clipped only once summed: clipping each
    # class first would add about 0.4 sigma of positive bias per empty class
    c = np.asarray(counts, dtype=float)
    numbers = max(0.0, float(sum(c[k] for k in NUMBER_CLASSES)))
    dates = max(0.0, float(sum(c[k] for k in DATE_CLASSES)))
    text = max(0.0, float(c[ValueClass.TEXT]))
    # the shares read classes under the noise floor as empty: summed, the noise of the seven
    # classes a numeric column leaves empty (sigma sqrt(7)) would make one numeric column in
    # thirteen categorical on a wide table (caravan, 86 columns at epsilon 1)
    floors = np.full(len(c), NOISE_FLOOR * sigma)
    floors[list(DECIMAL_CLASSES)] = DECIMAL_FLOOR * sigma
    heard = np.where(c > floors, c, 0.0)
    heard_numbers = float(sum(heard[k] for k in NUMBER_CLASSES))
    heard_dates = float(sum(heard[k] for k in DATE_CLASSES))
    heard_present = heard_numbers + heard_dates + float(heard[ValueClass.TEXT])
    # the counts of 1, 2, 3, 4 and more decimals; none below "more": more than 4 (None)
    decimals = fewest_decimals([heard[k] for k in DECIMAL_CLASSES], heard_numbers)
    integer = decimals == 0
    fmt = _date_format(c)
    if heard_present <= MIN_SIGNAL * sigma:
        # too few values for shares to mean much: the group heard loudest decides, then the
        # group with the largest single class (a sum over many empty classes is mostly
        # noise: six number classes can sum a real count of 1,400 to below zero). Nothing
        # at all (a column of missing values) stays categorical.
        loudest = {
            Kind.CATEGORICAL: (float(heard[ValueClass.TEXT]), float(c[ValueClass.TEXT])),
            Kind.NUMERIC: (heard_numbers, max(float(c[k]) for k in NUMBER_CLASSES)),
            Kind.DATETIME: (heard_dates, max(float(c[k]) for k in DATE_CLASSES)),
        }
        kind = max(loudest, key=lambda k: loudest[k])
        reason = (
            f"few values for this budget: numbers ({numbers:.0f}), dates ({dates:.0f}) and "
            f"text ({text:.0f}) compared by their loudest noisy class -> {kind.value}"
        )
    elif heard_numbers >= KIND_SHARE * heard_present:
        kind = Kind.NUMERIC
        reason = f"{heard_numbers / heard_present:.0%} of values are numbers -> numeric"
    elif heard_dates >= KIND_SHARE * heard_present:
        kind = Kind.DATETIME
        reason = f"{heard_dates / heard_present:.0%} of values are dates -> datetime"
    else:
        kind = Kind.CATEGORICAL
        reason = (
            f"{heard_numbers / heard_present:.0%} numbers, {heard_dates / heard_present:.0%} "
            "dates -> categorical"
        )
    if kind is Kind.NUMERIC:
        if integer:
            reason += ", whole numbers"
        elif decimals is None:
            reason += f", more than {MAX_COUNTED_DECIMALS} decimals"
        else:
            reason += f", {decimals} decimal{'' if decimals == 1 else 's'}"
    elif kind is Kind.DATETIME:
        reason += f", {fmt}"
    return StructureDecision(kind, bool(integer), fmt, reason, decimals)


def _date_format(c: np.ndarray) -> str:
    """The format of the largest date class; ambiguous slashed dates join the slashed format
    with more votes (month first on a tie, as pandas and most software read them)."""
    slashed = (
        ValueClass.DATE_DMY if c[ValueClass.DATE_DMY] > c[ValueClass.DATE_MDY] else
        ValueClass.DATE_MDY
    )  # fmt: skip
    votes = {k: float(c[k]) for k in DATE_FORMATS}
    votes[slashed] += float(c[ValueClass.DATE_SLASH_AMBIGUOUS])
    return DATE_FORMATS[max(votes, key=lambda k: votes[k])]


def measure_structure(
    column: pd.Series, rho: float, noise: NoiseSource | np.random.Generator
) -> StructureEstimate:
    """The column's class counts with Gaussian noise (``rho``-zCDP), and what they decide.

    ``column`` must be canonical text (:func:`~privsyn_core.data.values.canonical_text`).
    """
    return noisy_structure(str(column.name), class_counts(column), rho, noise)


def noisy_structure(
    name: str, counts: np.ndarray, rho: float, noise: NoiseSource | np.random.Generator
) -> StructureEstimate:
    """The mechanism itself: exact class counts (one record moves one of them by one) plus
    Gaussian noise of ``sigma = 1 / sqrt(2 rho)``, and the decision they lead to."""
    source = as_noise(noise)
    sigma = source.unit.sigma(rho)
    noisy = source.add(counts, sigma, integer=True)
    measurement = Measurement(
        step="structure",
        attributes=(name,),
        sensitivity=source.unit.sensitivity(),
        rho=rho,
        sigma=sigma,
        n_queries=len(ValueClass),
        mechanism=f"{source.mechanism(integer=True)} on counts of value classes "
        "(missing, integer, decimals 1-4 and more, date formats, text)",
    )
    return StructureEstimate(name, noisy, decide_structure(noisy, sigma), measurement)
