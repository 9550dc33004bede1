"""PrivBayes-style selection with InDif scores (the paper's "PrivBayes-InDif", section 6.3).

Each of the ``d - 1`` steps of :mod:`privsyn_core.selection.privbayes` scores its candidates
``(X, P)`` with the exact InDif between ``X`` and the parent set ``P`` as one compound attribute,
in counts (range ``[0, 2n]``, sensitivity 4 by Lemma 4.1), and picks one with the exponential
mechanism (paper appendix A). The steps share the selection budget ``rho`` equally; each is
``rho / (d - 1)``-zCDP (:func:`~privsyn_core.privacy.ledger.exponential_scale`) and is charged to
the ledger as its own entry. The first attribute is drawn uniformly at random, which reads
no data and costs nothing.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from privsyn_core.marginals import indif_of_joint
from privsyn_core.privacy.ledger import INDIF_SENSITIVITY, Measurement, exponential_scale
from privsyn_core.privacy.noise import NoiseSource
from privsyn_core.selection.privbayes import NetworkNode, candidates

if TYPE_CHECKING:
    from privsyn_core.measuring.counters import Counter


def candidate_scores(counter: Counter, options: list[NetworkNode]) -> np.ndarray:
    """Exact InDif of every candidate (private: only :func:`select_network` may use it)."""
    tables = counter.count([(o.attribute, *o.parents) for o in options])
    scores = np.empty(len(options))
    for i, table in enumerate(tables):
        joint = table.values.reshape(table.shape[0], -1).astype(float)
        scores[i] = indif_of_joint(joint)
    return scores


def select_network(
    counter: Counter,
    rho: float,
    noise: NoiseSource,
    *,
    degree: int = 2,
    max_cells: int = 5000,
) -> tuple[tuple[NetworkNode, ...], tuple[Measurement, ...]]:
    """A Bayesian network of degree ``degree`` chosen privately at total cost ``rho``, and
    one ledger entry per exponential-mechanism step (none for a single attribute)."""
    domain = counter.domain
    names = list(domain.attributes)
    sizes = domain.as_dict()
    if len(names) < 2:
        return tuple(NetworkNode(a, ()) for a in names), ()
    first = names[noise.choose(np.zeros(len(names)), 1.0)]
    nodes = [NetworkNode(first, ())]
    network, remaining = [first], [a for a in names if a != first]
    rho_step = rho / (len(names) - 1)
    sensitivity = noise.unit.sensitivity(INDIF_SENSITIVITY)
    scale = exponential_scale(rho_step, sensitivity)
    spends: list[Measurement] = []
    while remaining:
        options = candidates(network, remaining, sizes, degree, max_cells)
        picked = options[noise.choose(candidate_scores(counter, options), scale)]
        involved = sorted({a for o in options for a in (o.attribute, *o.parents)}, key=names.index)
        spends.append(
            Measurement(
                step="privbayes",
                attributes=tuple(involved),
                sensitivity=sensitivity,
                rho=rho_step,
                sigma=scale,
                n_queries=len(options),
                mechanism=f"{noise.choice_mechanism()}; sigma is the Gumbel scale, "
                f"epsilon {math.sqrt(8 * rho_step):.4g}",
            )
        )
        nodes.append(picked)
        network.append(picked.attribute)
        remaining.remove(picked.attribute)
    return tuple(nodes), tuple(spends)
