"""PrivSyn Studio's engine: differentially private synthetic tables (Zhang et al. 2021).

The public names below load on first use (PEP 562), so ``import privsyn_core.cli`` and
``privsyn --help`` do not pay for pandas, networkx and the whole engine before they need them.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

_HOMES = {
    "PrivSynConfig": "privsyn_core.config",
    "Domain": "privsyn_core.domain",
    "GumSettings": "privsyn_core.generation.gum_settings",
    "FittedModel": "privsyn_core.generation.fitted",
    "PrivSyn": "privsyn_core.model",
    "Measurements": "privsyn_core.generation.synthesis",
    "SelectedMarginal": "privsyn_core.generation.synthesis",
    "SynthesisResult": "privsyn_core.generation.synthesis",
    "generate": "privsyn_core.generation.synthesis",
    "measure": "privsyn_core.pipeline",
    "synthesize": "privsyn_core.pipeline",
    "BudgetExceededError": "privsyn_core.privacy.ledger",
    "Measurement": "privsyn_core.privacy.ledger",
    "PrivacyLedger": "privsyn_core.privacy.ledger",
    "epsilon_from_rho": "privsyn_core.privacy.conversion",
    "rho_from_epsilon_delta": "privsyn_core.privacy.conversion",
    "BlockProgress": "privsyn_core.progress",
    "GumProgress": "privsyn_core.progress",
    "ProgressEvent": "privsyn_core.progress",
    "Stage": "privsyn_core.progress",
    "StageFinished": "privsyn_core.progress",
    "StageStarted": "privsyn_core.progress",
    "SynthesisCancelled": "privsyn_core.progress",
    "TableError": "privsyn_core.errors",
}

__all__ = [
    "BlockProgress",
    "BudgetExceededError",
    "Domain",
    "FittedModel",
    "GumProgress",
    "GumSettings",
    "Measurement",
    "Measurements",
    "PrivSyn",
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

if TYPE_CHECKING:
    from privsyn_core.config import PrivSynConfig
    from privsyn_core.domain import Domain
    from privsyn_core.errors import TableError
    from privsyn_core.generation.fitted import FittedModel
    from privsyn_core.generation.gum_settings import GumSettings
    from privsyn_core.generation.synthesis import (
        Measurements,
        SelectedMarginal,
        SynthesisResult,
        generate,
    )
    from privsyn_core.model import PrivSyn
    from privsyn_core.pipeline import measure, synthesize
    from privsyn_core.privacy.conversion import epsilon_from_rho, rho_from_epsilon_delta
    from privsyn_core.privacy.ledger import BudgetExceededError, Measurement, PrivacyLedger
    from privsyn_core.progress import (
        BlockProgress,
        GumProgress,
        ProgressEvent,
        Stage,
        StageFinished,
        StageStarted,
        SynthesisCancelled,
    )


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'privsyn_core' has no attribute {name!r}")
    value = getattr(import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
