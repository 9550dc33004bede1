"""Settings of a PrivSyn run, with the paper's defaults (Algorithm 3)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from privsyn_core.errors import InputError
from privsyn_core.generation.empty_cells import EMPTY_SIGMAS
from privsyn_core.generation.gum_settings import GumSettings
from privsyn_core.generation.independence import DEFAULT_THRESHOLD, check_threshold
from privsyn_core.generation.quasi_independence import DEFAULT_PENALTY
from privsyn_core.privacy.budget import Budget
from privsyn_core.privacy.conversion import Conversion, rho_from_epsilon_delta
from privsyn_core.selection.combine import COMBINE_RULES, CombineRule
from privsyn_core.selection.methods import (
    SELECTION_METHODS,
    AllPairs,
    Auto,
    DenseMarg,
    Given,
    PrivBayes,
    SelectionMethod,
    TreeFirst,
)
from privsyn_core.selection.target import TargetEmphasis
from privsyn_core.width_policy import WIDTH_POLICY

#: how marginals are chosen (the paper lab; see :class:`PrivSynConfig`)
SelectionName = Literal["auto", "densemarg", "treefirst", "privbayes", "all_pairs", "given"]
#: how the marginal budget is spent (paper section 6.4)
NoiseAllocation = Literal["weighted_gaussian", "equal_gaussian", "equal_laplace"]
NOISE_ALLOCATIONS: tuple[str, ...] = ("weighted_gaussian", "equal_gaussian", "equal_laplace")
#: how the synthetic table is made from the marginals (paper section 5)
SynthesisMethod = Literal["auto", "gum", "mcf", "mrf", "gum+mrf", "independent"]
SYNTHESIS_METHODS: tuple[str, ...] = ("auto", "gum", "mcf", "mrf", "gum+mrf", "independent")


@dataclass(frozen=True)
class BudgetSplit:
    """rho for each of Algorithm 3's measurements: the 1-way marginals (rho_1), the
    selection (rho_2: InDif scores, or PrivBayes's parent sets) and the chosen marginals
    (rho_3)."""

    one_way: float
    selection: float
    marginals: float


@dataclass(frozen=True)
class OpenSplit:
    """What the structure and domain estimates a schema leaves open take before Algorithm 3's
    own split: the delta held back for the category thresholds, and their shares of rho."""

    reserved_delta: float
    structure_share: float
    domain_share: float

    def rho(self, budget_rho: float) -> tuple[float, float]:
        """rho for the structure step and for the domain estimates."""
        return self.structure_share * budget_rho, self.domain_share * budget_rho


@dataclass(frozen=True)
class PrivSynConfig:
    """Everything a run can change besides epsilon, delta and the seed.

    Budget split (Algorithm 3): ``one_way_share`` of rho for the 1-way marginals,
    ``indif_share`` for InDif, the rest for the selected marginals. The paper and the authors'
    code split 0.1 / 0.1 / 0.8; our default is 0.3 / 0.1 / 0.6, chosen by
    ``benchmarks/defaults.py --study split`` (four tables, epsilon 0.2, 1 and 2, 3 seeds):
    0.3 has the best mean rank on range queries and SVM and is within noise of the best on
    2-way L1, and 0.1 ranks last on all three. The 1-way marginals decide which values are
    kept (values under 3 sigma are merged) and anchor consistency and GUM's start, and
    Adult's ~100-value columns lose most to a thin share (adult-coded at epsilon 0.2: L1
    0.217 at 0.1, 0.165 at 0.3). All-binary NLTCS is the exception: it loses 6-10% of L1.

    **The paper lab.** Every choice the paper compares is a field whose default is the
    paper's; all of them spend from the same ledger.

    Measurement (each option changes what is spent):

    * ``selection`` (section 4.2 vs 6.3): "auto" (the default), "treefirst" with its own
      margin 1 on a table of at least 30 attributes, "densemarg" on a narrower one
      (:class:`~privsyn_core.selection.methods.Auto`, the evidence beside
      ``WIDTH_POLICY``); "densemarg" (Algorithm 1 on noisy InDif, then
      Algorithm 2's combining); "treefirst", two rounds on rho_3: a maximum spanning tree of
      the noisy InDif measured first, then the pairs whose InDif that tree does not explain
      (:mod:`privsyn_core.selection.tree_first`; with ``indif_margin`` as its margin, measured
      best at 1.0); "privbayes", the paper's PrivBayes-InDif: a Bayesian network
      of degree ``privbayes_degree`` whose ``d - 1`` parent choices are made by the
      exponential mechanism on InDif scores, spending the ``indif_share`` (each step charged
      to the ledger; parent sets capped at ``gamma`` cells, see
      :mod:`privsyn_core.selection.privbayes`); "all_pairs", every 2-way marginal; "given",
      the attribute sets in ``marginals`` (column names, checked before anything is spent).
      The last two read no data to choose, so ``indif_share`` goes to the marginals.
    * ``noise`` (section 6.4), how the marginal budget ``rho_3`` is split: "weighted_gaussian"
      (rho_i ~ c_i^(2/3), Equation 1), "equal_gaussian" (rho_3 / m each) or "equal_laplace"
      (rho_3 / m each, spent as pure epsilon_i = sqrt(2 rho_i) by Laplace noise of scale
      1 / epsilon_i; Bun-Steinke: epsilon-DP is epsilon^2/2-zCDP). The 1-way marginals and
      InDif stay Gaussian.

    Generation (post-processing: :func:`~privsyn_core.pipeline.generate` may be called many
    times on one :class:`~privsyn_core.pipeline.Measurements` with configs differing only
    here, at no privacy cost):

    * ``consistency`` (section 4.3): True reconciles the noisy marginals; False only makes
      each a distribution on its own (:func:`~privsyn_core.generation.consistency.
      without_consistency`).
    * ``synthesis`` (section 5): "gum", the "mcf" strawman of section 5.1
      (:mod:`privsyn_core.generation.mcf`), which runs for ``gum.iterations`` too, "mrf",
      a Markov random field fitted to the same targets (:mod:`privsyn_core.generation.mrf`;
      not the paper's: Private-PGM's estimator, by Gibbs chains), "gum+mrf" (both from one
      start, the closer table kept; the MRF only where GUM ends short of its noise floor),
      "independent" (each column from its own noisy 1-way marginal: the baseline), or
      "auto" (the default): "gum+mrf" on a wide table, "gum" on a narrow one
      (:func:`~privsyn_core.generation.planned.resolve_synthesis`).
    * ``gum.strategy`` (appendix I: S1..S6) and ``gum.decay_schedule`` (section 5.3 and
      appendix J: step, exponential, linear, sqrt, none): see
      :class:`~privsyn_core.generation.gum_settings.GumSettings`.
    """

    one_way_share: float = 0.3
    indif_share: float = 0.1
    conversion: Conversion = "tight"
    filter_low_counts: bool = True
    threshold_sigmas: float = 3.0
    #: join an attribute no selected pair covers to its partner of highest noisy InDif (the
    #: authors' code; the paper leaves it to its 1-way marginal). Off by default: in
    #: ``benchmarks/defaults.py --study strategy`` the links cost budget for pairs Algorithm 1
    #: judged not worth it, and leaving them out has the better mean rank on 2-way L1 and
    #: range queries over four tables and three epsilons (adult-coded at epsilon 1 with S3:
    #: 0.0882 vs 0.0910)
    connect_isolated: bool = False
    #: Algorithm 1 counts a pair's dependency as its noisy InDif less this many InDif noise
    #: standard deviations, times the estimated share of pairs with no dependency
    #: (:mod:`privsyn_core.selection.greedy`, the winner's curse; 0 is the paper's rule). 2 by
    #: ``benchmarks/defaults.py --study margin`` and the wide tables: see the README's
    #: defaults table. Selection "auto" uses it on narrow tables only (DenseMarg)
    indif_margin: float = 2.0
    #: tree-first's margin over the InDif noise, the same for selection "auto" on a wide
    #: table and "treefirst" (:attr:`~privsyn_core.width_policy.WidthPolicy.tree_first_margin`)
    tree_first_margin: float = WIDTH_POLICY.tree_first_margin
    gamma: int = 5000
    #: which cliques Algorithm 2 merges (:mod:`privsyn_core.selection.combine`): "paper",
    #: any under ``gamma`` cells; "no_added_noise", only those that do not raise Algorithm
    #: 1's noise error; "off", none: the selected pairs are measured as they are. "off" by
    #: evidence: in ``benchmarks/defaults.py --study combine`` (four tables, epsilons 0.2, 1,
    #: 2, 3 seeds) it has the best mean rank on 2-way L1 (1.67 of 6 arms, "paper" 4.17),
    #: range queries (1.5 vs 4.5) and, with a prediction target, the SVM (2.11 vs 3.11).
    #: A merged clique takes the budget of the pairs it replaces and spreads it over many
    #: more cells (NLTCS at epsilon 1: L1 0.0065 vs 0.0168 with the paper's rule).
    combine: CombineRule = "off"
    consistency_rounds: int = 30
    append_attributes: bool = True
    separate_and_join: bool = True
    gum: GumSettings = field(default_factory=GumSettings)
    #: share of rho spent estimating domains the schema leaves open (0 when none are; what
    #: the estimates leave unspent goes to PrivSyn's steps, see
    #: :class:`~privsyn_core.measuring.domain_split.DomainSplit`). 0.1 by
    #: ``benchmarks/domains.py`` (raw tables, no schema, epsilon 1, 10 seeds;
    #: ``benchmarks/evidence/domains-2026-11-26.txt``): at 0.05 the 10,000 x 55 loans table
    #: still loses its 32-value sub_grade in 9 seeds of 10, at 0.1 in 1; the bounds of
    #: caravan's 85 numeric columns hold 96% of their values instead of 93%. The price, 5% of
    #: rho taken from PrivSyn's own steps, raises their noise by 2.8%; a column left out
    #: loses everything
    domain_share: float = 0.1
    #: share of rho spent on the noisy value-class counts that decide the kinds, whole
    #: numbers and date formats the schema leaves open (0 when none are; see
    #: :mod:`privsyn_core.measuring.structure`)
    structure_share: float = 0.02
    #: share of delta reserved for releasing categories by thresholded noisy counts
    threshold_delta_share: float = 0.5
    #: the paper lab (see the class docstring): how marginals are chosen
    selection: SelectionName = "auto"
    #: parents per attribute of the "privbayes" selection (its marginals have degree + 1)
    privbayes_degree: int = 2
    #: the attribute sets measured by the "given" selection, as tuples of column names
    marginals: tuple[tuple[str, ...], ...] = ()
    #: how the marginal budget is split and which noise it buys
    noise: NoiseAllocation = "weighted_gaussian"
    #: reconcile the noisy marginals before generation
    consistency: bool = True
    #: GUM, the MCF strawman, the MRF, or both GUM and the MRF; "auto" by the table's width
    synthesis: SynthesisMethod = "auto"
    #: a measured pair whose dependence is within this many times what its noise alone
    #: gives is drawn as independent (:mod:`privsyn_core.generation.independence`, Mallows'
    #: Cp: 2); None draws every pair as measured. A generation setting
    independence_threshold: float | None = DEFAULT_THRESHOLD
    #: on a wide table (:attr:`~privsyn_core.width_policy.WidthPolicy.quasi_independence_from`),
    #: a measured pair independent but for a few cells is drawn from its quasi-independent
    #: fit, judged with this penalty per parameter (:mod:`privsyn_core.generation.
    #: quasi_independence`, Mallows' Cp: 2); None keeps every pair as measured. A generation
    #: setting, apart from the independence rule above
    quasi_independence: float | None = DEFAULT_PENALTY
    #: a measured marginal's cells at most this many noise sigmas are targeted as empty and
    #: kept empty in the rows (:mod:`privsyn_core.generation.empty_cells`); None: neither.
    #: A generation setting
    empty_sigmas: float | None = EMPTY_SIGMAS
    #: the column people will predict, a public choice (None: no target). Marginals that
    #: hold it weigh ``target_weight`` in selection and in the budget split
    #: (:mod:`privsyn_core.selection.target`); a measurement setting. The weight 8 is from
    #: ``benchmarks/defaults.py --study target`` (Adult coded and raw, penguins; epsilon 0.2,
    #: 1, 2): SVM mean rank 2.2 (w=16: 2.0, w=2: 3.8, no target: 4.0) at a smaller cost in
    #: 2-way L1 than 16 (raw Adult, epsilon 1: 0.086 vs 0.093; no target 0.079)
    target: str | None = None
    target_weight: float = 8.0

    def __post_init__(self) -> None:
        for name in ("one_way_share", "indif_share"):
            value = getattr(self, name)
            if not 0 < value < 1:
                raise InputError(f"{name} must lie strictly between 0 and 1, got {value}")
        if self.one_way_share + self.indif_share >= 1:
            raise InputError("one_way_share + indif_share must leave budget for the marginals")
        if self.threshold_sigmas < 0:
            raise InputError("threshold_sigmas must be >= 0")
        for margin in ("indif_margin", "tree_first_margin"):
            if not 0 <= getattr(self, margin) < 100:
                raise InputError(f"{margin} must lie in [0, 100), got {getattr(self, margin)}")
        if not 0 < self.domain_share < 1 or not 0 < self.threshold_delta_share < 1:
            raise InputError("domain_share and threshold_delta_share must lie in (0, 1)")
        if not 0 < self.structure_share < 1 or self.structure_share + self.domain_share >= 0.9:
            raise InputError(
                "structure_share must lie in (0, 1) and, with domain_share, leave at least a "
                "tenth of the budget to PrivSyn's own steps"
            )
        if self.gamma < 1 or self.consistency_rounds < 1:
            raise InputError("gamma and consistency_rounds must be >= 1")
        _check_choice("selection", self.selection, SELECTION_METHODS)
        _check_choice("combine", self.combine, COMBINE_RULES)
        _check_choice("noise", self.noise, NOISE_ALLOCATIONS)
        _check_choice("synthesis", self.synthesis, SYNTHESIS_METHODS)
        check_threshold(self.independence_threshold)
        check_threshold(self.quasi_independence, "quasi_independence")
        if not isinstance(self.consistency, bool):
            raise InputError(f"consistency must be True or False, got {self.consistency!r}")
        if isinstance(self.privbayes_degree, bool) or not isinstance(self.privbayes_degree, int):
            raise InputError(f"privbayes_degree must be an integer, got {self.privbayes_degree!r}")
        if self.privbayes_degree < 1:
            raise InputError(f"privbayes_degree must be >= 1, got {self.privbayes_degree}")
        if isinstance(self.marginals, str) or any(
            isinstance(m, str) or not all(isinstance(a, str) for a in m) for m in self.marginals
        ):
            raise InputError(
                "marginals must be a sequence of attribute sets, each a sequence of column "
                f"names, e.g. (('age', 'income'),), got {self.marginals!r}"
            )
        object.__setattr__(self, "marginals", tuple(tuple(m) for m in self.marginals))
        if self.target is not None and (not isinstance(self.target, str) or not self.target):
            raise InputError(f"target must be a column name or None, got {self.target!r}")
        TargetEmphasis("", self.target_weight)  # checks the weight
        if self.selection == "given" and not self.marginals:
            raise InputError("selection 'given' needs the attribute sets in marginals")
        if self.selection != "given" and self.marginals:
            raise InputError(
                f"marginals are used by selection 'given' only (selection is {self.selection!r})"
            )

    @property
    def emphasis(self) -> TargetEmphasis | None:
        """The prediction target's weighting, None without a target."""
        return None if self.target is None else TargetEmphasis(self.target, self.target_weight)

    @property
    def marginal_share(self) -> float:
        return 1.0 - self.one_way_share - self.indif_share

    @property
    def selection_reads_data(self) -> bool:
        """Whether the selection spends budget to choose (InDif scores, or the exponential
        mechanism of "privbayes"); "all_pairs" and "given" choose without reading rows."""
        return self.selection_method().reads is not None

    def selection_method(self) -> SelectionMethod:
        """The method :attr:`selection` names, with the settings it uses. "auto" and
        "treefirst" build the same :class:`TreeFirst`, so they agree on a wide table."""
        dense = DenseMarg(
            self.gamma, self.combine, self.connect_isolated, self.emphasis, self.indif_margin
        )
        tree = TreeFirst(self.tree_first_margin, self.emphasis, self.noise != "weighted_gaussian")
        chosen: dict[str, SelectionMethod] = {
            Auto.name: Auto(dense, tree),
            DenseMarg.name: dense,
            TreeFirst.name: tree,
            AllPairs.name: AllPairs(),
        }
        if self.selection == PrivBayes.name:
            return PrivBayes(self.privbayes_degree, self.gamma)
        if self.selection == Given.name:
            return Given(self.marginals)
        return chosen[self.selection]

    def open_split(
        self,
        delta: float,
        *,
        structure: int,
        estimates: int,
        category_estimates: int,
        private: bool = True,
    ) -> OpenSplit:
        """The budget for what a schema leaves open: ``structure`` columns of undecided kind,
        ``estimates`` domain estimates, ``category_estimates`` of which may release
        categories (they need delta for their thresholds). Nothing when it is read off the
        data instead (``private`` False, not DP). The one rule the run and the planner follow."""
        if not private:
            return OpenSplit(0.0, 0.0, 0.0)
        return OpenSplit(
            self.threshold_delta_share * delta if category_estimates else 0.0,
            self.structure_share if structure else 0.0,
            self.domain_share if estimates else 0.0,
        )

    def run_budget(self, epsilon: float, delta: float) -> Budget:
        """The most one run at (epsilon, delta) can spend, known before a row is read (so a
        front end reserves it against the lifetime budget before measuring): rho converted
        at the whole delta, the largest it can be (a run that thresholds converts at what
        its thresholds leave), and the share of delta its thresholds may spend."""
        return Budget(
            rho_from_epsilon_delta(epsilon, delta, self.conversion),
            self.threshold_delta_share * delta,
        )

    def split(self, rho: float, n_columns: int) -> BudgetSplit:
        """Algorithm 3's split of ``rho`` over its measurements: the one rule the run and
        the planner both follow. The selection share goes to the marginals when the
        selection reads no data or there is no pair to score."""
        one_way = self.one_way_share * rho
        selection = self.indif_share * rho if n_columns > 1 and self.selection_reads_data else 0.0
        return BudgetSplit(one_way, selection, rho - one_way - selection)


def _check_choice(name: str, value: object, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise InputError(f"unknown {name} {value!r}; choose one of {', '.join(choices)}")
