"""Helpers shared by the benchmarks: timing, peak memory and table printing."""

from __future__ import annotations

import statistics
import time
import tracemalloc
from collections.abc import Callable
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
