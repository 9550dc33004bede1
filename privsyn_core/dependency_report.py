"""What a run's dependency measurements say, in numbers a reader can check.

The noisy InDif scores (paper section 4.1) are in records, and on a wide table their noise is
thousands of records: on a 10,000 x 55 table at epsilon 1 each score carries Gaussian noise
of sigma 2,628, and the scores run from -8,000 to +20,000. A score means something only
against that sigma, which is public (it is set by the budget and the number of pairs,
Theorem 4.2, and the ledger records it). This module puts the scores in units of their noise
and counts what the selection did with them.

Everything here reads DP outputs only (the noisy scores, the ledger, the selection made from
them): post-processing, free, and safe to show.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from privsyn_core.generation.guard import guard_message
from privsyn_core.generation.independence import noise_pairs
from privsyn_core.generation.quasi_independence import quasi_independent_marginals
from privsyn_core.selection.greedy import measurable_pairs
from privsyn_core.selection.methods import selection_account

if TYPE_CHECKING:
    from privsyn_core.generation.synthesis import SynthesisResult
    from privsyn_core.privacy.ledger import PrivacyLedger

#: a noisy score under this many noise standard deviations is "within the noise": the score
#: of an independent pair (true InDif near 0) stays under it 97.7% of the time. A display
#: threshold for reading the scores, not a rule of the selection.
WITHIN_NOISE_SIGMAS = 2.0


def indif_noise_sigma(ledger: PrivacyLedger) -> float | None:
    """The noise standard deviation (in records) of every InDif score, as the ledger's
    "indif" entry recorded it; None when the run measured no scores."""
    sigmas = [e.sigma for e in ledger.entries if e.step == "indif"]
    return float(sigmas[-1]) if sigmas else None


@dataclass(frozen=True)
class DependencyReport:
    """The scores in noise units, and what the selection took from them.

    ``scores``: noisy InDif divided by ``sigma`` (attribute x attribute, NaN diagonal), None
    when no score was measured (another selection than PrivSyn's, or a single column).
    ``candidates``: the pairs scored. ``selected``: the pairs Algorithm 1 took, in its order;
    ``isolated_links``: pairs added for attributes no selected pair covered.
    ``selected_within_noise``: how many of ``selected`` scored under ``WITHIN_NOISE_SIGMAS``.
    """

    sigma: float | None
    scores: pd.DataFrame | None
    candidates: int
    selected: tuple[tuple[str, str], ...]
    isolated_links: tuple[tuple[str, str], ...]
    selected_within_noise: int
    #: how many pairs of the median candidate's size the marginal budget measures well
    #: (:func:`~privsyn_core.selection.greedy.measurable_pairs`); None without scores
    measurable: int | None = None
    #: what the guard did when it replaced GUM's table by independent columns
    #: (:func:`~privsyn_core.generation.guard.guard_message`), None when it did not
    guard: str | None = None
    #: which selection method ran and, for the default "auto", why
    #: (:func:`~privsyn_core.selection.methods.selection_account`)
    method: str = ""
    #: the measured pairs the run's samples draw as independent, their marginals showing no
    #: more dependence than their noise (:mod:`privsyn_core.generation.independence`), of
    #: ``measured_pairs`` 2-way marginals
    independent_pairs: int = 0
    measured_pairs: int = 0
    #: the measured pairs drawn from their quasi-independent fit, independent but for a few
    #: cells (:mod:`privsyn_core.generation.quasi_independence`)
    quasi_pairs: int = 0


def dependency_report(result: SynthesisResult) -> DependencyReport:
    """The :class:`DependencyReport` of a finished run."""
    sigma = indif_noise_sigma(result.ledger)
    noisy = result.noisy_indif
    names = list(noisy.columns)
    selected = tuple(step.pair for step in result.selection.steps)
    links = tuple(result.selection.isolated_links)
    if sigma is None or sigma <= 0 or len(names) < 2:
        return DependencyReport(None, None, 0, selected, links, 0)
    values = noisy.to_numpy(dtype=float, copy=True) / sigma
    np.fill_diagonal(values, np.nan)
    scores = pd.DataFrame(values, index=noisy.index, columns=noisy.columns)
    within = sum(scores.at[a, b] < WITHIN_NOISE_SIGMAS for a, b in selected)
    d = len(names)
    sizes = {g.attribute: g.size for g in result.groupings}
    cells = [sizes[a] * sizes[b] for a, b in combinations(names, 2)]
    rho = sum(e.rho for e in result.ledger.entries if e.step == "marginal")
    config = result.model.config if result.model is not None else {}
    return DependencyReport(
        sigma=sigma,
        scores=scores,
        candidates=d * (d - 1) // 2,
        selected=selected,
        isolated_links=links,
        selected_within_noise=int(within),
        measurable=measurable_pairs(cells, rho, result.consistency.total),
        guard=guard_message(result.independent) if result.independent else None,
        method=selection_account(str(config.get("selection", "auto")), d),
        **_pairs_drawn_independent(result),
    )


def _pairs_drawn_independent(result: SynthesisResult) -> dict[str, int]:
    model = result.model
    if model is None:
        return {}
    threshold = model.defaults.independence_threshold
    pairs = noise_pairs(model.marginals, model.noise_scales(), threshold)
    penalty = model.defaults.quasi_independence
    _, quasi = quasi_independent_marginals(
        model.marginals, model.noisy, penalty, pairs, len(model.engine)
    )
    measured = sum(len(t.attributes) == 2 for t in model.marginals)
    return {"independent_pairs": len(pairs), "measured_pairs": measured, "quasi_pairs": quasi}
