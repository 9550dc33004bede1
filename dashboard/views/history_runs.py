"""Tables about recorded runs, built only from what the registry stored for each run.

A run's record holds its public settings, its ledger as JSON (``PrivacyLedger.to_json``) and
its bundle: DP artifacts and public choices. Nothing here reads the private table, so the
History page can show all of it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

import pandas as pd

from privsyn_core.privacy.ledger import PrivacyUnit
from privsyn_core.release.registry import HeldBudget, RunRecord, TableRecord

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


#: a setting a run's record holds as None (no person column, no declared domain...)
NOT_SET = "not set"

#: hex digits of a fingerprint shown to tell two tables apart (8: one chance in about four
#: billion that two tables of one registry share them)
SHORT_PRINT = 8


def table_name(table: TableRecord) -> str:
    """What its owner calls the table: the name they gave it, else its file name."""
    return table.label or table.name


def table_title(table: TableRecord) -> str:
    """The table's name with what tells it apart from another of that name: its file name
    (when it has a name of its own), numbers of columns and rows when known, and the start of
    its fingerprint, e.g. "raw.csv · 15 columns · 48,842 rows · #1a2b3c4d". Owner-only: the
    rows are a true count and the fingerprint a hash of the values."""
    parts = [table_name(table)]
    if table.label and table.label != table.name:
        parts.append(table.name)
    if table.columns is not None:
        parts.append(f"{table.columns:,} column{'s' * (table.columns != 1)}")
    if table.rows is not None:
        parts.append(f"{table.rows:,} row{'s' * (table.rows != 1)}")
    parts.append(f"#{table.fingerprint[:SHORT_PRINT]}")
    return " · ".join(parts)


def titles(runs: Sequence[RunRecord], tables: Sequence[TableRecord]) -> dict[str, str]:
    """Each runs' table's title by fingerprint; a table the registry did not list (recorded
    since it was read) by the name on its runs."""
    known = {t.fingerprint: t for t in tables}
    return {
        run.fingerprint: table_title(
            known.get(run.fingerprint) or TableRecord(run.fingerprint, run.name, run.created)
        )
        for run in runs
    }


def by_table(runs: Sequence[RunRecord], first: str | None = None) -> dict[str, list[RunRecord]]:
    """The runs of each table, in the order recorded; the tables ``first`` (the one in use)
    first, then by their newest run, newest first."""
    groups: dict[str, list[RunRecord]] = {}
    for run in runs:
        groups.setdefault(run.fingerprint, []).append(run)
    order = sorted(groups, key=lambda fp: (fp != first, -max(r.id for r in groups[fp])))
    return {fp: groups[fp] for fp in order}


def label(run: RunRecord, table: str | None = None) -> str:
    """A run as a choice in a list: its id, ``table`` (when runs of several tables are listed
    together), epsilon and time."""
    epsilon = "-" if run.epsilon is None else f"{run.epsilon:g}"
    on = "" if table is None else f" on {table}"
    return f"run {run.id}{on}: epsilon {epsilon}, {when(run)}"


def comparable(groups: Mapping[str, Sequence[RunRecord]]) -> list[str]:
    """The tables with two runs or more, in the order of ``groups`` (:func:`by_table`): only
    runs of one table are compared, since runs of two tables differ by their data first."""
    return [fp for fp, runs in groups.items() if len(runs) >= 2]


def runs_frame(runs: Sequence[RunRecord]) -> pd.DataFrame:
    """One row per run of one table, newest first (the table is named above it)."""
    return pd.DataFrame(
        [
            {
                "id": run.id,
                "time": when(run),
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
            "id", "time", "epsilon", "delta", "rho", "delta spent", "noise",
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
    """Both runs' stored settings and budget, one row per setting (as text: they mix types;
    a setting left unset reads "not set", never "None", which could be a value)."""

    def described(run: RunRecord) -> dict[str, str]:
        return {
            "table": run.name,
            "time": when(run),
            "noise": run.randomness,
            "rho spent": f"{run.rho:.6g}",
            **{key: NOT_SET if v is None else str(v) for key, v in run.config.items()},
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
