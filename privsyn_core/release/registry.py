"""A run registry: every finished release, and the budget each dataset has spent so far.

Re-running a synthesis spends budget again, so a release that is lost costs privacy, not
just time. The registry (SQLite from the standard library, one file in the user's data
folder, or wherever ``PRIVSYN_REGISTRY`` points) keeps every finished run with its
configuration, ledger and release bundle, and per dataset fingerprint the cumulative rho
spent across runs, with an optional lifetime budget that warns near its end and refuses past
it.

**Reserve, then measure.** A run's whole cost is reserved (:meth:`Registry.reserve`) in one
transaction that checks the lifetime budget against everything spent *and* everything held by
other runs, before the run measures anything. Its spend is then recorded against the
reservation (:meth:`Reservation.spend`) before any output is written, and what it did not
spend is given back (:meth:`Reservation.release`) only once it has ended. So two runs that
start together cannot both pass a budget that holds one, and a process killed at any point
leaves at least what it released on the books: a reservation that is never given back stays
counted, with the process that held it (:class:`HeldBudget`). Every front end (the CLI, the
dashboard's runs and its Lab) keeps its books this one way.

Writes are single transactions (``BEGIN IMMEDIATE``, WAL journal): a process killed midway
leaves no half-written run, and concurrent writers queue instead of corrupting the file.
The fingerprint is a hash of the private table; it stays on this machine.
"""

from __future__ import annotations

import hashlib
import json
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
from privsyn_core.data.values import canonical_text
from privsyn_core.errors import InputError
from privsyn_core.privacy.ledger import BudgetExceededError, PrivacyLedger
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

