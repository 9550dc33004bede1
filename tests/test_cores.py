"""No hard-coded core counts (``privsyn_core.cores``): the engine uses the cores this
process may use, and block workers share them out."""

import os
import re
from pathlib import Path

import numpy as np
import pytest

import privsyn_core.cores as cores
from privsyn_core.cores import available_cores, limit_threads, threads, threads_per_worker

PACKAGE = Path(__file__).resolve().parent.parent / "privsyn_core"


def test_the_cores_are_this_process_affinity():
    assert available_cores() == len(os.sched_getaffinity(0))


def test_a_narrower_affinity_is_what_counts_and_without_one_the_machine_count(monkeypatch):
    monkeypatch.setattr(cores.os, "sched_getaffinity", lambda pid: {0, 3, 5}, raising=False)
    assert available_cores() == 3 and threads() == 3

    def unsupported(pid: int) -> set[int]:
        raise AttributeError("no sched_getaffinity here")

    monkeypatch.setattr(cores.os, "sched_getaffinity", unsupported, raising=False)
    monkeypatch.setattr(cores.os, "cpu_count", lambda: 6)
    assert available_cores() == 6
    monkeypatch.setattr(cores.os, "cpu_count", lambda: None)
    assert available_cores() == 1


def test_workers_share_the_cores_out_at_least_one_thread_each():
    assert threads_per_worker(1, 16) == 16
    assert threads_per_worker(4, 16) == 4
    assert threads_per_worker(3, 16) == 5
    assert threads_per_worker(32, 16) == 1


def test_a_limit_sets_this_process_threads_until_lifted():
    try:
        limit_threads(1)
        assert threads() == 1
    finally:
        limit_threads(None)
    assert threads() == available_cores()
    with pytest.raises(ValueError):
        limit_threads(0)


@pytest.mark.slow
def test_batch_counts_are_the_same_on_any_number_of_threads():
    pytest.importorskip("numba")
    from privsyn_core.count_kernel import count_sets

    rng = np.random.default_rng(0)
    records = rng.integers(0, 7, size=(6, 5000)).astype(np.uint8)
    rows = [(i, j) for i in range(6) for j in range(i + 1, 6)] + [(0, 1, 2)]
    shapes = [(7,) * len(r) for r in rows]
    counts = {}
    try:
        for count in (1, 3, 8):
            limit_threads(count)
            counts[count] = count_sets(records, rows, shapes)
    finally:
        limit_threads(None)
    for count in (3, 8):
        assert all(np.array_equal(a, b) for a, b in zip(counts[1], counts[count], strict=True))


def test_no_module_hard_codes_a_core_count():
    hard_coded = re.compile(
        r"_WORKERS\s*=\s*\d|max_workers\s*=\s*\d|local\[\d+\]\"|threads\s*=\s*\d"
    )
    found = [
        f"{path.relative_to(PACKAGE)}:{number}"
        for path in PACKAGE.rglob("*.py")
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if hard_coded.search(line)
    ]
    assert found == []
