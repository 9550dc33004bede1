"""Choosing between tables by how close they come to the measurements (DP outputs only).

Every choice here weighs tables by :func:`~privsyn_core.generation.target_scores.table_score`: their
distance to the noisy marginals and, for the pairs no marginal covers, to the noisy InDif
scores. Those are the run's released DP outputs, so choosing among tables is
post-processing and costs no privacy budget.

* :func:`guard`: a method must not be worse than its own cheapest model. Each component's
  table is weighed against independent columns drawn from the consistent 1-way marginals,
  and replaced by them when they come closer.
* :func:`closer`: per component, GUM's table or the MRF's, whichever is closer (synthesis
  "gum+mrf"; components are drawn independently of each other, paper 5.3).
* :func:`start_score`: the starting tables' score, which the kept table is reported against.
* :func:`kept_table`: which of these choices each part of the returned table came from, as
  the page and the command line say it (:mod:`~privsyn_core.generation.kept`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from privsyn_core.generation.dependence import UnmeasuredPairs
from privsyn_core.generation.fitted_data import FittedData
from privsyn_core.generation.gum import GumIterationRecord
from privsyn_core.generation.kept import KeptPart, KeptSource, KeptTable
from privsyn_core.generation.records import fill_record_major, record_major
from privsyn_core.generation.sampling import shuffled_column
from privsyn_core.generation.target_scores import GumTarget, score_below, table_score
from privsyn_core.generation.targets import Component


def guard(
    components: Sequence[Component],
    judged: Sequence[UnmeasuredPairs | None],
    model: FittedData,
    rng: np.random.Generator,
) -> list[str]:
    """The method must not be worse than its own cheapest model: each component's table
    is weighed (:func:`~privsyn_core.generation.target_scores.table_score`, DP outputs only) against
    independent columns drawn from the consistent 1-way marginals, and replaced by them
    when they come closer. Returns the attributes so replaced."""
    replaced: list[str] = []
    for (names, arr, targets), pairs in zip(components, judged, strict=True):
        if not targets:
            continue
        n = arr.shape[1]
        columns = np.empty((len(names), n), dtype=arr.dtype)  # codes, not int64: 8x less
        for row, a in enumerate(names):
            columns[row] = shuffled_column(model.one_way[model.engine.index(a)].values, n, rng)
        cheapest = record_major(len(names), n, arr.dtype)
        fill_record_major(cheapest, columns)
        del columns
        # independent columns usually lose on the measured marginals alone: their unmeasured
        # pairs are then not counted
        kept = table_score(arr, targets, pairs)
        score, exact = score_below(cheapest, targets, pairs, kept)
        if exact and score < kept:
            np.copyto(arr, cheapest)
            replaced.extend(names)
    return replaced


def guard_message(attributes: Sequence[str]) -> str:
    """What the guard did, for the GUM stage and the Marginals page."""
    return (
        f"{len(attributes)} attributes drawn as independent columns from their 1-way "
        "marginals: that table comes closer to the noisy marginals and InDif scores than "
        "any GUM made from the selected marginals"
    )


def closer(
    kept: Sequence[tuple[np.ndarray, Sequence[GumTarget]]],
    others: Sequence[tuple[np.ndarray, Sequence[GumTarget]]],
    judged: Sequence[UnmeasuredPairs | None],
) -> list[bool]:
    """Per component, the table of ``kept`` or ``others`` closer to the measurements
    (:func:`~privsyn_core.generation.target_scores.table_score`: DP outputs only), written into
    ``kept``; whether each came from ``others``. Components are drawn independently of each
    other (paper 5.3), so each may come from either method."""
    taken = []
    for (mine, targets), (theirs, _), pairs in zip(kept, others, judged, strict=True):
        better = bool(targets) and table_score(theirs, targets, pairs) < table_score(
            mine, targets, pairs
        )
        if better:
            mine[...] = theirs
        taken.append(better)
    return taken


def start_score(
    problems: Sequence[tuple[np.ndarray, Sequence[GumTarget]]],
    judged: Sequence[UnmeasuredPairs | None],
) -> float:
    """The initial tables' :func:`~privsyn_core.generation.target_scores.table_score`
    (what GUM's kept table is weighed against), weighted as GUM weighs them."""
    scored = [
        (table_score(arr, targets, pairs), len(targets))
        for (arr, targets), pairs in zip(problems, judged, strict=True)
        if targets
    ]
    weight = sum(w for _, w in scored)
    return sum(s * w for s, w in scored) / weight if weight else 0.0


def kept_table(
    components: Sequence[Component],
    history: Sequence[GumIterationRecord],
    iterations: int,
    mrf_chosen: Sequence[bool] | None,
    independent: set[str],
    scores: tuple[float, float] | None,
) -> KeptTable | None:
    """Which table each component with targets returned (:class:`KeptTable`): read off the
    last record of GUM (and of the MRF) the step each one's kept table was made at, as GUM
    recorded it; then the MRF's table where it was closer, and the guard's independent
    columns where they replaced GUM's. ``iterations``: GUM's records at the head of
    ``history`` (the MRF's sweeps follow). ``scores``: the starting tables' score and the
    returned table's (both :func:`start_score`), None when GUM returned its last table."""
    parts = [(names, len(targets)) for names, _, targets in components if targets]
    if not parts or not history:
        return None
    gum = history[iterations - 1] if iterations else None
    sweep = history[-1] if len(history) > iterations else None
    everywhere = [True] * len(components)  # the MRF alone: its table in every component
    chosen = [
        c
        for c, (_, _, targets) in zip(mrf_chosen or everywhere, components, strict=True)
        if targets
    ]
    kept: list[KeptPart] = []
    for k, (names, marginals) in enumerate(parts):
        source: KeptSource = "gum"
        at = iterations
        if gum is not None and gum.kept:
            at = gum.kept[k]
        if sweep is not None and chosen[k]:
            source = "mrf"
            at = sweep.kept[k] if sweep.kept else len(history)
        if set(names) <= independent:
            source, at = "independent", 0
        kept.append(KeptPart(source, at, marginals))
    start, score = scores if scores is not None else (None, None)
    return KeptTable(tuple(kept), iterations, len(history) - iterations, score, start)
