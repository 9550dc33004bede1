"""How a run chooses the marginals it measures (paper Algorithm 3, lines 3-4): one object
per selection method, with one interface.

Each method says which private score it reads (:attr:`SelectionMethod.reads`: the noisy
InDif scores of section 4.2, PrivBayes's parent sets of section 6.3, or nothing) and how it
chooses from them (:meth:`SelectionMethod.choose`). The scores are measured by the pipeline
(the only code that reads rows); choosing from them is post-processing, so this module
imports no counter.

* :class:`DenseMarg`: the paper's choice, Algorithm 1 on the noisy InDif scores, then
  Algorithm 2 (combine).
* :class:`TreeFirst`: a maximum spanning tree measured first, then the pairs whose noisy
  InDif the tree does not explain (two rounds on rho_3).
* :class:`Auto` (the default): TreeFirst on a wide table, DenseMarg on a narrower one.
* :class:`PrivBayes`: the marginals of a Bayesian network chosen with the exponential
  mechanism (the comparison of section 6.3).
* :class:`AllPairs` and :class:`Given`: fixed without looking at the data (all 2-way
  marginals, as PriView does; or the user's own). Their selection share goes to the marginals.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Literal

import pandas as pd

from privsyn_core.domain import Domain
from privsyn_core.marginals import NoisyMarginal
from privsyn_core.selection.combine import CombineRule, combine_marginals
from privsyn_core.selection.fixed import all_pairs, given_marginals
from privsyn_core.selection.greedy import Selection, select_marginals
from privsyn_core.selection.privbayes import NetworkNode, network_marginals
from privsyn_core.selection.target import TargetEmphasis
from privsyn_core.selection.tree_first import Scoring, first_round, second_round
from privsyn_core.width_policy import WIDTH_POLICY

#: the private score a method reads before it chooses
Reads = Literal["indif", "network"]

#: the selection that selects nothing (and the one every data-independent method reports)
NO_SELECTION = Selection((), 0.0, ())


@dataclass(frozen=True)
class SelectionScores:
    """What the selection step measured, all of it DP: the noisy InDif scores (NaN where none
    were measured) with their noise standard deviation, or PrivBayes's parent sets; and the
    noisy 1-way marginals measured before them."""

    indif: pd.DataFrame
    indif_sigma: float = 0.0
    network: tuple[NetworkNode, ...] = ()
    #: the noisy 1-way marginals on the engine's codes (measured before any score)
    one_way: tuple[NoisyMarginal, ...] = ()


@dataclass(frozen=True)
class Choice:
    """The marginals a method chose, before the 1-way marginals that no choice covers are
    added, each with where it came from (``origins``: "selected", "isolated", "combined", or
    the method's name)."""

    marginals: tuple[tuple[str, ...], ...]
    origins: tuple[str, ...]
    selection: Selection = NO_SELECTION
    #: one line for the progress display
    summary: str = ""
    #: each marginal's own rho, when the method splits rho_3 itself (empty: Equation 1)
    budgets: tuple[float, ...] = ()
    #: set when ``marginals`` are a first round: measured with ``budgets``, what they show
    #: goes in here and the final choice comes out (its budgets and the first round's
    #: together spend rho_3)
    then: Callable[[Sequence[NoisyMarginal]], Choice] | None = None


class SelectionMethod(ABC):
    """A way of choosing marginals: the private score it reads (``reads``, None for none),
    free checks against the table's columns, and the choice itself."""

    name: ClassVar[str]
    reads: ClassVar[Reads | None]
    #: what it does, in a few words (the dashboard's line on which method ran)
    title: ClassVar[str]

    def check(self, columns: Sequence[str]) -> None:  # noqa: B027 (most methods check nothing)
        """Refuse what cannot fit the table's columns (names are public: nothing is spent)."""

    def planned(self, n_columns: int) -> tuple[int, str] | None:
        """How many marginals it will choose, and in words, when that is known before the
        run (the planner's noise per marginal); None when the data decides."""
        return None

    @abstractmethod
    def choose(self, scores: SelectionScores, engine: Domain, rho_marginals: float) -> Choice:
        """The marginals to measure with ``rho_marginals`` (rho_3), from ``scores`` alone."""


@dataclass(frozen=True)
class DenseMarg(SelectionMethod):
    """Algorithm 1 (pairs whose dependency outweighs the noise of measuring them), then
    Algorithm 2 (cliques of at most ``gamma`` cells merged into one marginal)."""

    name: ClassVar[str] = "densemarg"
    reads: ClassVar[Reads | None] = "indif"
    title: ClassVar[str] = "DenseMarg (Algorithm 1)"
    gamma: int
    combine: CombineRule = "paper"
    connect_isolated: bool = True
    emphasis: TargetEmphasis | None = None
    margin: float = 0.0

    def choose(self, scores: SelectionScores, engine: Domain, rho_marginals: float) -> Choice:
        sizes = engine.as_dict()
        selection = select_marginals(
            scores.indif,
            sizes,
            rho_marginals,
            connect_isolated=self.connect_isolated,
            emphasis=self.emphasis,
            indif_sigma=scores.indif_sigma,
            margin=self.margin,
        )
        chosen = combine_marginals(
            selection.pairs,
            sizes,
            scores.indif,
            self.gamma,
            rule=self.combine,
            emphasis=self.emphasis,
        )
        return Choice(
            tuple(chosen),
            origins(chosen, selection),
            selection,
            f"{len(selection.steps)} pairs selected, {len(selection.isolated_links)} links",
        )


@dataclass(frozen=True)
class TreeFirst(SelectionMethod):
    """Two rounds on rho_3 (:mod:`privsyn_core.selection.tree_first`): a maximum spanning tree
    of the noisy InDif first, then the pairs whose noisy InDif the measured tree does not
    explain; a pair measured twice is pooled."""

    name: ClassVar[str] = "treefirst"
    reads: ClassVar[Reads | None] = "indif"
    title: ClassVar[str] = "a tree first, then the pairs it does not explain"
    #: its margin over the InDif noise
    #: (:attr:`~privsyn_core.width_policy.WidthPolicy.tree_first_margin`)
    margin: float = WIDTH_POLICY.tree_first_margin
    emphasis: TargetEmphasis | None = None
    equal: bool = False

    def choose(self, scores: SelectionScores, engine: Domain, rho_marginals: float) -> Choice:
        scoring = Scoring(
            engine.as_dict(),
            scores.one_way,
            scores.indif_sigma,
            self.margin,
            self.emphasis,
            self.equal,
        )
        tree = first_round(scores.indif, rho_marginals, scoring)

        def then(measured: Sequence[NoisyMarginal]) -> Choice:
            final = second_round(scores.indif, rho_marginals, tree, measured, scoring)
            links = {frozenset(m) for m in tree.marginals}
            return Choice(
                final.marginals,
                tuple(
                    "tree" if frozenset(m) in links else "selected" if len(m) > 1 else "one_way"
                    for m in final.marginals
                ),
                Selection(final.steps, 0.0, ()),
                f"{len(tree.marginals)} tree pairs, "
                f"{len(final.steps) - len(tree.marginals)} pairs beyond the tree",
                final.budgets,
            )

        return Choice(
            tree.marginals,
            ("tree",) * len(tree.marginals),
            Selection(tree.steps, 0.0, ()),
            f"a tree of {len(tree.marginals)} pairs measured first",
            tree.budgets,
            then,
        )


@dataclass(frozen=True)
class PrivBayes(SelectionMethod):
    """The marginals of a Bayesian network of ``degree`` parents per attribute, the parents
    chosen privately (:mod:`privsyn_core.measuring.privbayes`)."""

    name: ClassVar[str] = "privbayes"
    reads: ClassVar[Reads | None] = "network"
    title: ClassVar[str] = "PrivBayes-InDif (section 6.3)"
    degree: int = 2
    #: the largest marginal a parent set may ask for
    gamma: int = 5000

    def choose(self, scores: SelectionScores, engine: Domain, rho_marginals: float) -> Choice:
        chosen = network_marginals(scores.network, engine.attributes) if len(engine) > 1 else ()
        return Choice(chosen, (self.name,) * len(chosen), summary=f"selection {self.name!r}")


@dataclass(frozen=True)
class AllPairs(SelectionMethod):
    """Every 2-way marginal."""

    name: ClassVar[str] = "all_pairs"
    reads: ClassVar[Reads | None] = None
    title: ClassVar[str] = "every pair"

    def planned(self, n_columns: int) -> tuple[int, str] | None:
        pairs = n_columns * (n_columns - 1) // 2
        return max(1, pairs), f"all {pairs} pairs"

    def choose(self, scores: SelectionScores, engine: Domain, rho_marginals: float) -> Choice:
        chosen = all_pairs(engine.attributes)
        return Choice(chosen, (self.name,) * len(chosen), summary=f"selection {self.name!r}")


@dataclass(frozen=True)
class Given(SelectionMethod):
    """The user's attribute sets, measured as given."""

    name: ClassVar[str] = "given"
    reads: ClassVar[Reads | None] = None
    title: ClassVar[str] = "the given marginals"
    marginals: tuple[tuple[str, ...], ...] = field(default=())

    def check(self, columns: Sequence[str]) -> None:
        given_marginals(self.marginals, list(columns))

    def planned(self, n_columns: int) -> tuple[int, str] | None:
        return len(self.marginals), f"{len(self.marginals)} given"

    def choose(self, scores: SelectionScores, engine: Domain, rho_marginals: float) -> Choice:
        chosen = given_marginals(self.marginals, engine.attributes)
        return Choice(chosen, (self.name,) * len(chosen), summary=f"selection {self.name!r}")


@dataclass(frozen=True)
class Auto(SelectionMethod):
    """The default: :class:`TreeFirst` on a wide table, :class:`DenseMarg` otherwise, as
    :data:`~privsyn_core.width_policy.WIDTH_POLICY` counts widths. Both read the same noisy
    InDif scores, so the budget split, and the plan, do not depend on the width."""

    name: ClassVar[str] = "auto"
    reads: ClassVar[Reads | None] = "indif"
    title: ClassVar[str] = "by the table's width"
    narrow: DenseMarg
    wide: TreeFirst

    def resolve(self, n_attributes: int) -> SelectionMethod:
        """The method a table of ``n_attributes`` attributes runs."""
        wide = WIDTH_POLICY.selection(n_attributes) == TreeFirst.name
        return self.wide if wide else self.narrow

    def choose(self, scores: SelectionScores, engine: Domain, rho_marginals: float) -> Choice:
        return self.resolve(len(engine)).choose(scores, engine, rho_marginals)


_METHODS: tuple[type[SelectionMethod], ...] = (
    Auto,
    DenseMarg,
    TreeFirst,
    PrivBayes,
    AllPairs,
    Given,
)
#: every selection method by its name in :class:`~privsyn_core.config.PrivSynConfig`
SELECTION_METHODS: tuple[str, ...] = tuple(m.name for m in _METHODS)


def selection_account(name: str, n_attributes: int) -> str:
    """Which method a run of selection ``name`` on ``n_attributes`` attributes ran, and for
    "auto" why, in one line (read off public settings and sizes)."""
    if name != Auto.name:
        return next(m.title for m in _METHODS if m.name == name)
    chosen = TreeFirst if WIDTH_POLICY.selection(n_attributes) == TreeFirst.name else DenseMarg
    return f"{WIDTH_POLICY.selection_account(n_attributes)}: {chosen.title}"


def origins(chosen: Sequence[tuple[str, ...]], selection: Selection) -> tuple[str, ...]:
    """Where each of DenseMarg's marginals came from: a merged clique, a selected pair, an
    isolated attribute's link, or (a pair Algorithm 1 did not take) a 1-way completion."""
    selected = {frozenset(s.pair) for s in selection.steps}
    links = {frozenset(p) for p in selection.isolated_links}
    out = []
    for attributes in chosen:
        key = frozenset(attributes)
        if len(attributes) > 2:
            out.append("combined")
        elif key in selected:
            out.append("selected")
        elif key in links:
            out.append("isolated")
        else:
            out.append("one_way")
    return tuple(out)
