"""Peak memory and CPU seconds of this process and its children together (block workers).

``resource.getrusage`` reports one process's high-water mark (``RUSAGE_SELF``) or the
largest finished child's (``RUSAGE_CHILDREN``), never the sum at one moment, which is what
a machine's memory must hold when blocks run on worker processes; and the workers of a
``forkserver`` pool are the fork server's children, not this process's, so
``os.times()``'s children times miss them. This samples the whole process tree from
``/proc`` every ``interval`` seconds (Linux): memory as the sum of proportional set sizes
(PSS: a page shared by the fork server and its forks counts once in all, where resident
sizes would count it in each), falling back to resident size; CPU as each process's user
plus system time since sampling began. A peak shorter than the interval can be missed, and
a worker's last interval of CPU when it exits, so both read a little low, never high.
"""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path
from types import TracebackType

_TICKS = os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            found += [int(c) for c in (task / "children").read_text().split()]
    return found


def _tree(pid: int | None = None) -> list[int]:
    todo, seen = [pid or os.getpid()], []
    while todo:
        current = todo.pop()
        seen.append(current)
        todo += _children(current)
    return seen


def _memory_bytes(pid: int) -> int:
    """PSS where the kernel reports it, else RSS; 0 for a process gone."""
    for name, field in ((f"/proc/{pid}/smaps_rollup", "Pss:"), (f"/proc/{pid}/status", "VmRSS:")):
        try:
            for line in Path(name).read_text().splitlines():
                if line.startswith(field):
                    return int(line.split()[1]) * 1024
        except OSError:
            continue
    return 0


def _cpu_seconds(pid: int) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime


def tree_rss_bytes(pid: int | None = None) -> int:
    """Memory (PSS, else RSS) of ``pid`` (default this process) and its descendants, now."""
    return sum(_memory_bytes(p) for p in _tree(pid))


class PeakTreeRss:
    """``with PeakTreeRss() as peak: ...``; then ``peak.mb`` is the highest sampled sum of
    the tree's memory and ``peak.cpu`` its CPU seconds over the block."""

    def __init__(self, interval: float = 0.05, pid: int | None = None) -> None:
        self.interval = interval
        self.pid = pid
        self.peak = 0
        self._start: dict[int, float] = {}
        self._last: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _take(self) -> None:
        pids = _tree(self.pid)
        self.peak = max(self.peak, sum(_memory_bytes(p) for p in pids))
        for p in pids:
            seconds = _cpu_seconds(p)
            if seconds is not None:
                self._start.setdefault(p, seconds if not self._last else 0.0)
                self._last[p] = seconds

    def _sample(self) -> None:
        while not self._stop.is_set():
            self._take()
            self._stop.wait(self.interval)

    def __enter__(self) -> PeakTreeRss:
        self._take()  # the processes that exist now count from now; later ones from 0
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join()
        self._take()

    @property
    def mb(self) -> float:
        return self.peak / 2**20

    @property
    def cpu(self) -> float:
        return sum(last - self._start[p] for p, last in self._last.items())
