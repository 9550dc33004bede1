"""A run registry: every finished release, and the budget each dataset has spent so far.

Re-running a synthesis spends budget again, so a release that is lost costs privacy, not
just time. The registry (SQLite from the standard library, one file in the user's data
folder, or wherever ``PRIVSYN_REGISTRY`` points) keeps every finished run with its
configuration, ledger and release bundle, and per dataset fingerprint the cumulative rho
spent across runs, with an optional lifetime budget that warns near its end and refuses past
it. Every cost here is a :class:`~privsyn_core.privacy.budget.Budget`: rho, and the delta of
thresholded releases, which composes by addition like rho (a run that releases categories
spends part of its delta). A lifetime budget is checked on both parts.

**Reserve, then measure.** A run's whole cost is reserved (:meth:`Registry.reserve`) in one
transaction that checks the lifetime budget against everything spent *and* everything held by
other runs, before the run measures anything. Its spend is then recorded against the
reservation (:meth:`Reservation.spend`) before any output is written, and what it did not
spend is returned to the dataset's budget (:meth:`Reservation.return_unspent`) only once it
has ended. So two runs that start together cannot both pass a budget that holds one, and a
process killed at any point leaves at least what it released on the books: a reservation
that is never returned stays counted, with the process that held it (:class:`HeldBudget`).
Every front end (the CLI, the dashboard's runs and its Lab) keeps its books this one way.

Writes are single transactions (``BEGIN IMMEDIATE``, WAL journal): a process killed midway
leaves no half-written run, and concurrent writers queue instead of corrupting the file.
The fingerprint is a hash of the private table; it stays on this machine, with what tells the
owner which table it is (:class:`TableRecord`: the name they gave it, its numbers of columns
and rows).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import socket
import sqlite3
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from privsyn_core.config import PrivSynConfig
from privsyn_core.data.opened import file_bytes_fingerprint
from privsyn_core.data.values import canonical_text
from privsyn_core.errors import InputError
from privsyn_core.privacy.budget import NOTHING, Budget
from privsyn_core.privacy.ledger import BudgetExceededError, FailedAfterSpending, PrivacyLedger
from privsyn_core.release.bundle import bundle_bytes

if TYPE_CHECKING:
    from privsyn_core.generation.synthesis import SynthesisResult

#: share of a lifetime budget after which recording a run warns
WARN_SHARE = 0.8

_SCHEMA = """
CREATE TABLE IF NOT EXISTS datasets (
    fingerprint TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    first_seen REAL NOT NULL,
    lifetime_rho REAL
);
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    fingerprint TEXT NOT NULL REFERENCES datasets(fingerprint),
    created REAL NOT NULL,
    epsilon REAL,
    delta REAL,
    rho REAL NOT NULL,
    randomness TEXT NOT NULL,
    config TEXT NOT NULL,
    ledger TEXT NOT NULL,
    bundle BLOB
);
CREATE INDEX IF NOT EXISTS runs_by_dataset ON runs(fingerprint);
CREATE TABLE IF NOT EXISTS reservations (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    fingerprint TEXT NOT NULL REFERENCES datasets(fingerprint),
    created REAL NOT NULL,
    rho REAL NOT NULL,
    purpose TEXT NOT NULL,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL
);
"""

#: columns added after the first registries were written, with how each is declared; a
#: registry without them gains them when opened (:func:`_migrate`)
_ADDED = (
    # the delta a run's thresholded releases spent (its ledger's spent_delta)
    ("runs", "spent_delta", "REAL"),
    # the delta a reservation holds for thresholded releases
    ("reservations", "delta", "REAL NOT NULL DEFAULT 0"),
    # the lifetime's cap on that delta (NULL with a lifetime rho: set before deltas counted)
    ("datasets", "lifetime_delta", "REAL"),
    # the owner's name for the table, and its number of columns and rows (see TableRecord)
    ("datasets", "label", "TEXT"),
    ("datasets", "columns", "INTEGER"),
    ("datasets", "rows", "INTEGER"),
)

#: the budget a dataset has committed: what its runs spent plus what running (or dead) runs hold
_COMMITTED = (
    "SELECT COALESCE((SELECT SUM(rho) FROM runs WHERE fingerprint = :fp), 0), "
    "COALESCE((SELECT SUM(spent_delta) FROM runs WHERE fingerprint = :fp), 0), "
    "COALESCE((SELECT SUM(rho) FROM reservations WHERE fingerprint = :fp), 0), "
    "COALESCE((SELECT SUM(delta) FROM reservations WHERE fingerprint = :fp), 0), "
    "(SELECT lifetime_rho FROM datasets WHERE fingerprint = :fp), "
    "(SELECT lifetime_delta FROM datasets WHERE fingerprint = :fp)"
)


def default_path() -> Path:
    """``PRIVSYN_REGISTRY``, else ``$XDG_DATA_HOME/privsyn-studio/registry.sqlite3``."""
    if os.environ.get("PRIVSYN_REGISTRY"):
        return Path(os.environ["PRIVSYN_REGISTRY"])
    base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return base / "privsyn-studio" / "registry.sqlite3"


def fingerprint(table: pd.DataFrame) -> str:
    """A stable hash of a table's columns and values (owner-only: it identifies the data).

    Values are hashed as their canonical text, so the same table has the same fingerprint
    whether it was read from CSV (text), from Parquet or built with pandas' inferred types.
    """
    digest = hashlib.sha256()
    digest.update(json.dumps([str(c) for c in table.columns]).encode())
    text = pd.DataFrame({i: canonical_text(table.iloc[:, i]) for i in range(table.shape[1])})
    digest.update(pd.util.hash_pandas_object(text, index=False).to_numpy().tobytes())
    return digest.hexdigest()


def file_fingerprint(path: str | Path) -> str:
    """A stable hash of a table file's bytes (owner-only,
    :func:`~privsyn_core.data.opened.file_bytes_fingerprint`): the fingerprint of a file input
    on every engine, so the same file spends from one budget whichever engine reads it. It
    differs from :func:`fingerprint` of the same table loaded into memory."""
    with Path(path).open("rb") as handle:
        return file_bytes_fingerprint(iter(lambda: handle.read(1 << 20), b""))


def bytes_fingerprint(data: bytes) -> str:
    """:func:`file_fingerprint` of a file holding ``data`` (an uploaded file's bytes)."""
    return file_bytes_fingerprint((data,))


@dataclass(frozen=True)
class RunRecord:
    id: int
    fingerprint: str
    created: float
    #: the (epsilon, delta) the run was asked for (its guarantee's own statement)
    epsilon: float | None
    delta: float | None
    rho: float
    randomness: str
    config: dict
    ledger: dict
    has_bundle: bool
    #: the dataset's name when it was first recorded (a file name; the fingerprint is the key)
    name: str = ""
    #: the delta its thresholded releases spent, on top of rho
    spent_delta: float = 0.0

    @property
    def spent(self) -> Budget:
        """What the run spent: its rho and its thresholds' delta."""
        return Budget(self.rho, self.spent_delta)


@dataclass(frozen=True)
class TableRecord:
    """What the registry knows of a dataset besides its books, to tell its owner which table
    it is: two files both called ``raw.csv`` share a name but not a fingerprint.

    Owner-only, like the fingerprint: ``rows`` is the table's true number of rows, not a DP
    count, so it stays in this file on this machine and never goes into a bundle.
    """

    fingerprint: str
    #: the file name it was first recorded under
    name: str
    first_seen: float
    #: the owner's own name for it (None: none given)
    label: str | None = None
    #: its number of columns and rows when last described (None: not known; a file on disk
    #: is never counted outside a run, so its rows stay None)
    columns: int | None = None
    rows: int | None = None


@dataclass(frozen=True)
class BudgetStatus:
    """A dataset's books: what its runs spent, what running (or dead) runs hold, and its
    lifetime allowance (None: no lifetime budget)."""

    spent: Budget
    lifetime: Budget | None
    held: Budget = NOTHING

    @property
    def committed(self) -> Budget:
        """Spent plus held: what the lifetime budget is checked against."""
        return self.spent + self.held

    @property
    def remaining(self) -> Budget | None:
        """What is left of the lifetime budget (None: no lifetime budget)."""
        return None if self.lifetime is None else self.committed.left_of(self.lifetime)


@dataclass(frozen=True)
class HeldBudget:
    """Budget a run reserved and has not given back: it is still running, or its process
    died before it could record what it spent (then the whole of it stays counted, since
    nobody can tell what it measured or released)."""

    id: int
    fingerprint: str
    created: float
    rho: float
    #: which front end reserved it and with which public settings
    purpose: str
    host: str
    pid: int
    #: the delta held for its thresholded releases
    delta: float = 0.0

    def process_alive(self) -> bool | None:
        """Whether the process that holds it still runs (None: it ran on another machine)."""
        if self.host != socket.gethostname():
            return None
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:  # another user's process
            return True
        return True


class BudgetWarning(UserWarning):
    """A run brings a dataset past ``WARN_SHARE`` of its lifetime budget."""


class Registry:
    """The registry file at ``path`` (created on first use)."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else default_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._connection() as db:
            db.executescript(_SCHEMA)
            older = _written_before(db)
        if older:  # a write lock only for a file an earlier version wrote, once
            with self._transaction() as db:
                _migrate(db)

    @contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA foreign_keys=ON")
            yield db
        finally:
            db.close()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._connection() as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    def budget(self, fingerprint: str) -> BudgetStatus:
        with self._connection() as db:
            return _status(db, fingerprint)

    def set_lifetime_budget(self, fingerprint: str, name: str, lifetime: Budget | None) -> None:
        """Set (or with None clear) the dataset's lifetime allowance, both parts."""
        rho, delta = (None, None) if lifetime is None else (lifetime.rho, lifetime.delta)
        if delta is not None and math.isinf(delta):
            delta = None  # stored as "not capped"
        with self._transaction() as db:
            self._ensure_dataset(db, fingerprint, name)
            db.execute(
                "UPDATE datasets SET lifetime_rho = ?, lifetime_delta = ? WHERE fingerprint = ?",
                (rho, delta, fingerprint),
            )

    def reserve(self, fingerprint: str, name: str, cost: Budget, purpose: str) -> Reservation:
        """Hold ``cost`` of the dataset's budget for a run that is about to measure: checked
        against the lifetime budget (both parts) and recorded in one transaction, so
        concurrent runs queue here and the second one past the budget is refused before it
        measures anything (BudgetExceededError). ``purpose`` is shown while it is held
        (public settings only). Warns (BudgetWarning) past ``WARN_SHARE`` of either part."""
        with self._transaction() as db:
            self._ensure_dataset(db, fingerprint, name)
            status = _status(db, fingerprint)
            _refuse_past_lifetime(status, cost)
            cursor = db.execute(
                "INSERT INTO reservations (fingerprint, created, rho, delta, purpose, host, pid) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    fingerprint,
                    time.time(),
                    cost.rho,
                    cost.delta,
                    purpose,
                    socket.gethostname(),
                    os.getpid(),
                ),
            )
            held = _inserted_id(cursor)
        _warn_near_lifetime(status, cost)
        return Reservation(self, held, fingerprint, name, cost)

    def held(self, fingerprint: str | None = None) -> list[HeldBudget]:
        """Reservations not given back: runs in progress, and runs whose process died."""
        query = "SELECT id, fingerprint, created, rho, purpose, host, pid, delta FROM reservations"
        return [HeldBudget(*row) for row in self._rows(query, fingerprint)]

    def runs(self, fingerprint: str | None = None) -> list[RunRecord]:
        query = (
            "SELECT id, fingerprint, created, epsilon, delta, rho, randomness, config, ledger, "
            "bundle IS NOT NULL, name, spent_delta FROM runs JOIN datasets USING (fingerprint)"
        )
        return [
            RunRecord(r[0], r[1], r[2], r[3], r[4], r[5], r[6], json.loads(r[7]),
                      json.loads(r[8]), bool(r[9]), r[10], r[11] or 0.0)
            for r in self._rows(query, fingerprint)
        ]  # fmt: skip

    def tables(self, fingerprint: str | None = None) -> list[TableRecord]:
        """Every dataset the registry knows (only ``fingerprint``'s unless it is None)."""
        query = "SELECT fingerprint, name, first_seen, label, columns, rows FROM datasets"
        arguments: tuple = ()
        if fingerprint is not None:
            query += " WHERE fingerprint = ?"
            arguments = (fingerprint,)
        with self._connection() as db:
            rows = db.execute(query + " ORDER BY first_seen", arguments).fetchall()
        return [TableRecord(*row) for row in rows]

    def describe_table(
        self, fingerprint: str, name: str, columns: int, rows: int | None = None
    ) -> None:
        """Store the dataset's number of columns and, when known, rows (see
        :class:`TableRecord`); a row count already stored is kept when ``rows`` is None."""
        with self._transaction() as db:
            self._ensure_dataset(db, fingerprint, name)
            db.execute(
                "UPDATE datasets SET columns = ?, rows = COALESCE(?, rows) WHERE fingerprint = ?",
                (columns, rows, fingerprint),
            )

    def name_table(self, fingerprint: str, name: str, label: str | None) -> None:
        """Give the dataset the owner's own name (None or blank: take it away)."""
        label = (label or "").strip() or None
        with self._transaction() as db:
            self._ensure_dataset(db, fingerprint, name)
            db.execute("UPDATE datasets SET label = ? WHERE fingerprint = ?", (label, fingerprint))

    def _rows(self, query: str, fingerprint: str | None) -> list[tuple]:
        """``query``'s rows in id order, only those of ``fingerprint`` unless it is None."""
        arguments: tuple = ()
        if fingerprint is not None:
            query += " WHERE fingerprint = ?"
            arguments = (fingerprint,)
        with self._connection() as db:
            return db.execute(query + " ORDER BY id", arguments).fetchall()

    def run(self, run_id: int) -> RunRecord:
        matches = [r for r in self.runs() if r.id == run_id]
        if not matches:
            raise KeyError(f"no run {run_id} in {self.path}")
        return matches[0]

    def bundle(self, run_id: int) -> bytes | None:
        with self._connection() as db:
            row = db.execute("SELECT bundle FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            raise KeyError(f"no run {run_id} in {self.path}")
        return row[0]

    @staticmethod
    def _ensure_dataset(db: sqlite3.Connection, fingerprint: str, name: str) -> None:
        db.execute(
            "INSERT OR IGNORE INTO datasets (fingerprint, name, first_seen) VALUES (?, ?, ?)",
            (fingerprint, name, time.time()),
        )


class Reservation:
    """Budget one run holds (:meth:`Registry.reserve`): its spends are recorded against it,
    and what it did not spend is returned to the dataset's budget when it ends
    (:meth:`return_unspent`). A process that dies never returns it, so the registry's total
    stays at least what the run released.

    As a context manager it returns the unspent rest when the block ends normally or with an
    input error raised before anything was measured; any other exception (a failure after
    spending, :class:`~privsyn_core.errors.FailedAfterSpending`, an interruption, a bug)
    keeps the reservation unless the caller recorded what was spent and returned the rest
    itself, since what the run measured and showed before it stopped is otherwise unknown.
    """

    def __init__(
        self, registry: Registry, held: int, fingerprint: str, name: str, cost: Budget
    ) -> None:
        self.registry, self.id = registry, held
        self.fingerprint, self.name, self.cost = fingerprint, name, cost
        self.spent = NOTHING
        self.run_ids: list[int] = []
        self.open = True

    def spend(self, ledger: PrivacyLedger, config: dict, bundle: bytes | None = None) -> int:
        """Record what a measurement spent, moving it from the reservation to a run row in
        one transaction (the total never dips), and return the run's id. A spend larger
        than what is still held is recorded all the same: a spend is a fact."""
        if not self.open:
            raise RuntimeError(f"reservation {self.id} has ended: its unspent budget was returned")
        spent = ledger.spent
        with self.registry._transaction() as db:
            run_id = _insert_run(db, self.fingerprint, ledger, config, bundle)
            db.execute(
                "UPDATE reservations SET rho = MAX(0, rho - ?), delta = MAX(0, delta - ?) "
                "WHERE id = ?",
                (spent.rho, spent.delta, self.id),
            )
        self.spent = self.spent + spent
        self.run_ids.append(run_id)
        return run_id

    def record_result(
        self, result: SynthesisResult, config: PrivSynConfig, settings: dict
    ) -> tuple[int, bytes | None]:
        """:meth:`spend` for a finished synthesis, with its release bundle, so the release can
        be downloaded again later without spending anything. Runs that are not end-to-end DP
        (domains read off the raw data) get no bundle. Returns the run id and the bundle."""
        bundle = bundle_bytes(result, config) if result.end_to_end_dp else None
        return self.spend(result.ledger, settings, bundle), bundle

    def return_unspent(self) -> None:
        """Return what the run did not spend to the dataset's budget, ending the reservation:
        the run has ended and will measure nothing more. (It publishes nothing: a release is
        written by the run, once its spend is recorded.)"""
        if self.open:
            with self.registry._transaction() as db:
                db.execute("DELETE FROM reservations WHERE id = ?", (self.id,))
            self.open = False

    def __enter__(self) -> Reservation:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, *_: object
    ) -> None:
        if kind is None or (
            isinstance(error, InputError) and not isinstance(error, FailedAfterSpending)
        ):
            self.return_unspent()


