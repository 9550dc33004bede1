"""Tables about recorded runs, built only from what the registry stored for each run.

A run's record holds its public settings, its ledger as JSON (``PrivacyLedger.to_json``) and
its bundle: DP artifacts and public choices. Nothing here reads the private table, so the
History page can show all of it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import pandas as pd

from privsyn_core.privacy.ledger import PrivacyUnit
from privsyn_core.release.registry import HeldBudget, RunRecord

#: ledger steps in the order the pipeline spends them
STEP_ORDER = ("domain", "one_way", "indif", "marginal")


def when(run: RunRecord) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(run.created))


def selected_marginals(run: RunRecord) -> list[str]:
    """The marginals PrivSyn selected and measured in this run, as "a x b" labels."""
    return [
        " x ".join(m["attributes"]) for m in run.ledger["measurements"] if m["step"] == "marginal"
    ]


def rho_by_step(run: RunRecord) -> dict[str, float]:
    """rho spent per pipeline step, from the stored ledger's measurements."""
    spent: dict[str, float] = {}
    for m in run.ledger["measurements"]:
        spent[m["step"]] = spent.get(m["step"], 0.0) + m["rho"]
    known = [s for s in STEP_ORDER if s in spent]
    return {s: spent[s] for s in known + sorted(set(spent) - set(known))}


def outcome(run: RunRecord) -> str:
    """The run's outcome: "finished", "cancelled" or "failed: why" (the last two recorded for
    what they spent first)."""
    return str(run.config.get("outcome", "finished"))


def unit(run: RunRecord) -> PrivacyUnit:
    """The unit of the run's guarantee, as its stored ledger states it (per row, or per person
    with at most K rows; a ledger recorded before units existed is per row)."""
    return PrivacyUnit.from_json(run.ledger.get("privacy_unit"))


def units(runs: Sequence[RunRecord]) -> list[PrivacyUnit]:
    """Each unit the runs' guarantees are stated in, once, in the runs' order."""
    return list(dict.fromkeys(unit(run) for run in runs))


def label(run: RunRecord) -> str:
    epsilon = "-" if run.epsilon is None else f"{run.epsilon:g}"
    return f"run {run.id}: {run.name}, epsilon {epsilon}, {when(run)}"


def runs_frame(runs: Sequence[RunRecord]) -> pd.DataFrame:
    """One row per run, newest first."""
    return pd.DataFrame(
        [
            {
                "id": run.id,
                "time": when(run),
                "table": run.name,
                "epsilon": run.epsilon,
                "delta": run.delta,
                "rho": run.rho,
                "delta spent": run.spent_delta,
                "noise": run.randomness,
                "privacy unit": unit(run).words,
                "marginals": len(selected_marginals(run)),
                "bundle": run.has_bundle,
                "outcome": outcome(run).split(":")[0],
            }
            for run in reversed(runs)
        ],
        columns=[
            "id", "time", "table", "epsilon", "delta", "rho", "delta spent", "noise",
            "privacy unit",
            "marginals", "bundle", "outcome",
        ],
    )  # fmt: skip


def held_state(held: HeldBudget) -> str:
    """Whether a reservation's run is still going, or died and left it counted in full."""
    alive = held.process_alive()
    if alive is None:
        return f"held by process {held.pid} on {held.host} (another machine)"
    if alive:
        return f"in progress (process {held.pid})"
    return "stopped without recording its spend: counted in full"


def held_frame(held: Sequence[HeldBudget]) -> pd.DataFrame:
    """One row per reservation not given back, newest first."""
    return pd.DataFrame(
        [
            {
                "since": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(h.created)),
                "rho held": h.rho,
                "delta held": h.delta,
                "by": h.purpose,
                "state": held_state(h),
            }
            for h in reversed(held)
        ],
        columns=["since", "rho held", "delta held", "by", "state"],
    )


def settings_frame(a: RunRecord, b: RunRecord) -> pd.DataFrame:
    """Both runs' stored settings and budget, one row per setting (as text: they mix types)."""

    def described(run: RunRecord) -> dict[str, str]:
        return {
            "table": run.name,
            "time": when(run),
            "noise": run.randomness,
            "rho spent": f"{run.rho:.6g}",
            **{key: str(value) for key, value in run.config.items()},
        }

    left, right = described(a), described(b)
    keys = list(dict.fromkeys([*left, *right]))
    return pd.DataFrame(
        {
            "setting": keys,
            f"run {a.id}": [left.get(k, "") for k in keys],
            f"run {b.id}": [right.get(k, "") for k in keys],
        }
    )


def steps_frame(a: RunRecord, b: RunRecord) -> pd.DataFrame:
    """rho per step for both runs, with the total."""
    left, right = rho_by_step(a), rho_by_step(b)
    steps = list(dict.fromkeys([*left, *right]))
    return pd.DataFrame(
        {
            "step": [*steps, "total"],
            f"run {a.id}": [left.get(s, 0.0) for s in steps] + [a.rho],
            f"run {b.id}": [right.get(s, 0.0) for s in steps] + [b.rho],
        }
    )


def marginals_frame(a: RunRecord, b: RunRecord) -> pd.DataFrame:
    """Every marginal either run selected, and which run selected it."""
    left, right = set(selected_marginals(a)), set(selected_marginals(b))
    names = list(dict.fromkeys([*selected_marginals(a), *selected_marginals(b)]))
    return pd.DataFrame(
        {
            "marginal": names,
            f"run {a.id}": [n in left for n in names],
            f"run {b.id}": [n in right for n in names],
        }
    )
