"""A run registry: every finished release, and the budget each dataset has spent so far.

Re-running a synthesis spends budget again, so a release that is lost costs privacy, not
just time. The registry (SQLite from the standard library, one file in the user's data
folder, or wherever ``PRIVSYN_REGISTRY`` points) keeps every finished run with its
configuration, ledger and release bundle, and per dataset fingerprint the cumulative rho
spent across runs, with an optional lifetime budget that warns near its end and refuses past
it.

Writes are single transactions (``BEGIN IMMEDIATE``, WAL journal): a process killed midway
leaves no half-written run, and concurrent writers queue instead of corrupting the file.
The fingerprint is a hash of the private table; it stays on this machine.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from privsyn_core.config import PrivSynConfig
from privsyn_core.data.values import canonical_text
from privsyn_core.privacy.ledger import BudgetExceededError, PrivacyLedger
from privsyn_core.release.bundle import bundle_bytes

if TYPE_CHECKING:
    from privsyn_core.pipeline import SynthesisResult

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
"""


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
    spent_rho: float
    lifetime_rho: float | None

    @property
    def remaining_rho(self) -> float | None:
        return None if self.lifetime_rho is None else self.lifetime_rho - self.spent_rho


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
            spent = db.execute(
                "SELECT COALESCE(SUM(rho), 0) FROM runs WHERE fingerprint = ?", (fingerprint,)
            ).fetchone()[0]
            row = db.execute(
                "SELECT lifetime_rho FROM datasets WHERE fingerprint = ?", (fingerprint,)
            ).fetchone()
        return BudgetStatus(float(spent), None if row is None else row[0])

    def set_lifetime_budget(self, fingerprint: str, name: str, rho: float | None) -> None:
        with self._transaction() as db:
            self._ensure_dataset(db, fingerprint, name)
            db.execute(
                "UPDATE datasets SET lifetime_rho = ? WHERE fingerprint = ?", (rho, fingerprint)
            )

    def check(self, fingerprint: str, rho: float) -> BudgetStatus:
        """Refuse (BudgetExceededError) a run of ``rho`` that would pass the lifetime budget."""
        status = self.budget(fingerprint)
        if status.lifetime_rho is not None and status.spent_rho + rho > status.lifetime_rho:
            raise BudgetExceededError(
                f"this dataset has spent rho {status.spent_rho:.4g} of its lifetime budget "
                f"{status.lifetime_rho:.4g}; a run of rho {rho:.4g} would exceed it. Re-download "
                f"an earlier release instead, or raise the lifetime budget deliberately"
            )
        return status

    def record(
        self,
        fingerprint: str,
        name: str,
        ledger: PrivacyLedger,
        config: dict,
        bundle: bytes | None = None,
    ) -> int:
        """Store a finished run atomically and return its id (checks the lifetime budget
        inside the same transaction, so two concurrent runs cannot both slip past it)."""
        import warnings

        rho = ledger.spent_rho
        with self._transaction() as db:
            self._ensure_dataset(db, fingerprint, name)
            spent, lifetime = db.execute(
                "SELECT COALESCE((SELECT SUM(rho) FROM runs WHERE fingerprint = ?), 0), "
                "lifetime_rho FROM datasets WHERE fingerprint = ?",
                (fingerprint, fingerprint),
            ).fetchone()
            if lifetime is not None and spent + rho > lifetime * (1 + 1e-12):
                raise BudgetExceededError(
                    f"recording this run (rho {rho:.4g}) would bring the dataset past its "
                    f"lifetime budget {lifetime:.4g} (already spent {spent:.4g})"
                )
            cursor = db.execute(
                "INSERT INTO runs (fingerprint, created, epsilon, delta, rho, randomness, "
                "config, ledger, bundle) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    fingerprint,
                    time.time(),
                    ledger.epsilon,
                    ledger.delta,
                    rho,
                    ledger.randomness,
                    json.dumps(config, sort_keys=True, default=str),
                    json.dumps(ledger.to_json()),
                    bundle,
                ),
            )
            run_id = int(cursor.lastrowid)
        if lifetime is not None and spent + rho > WARN_SHARE * lifetime:
            warnings.warn(
                f"this dataset has now spent rho {spent + rho:.4g} of its lifetime budget "
                f"{lifetime:.4g}",
                BudgetWarning,
                stacklevel=2,
            )
        return run_id

    def runs(self, fingerprint: str | None = None) -> list[RunRecord]:
        query = (
            "SELECT id, fingerprint, created, epsilon, delta, rho, randomness, config, ledger, "
            "bundle IS NOT NULL, name FROM runs JOIN datasets USING (fingerprint)"
        )
        arguments: tuple = ()
        if fingerprint is not None:
            query += " WHERE fingerprint = ?"
            arguments = (fingerprint,)
        with self._connection() as db:
            rows = db.execute(query + " ORDER BY id", arguments).fetchall()
        return [
            RunRecord(r[0], r[1], r[2], r[3], r[4], r[5], r[6], json.loads(r[7]),
                      json.loads(r[8]), bool(r[9]), r[10])
            for r in rows
        ]  # fmt: skip

    def run(self, run_id: int) -> RunRecord:
        matches = [r for r in self.runs() if r.id == run_id]
        if not matches:
            raise KeyError(f"no run {run_id} in {self.path}")
        return matches[0]

    def record_result(
        self,
        fingerprint: str,
        name: str,
        result: SynthesisResult,
        config: PrivSynConfig,
        settings: dict,
    ) -> tuple[int, bytes | None]:
        """Record a finished synthesis with its release bundle, so the release can be
        downloaded again later without spending anything. Runs that are not end-to-end DP
        (domains read off the raw data) get no bundle. Returns the run id and the bundle."""
        bundle = bundle_bytes(result, config) if result.end_to_end_dp else None
        return self.record(fingerprint, name, result.ledger, settings, bundle), bundle

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