def _status(db: sqlite3.Connection, fingerprint: str) -> BudgetStatus:
    spent, spent_delta, held, held_delta, lifetime, lifetime_delta = db.execute(
        _COMMITTED, {"fp": fingerprint}
    ).fetchone()
    return BudgetStatus(
        Budget(float(spent), float(spent_delta)),
        None
        if lifetime is None
        else Budget(lifetime, math.inf if lifetime_delta is None else lifetime_delta),
        Budget(float(held), float(held_delta)),
    )


def refusal(status: BudgetStatus, cost: Budget) -> str:
    """Why a run of ``cost`` does not fit the dataset's lifetime budget: which part it would
    pass and what is committed of it (for the error and for a front end's own message)."""
    assert status.lifetime is not None, "only a lifetime budget refuses"
    committed, lifetime = status.committed, status.lifetime
    after = committed + cost
    parts = [
        f"rho {after.rho:.4g} > {lifetime.rho:.4g}" if after.rho > lifetime.rho else "",
        f"delta {after.delta:.3g} > {lifetime.delta:.3g}" if after.delta > lifetime.delta else "",
    ]
    held = (
        f" (of which {status.held.words} is held by runs in progress, or by runs that died "
        "before recording their spend)"
        if status.held.rho > 0 or status.held.delta > 0
        else ""
    )
    return (
        f"this dataset has committed {committed.words} of its lifetime budget "
        f"({lifetime.words}){held}; a run of up to {cost.words} would exceed it "
        f"({' and '.join(p for p in parts if p)})"
    )


