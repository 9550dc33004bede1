"""Combinations the measurements show as empty stay empty in the synthetic rows.

GUM moves rows a few attributes at a time, and a step that fits one marginal puts rows back
into cells another marginal measured as empty: on raw Adult at epsilon 1, 7-17% of the rows
paired an education with a number of years of school it never has, while the consistent
target of that measured pair held almost none there.

**Which cells are empty** (:func:`structural_zeros`), by two tests of a measured marginal's
consistent counts against their noise:

* *Rarer than independence.* A cell at most :data:`EMPTY_SIGMAS` of its noise, where the
  product of the marginal's own margins (what the cell would hold were its attributes
  independent) expects at least :data:`EXPECTED_SIGMAS` of it. Such a combination is
  measured as rarer than its columns' own shares make it by several noise sigmas: it does
  not occur (``Husband`` with ``Never-married``, ``Bachelors`` with 9 years). A cell that
  independence expects to be small is not one by this test, however small: its
  measurement cannot tell a rare combination from none, and emptying every small cell
  moves real rows (adult-coded loses 13% of its 2-way L1 that way).
* *A value that holds its rows in one cell* (:func:`_outside_a_single_cell`): a row of the
  marginal (one value of one attribute) whose cells but one are each within
  :data:`ROW_CELL_SIGMAS` of zero and together within :data:`ROW_SUM_SIGMAS` of the noise
  of their sum, with its largest cell clearly measured: as far as the measurement tells,
  that value determines the others, and the rest of its row is empty. This catches the
  rare values the first test cannot judge (``10th`` holds 933 rows, every one with 6 years;
  independence expects 10 in each other number). On raw Adult at epsilon 1 (3 seeds), the
  rows pairing an education with a number of years it never has, ``(other)`` aside, fell
  from 6.6% to 0.7%; adult-coded's 2-way L1 is unchanged (0.1588 / 0.0735 / 0.0589 at
  epsilon 0.2 / 1 / 2 against 0.1586 / 0.0740 / 0.0590). Emptying the thin cells of every
  row, not only of the rows that keep one cell, costs adult-coded 2-4%.

**What is done with them**: they are zero in the targets GUM and the MRF fit, and after
synthesis (and the appended attributes) every row in one has one of that marginal's
attributes changed, going round the attributes from pass to pass, for at most
:data:`PASSES`. The new value is drawn from its distribution given the row's other
attributes in every target that holds it (the product of their conditionals over its 1-way
target: zero in every empty cell of any of them), and is taken by exchange with a row that
holds it and can take the old value without entering an empty cell itself, so that the
attribute keeps its 1-way distribution, to which the rest of the table was fitted (a plain
redraw shifted it, and with it every pair of the attribute: adult-coded lost 4%).
Post-processing of the DP targets: it reads nothing else and costs nothing.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

import numpy as np

from privsyn_core.domain import Domain
from privsyn_core.marginals import MarginalTable

#: a cell is empty when it is at most this many noise sigmas (the default of
#: :attr:`~privsyn_core.generation.fitted_data.SamplingSettings.empty_sigmas`) where independence
#: of its attributes expects at least :data:`EXPECTED_SIGMAS`. By ``benchmarks/defaults.py
#: --study empty`` (adult-coded, raw Adult, NLTCS; epsilon 0.2, 1, 2; 3 seeds; one
#: measurement per seed for every arm): 2-way L1 within 3% of leaving the rows as drawn in
#: every cell and lower in 6 of 9 (raw Adult at epsilon 2: 0.0545 against 0.0561); at 1 sigma
#: NLTCS at 0.2 loses 21%, and without the expectation (every cell under the bar, rare
#: combinations too) adult-coded at 1 loses 13%
EMPTY_SIGMAS = 0.5
EXPECTED_SIGMAS = 2.0
#: the row test (:func:`_outside_a_single_cell`), in noise sigmas: each other cell, their
#: sum (of the noise of the sum) and the row's largest cell. A sum of 1 sigma cost
#: adult-coded 1% at epsilon 0.2 and left 0.3% of raw Adult's education rows broken, not 0.7%
ROW_CELL_SIGMAS = 1.0
ROW_SUM_SIGMAS = 0.5
ROW_PEAK_SIGMAS = 3.0
#: passes over the targets at most; each pass redraws one attribute of every row in an empty
#: cell of each target
PASSES = 6


def structural_zeros(table: MarginalTable, sigma: float, sigmas: float) -> np.ndarray:
    """The cells of ``table`` (a flat mask) that its measurement shows as combinations that do
    not occur (see the module docstring): at most ``sigmas`` noise standard deviations
    ``sigma`` where the product of the table's own margins expects at least
    :data:`EXPECTED_SIGMAS` of them, or outside the one cell that holds a value's rows."""
    values = np.asarray(table.values, dtype=float)
    expected = _independent(values.reshape(table.shape)).ravel()
    rare = (values <= sigmas * sigma) & (expected >= EXPECTED_SIGMAS * sigma)
    return rare | _outside_a_single_cell(values.reshape(table.shape), sigma).ravel()


