"""How the domain budget is spread over the columns' estimates.

Once the structure step has settled every column's kind (a DP output, so the split may follow
it: zCDP composes adaptively), the domain budget is shared by the range estimates of the
numeric columns and the category estimates of the others
(:mod:`privsyn_core.measuring.private_domain`): a category gets more than a range, and an
estimate that found nothing gets a second one. The planner prices the same split before a run.
"""

from __future__ import annotations

from dataclasses import dataclass

#: how much more a category estimate gets than a range estimate (see :class:`DomainSplit`)
CATEGORY_WEIGHT = 3.0
#: share of a range's first estimate that releases its column's frequent values, when they
#: are (numbers with decimals: :func:`~privsyn_core.data.columns.prepare_columns`). From
#: the range's own share: given weight of their own, the releases of a table of many numbers
#: took its categories' budget (a wide raw table then lost its 12 grades)
VALUE_SHARE = 0.5
#: share of the ranges' budget every range estimate spends at first; the rest is kept for
#: the ranges whose first estimate found nothing. 0.75 against 0.5 (domain share 0.1,
#: category weight 3, 8 seeds): the bounds of caravan's 85 numeric columns hold 94% of
#: their values instead of 91%, Adult's 95% instead of 94%, with the same columns kept
FIRST_RANGE_SHARE = 0.75
#: the same for the categories' budget and the category estimates that released nothing.
#: 0.75 against one estimate (raw loans at epsilon 1, 10 seeds): verification_income_joint
#: kept in 10 seeds instead of 3, sub_grade releases 7.9 values instead of 1.9; Adult, caravan
#: and happiness keep what they kept (benchmarks/evidence/domains-2026-11-27.txt)
FIRST_CATEGORY_SHARE = 0.75
#: share of the thresholds' delta the first category estimates spend; the rest is shared by
#: the second ones (a threshold moves with the square root of log(1 / delta): halving delta
#: raises it by about 2%)
FIRST_CATEGORY_DELTA_SHARE = 0.5


@dataclass(frozen=True)
class DomainSplit:
    """How the domain budget ``total`` is spread over ``ranges`` range estimates and
    ``categories`` category estimates, once the structure step has settled every kind (a DP
    output, so the split may follow it: zCDP composes adaptively).

    The budget is spent where it is needed, by three rules (the numbers are from
    ``benchmarks/domains.py``, which measures them on raw wide tables at epsilon 1):

    * **A category needs more than a range.** A category survives when its own count clears
      a threshold about 7 sigma high (``private_domain.categories_from_counts``; the tail
      bound of delta over tens of columns), while a range needs only a doubling of the
      column's values to clear 4.5 sigma (``private_domain.range_from_histogram``): a
      category estimate weighs :data:`CATEGORY_WEIGHT` against 1 for a range. At a domain
      share of 0.1 (8 seeds), weight 2 still lost loans' sub_grade in 3 seeds, 3 in none or
      one; 4 kept no more columns and cut the ranges' budget (Adult's bounds held 94% of its
      values, 95% at 3).
    * **A range that found nothing gets a second estimate.** Every range first spends
      :data:`FIRST_RANGE_SHARE` of its weight; the rest of the ranges' budget is shared by
      the ranges that found nothing (sparse columns: most rows missing), whose second
      estimate adds to the first (``private_domain.NoisyEvidence``). When every range found
      its bounds, that rest goes to the category estimates, which come last; without them it
      is left unspent, for PrivSyn's own steps.
    * **So does a category estimate that released nothing.** Every category estimate first
      spends :data:`FIRST_CATEGORY_SHARE` of its part; the rest of the categories' budget is
      shared by the columns that released no value (a column whose commonest values sit
      just under the threshold: loans' verification_income_joint, 611 rows against a
      threshold of 671), whose second estimate adds to the first. When every column
      released something, every column gets a second estimate, which may add values: the
      thresholds are then those of one estimate with the whole budget (2% higher, for the
      delta now split in two).
    """

    total: float
    ranges: int
    categories: int
    category_weight: float = CATEGORY_WEIGHT
    #: ranges whose column's frequent values are also released, as categories are, once,
    #: from the range's own share (:data:`VALUE_SHARE` of its first estimate's)
    values: int = 0

    @property
    def _unit(self) -> float:
        weights = self.ranges + self.category_weight * self.categories
        return self.total / weights if weights else 0.0

    @property
    def value_rho(self) -> float:
        """rho of each numeric column's release of its frequent values (one estimate)."""
        return VALUE_SHARE * self.range_first

    @property
    def valued_range_first(self) -> float:
        """rho of the first range estimate of a column whose values are also released."""
        return (1.0 - VALUE_SHARE) * self.range_first

    @property
    def range_first(self) -> float:
        """rho of every range's first estimate."""
        return FIRST_RANGE_SHARE * self._unit

    @property
    def range_reserve(self) -> float:
        """rho kept for the second estimates of the ranges that found nothing."""
        return (1.0 - FIRST_RANGE_SHARE) * self._unit * self.ranges

    def range_second(self, failed: int) -> float:
        """rho of each second estimate when ``failed`` ranges found nothing."""
        return self.range_reserve / failed if failed else 0.0

    def category_budget(self, failed_ranges: int) -> float:
        """rho of all the category estimates together, after ``failed_ranges`` ranges found
        nothing (when none did, the ranges' reserve joins it)."""
        if not self.categories:
            return 0.0
        reserve = 0.0 if failed_ranges else self.range_reserve
        return self.category_weight * self._unit * self.categories + reserve

    @property
    def category_least(self) -> float:
        """rho of the first estimate every category gets whatever the ranges find: the
        threshold a category can count on."""
        return self.category_first(failed_ranges=1)

    def category_first(self, failed_ranges: int) -> float:
        """rho of every category's first estimate."""
        if not self.categories:
            return 0.0
        return FIRST_CATEGORY_SHARE * self.category_budget(failed_ranges) / self.categories

    def category_seconds(self, failed: int) -> int:
        """How many second category estimates there are when ``failed`` first ones released
        nothing: one for each of those, or for every column when none failed."""
        return failed or self.categories

    def category_second(self, failed_ranges: int, failed: int) -> float:
        """rho of each second estimate when ``failed`` category estimates released nothing."""
        seconds = self.category_seconds(failed)
        if not seconds:
            return 0.0
        return (1.0 - FIRST_CATEGORY_SHARE) * self.category_budget(failed_ranges) / seconds

    def category_first_delta(self, delta: float) -> float:
        """delta of every category's first estimate (and of every release of a numeric
        column's values), from the thresholds' ``delta``."""
        share = 1.0 if FIRST_CATEGORY_SHARE >= 1.0 else FIRST_CATEGORY_DELTA_SHARE
        return share * delta / max(1, self.categories + self.values)

    def category_second_delta(self, delta: float, failed: int) -> float:
        """delta of each second estimate when ``failed`` category estimates released
        nothing."""
        rest = delta - self.category_first_delta(delta) * (self.categories + self.values)
        return rest / max(1, self.category_seconds(failed))

    def spent(self, failed_ranges: int) -> float:
        """rho all the estimates spend together, when ``failed_ranges`` ranges found nothing
        (the categories spend their whole budget, whatever their first estimates release)."""
        return (
            self.range_first * self.ranges
            + (self.range_reserve if failed_ranges else 0.0)
            + self.category_budget(failed_ranges)
        )
