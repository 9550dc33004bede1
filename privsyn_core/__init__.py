"""PrivSyn Studio's engine: differentially private synthetic tables (Zhang et al. 2021)."""

from privsyn_core.config import PrivSynConfig
from privsyn_core.domain import Domain
from privsyn_core.gum import GumSettings
from privsyn_core.pipeline import (
    Measurements,
    SelectedMarginal,
    SynthesisResult,
    generate,
    measure,
    synthesize,
)
from privsyn_core.privacy import (
    BudgetExceededError,
    Measurement,
    PrivacyLedger,
    epsilon_from_rho,
    rho_from_epsilon_delta,
)
from privsyn_core.progress import (
    GumProgress,
    ProgressEvent,
    Stage,
    StageFinished,
    StageStarted,
    SynthesisCancelled,
)
from privsyn_core.table import TableError

__all__ = [
    "BudgetExceededError",
    "Domain",
    "GumProgress",
    "GumSettings",
    "Measurement",
    "Measurements",
    "PrivSynConfig",
    "PrivacyLedger",
    "ProgressEvent",
    "SelectedMarginal",
    "Stage",
    "StageFinished",
    "StageStarted",
    "SynthesisCancelled",
    "SynthesisResult",
    "TableError",
    "epsilon_from_rho",
    "generate",
    "measure",
    "rho_from_epsilon_delta",
    "synthesize",
]
