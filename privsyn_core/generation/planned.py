"""One synthesis, planned from public inputs: which method runs, in blocks of how many rows,
with how many iterations, how many blocks at once; and whether its memory fits.

A run checks its memory twice: before it spends anything (from the input's width and the
settings asked for), and after measuring (from the attributes it models, fewer once ids or
unreleasable columns are left out). Both checks are made on a :class:`PlannedSynthesis`,
so the one before spending counts what the one after it counts: the MRF beside GUM on a
wide table, the rows of one block, the blocks in flight. The one before is taken at the
input's width, the most the run can model, so a run that passes it and then fails for
memory after spending is one whose input widens after it was read, which does not happen.
"""

from __future__ import annotations

from dataclasses import dataclass

from privsyn_core.generation.blocks import block_sizes
from privsyn_core.generation.memory import check_blocks_fit, check_fits
from privsyn_core.width_policy import WIDTH_POLICY


def resolve_synthesis(choice: str, n_attributes: int, iterations: int = 1) -> str:
    """The method ``choice`` stands for on a table of ``n_attributes`` modelled attributes
    with GUM's ``iterations``: "auto" is "gum+mrf" on a wide table (as selection "auto"
    counts it, :data:`~privsyn_core.width_policy.WIDTH_POLICY`) and "gum" on a narrow one or
    when GUM is asked for no iteration (``--iterations 0``: the initial table, as asked);
    other choices stand.

    Why: on the five wide tables of ``benchmarks/wide.py`` (33-86 columns; evidence N of
    ``benchmarks/evidence/tree-first-2026-11-26.txt``) GUM's kept table is often its tree
    start, short of the many overlapping marginals (happiness, caravan and loans at
    epsilon 4), and the MRF fitted to the same targets is 2-34% closer; where GUM fits its
    targets (planted, dense) the judge keeps GUM's table, and where GUM's table is within
    its noise floor the MRF is not run at all, so 100,000-row blocks of 600,000-row tables
    cost what they did. Narrow tables keep GUM: on adult-coded the MRF gained 1-3% at
    epsilon 1 and 2 for 50 times the time (evidence M)."""
    if choice != "auto":
        return choice
    return WIDTH_POLICY.synthesis(n_attributes, iterations)


@dataclass(frozen=True)
class PlannedSynthesis:
    """How the rows of one sample are made: ``method`` as resolved ("gum", "mcf", "mrf" or
    "gum+mrf", never "auto"), GUM's ``iterations``, ``block_rows`` rows per block and
    ``workers`` blocks made at once."""

    method: str
    iterations: int
    block_rows: int
    workers: int

    def check_fits(
        self,
        rows: int,
        attributes: int,
        itemsize: int,
        *,
        streamed: bool,
        available: int | None = None,
    ) -> None:
        """Refuse (:class:`~privsyn_core.errors.InputError`) ``rows`` synthetic rows of
        ``attributes`` codes of ``itemsize`` bytes that would not fit in memory. Streamed
        (each block written before more are made), only the blocks in flight are held;
        else the whole table is, with the method's working memory for one block."""
        if streamed:
            sizes = block_sizes(rows, self.block_rows)
            check_blocks_fit(
                sizes.largest,
                min(self.workers, len(sizes)),
                attributes,
                itemsize,
                available,
                self.method,
            )
        else:
            check_fits(rows, attributes, itemsize, available, self.method, self.block_rows)


def plan_synthesis(
    choice: str, iterations: int, block_rows: int, workers: int, attributes: int
) -> PlannedSynthesis:
    """The synthesis that settings (``choice`` of method, GUM's ``iterations``,
    ``block_rows``, ``workers``) make on ``attributes`` modelled attributes."""
    return PlannedSynthesis(
        resolve_synthesis(choice, attributes, iterations), iterations, block_rows, workers
    )
