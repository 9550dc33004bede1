"""The choices that depend on how many attributes a table models, in one place.

The paper has one rule for every table: DenseMarg selection (Algorithm 1 and 2), GUM
synthesis, every measured marginal taken as it was measured. On wide tables (tens to hundreds
of columns, which PrivSyn was made for) three departures measured better, each on its own
evidence. They are three rules, not one: each has its own field here, so changing one (for
example where the MRF starts to pay) leaves the others where their evidence put them.

The width is a public count: the attributes a declared domain names, or those a DP
preparation kept (never a count of private rows). Selection "auto" and synthesis "auto" read
this object, and the named methods ("treefirst", "gum+mrf") take the same settings from it,
so "auto" on a wide table and the named method agree by construction.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

#: the selection a width stands for ("auto" resolves to one of these)
WidthSelection = Literal["treefirst", "densemarg"]


@dataclass(frozen=True)
class WidthPolicy:
    """Where each width-dependent rule starts, and the tree-first margin.

    Evidence files are under ``benchmarks/evidence/``.
    """

    #: selection "auto" measures a tree first (:class:`~privsyn_core.selection.methods.
    #: TreeFirst`) from this many attributes, and runs DenseMarg below it. By
    #: ``tree-first-2026-11-26.txt`` (sections D and I): tree-first beats MST in 11 of 12
    #: cells on the wide tables (33, 40 and 55 columns) where DenseMarg beats it in 6, while
    #: the narrow ones (penguins 7, Adult 14-15, NLTCS 16 columns) do best with DenseMarg
    #: (on adult-coded tree-first misses the range-query and SVM targets). Nothing was
    #: measured between 16 and 33 columns; 30 stays near the narrowest table that gained
    #: (happiness, 33 columns, where tree-first wins 2 of 3 epsilons).
    tree_first_from: int = 30
    #: tree-first's margin over the InDif noise, for "auto" and "treefirst" alike: 1 won 11
    #: of 12 wide-table cells against MST, 2 won 9 (``tree-first-2026-11-26.txt``, section
    #: D). DenseMarg keeps its own margin (:attr:`~privsyn_core.config.PrivSynConfig.
    #: indif_margin`).
    tree_first_margin: float = 1.0
    #: synthesis "auto" runs GUM then the MRF (keeping the closer table) from this many
    #: attributes, GUM alone below it. By ``tree-first-2026-11-26.txt`` section N: on the
    #: five wide tables (33-86 columns) GUM's kept table is often its tree start, and the MRF
    #: fitted to the same targets is 2-34% closer; where GUM reaches its noise floor the MRF
    #: is not run. On adult-coded (section M) the MRF gained 1-3% at epsilon 1 and 2 for 50
    #: times the time, so narrow tables keep GUM.
    mrf_from: int = 30
    #: measured pairs are replaced by their quasi-independent fit
    #: (:mod:`~privsyn_core.generation.quasi_independence`) from this many attributes. By
    #: ``wide-2026-11-27-caravan-large.txt`` section Q: the fit brought the wide tables'
    #: targets closer to the real pairs, while on adult-coded at epsilon 1 it took 1 or 2 of
    #: 41 pairs on 7 of 8 seeds and the SVM error rose on 6 of them (mean 0.1488 to 0.1506)
    #: with the 2-way L1 and range queries the same.
    quasi_independence_from: int = 30

    def __post_init__(self) -> None:
        for name in ("tree_first_from", "mrf_from", "quasi_independence_from"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a whole number of at least 1, got {value!r}")
        if not 0 <= self.tree_first_margin < 100:
            margin = self.tree_first_margin
            raise ValueError(f"tree_first_margin must lie in [0, 100), got {margin}")

    def selection(self, n_attributes: int) -> WidthSelection:
        """The method selection "auto" runs on ``n_attributes`` modelled attributes."""
        return "treefirst" if n_attributes >= self.tree_first_from else "densemarg"

    def synthesis(self, n_attributes: int, iterations: int = 1) -> str:
        """The method synthesis "auto" runs: "gum+mrf" on a table of at least
        :attr:`mrf_from` attributes, "gum" on a narrower one, and "gum" when GUM is asked for
        no iteration (the starting table is what was asked for)."""
        return "gum+mrf" if n_attributes >= self.mrf_from and iterations > 0 else "gum"

    def quasi_independence(self, n_attributes: int) -> bool:
        """Whether measured pairs may be replaced by their quasi-independent fit."""
        return n_attributes >= self.quasi_independence_from

    def selection_account(self, n_attributes: int) -> str:
        """Why selection "auto" ran what it ran, in words (from public counts only)."""
        if self.selection(n_attributes) == "treefirst":
            return f"wide table ({n_attributes} attributes >= {self.tree_first_from})"
        return f"narrow table ({n_attributes} attributes < {self.tree_first_from})"


#: the policy every run uses
WIDTH_POLICY = WidthPolicy()