def _refuse_past_lifetime(status: BudgetStatus, cost: Budget) -> None:
    if status.lifetime is None or (status.committed + cost).fits(status.lifetime):
        return
    raise BudgetExceededError(
        f"{refusal(status, cost)}. Re-download an earlier release instead, or raise the "
        "lifetime budget deliberately"
    )


def _warn_near_lifetime(status: BudgetStatus, cost: Budget) -> None:
    """BudgetWarning once ``cost`` more brings the dataset past ``WARN_SHARE`` of either part
    of its lifetime budget (raised at the caller of the registry's method)."""
    lifetime, committed = status.lifetime, status.committed + cost
    if lifetime is None:
        return
    if committed.rho > WARN_SHARE * lifetime.rho or committed.delta > WARN_SHARE * lifetime.delta:
        warnings.warn(
            f"this dataset has now spent or reserved {committed.words} of its lifetime "
            f"budget ({lifetime.words})",
            BudgetWarning,
            stacklevel=3,
        )


def _written_before(db: sqlite3.Connection) -> bool:
    """Whether the registry lacks a column of :data:`_ADDED` or an old run's delta (every
    :class:`Registry` checks; only such a file takes the write lock of :func:`_migrate`)."""
    for table, column, _ in _ADDED:
        if column not in {row[1] for row in db.execute(f"PRAGMA table_info({table})")}:
            return True
    return db.execute("SELECT 1 FROM runs WHERE spent_delta IS NULL LIMIT 1").fetchone() is not None


