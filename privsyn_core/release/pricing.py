"""A release bundle's price, checked: its ledger and noisy marginals must agree.

Anyone can edit a bundle's files and re-hash them, so a loaded model carries only figures
recomputed from the noise scales it holds (:func:`~privsyn_core.privacy.ledger.verified`),
and every noisy marginal it is fitted to must be one a ledger measurement paid for
(:func:`priced`). A ledger or noisy marginal that states another price is a
:class:`~privsyn_core.privacy.ledger.LedgerMismatchError`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from itertools import combinations
from typing import Any

from privsyn_core.domain import Domain
from privsyn_core.marginals import MarginalTable, NoisyMarginal
from privsyn_core.privacy.ledger import (
    LedgerMismatchError,
    Measurement,
    PrivacyLedger,
    PrivacyUnit,
    agrees,
    gaussian_rho,
    verified,
)

#: at most this many measurements of one marginal pooled into one (tree-first pools two)
_MOST_POOLED = 3


def ledger_from_json(data: Mapping[str, Any]) -> PrivacyLedger:
    """A ledger back from :meth:`PrivacyLedger.to_json`, as the record states it (a claim:
    :func:`~privsyn_core.privacy.ledger.verified` prices it again)."""
    return PrivacyLedger(
        budget_rho=float(data["budget_rho"]),
        epsilon=None if data["epsilon"] is None else float(data["epsilon"]),
        delta=None if data["delta"] is None else float(data["delta"]),
        conversion=data["conversion"],
        entries=tuple(
            Measurement(
                step=e["step"],
                attributes=tuple(e["attributes"]),
                sensitivity=float(e["sensitivity"]),
                rho=float(e["rho"]),
                sigma=float(e["sigma"]),
                n_queries=int(e["queries"]),
                mechanism=e["mechanism"],
                delta=float(e.get("delta", 0.0)),
            )
            for e in data["measurements"]
        ),
        reserved_delta=float(data.get("reserved_delta", 0.0)),
        not_private=tuple(data.get("not_private", ())),
        randomness=data.get("randomness", "release"),
        unit=PrivacyUnit.from_json(data.get("privacy_unit")),
    )


def priced(
    ledger: Mapping[str, Any],
    noisy: Sequence[NoisyMarginal],
    engine: Domain,
    targets: Sequence[MarginalTable],
) -> PrivacyLedger:
    """The bundle's ledger with every figure recomputed from its noise scales, once the noisy
    marginals it carries are the ones it paid for.

    The model is fitted to exactly the noisy marginals of ``marginals.json`` (each column's
    1-way, then one per target, paper 4.3). Each must state the rho its sigma buys (the
    Gaussian budget of its per-cell variance, :class:`NoisyMarginal`) and match a ledger
    measurement of its own: same attributes, one query per cell, sensitivity 1 per row (K for a
    person of at most K rows: the ledger's unit), same sigma.
    So a price edited in the ledger alone, or a sigma edited in one file but not the other,
    is a :class:`LedgerMismatchError`."""
    checked = verified(ledger_from_json(ledger), ledger)
    fitted = [*((name,) for name in engine), *(t.attributes for t in targets)]
    carried = [m.attributes for m in noisy]
    if carried != fitted:
        first = next(
            (i for i, (a, b) in enumerate(zip(carried, fitted, strict=False)) if a != b),
            min(len(carried), len(fitted)),
        )
        got, want = (
            str(list(names[first])) if first < len(names) else "none" for names in (carried, fitted)
        )
        raise LedgerMismatchError(
            f"its marginals.json holds {len(carried)} noisy marginals and its model is fitted "
            f"to {len(fitted)}: number {first + 1} is on {got} in one and on {want} in the other"
        )
    unpaid = list(checked.entries)
    sensitivity = checked.unit.sensitivity()
    for marginal in noisy:
        name, sigma = list(marginal.attributes), marginal.sigma
        if not (math.isfinite(sigma) and sigma > 0):
            raise LedgerMismatchError(
                f"its marginals.json gives the noisy marginal on {name} sigma {sigma!r}, not a "
                "positive number"
            )
        means = gaussian_rho(sigma, sensitivity)
        if not agrees(marginal.rho, means):
            raise LedgerMismatchError(
                f"its marginals.json says rho {marginal.rho:.6g} for the noisy marginal on "
                f"{name}, but its sigma {sigma:.6g} means rho {means:.6g}"
            )
        paid = _paid_by(marginal, sensitivity, unpaid)
        if paid is None:
            raise LedgerMismatchError(
                f"its marginals.json holds a noisy marginal on {name} with sigma {sigma:.6g} "
                "that no measurement in its ledger paid for"
            )
        for entry in paid:
            unpaid.remove(entry)
    return checked


def _paid_by(
    marginal: NoisyMarginal, sensitivity: float, unpaid: Sequence[Measurement]
) -> tuple[Measurement, ...] | None:
    """The ledger measurements that paid for ``marginal``: one of the same attributes, cells,
    sensitivity and sigma; or, for a marginal measured more than once and pooled by inverse
    variance (tree-first's pairs, :func:`~privsyn_core.selection.tree_first.pooled`), the
    fewest such measurements whose precisions ``1 / sigma^2`` add up to the marginal's."""
    same = [
        e
        for e in unpaid
        if e.attributes == marginal.attributes
        and e.n_queries == marginal.cells
        and e.sensitivity == sensitivity
    ]
    for size in range(1, min(len(same), _MOST_POOLED) + 1):
        for group in combinations(same, size):
            if agrees(math.fsum(e.sigma**-2 for e in group), marginal.sigma**-2):
                return group
    return None