def _outside_a_single_cell(values: np.ndarray, sigma: float) -> np.ndarray:
    """The cells outside the one cell that holds a value's rows: along some axis, a row
    (one value of an attribute, its cells over the others) whose largest cell is clearly
    measured (at least :data:`ROW_PEAK_SIGMAS` noise sigmas) and whose other cells are each
    at most :data:`ROW_CELL_SIGMAS` and together at most :data:`ROW_SUM_SIGMAS` sigmas of the
    noise of their sum (``sigma`` times the root of their number). As far as the
    measurement tells, that value determines the others: ``Masters`` holds 1,700 rows with
    14 years of school and its other 14 numbers of years within noise of zero together."""
    determined = np.zeros(values.shape, dtype=bool)
    for axis in range(values.ndim):
        moved = np.moveaxis(values, axis, 0)
        rows = moved.reshape(moved.shape[0], -1)
        others = rows.shape[1] - 1
        if others < 1:
            continue
        ordered = np.sort(rows, axis=1)
        one_cell = (
            (ordered[:, -1] >= ROW_PEAK_SIGMAS * sigma)
            & (ordered[:, -2] <= ROW_CELL_SIGMAS * sigma)
            & (ordered[:, :-1].sum(axis=1) <= ROW_SUM_SIGMAS * sigma * np.sqrt(others))
        )
        outside = np.arange(rows.shape[1])[None, :] != rows.argmax(axis=1)[:, None]
        found = (one_cell[:, None] & outside).reshape(moved.shape)
        determined |= np.moveaxis(found, 0, axis)
    return determined


def emptied(table: MarginalTable, sigma: float, sigmas: float) -> MarginalTable:
    """``table`` with its :func:`structural_zeros` set to zero."""
    values = np.asarray(table.values, dtype=float)
    return table.with_values(np.where(structural_zeros(table, sigma, sigmas), 0.0, values))


def _independent(values: np.ndarray) -> np.ndarray:
    """The counts a table would hold with its attributes independent: the product of its
    1-way margins (clipped at zero), scaled to its total."""
    clipped = np.clip(values, 0.0, None)
    total = clipped.sum()
    if total <= 0:
        return np.zeros_like(clipped)
    out = np.ones_like(clipped)
    for axis in range(clipped.ndim):
        others = tuple(a for a in range(clipped.ndim) if a != axis)
        margin = clipped.sum(axis=others) / total
        shape = [1] * clipped.ndim
        shape[axis] = -1
        out = out * margin.reshape(shape)
    return out * total


