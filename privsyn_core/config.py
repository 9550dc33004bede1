"""Settings of a PrivSyn run, with the paper's defaults (Algorithm 3)."""

from __future__ import annotations

from dataclasses import dataclass, field

from privsyn_core.errors import InputError
from privsyn_core.generation.gum import GumSettings
from privsyn_core.privacy.ledger import Conversion


@dataclass(frozen=True)
class PrivSynConfig:
    """Everything a run can change besides epsilon, delta and the seed.

    Budget split (Algorithm 3): ``one_way_share`` of rho for the 1-way marginals,
    ``indif_share`` for InDif, the rest for the selected marginals (0.1 / 0.1 / 0.8).
    """

    one_way_share: float = 0.1
    indif_share: float = 0.1
    conversion: Conversion = "tight"
    filter_low_counts: bool = True
    threshold_sigmas: float = 3.0
    connect_isolated: bool = True
    gamma: int = 5000
    consistency_rounds: int = 30
    append_attributes: bool = True
    separate_and_join: bool = True
    gum: GumSettings = field(default_factory=GumSettings)
    #: share of rho spent estimating domains the schema leaves open (0 when none are)
    domain_share: float = 0.05
    #: share of rho spent on the noisy value-class counts that decide the kinds, whole
    #: numbers and date formats the schema leaves open (0 when none are; see
    #: :mod:`privsyn_core.measuring.structure`)
    structure_share: float = 0.02
    #: share of delta reserved for releasing categories by thresholded noisy counts
    threshold_delta_share: float = 0.5

    def __post_init__(self) -> None:
        for name in ("one_way_share", "indif_share"):
            value = getattr(self, name)
            if not 0 < value < 1:
                raise InputError(f"{name} must lie strictly between 0 and 1, got {value}")
        if self.one_way_share + self.indif_share >= 1:
            raise InputError("one_way_share + indif_share must leave budget for the marginals")
        if self.threshold_sigmas < 0:
            raise InputError("threshold_sigmas must be >= 0")
        if not 0 < self.domain_share < 1 or not 0 < self.threshold_delta_share < 1:
            raise InputError("domain_share and threshold_delta_share must lie in (0, 1)")
        if not 0 < self.structure_share < 1 or self.structure_share + self.domain_share >= 0.9:
            raise InputError(
                "structure_share must lie in (0, 1) and, with domain_share, leave at least a "
                "tenth of the budget to PrivSyn's own steps"
            )
        if self.gamma < 1 or self.consistency_rounds < 1:
            raise InputError("gamma and consistency_rounds must be >= 1")

    @property
    def marginal_share(self) -> float:
        return 1.0 - self.one_way_share - self.indif_share
