"""MCF, the paper's strawman synthesiser (section 5.1): min-cost flow per marginal.

For each noisy marginal in turn, the synthetic table is changed so that its marginal equals
the target *exactly*: records move from over-filled cells to under-filled ones along a
min-cost flow, and a moved record changes only the marginal's attributes where its old and
new cell differ ("we change only the related attribute and keep the other attributes the
same"). The cost of moving a record from cell ``u`` to cell ``v`` is the number of attributes
that change, so the flow makes the fewest changes. All marginals are visited per iteration,
for the same number of iterations (and with the same plateau rule) as GUM, so the two
convergence curves compare directly; the paper's point (appendix H) is that this fully
consistent step undoes the work of the previous marginals, which GUM's gradual, duplicating
updates avoid.

**The flow.** A bipartite graph over-cells x under-cells has up to ``cells^2 / 4`` edges (six
million for a 5,000-cell marginal). With Hamming costs, a route that changes ``k - j``
attributes of a ``k``-way marginal is one through a "hub": a subset ``S`` of ``j`` attributes and
a value on it that both cells share. So the flow is routed level by level, cheapest first:
a maximum flow (scipy's Dinic) through all hubs of ``k - 1`` attributes, then of ``k - 2``
with what is left, down to the empty set that joins everything. For pairs (``k = 2``, most
marginals) this is an exact min-cost flow: the cost is ``2T - F`` for ``T`` records moved and
``F`` moved at cost 1, and the first level maximises ``F``. For ``k >= 3`` maximising the
cheap levels first is the natural greedy and not always optimal (a unit moved at cost 1 can
block two at cost 2 instead of 3); the tests measure the gap against networkx's exact flow.
An exact LP over the hub graph was tried first and took 30 s for a 5,000-cell triple.

**Cost.** One to ``k`` max-flows per marginal per iteration, a few milliseconds each for a
pair and tens of milliseconds for a 5,000-cell triple, so an Adult iteration (about 30
marginals) costs several times a GUM iteration. It is a teaching and benchmarking option.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

import numpy as np

from privsyn_core.generation.gum import GumIterationRecord, ProgressHook, run_passes
from privsyn_core.generation.gum_settings import GumSettings
from privsyn_core.generation.sampling import quota_counts
from privsyn_core.generation.target_scores import GumTarget
from privsyn_core.marginals import cell_index

#: a move: ``amount`` records go from cell ``source`` to cell ``destination``
Move = tuple[int, int, int]


def target_counts(frequencies: np.ndarray, n: int) -> np.ndarray:
    """The target in whole records: frequencies times ``n``, rounded by largest remainder so
    that they sum to ``n`` exactly."""
    return quota_counts(np.asarray(frequencies, dtype=float), n)


def min_cost_moves(counts: np.ndarray, target: np.ndarray, shape: Sequence[int]) -> list[Move]:
    """Moves that turn ``counts`` into ``target`` (whole records, same total, flat over a
    table of ``shape``) at low total cost, the cost of a record being the number of its
    attributes that change: a min-cost flow for pairs, level by level beyond (module doc)."""
    counts = np.asarray(counts, dtype=np.int64)
    target = np.asarray(target, dtype=np.int64)
    if counts.sum() != target.sum():
        raise ValueError("counts and target must have the same total")
    excess = counts - target
    over = np.flatnonzero(excess > 0)
    under = np.flatnonzero(excess < 0)
    supply = excess[over].copy()
    demand = -excess[under]
    k = len(shape)
    over_values = np.stack(np.unravel_index(over, shape), axis=1)
    under_values = np.stack(np.unravel_index(under, shape), axis=1)
    moves: list[Move] = []
    for agree in range(k - 1, -1, -1):  # cost k - agree per record, cheapest first
        if not supply.any():
            break
        subsets = [list(s) for s in combinations(range(k), agree)]
        moves.extend(
            _route_level(over, under, over_values, under_values, supply, demand, shape, subsets)
        )
    return moves


def _route_level(
    over: np.ndarray,
    under: np.ndarray,
    over_values: np.ndarray,
    under_values: np.ndarray,
    supply: np.ndarray,
    demand: np.ndarray,
    shape: Sequence[int],
    subsets: list[list[int]],
) -> list[Move]:
    """A maximum flow from over-cells to under-cells that agree on one of ``subsets`` (each
    of the same size, so every route costs the same); updates ``supply`` and ``demand`` in
    place and returns the moves."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import maximum_flow

    live_over = np.flatnonzero(supply > 0)
    live_under = np.flatnonzero(demand > 0)
    if live_over.size == 0 or live_under.size == 0:
        return []
    n_o, n_u = live_over.size, live_under.size
    tails: list[np.ndarray] = []  # (over index, hub) pairs
    heads: list[np.ndarray] = []  # (hub, under index) pairs
    hubs = 0
    for subset in subsets:
        over_keys = _keys(over_values[live_over][:, subset], shape, subset)
        under_keys = _keys(under_values[live_under][:, subset], shape, subset)
        shared = np.intersect1d(over_keys, under_keys)
        if shared.size == 0:
            continue
        o = np.flatnonzero(np.isin(over_keys, shared))
        u = np.flatnonzero(np.isin(under_keys, shared))
        tails.append(np.stack([o, hubs + np.searchsorted(shared, over_keys[o])], axis=1))
        heads.append(np.stack([hubs + np.searchsorted(shared, under_keys[u]), u], axis=1))
        hubs += shared.size
    if not hubs:
        return []
    tail = np.concatenate(tails)
    head = np.concatenate(heads)
    # nodes: 0 source, 1..n_o over, then hubs, then under, then the sink
    source, sink = 0, 1 + n_o + hubs + n_u
    big = int(supply.sum())
    rows = np.concatenate(
        [np.zeros(n_o, dtype=np.int64), 1 + tail[:, 0], 1 + n_o + head[:, 0],
         1 + n_o + hubs + np.arange(n_u)]
    )  # fmt: skip
    cols = np.concatenate(
        [1 + np.arange(n_o), 1 + n_o + tail[:, 1], 1 + n_o + hubs + head[:, 1],
         np.full(n_u, sink)]
    )  # fmt: skip
    capacity = np.concatenate(
        [supply[live_over], np.full(tail.shape[0] + head.shape[0], big), demand[live_under]]
    )
    graph = csr_matrix((capacity.astype(np.int32), (rows, cols)), shape=(sink + 1, sink + 1))
    flow = maximum_flow(graph, source, sink, method="dinic").flow
    into_hub = np.asarray(flow[1 + tail[:, 0], 1 + n_o + tail[:, 1]]).ravel()
    out_of_hub = np.asarray(flow[1 + n_o + head[:, 0], 1 + n_o + hubs + head[:, 1]]).ravel()
    moves = _decompose(
        over[live_over], under[live_under], hubs, tail[:, 0], tail[:, 1], into_hub,
        head[:, 0], head[:, 1], out_of_hub,
    )  # fmt: skip
    sent = np.bincount(tail[:, 0], weights=into_hub, minlength=n_o).astype(np.int64)
    received = np.bincount(head[:, 1], weights=out_of_hub, minlength=n_u).astype(np.int64)
    supply[live_over] -= sent
    demand[live_under] -= received
    return moves