def emptied_targets(
    targets: Sequence[MarginalTable],
    scales: Mapping[tuple[str, ...], float],
    sigmas: float,
    keep: Collection[tuple[str, ...]] = (),
) -> tuple[list[MarginalTable], dict[tuple[str, ...], np.ndarray]]:
    """The measured multi-way ``targets`` (noise per cell in ``scales``) with their
    :func:`structural_zeros` set to zero, and those cells' masks by attributes; but those in
    ``keep`` (drawn as independent: a product of margins has no empty cell)."""
    tables: list[MarginalTable] = []
    masks: dict[tuple[str, ...], np.ndarray] = {}
    for table in targets:
        if (
            len(table.attributes) > 1
            and table.attributes in scales
            and table.attributes not in keep
        ):
            mask = structural_zeros(table, scales[table.attributes], sigmas)
            if mask.any():
                masks[table.attributes] = mask
                table = table.with_values(np.where(mask, 0.0, table.values))
        tables.append(table)
    return tables, masks


def empty_cell_rows(
    synthetic: np.ndarray, engine: Domain, attributes: tuple[str, ...], mask: np.ndarray
) -> np.ndarray:
    """The rows of ``synthetic`` (engine codes, one row per attribute) that lie in a cell of
    the marginal of ``attributes`` that ``mask`` (flat, over its cells) marks empty."""
    axes = [engine.index(a) for a in attributes]
    shape = tuple(engine.sizes[i] for i in axes)
    cells = np.ravel_multi_index(tuple(synthetic[i] for i in axes), shape)
    return np.flatnonzero(mask[cells])


def fill_empty_cells(
    synthetic: np.ndarray,
    engine: Domain,
    targets: Sequence[MarginalTable],
    masks: Mapping[tuple[str, ...], np.ndarray],
    rng: np.random.Generator,
    one_way: Sequence[MarginalTable] = (),
    passes: int = PASSES,
) -> int:
    """Move the rows of ``synthetic`` (modified in place) out of the cells ``masks`` marks
    empty (see the module docstring), redrawing from the conditionals of ``targets`` and
    the consistent 1-way targets ``one_way`` (engine codes); returns the rows left in one."""
    tables = [t for t in targets if len(t.attributes) > 1]
    alone = {
        t.attributes[0]: np.clip(np.asarray(t.values, dtype=float), 0.0, None) for t in one_way
    }
    left = sum(empty_cell_rows(synthetic, engine, a, m).size for a, m in masks.items())
    for round_ in range(passes if left else 0):
        for attributes, mask in masks.items():
            rows = empty_cell_rows(synthetic, engine, attributes, mask)
            if rows.size:
                axis = attributes[round_ % len(attributes)]
                wanted = _drawn(synthetic, engine, tables, alone.get(axis), axis, rows, rng)
                _swap(synthetic, engine, masks, axis, rows, wanted, rng)
        left = sum(empty_cell_rows(synthetic, engine, a, m).size for a, m in masks.items())
        if left == 0:
            break
    return left


def _masked(
    synthetic: np.ndarray,
    engine: Domain,
    masks: Mapping[tuple[str, ...], np.ndarray],
    attribute: str,
    rows: np.ndarray,
    values: np.ndarray,
) -> np.ndarray:
    """Whether ``rows``, given ``values`` for ``attribute``, lie in a cell some mask over
    that attribute marks empty."""
    out = np.zeros(rows.size, dtype=bool)
    for attributes, mask in masks.items():
        if attribute not in attributes:
            continue
        codes = [values if a == attribute else synthetic[engine.index(a)][rows] for a in attributes]
        shape = tuple(engine.sizes[engine.index(a)] for a in attributes)
        out |= mask[np.ravel_multi_index(tuple(codes), shape)]
    return out


