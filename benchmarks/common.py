"""Helpers shared by the benchmarks: timing, peak memory, table printing, seed grids."""

from __future__ import annotations

import json
import statistics
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    """Run ``fn`` once; return (result, wall seconds)."""
    started = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - started


def peak_memory_mb(fn: Callable[[], Any]) -> float:
    """Peak memory allocated while ``fn`` runs (tracemalloc, which numpy reports to).

    Tracing slows allocation-heavy code severalfold, so call this on a separate run from
    the timed ones.
    """
    tracemalloc.start()
    try:
        fn()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak / 2**20


def median(values: list[float]) -> float:
    return statistics.median(values)


def print_table(rows: list[dict[str, Any]]) -> None:
    if not rows:
        return
    columns = list(rows[0])
    cells = [[_fmt(r[c]) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    print("  ".join(c.rjust(w) for c, w in zip(columns, widths, strict=True)))
    for row in cells:
        print("  ".join(v.rjust(w) for v, w in zip(row, widths, strict=True)))


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1000 else f"{value:.0f}"
    return str(value)


def run_grid(
    tables: list[str],
    epsilons: list[float],
    seeds: int,
    run_seed: Callable[[str, float, int], list[dict[str, Any]]],
    save: Path | None,
) -> list[dict[str, Any]]:
    """``run_seed(table, epsilon, seed)`` over the grid, printing each cell's seconds and saving
    every row so far to ``save`` (JSON) after each cell. A cell the budget cannot synthesise
    (``FailedAfterSpending``, e.g. a tiny table at a small epsilon) is reported and skipped."""
    from privsyn_core.privacy.ledger import FailedAfterSpending

    rows: list[dict[str, Any]] = []
    for name in tables:
        for epsilon in epsilons:
            for seed in range(seeds):
                started = time.perf_counter()
                try:
                    rows.extend(run_seed(name, epsilon, seed))
                except FailedAfterSpending as error:
                    print(f"{name} eps={epsilon:g} seed={seed}: skipped ({error})", flush=True)
                    continue
                seconds = time.perf_counter() - started
                print(f"{name} eps={epsilon:g} seed={seed}: {seconds:.0f} s", flush=True)
                if save is not None:
                    save.write_text(json.dumps(rows, indent=1))
    return rows
