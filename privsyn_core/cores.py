"""How many cores this process may use, and how many threads each engine process runs.

No count is hard-coded: GUM's update threads, batch counting, Spark's local mode and the
block workers of :mod:`privsyn_core.generation.blocks` all ask here. The cores a process may
use are its CPU affinity (``taskset``, a container's cpuset, a batch scheduler's
allotment), not the machine's core count: on a 64-core host that lends this process 4, 64
threads would oversubscribe 16 times.

When several block workers run, each is a process of its own and gets
``cores // workers`` threads (:func:`limit_threads`), so workers times threads never
exceeds the cores.
"""

from __future__ import annotations

import os

_threads: int | None = None


def available_cores() -> int:
    """The cores this process may run on: its affinity where the OS reports one, else the
    machine's count, else 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # macOS and Windows have no sched_getaffinity
        return max(1, os.cpu_count() or 1)


def threads() -> int:
    """Threads an engine pass (a GUM update, a batch count) may split over in this
    process: :func:`limit_threads`'s count if one was set, else all available cores."""
    return _threads if _threads is not None else available_cores()


def limit_threads(count: int | None) -> None:
    """Give this process ``count`` threads per pass (None: back to all available cores).
    Block workers call it once at start-up, so a process-wide setting is what is wanted."""
    global _threads
    if count is not None and count < 1:
        raise ValueError(f"a process needs at least one thread, got {count}")
    _threads = count


def threads_per_worker(workers: int, cores: int | None = None) -> int:
    """Threads for each of ``workers`` processes sharing ``cores`` (default: available):
    an even share, at least one."""
    return max(1, (cores if cores is not None else available_cores()) // max(1, workers))