def _swap(
    synthetic: np.ndarray,
    engine: Domain,
    masks: Mapping[tuple[str, ...], np.ndarray],
    attribute: str,
    rows: np.ndarray,
    wanted: np.ndarray,
    rng: np.random.Generator,
) -> None:
    """Give ``rows`` the ``wanted`` values of ``attribute`` by exchange: each takes the value
    of a row that holds it, and that row takes the moved row's old value, chosen where the
    old value puts it in no empty cell (first among the rows that want it: two rows in empty
    cells that fix each other). The attribute's column keeps every value's count (its 1-way
    distribution, to which the rest of the table was fitted); a row with no such partner
    takes its wanted value alone."""
    column = synthetic[engine.index(attribute)]
    current = column[rows].astype(np.int64)
    used = np.zeros(column.size, dtype=bool)
    wants = np.full(column.size, -1, dtype=np.int64)
    wants[rows] = wanted
    # the rows holding each value, found once (a pass over the column per pair of values
    # would cost pairs x rows)
    order = np.argsort(column, kind="stable")
    size = engine.sizes[engine.index(attribute)]
    starts = np.searchsorted(column[order], np.arange(size + 1))
    pairs = np.unique(np.stack([current, wanted]), axis=1)
    for old, new in pairs.T:
        if old == new:
            continue
        movers = rows[(current == old) & (wanted == new) & ~used[rows]]
        holders = order[starts[new] : starts[new + 1]]
        holders = holders[~used[holders]]
        if movers.size == 0 or holders.size == 0:
            continue
        fits = ~_masked(synthetic, engine, masks, attribute, holders, np.full(holders.size, old))
        holders = holders[fits]
        holders = np.concatenate([holders[wants[holders] == old], holders[wants[holders] != old]])
        count = min(movers.size, holders.size)
        if count == 0:
            continue
        first = holders[: int(np.count_nonzero(wants[holders] == old))]
        rest = rng.permutation(holders[first.size :])
        partners = np.concatenate([rng.permutation(first), rest])[:count]
        movers = rng.permutation(movers)[:count]
        column[partners] = old
        column[movers] = new
        used[partners] = used[movers] = True
    alone = ~used[rows] & (current != wanted)
    column[rows[alone]] = wanted[alone]


def _drawn(
    synthetic: np.ndarray,
    engine: Domain,
    tables: Sequence[MarginalTable],
    one_way: np.ndarray | None,
    attribute: str,
    rows: np.ndarray,
    rng: np.random.Generator,
) -> np.ndarray:
    """A value of ``attribute`` for each of ``rows`` drawn from its distribution given the
    row's other attributes in every target that holds it: the product of those targets'
    conditionals, over its 1-way target counted once (a pairwise model's conditional),
    which is zero in every cell any target holds empty. A row for which every value is
    excluded keeps its own."""
    holding = [t for t in tables if attribute in t.attributes]
    size = engine.sizes[engine.index(attribute)]
    log_weights = np.zeros((rows.size, size))
    for table in holding:
        axis = table.attributes.index(attribute)
        values = np.moveaxis(np.asarray(table.values).reshape(table.shape), axis, -1)
        others = [a for a in table.attributes if a != attribute]
        parent = np.ravel_multi_index(
            tuple(synthetic[engine.index(a)][rows] for a in others), values.shape[:-1]
        )
        with np.errstate(divide="ignore"):
            log_weights += np.log(np.clip(values.reshape(-1, size)[parent], 0.0, None))
    if one_way is not None and len(holding) > 1:
        with np.errstate(divide="ignore"):
            log_weights -= (len(holding) - 1) * np.log(np.where(one_way > 0, one_way, np.inf))
    drawn = synthetic[engine.index(attribute), rows].astype(np.int64)
    possible = np.isfinite(log_weights).any(axis=1)
    if not possible.any():
        return drawn
    finite = log_weights[possible]
    weights = np.exp(finite - finite.max(axis=1, keepdims=True))
    cumulative = np.cumsum(weights, axis=1)
    u = rng.random(int(possible.sum())) * cumulative[:, -1]
    drawn[possible] = np.minimum((cumulative <= u[:, None]).sum(axis=1), size - 1)
    return drawn