def _keys(values: np.ndarray, shape: Sequence[int], cols: list[int]) -> np.ndarray:
    key = np.zeros(values.shape[0], dtype=np.int64)
    for i, c in enumerate(cols):
        key = key * shape[c] + values[:, i]
    return key


def _decompose(
    over: np.ndarray,
    under: np.ndarray,
    hubs: int,
    tails: np.ndarray,
    tail_hubs: np.ndarray,
    flows_in: np.ndarray,
    head_hubs: np.ndarray,
    heads: np.ndarray,
    flows_out: np.ndarray,
) -> list[Move]:
    """Cell-to-cell moves from hub flows: at each hub, incoming and outgoing flow are paired
    in any order (every pairing through one hub has the same cost)."""
    incoming: list[list[list[int]]] = [[] for _ in range(hubs)]
    outgoing: list[list[list[int]]] = [[] for _ in range(hubs)]
    for t, h, f in zip(tails.tolist(), tail_hubs.tolist(), flows_in.tolist(), strict=True):
        if f > 0:
            incoming[h].append([int(over[t]), int(f)])
    for h, u, f in zip(head_hubs.tolist(), heads.tolist(), flows_out.tolist(), strict=True):
        if f > 0:
            outgoing[h].append([int(under[u]), int(f)])
    moves: list[Move] = []
    for ins, outs in zip(incoming, outgoing, strict=True):
        i = j = 0
        while i < len(ins) and j < len(outs):
            amount = min(ins[i][1], outs[j][1])
            moves.append((ins[i][0], outs[j][0], amount))
            ins[i][1] -= amount
            outs[j][1] -= amount
            i += ins[i][1] == 0
            j += outs[j][1] == 0
    return moves


def mcf_update(records: np.ndarray, target: GumTarget, rng: np.random.Generator) -> float:
    """Make the marginal of ``records`` on ``target`` equal to the target (in whole records)
    by a min-cost flow, in place; returns the L1 error (frequencies) before the update."""
    n = records.shape[1]
    cells = cell_index(records, target.rows, target.shape)
    counts = np.bincount(cells, minlength=target.frequencies.size)
    error = float(np.abs(counts / n - target.frequencies).sum())
    moves = min_cost_moves(counts, target_counts(target.frequencies, n), target.shape)
    if not moves:
        return error
    sources = np.array([m[0] for m in moves])
    amounts = np.array([m[2] for m in moves])
    destinations = np.repeat(np.array([m[1] for m in moves]), amounts)
    # for every source cell, its records in random order; take as many as leave it
    order = np.argsort(cells, kind="stable")
    start = np.searchsorted(cells[order], np.arange(counts.size))
    rows: list[np.ndarray] = []
    taken = dict.fromkeys(sources.tolist(), 0)
    shuffled: dict[int, np.ndarray] = {}
    for source, amount in zip(sources.tolist(), amounts.tolist(), strict=True):
        if source not in shuffled:
            members = order[start[source] : start[source] + counts[source]]
            shuffled[source] = rng.permutation(members)
        rows.append(shuffled[source][taken[source] : taken[source] + amount])
        taken[source] += amount
    moved = np.concatenate(rows)
    values = np.unravel_index(destinations, target.shape)
    for row, column in zip(target.rows, values, strict=True):
        records[row, moved] = column
    return error


def run_mcf(
    components: Sequence[tuple[np.ndarray, Sequence[GumTarget]]],
    settings: GumSettings,
    rng: np.random.Generator,
    on_iteration: ProgressHook | None = None,
) -> tuple[list[GumIterationRecord], bool]:
    """MCF on every component, in GUM's outer loop (:func:`~privsyn_core.generation.gum.
    run_passes`): ``settings.iterations`` passes over all marginals (largest error first) with
    the same plateau rule, each marginal made exact by :func:`mcf_update`; the history's alpha
    is 1 (every step goes all the way). GUM's kept table and noise floor are GUM's own."""

    def update(iteration: int, component: int, target: int) -> float:
        records, targets = components[component]
        return mcf_update(records, targets[target], rng)

    return run_passes(components, settings, update, on_iteration)
