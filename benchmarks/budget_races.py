"""Privacy promises under races and kills (issue 21): prints what was released against what
the run registry holds.

1. ``--tries`` times, ``--processes`` CLI runs (``privsyn synthesize`` on the penguins table,
   epsilon 4, 2 GUM iterations, debug noise) start at the same moment against a lifetime
   budget that holds 1.5 runs. Prints per try the tables written, the rho they released (one
   run's rho each), what the registry recorded, and at the end the largest released total
   against the budget (it must never pass 1).
2. One run killed with SIGKILL at each point of its life (after reserving, after each pipeline
   stage, after its books, after its table is written): prints the registry's total (spent
   plus held) against what the run had released (its table's rho, if it wrote one) and the
   rho its finished stages had measured (the whole budget once any stage ran).

Run: ``python benchmarks/budget_races.py [--tries 10] [--processes 2]``. Each process forks
from this one, so no start-up time sits between the racers. The registries are temporary.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import math
import multiprocessing
import os
import signal
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from test_registry import KILL_POINTS, _killed_at  # noqa: E402

from privsyn_core.cli import main  # noqa: E402
from privsyn_core.privacy.budget import Budget  # noqa: E402
from privsyn_core.privacy.conversion import rho_from_epsilon_delta  # noqa: E402
from privsyn_core.release.registry import Registry, file_fingerprint  # noqa: E402

SOURCE = ROOT / "tests" / "data" / "penguins.csv"
EPSILON = 4.0


def argv(output: Path) -> list[str]:
    return [
        "synthesize", str(SOURCE), "-o", str(output), "--epsilon", str(EPSILON),
        "--iterations", "2", "--seed", "0", "-q",
    ]  # fmt: skip


def racer(command: list[str], go) -> None:
    go.wait(30)
    with contextlib.redirect_stderr(io.StringIO()):
        os._exit(main(command))


def races(tries: int, processes: int) -> None:
    context = multiprocessing.get_context("fork")
    one_run = rho_from_epsilon_delta(EPSILON, 1e-9)
    lifetime = 1.5 * one_run
    dataset = file_fingerprint(SOURCE)
    worst, over = 0.0, 0
    print(f"{processes} runs started together, lifetime budget rho {lifetime:.4f} (1.5 runs)")
    for attempt in range(tries):
        folder = Path(tempfile.mkdtemp(prefix="privsyn-race-"))
        os.environ["PRIVSYN_REGISTRY"] = str(folder / "registry.sqlite3")
        registry = Registry()
        registry.set_lifetime_budget(dataset, SOURCE.name, Budget(lifetime, math.inf))
        go = context.Event()
        outputs = [folder / f"out{k}.csv" for k in range(processes)]
        started = [context.Process(target=racer, args=(argv(o), go)) for o in outputs]
        for process in started:
            process.start()
        go.set()
        for process in started:
            process.join(120)
        written = sum(o.exists() for o in outputs)
        released = written * one_run
        committed = registry.budget(dataset).committed.rho
        worst = max(worst, released / lifetime)
        over += released > lifetime
        print(
            f"  try {attempt}: {written} tables written, released rho <= {released:.4f}, "
            f"registry holds {committed:.4f}"
        )
    print(f"tries past the budget: {over} of {tries}; largest released / budget: {worst:.2f}")


def kills() -> None:
    context = multiprocessing.get_context("fork")
    budget = rho_from_epsilon_delta(EPSILON, 1e-9)
    dataset = file_fingerprint(SOURCE)
    print(f"one run killed with SIGKILL at each point (its budget: rho {budget:.4f})")
    print(f"  {'killed after':<14} {'table':>6} {'registry total':>15} {'held':>8}")
    for point in KILL_POINTS:
        folder = Path(tempfile.mkdtemp(prefix="privsyn-kill-"))
        os.environ["PRIVSYN_REGISTRY"] = str(folder / "registry.sqlite3")
        child = context.Process(target=_killed_at, args=(point, argv(folder / "out.csv")))
        child.start()
        child.join(120)
        killed = child.exitcode == -signal.SIGKILL
        status = Registry().budget(dataset)
        table = (folder / "out.csv").exists()
        print(
            f"  {point:<14} {'yes' if table else 'no':>6} {status.committed.rho:>15.4f} "
            f"{status.held.rho:>8.4f}" + ("" if killed else "  (not reached)")
        )


def run() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tries", type=int, default=10)
    parser.add_argument("--processes", type=int, default=2)
    args = parser.parse_args()
    races(args.tries, args.processes)
    kills()


if __name__ == "__main__":
    run()
