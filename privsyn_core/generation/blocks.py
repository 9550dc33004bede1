"""Synthetic rows made as independent blocks, on worker processes.

GUM's cost grows with the rows it updates, and one GUM over all the rows runs on one
process and holds the whole table. The rows are instead made as blocks of at most
:attr:`~privsyn_core.generation.fitted_data.SamplingSettings.block_rows` rows, each block a whole
draw of its own (GUM, appending, decoding) over the same fitted model. A block is a
post-processing of the DP measurements like any other sample, so blocks cost nothing and
may run anywhere, in any order.

Reproducibility: block ``i`` draws from the ``i``-th child of a seed sequence spawned from
the run's generator (:func:`block_generators`), and the rows are split by
:func:`block_sizes` from the row count and the block size alone, so a seed and a block size
give the same rows whatever the number of workers (and GUM's kernels give the same result
whatever the number of threads, :mod:`privsyn_core.generation.gum_kernel`). A run of one
block draws from the run's generator itself, so tables no larger than a block are made
exactly as before blocks existed.

The guard (:func:`~privsyn_core.generation.guard.guard`, GUM's table against independent
columns) runs in every block, on that block's table: it judges the rows that will be
written, and judging once would mean either holding all blocks (no streaming) or applying
one block's verdict to tables it never saw. A block's table is scored from DP outputs only,
like the whole table's was, so the guard costs no budget in any number of blocks; the GUM
stage's summary says in how many blocks it drew independent columns.

Workers: ``workers`` processes (default: every core this process may use,
:func:`~privsyn_core.cores.available_cores`), each with ``cores // workers`` threads so they
do not oversubscribe the cores. One worker runs the blocks in this process, with no pool.
The pool starts its processes with ``forkserver`` where there is one (Linux): a fork of
this process could inherit a lock held by one of its threads (GUM's thread pools, a
dashboard session's), and ``spawn`` re-imports the engine per worker; the fork server
imports it once and forks a clean, single-threaded copy per worker. The model is sent to
each worker once, at its start. At most ``workers`` blocks are out at a time and they come
back in order, so memory is bounded by the workers times the block size, not by the rows.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar, overload

import numpy as np

from privsyn_core.cores import available_cores, limit_threads, threads_per_worker
from privsyn_core.errors import InputError

T = TypeVar("T")

#: rows per block when a sample does not say (see :class:`SamplingSettings.block_rows`
#: for the measurement that chose it)
DEFAULT_BLOCK_ROWS = 100_000

#: a block is a callable (picklable, for the pool) from (rows, generator) to its result
BlockWork = Callable[[int, np.random.Generator], T]


@dataclass(frozen=True)
class BlockSizes(Sequence[int]):
    """``rows`` rows as ``blocks`` blocks as even as possible (sizes differ by at most one),
    computed when asked: a hundred million rows in blocks of a thousand are 100,000 blocks,
    never listed (a slice lists the sizes it asks for)."""

    rows: int
    blocks: int

    def __len__(self) -> int:
        return self.blocks

    @overload
    def __getitem__(self, index: int) -> int: ...

    @overload
    def __getitem__(self, index: slice) -> list[int]: ...

    def __getitem__(self, index: int | slice) -> int | list[int]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self.blocks))]
        if not -self.blocks <= index < self.blocks:
            raise IndexError(index)
        base, extra = divmod(self.rows, self.blocks)
        return base + (1 if index % self.blocks < extra else 0)

    @property
    def largest(self) -> int:
        return -(-self.rows // self.blocks)

    def start(self, index: int) -> int:
        """The first row of block ``index``, counted from 0 (the rows of the blocks before)."""
        base, extra = divmod(self.rows, self.blocks)
        return index * base + min(index, extra)


def block_sizes(n: int, block_rows: int) -> BlockSizes:
    """``n`` rows as the fewest blocks of at most ``block_rows``, as even as possible: a
    short last block would be a small GUM, whose sampling error is larger than its
    siblings'."""
    return BlockSizes(n, max(1, -(-n // block_rows)))


def block_generators(rng: np.random.Generator, count: int) -> Iterator[np.random.Generator]:
    """One independent generator per block: the run's own for a single block (the draw is
    then the one without blocks); else the children of one seed sequence spawned from it
    now (so what ``rng`` does later changes no block), each made when its block starts.
    Child ``i`` is ``base.spawn(count)[i]``, made without spawning all of them."""
    if count == 1:
        return iter([rng])
    seeds = block_seeds(rng, count)
    return (seeds.generator(index) for index in range(count))


@dataclass(frozen=True)
class BlockSeeds:
    """Where every block's generator comes from, as a small picklable value: what a block
    made elsewhere (a Spark task, :mod:`privsyn_core.generation.spark_blocks`) needs to
    draw exactly the rows the same block would draw here. ``generator(i)`` is the ``i``-th
    of :func:`block_generators`; a run of one block carries the run's generator itself (a
    copy of its state when pickled)."""

    #: the seed sequence the blocks' children come from (None for one block)
    base: np.random.SeedSequence | None
    #: the bit generator's type (PCG64 for ``default_rng``)
    kind: type[np.random.BitGenerator]
    #: the run's own generator, for a run of one block
    single: np.random.Generator | None = None

    def generator(self, index: int) -> np.random.Generator:
        if self.base is None:
            assert self.single is not None and index == 0, "a run of one block has block 0"
            return self.single
        child = np.random.SeedSequence(
            self.base.entropy,
            spawn_key=(*self.base.spawn_key, index),
            pool_size=self.base.pool_size,
        )
        return np.random.Generator(self.kind(child))


def block_seeds(rng: np.random.Generator, count: int) -> BlockSeeds:
    """The seeds of ``count`` blocks drawn from ``rng`` (see :func:`block_generators`,
    which this spawns from ``rng`` the same way: call one of them per run, not both)."""
    kind = type(rng.bit_generator)
    if count == 1:
        return BlockSeeds(None, kind, rng)
    seed_seq = rng.bit_generator.seed_seq
    assert isinstance(seed_seq, np.random.SeedSequence), "a generator made from a seed"
    return BlockSeeds(seed_seq.spawn(1)[0], kind)


def check_workers(workers: object) -> int:
    """``workers`` as a count (None: every core this process may use); an
    :class:`InputError` for anything but a whole number of at least 1."""
    if workers is None:
        return available_cores()
    if isinstance(workers, bool) or not isinstance(workers, int | np.integer):
        raise InputError(f"workers must be a whole number, got {workers!r}")
    if workers < 1:
        raise InputError(f"workers must be at least 1, got {workers}")
    return int(workers)


def check_block_rows(block_rows: object) -> int:
    """``block_rows`` as a count, or an :class:`InputError` for anything but a whole number
    of at least 1."""
    if isinstance(block_rows, bool) or not isinstance(block_rows, int | np.integer):
        raise InputError(f"the block size must be a whole number of rows, got {block_rows!r}")
    if block_rows < 1:
        raise InputError(f"the block size must be at least 1 row, got {block_rows}")
    return int(block_rows)


def run_blocks(
    work: BlockWork[T],
    sizes: Sequence[int],
    generators: Iterable[np.random.Generator],
    workers: int,
) -> Generator[T, None, None]:
    """``work(size, generator)`` for every block, results in block order.

    With one worker (or one block) the blocks run here, one after the other. Otherwise on a
    pool of ``min(workers, blocks)`` processes with at most that many blocks out at once;
    closing the iterator early (a failed write, a cancelled run) cancels the blocks not
    started and waits for the running ones (at most one per worker).
    """
    if workers == 1 or len(sizes) == 1:
        for size, generator in zip(sizes, generators, strict=False):
            yield work(size, generator)
        return
    processes = min(workers, len(sizes))
    pool = ProcessPoolExecutor(
        max_workers=processes,
        mp_context=_context(),
        initializer=_start_worker,
        initargs=(work, threads_per_worker(processes), os.getpid()),
    )
    try:
        jobs = iter(zip(sizes, generators, strict=False))
        pending: deque[Future[Any]] = deque()
        for size, generator in _take(jobs, processes):
            pending.append(pool.submit(_run, size, generator))
        while pending:
            result = pending.popleft().result()
            for size, generator in _take(jobs, 1):
                pending.append(pool.submit(_run, size, generator))
            yield result
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _take(jobs: Iterator[tuple[int, np.random.Generator]], count: int) -> list:
    return [job for _, job in zip(range(count), jobs, strict=False)]


def _context() -> multiprocessing.context.BaseContext:
    """``forkserver`` with the engine preloaded where the platform has it, else ``spawn``
    (see the module docstring for why never a plain fork), starting workers that do not
    import the caller's ``__main__`` (:func:`_main_hidden`)."""
    if "forkserver" in multiprocessing.get_all_start_methods():
        context = _EngineForkServer()
        context.set_forkserver_preload(["privsyn_core.generation.fitted"])
        return context
    return _EngineSpawn()


def _engine_only(
    name: str,
    process: type[multiprocessing.context.SpawnProcess | multiprocessing.context.ForkServerProcess],
) -> type:
    """``process`` (a multiprocessing Process class) started under :func:`_main_hidden`;
    ``name`` is the module attribute it is bound to (a process object is pickled by it)."""

    def start(process_obj: Any) -> Any:
        with _main_hidden():
            return process._Popen(process_obj)

    return type(name, (process,), {"_Popen": staticmethod(start)})


_contexts = multiprocessing.context
_EngineSpawnProcess = _engine_only("_EngineSpawnProcess", _contexts.SpawnProcess)
_EngineSpawn = type("_EngineSpawn", (_contexts.SpawnContext,), {"Process": _EngineSpawnProcess})
if hasattr(_contexts, "ForkServerContext"):
    _EngineForkServerProcess = _engine_only("_EngineForkServerProcess", _contexts.ForkServerProcess)
    _EngineForkServer = type(
        "_EngineForkServer", (_contexts.ForkServerContext,), {"Process": _EngineForkServerProcess}
    )


@contextmanager
def _main_hidden() -> Iterator[None]:
    """Start a worker without the caller's ``__main__``.

    multiprocessing makes every new process import the parent's main script (under another
    name) so that functions defined there can be unpickled; a script that calls the engine
    at top level, with no ``if __name__ == "__main__":`` guard, then runs again in every
    worker and fails there. Block workers run engine code only, so they need nothing from
    the script: hiding its path and spec while a worker starts spares the caller the guard.
    """
    main = sys.modules.get("__main__")
    saved: dict[str, Any] = (
        {k: main.__dict__[k] for k in ("__file__", "__spec__") if k in main.__dict__}
        if main
        else {}
    )
    try:
        if main is not None:
            main.__dict__.pop("__file__", None)
            if "__spec__" in saved:
                main.__spec__ = None
        yield
    finally:
        if main is not None:
            main.__dict__.update(saved)


#: the block work of this worker process, set once at its start (:func:`_start_worker`)
_work: BlockWork[Any] | None = None


def _start_worker(work: BlockWork[Any], threads: int, owner: int) -> None:
    global _work
    _work = work
    limit_threads(threads)
    threading.Thread(target=_exit_without, args=(owner,), daemon=True).start()


def _exit_without(owner: int) -> None:
    """End this worker once the process that owns the pool is gone. A worker is the fork
    server's child, and it holds both ends of its task queue, so when the owner is killed
    (SIGTERM, SIGKILL) nothing would ever wake it: it would sleep on as an orphan."""
    while True:
        time.sleep(_OWNER_CHECK_SECONDS)
        try:
            os.kill(owner, 0)
        except ProcessLookupError:
            os._exit(1)
        except PermissionError:  # a process of another user took the number: gone too
            os._exit(1)


#: how often a worker checks that its pool's owner is alive
_OWNER_CHECK_SECONDS = 1.0


def _run(size: int, generator: np.random.Generator) -> Any:
    assert _work is not None, "a block ran in a process the pool did not start"
    return _work(size, generator)