def _migrate(db: sqlite3.Connection) -> None:
    """Bring a registry written by an earlier version up to this one (in the caller's
    transaction): add the columns of :data:`_ADDED`, and fill each old run's delta from
    the ledger it stored (its ``spent_delta``; the sum of its measurements' deltas when the
    record lacks it; the run's whole delta when the ledger cannot be read, the most it
    could have spent)."""
    for table, column, declared in _ADDED:
        present = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
        if column not in present:
            db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {declared}")
    old = db.execute("SELECT id, delta, ledger FROM runs WHERE spent_delta IS NULL").fetchall()
    for run_id, delta, ledger in old:
        db.execute(
            "UPDATE runs SET spent_delta = ? WHERE id = ?",
            (_stored_delta(ledger, delta), run_id),
        )


def _stored_delta(ledger: str, whole: float | None) -> float:
    """The thresholds' delta a stored ledger record says its run spent (see :func:`_migrate`)."""
    try:
        record = json.loads(ledger)
        stated = record.get("spent_delta")
        if stated is None:
            stated = math.fsum(m.get("delta", 0.0) for m in record.get("measurements", []))
        value = float(stated)
    except (ValueError, TypeError, AttributeError):
        value = math.nan
    if math.isfinite(value) and value >= 0:
        return value
    return float(whole) if whole is not None else 0.0


def _insert_run(
    db: sqlite3.Connection,
    fingerprint: str,
    ledger: PrivacyLedger,
    config: dict,
    bundle: bytes | None,
) -> int:
    cursor = db.execute(
        "INSERT INTO runs (fingerprint, created, epsilon, delta, rho, spent_delta, randomness, "
        "config, ledger, bundle) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            fingerprint,
            time.time(),
            ledger.epsilon,
            ledger.delta,
            ledger.spent_rho,
            ledger.spent_delta,
            ledger.randomness,
            json.dumps(config, sort_keys=True, default=str),
            json.dumps(ledger.to_json()),
            bundle,
        ),
    )
    return _inserted_id(cursor)


def _inserted_id(cursor: sqlite3.Cursor) -> int:
    """The id of the row ``cursor`` has just inserted."""
    assert cursor.lastrowid is not None, "an INSERT sets it"
    return cursor.lastrowid