#: the budget a dataset has committed: what its runs spent plus what running (or dead) runs hold
_COMMITTED = (
    "SELECT COALESCE((SELECT SUM(rho) FROM runs WHERE fingerprint = :fp), 0), "
    "COALESCE((SELECT SUM(rho) FROM reservations WHERE fingerprint = :fp), 0), "
    "(SELECT lifetime_rho FROM datasets WHERE fingerprint = :fp)"
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
    """A stable hash of a table file's bytes (owner-only): the fingerprint of a file input on
    every engine, so the same file spends from one budget whichever engine reads it. It
    differs from :func:`fingerprint` of the same table loaded into memory."""
    digest = hashlib.sha256(b"file:")
    with Path(path).open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def bytes_fingerprint(data: bytes) -> str:
    """:func:`file_fingerprint` of a file holding ``data`` (an uploaded file's bytes)."""
    return hashlib.sha256(b"file:" + data).hexdigest()


@dataclass(frozen=True)
class RunRecord:
    id: int
    fingerprint: str
    created: float
    epsilon: float | None
    delta: float | None
    rho: float
    randomness: str
    config: dict
    ledger: dict
    has_bundle: bool
    #: the dataset's name when it was first recorded (a file name; the fingerprint is the key)
    name: str = ""


@dataclass(frozen=True)
class BudgetStatus:
    #: what the dataset's recorded runs spent
    spent_rho: float
    lifetime_rho: float | None
    #: what runs in progress hold, and runs that died before recording their spend
    reserved_rho: float = 0.0

    @property
    def committed_rho(self) -> float:
        """Spent plus held: what the lifetime budget is checked against."""
        return self.spent_rho + self.reserved_rho

    @property
    def remaining_rho(self) -> float | None:
        return None if self.lifetime_rho is None else self.lifetime_rho - self.committed_rho


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

    def set_lifetime_budget(self, fingerprint: str, name: str, rho: float | None) -> None:
        with self._transaction() as db:
            self._ensure_dataset(db, fingerprint, name)
            db.execute(
                "UPDATE datasets SET lifetime_rho = ? WHERE fingerprint = ?", (rho, fingerprint)
            )

    def check(self, fingerprint: str, rho: float) -> BudgetStatus:
        """Refuse (BudgetExceededError) a run of ``rho`` that would pass the lifetime budget
        now. Advice only: another run may reserve in between; :meth:`reserve` is the check
        that holds."""
        status = self.budget(fingerprint)
        _refuse_past_lifetime(status, rho)
        return status

    def reserve(self, fingerprint: str, name: str, rho: float, purpose: str) -> Reservation:
        """Hold ``rho`` of the dataset's budget for a run that is about to measure: checked
        against the lifetime budget and recorded in one transaction, so concurrent runs
        queue here and the second one past the budget is refused before it measures
        anything (BudgetExceededError). ``purpose`` is shown while it is held (public
        settings only). Warns (BudgetWarning) past ``WARN_SHARE`` of the lifetime budget."""
        with self._transaction() as db:
            self._ensure_dataset(db, fingerprint, name)
            status = _status(db, fingerprint)
            _refuse_past_lifetime(status, rho)
            cursor = db.execute(
                "INSERT INTO reservations (fingerprint, created, rho, purpose, host, pid) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (fingerprint, time.time(), rho, purpose, socket.gethostname(), os.getpid()),
            )
            held = _inserted_id(cursor)
        _warn_near_lifetime(status, rho)
        return Reservation(self, held, fingerprint, name, rho)

    def held(self, fingerprint: str | None = None) -> list[HeldBudget]:
        """Reservations not given back: runs in progress, and runs whose process died."""
        query = "SELECT id, fingerprint, created, rho, purpose, host, pid FROM reservations"
        return [HeldBudget(*row) for row in self._rows(query, fingerprint)]

    def record(
        self,
        fingerprint: str,
        name: str,
        ledger: PrivacyLedger,
        config: dict,
        bundle: bytes | None = None,
    ) -> int:
        """Store a spend made outside any reservation (a run that measured before it was
        checked) atomically and return its id; refused (BudgetExceededError) past the
        lifetime budget. Front ends reserve first (:meth:`reserve`) instead."""
        rho = ledger.spent_rho
        with self._transaction() as db:
            self._ensure_dataset(db, fingerprint, name)
            status = _status(db, fingerprint)
            _refuse_past_lifetime(status, rho)
            run_id = _insert_run(db, fingerprint, ledger, config, bundle)
        _warn_near_lifetime(status, rho)
        return run_id

    def runs(self, fingerprint: str | None = None) -> list[RunRecord]:
        query = (
            "SELECT id, fingerprint, created, epsilon, delta, rho, randomness, config, ledger, "
            "bundle IS NOT NULL, name FROM runs JOIN datasets USING (fingerprint)"
        )
        return [
            RunRecord(r[0], r[1], r[2], r[3], r[4], r[5], r[6], json.loads(r[7]),
                      json.loads(r[8]), bool(r[9]), r[10])
            for r in self._rows(query, fingerprint)
        ]  # fmt: skip

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
    and what it did not spend is given back when it ends. A process that dies never gives
    it back, so the registry's total stays at least what the run released.

    As a context manager it gives back the rest when the block ends normally or with an
    input error raised before anything was measured; any other exception (a failure after
    spending, an interruption, a bug) keeps the reservation unless the caller recorded what
    was spent and gave the rest back itself, since what the run measured and showed before
    it stopped is otherwise unknown.
    """

    def __init__(
        self, registry: Registry, held: int, fingerprint: str, name: str, rho: float
    ) -> None:
        self.registry, self.id = registry, held
        self.fingerprint, self.name, self.rho = fingerprint, name, rho
        self.spent_rho = 0.0
        self.run_ids: list[int] = []
        self.open = True

    def spend(self, ledger: PrivacyLedger, config: dict, bundle: bytes | None = None) -> int:
        """Record what a measurement spent, moving it from the reservation to a run row in
        one transaction (the total never dips), and return the run's id. A spend larger
        than what is still held is recorded all the same: a spend is a fact."""
        if not self.open:
            raise RuntimeError(f"reservation {self.id} was already given back")
        rho = ledger.spent_rho
        with self.registry._transaction() as db:
            run_id = _insert_run(db, self.fingerprint, ledger, config, bundle)
            db.execute("UPDATE reservations SET rho = MAX(0, rho - ?) WHERE id = ?", (rho, self.id))
        self.spent_rho += rho
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

    def release(self) -> None:
        """Give back what was not spent: the run has ended and will measure nothing more."""
        if self.open:
            with self.registry._transaction() as db:
                db.execute("DELETE FROM reservations WHERE id = ?", (self.id,))
            self.open = False

    def __enter__(self) -> Reservation:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, *_: object
    ) -> None:
        if kind is None or (isinstance(error, InputError) and not error.spent):
            self.release()


def _status(db: sqlite3.Connection, fingerprint: str) -> BudgetStatus:
    spent, held, lifetime = db.execute(_COMMITTED, {"fp": fingerprint}).fetchone()
    return BudgetStatus(float(spent), lifetime, float(held))


def _refuse_past_lifetime(status: BudgetStatus, rho: float) -> None:
    lifetime = status.lifetime_rho
    if lifetime is None or status.committed_rho + rho <= lifetime * (1 + 1e-12):
        return
    held = (
        f" (of which rho {status.reserved_rho:.4g} is held by runs in progress, or by runs "
        "that died before recording their spend)"
        if status.reserved_rho > 0
        else ""
    )
    raise BudgetExceededError(
        f"this dataset has spent rho {status.committed_rho:.4g} of its lifetime budget "
        f"{lifetime:.4g}{held}; a run of rho {rho:.4g} would exceed it. Re-download an "
        "earlier release instead, or raise the lifetime budget deliberately"
    )


def _warn_near_lifetime(status: BudgetStatus, rho: float) -> None:
    """BudgetWarning once ``rho`` more brings the dataset past ``WARN_SHARE`` of its lifetime
    budget (raised at the caller of the registry's method)."""
    lifetime, committed = status.lifetime_rho, status.committed_rho + rho
    if lifetime is not None and committed > WARN_SHARE * lifetime:
        warnings.warn(
            f"this dataset has now spent or reserved rho {committed:.4g} of its lifetime "
            f"budget {lifetime:.4g}",
            BudgetWarning,
            stacklevel=3,
        )


def _insert_run(
    db: sqlite3.Connection,
    fingerprint: str,
    ledger: PrivacyLedger,
    config: dict,
    bundle: bytes | None,
) -> int:
    cursor = db.execute(
        "INSERT INTO runs (fingerprint, created, epsilon, delta, rho, randomness, config, "
        "ledger, bundle) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            fingerprint,
            time.time(),
            ledger.epsilon,
            ledger.delta,
            ledger.spent_rho,
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
