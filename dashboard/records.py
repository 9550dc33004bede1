"""The dashboard's side of the run registry: open it with a readable error, reserve a run's
cost against the table's lifetime budget before it measures anything, record what it spent
(with its bundle when done) against that reservation, and give back the rest; and keep with
each dataset what tells its owner which table it is (a name of their own, its size).

This is the registry's one way of keeping books (``privsyn_core.release.registry``: reserve,
then measure) with the dashboard's messages: the worker's runs and the Lab's comparisons both
keep theirs here. A reservation is given back only once what was spent is recorded; a spend
the registry cannot record keeps the whole reservation, so the books never show less than
was spent.

One ``Registry`` per call: it holds only a path and opens a fresh SQLite connection for each
operation, so browser sessions (threads) never share a connection. Nothing here is cached: a
cached registry read would show a stale budget, and the budget check must see every run.
"""

from __future__ import annotations

import sqlite3
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, NoReturn

import streamlit as st

from privsyn_core.config import PrivSynConfig
from privsyn_core.generation.synthesis import SynthesisResult
from privsyn_core.privacy.budget import Budget
from privsyn_core.privacy.conversion import epsilon_from_rho
from privsyn_core.privacy.ledger import BudgetExceededError, FailedAfterSpending, PrivacyLedger
from privsyn_core.privacy.noise import RELEASE
from privsyn_core.release.registry import (
    BudgetStatus,
    BudgetWarning,
    Registry,
    Reservation,
    TableRecord,
    default_path,
)
from privsyn_core.release.registry import refusal as registry_refusal

#: what opening or using the registry file raises (unwritable folder, not a database, locked)
REGISTRY_ERRORS = (OSError, sqlite3.Error)


def unavailable(exc: BaseException) -> str:
    """What is wrong with the registry file and what to do about it, for ``st.error``."""
    return (
        f"The run registry ({default_path()}) cannot be used: {exc}. It keeps every run and the "
        "privacy budget each table has spent, so the dashboard does not run or list runs "
        "without it. Point the PRIVSYN_REGISTRY environment variable at a file in a writable "
        "folder and restart the dashboard."
    )


def stop_with(message: str) -> NoReturn:
    st.error(message)
    st.stop()


def registry_or_stop() -> Registry:
    """The registry, or a readable error that ends the page's script."""
    try:
        return Registry()
    except REGISTRY_ERRORS as exc:
        stop_with(unavailable(exc))


def refusal(status: BudgetStatus, cost: Budget, delta: float) -> str:
    """Why a run was refused (it would pass either part of the lifetime budget) and what to
    do."""
    left = status.remaining
    lower = (
        f"lower epsilon on the Privacy page (about epsilon "
        f"{epsilon_from_rho(left.rho, delta):.3g} is left at delta {delta:g}), "
        if left is not None and left.rho > 0 and cost.delta <= left.delta
        else ""
    )
    return (
        "**Run refused: it would exceed this table's lifetime privacy budget.** "
        f"{_sentence(registry_refusal(status, cost))}. Nothing was measured and no budget "
        "was spent.\n\n"
        "What to do: re-download an earlier release on the History page (free), "
        f"{lower}or raise the lifetime budget on the History page if that is a deliberate "
        "decision."
    )


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:]


def known_table(dataset: str) -> TableRecord | None:
    """What the registry holds about the dataset besides its books (its owner's name for it,
    its size), or None: not recorded yet, or a registry that cannot be used (the pages that
    need the registry say so; the Data page works without it)."""
    try:
        found = Registry().tables(dataset)
    except REGISTRY_ERRORS:
        return None
    return found[0] if found else None


def describe_table(dataset: str, name: str, columns: int, rows: int | None) -> None:
    """Keep the table's numbers of columns and rows with its dataset, so that History can tell
    apart two tables with one file name after either is gone from the session. Written only
    when the registry lacks them: pages call this on every rerun, and a write would queue
    behind a run recording its result. A registry that cannot be used is left to the pages
    that need it to report."""
    known = known_table(dataset)
    if known is not None and known.columns == columns and rows in (None, known.rows):
        return
    try:
        Registry().describe_table(dataset, name, columns, rows)
    except REGISTRY_ERRORS:
        return


def name_table(dataset: str, name: str, label: str) -> str | None:
    """Store the owner's name for the table (blank: none); why it could not be, or None."""
    try:
        Registry().name_table(dataset, name, label)
    except REGISTRY_ERRORS as exc:
        return unavailable(exc)
    return None


@dataclass(frozen=True)
class Held:
    """A run's cost, reserved before it measures anything, and the lifetime-budget warnings
    reserving it raised (for the page: a Python warning would only reach the server log)."""

    reservation: Reservation
    budget_warnings: tuple[str, ...]


def reserve(dataset: str, name: str, cost: Budget, delta: float, purpose: str) -> Held | str:
    """Hold ``cost`` of ``dataset``'s budget for a run about to measure, or say why not (the
    lifetime budget, counting what other runs hold, or a registry that cannot be used);
    ``delta`` is the run's own, at which what is left is stated as epsilon."""
    try:
        registry = Registry()
        with budget_warnings() as notes:
            reservation = registry.reserve(dataset, name, cost, purpose)
    except BudgetExceededError:
        try:
            return refusal(registry.budget(dataset), cost, delta)
        except REGISTRY_ERRORS as exc:
            return unavailable(exc)
    except REGISTRY_ERRORS as exc:
        return unavailable(exc)
    return Held(reservation, tuple(notes))


@dataclass(frozen=True)
class Recorded:
    run_id: int
    bundle: bytes | None
    budget_warnings: tuple[str, ...]


def record(
    held: Held, result: SynthesisResult, config: PrivSynConfig, settings: dict[str, Any]
) -> Recorded:
    """Record a finished run and its bundle against its reservation, then give back what it
    did not spend. Raises one of ``REGISTRY_ERRORS`` when the registry cannot take it (the
    reservation then stays whole)."""
    run_id, bundle = held.reservation.record_result(result, config, settings)
    held.reservation.return_unspent()
    return Recorded(run_id, bundle, held.budget_warnings)


@contextmanager
def budget_warnings() -> Iterator[list[str]]:
    """Collect the registry's BudgetWarning messages raised inside the block; other warnings
    go on as usual."""
    notes: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", BudgetWarning)
        yield notes
    for item in caught:
        if issubclass(item.category, BudgetWarning):
            notes.append(str(item.message))
        else:  # not ours to swallow
            warnings.warn_explicit(item.message, item.category, item.filename, item.lineno)


def record_failure(
    reservation: Reservation, error: FailedAfterSpending, settings: dict[str, Any]
) -> str:
    """Record what a run spent before it failed (its message was computed from DP
    measurements, so the spend is real), as the CLI does; return what the page says."""
    failed = f"The run failed after spending part of its budget: {error}."
    try:
        run_id = reservation.spend(error.ledger, {**settings, "outcome": f"failed: {error}"})
        reservation.return_unspent()
    except REGISTRY_ERRORS as exc:
        return (
            f"{failed} That spend could not be recorded in the run registry ({exc}), so the "
            "run's whole reservation stays counted against the table's budget."
        )
    return f"{failed} Nothing was released; the spend is recorded as run {run_id} (History page)."


def record_interrupted(
    reservation: Reservation, spent: PrivacyLedger | None, settings: dict[str, Any]
) -> int | None:
    """Record what an interrupted (cancelled) run had spent and give back the rest; the run
    id, or None when nothing was spent or the registry cannot take it (then the whole
    reservation stays counted; an interruption is under way: never raise)."""
    try:
        run_id = None
        if spent is not None and spent.spent_rho > 0:
            run_id = reservation.spend(spent, {**settings, "outcome": "cancelled"})
        reservation.return_unspent()
    except REGISTRY_ERRORS:
        return None
    return run_id


def not_recorded(exc: BaseException) -> str:
    """Why a finished run's result is thrown away instead of shown."""
    return (
        f"The run finished but was not recorded (the registry at {default_path()} could not "
        f"be written: {exc}). A run that is not on the record is never offered for release, "
        "so its result was discarded: nothing was released. Its whole reservation stays "
        "counted against the table's budget, since its measurements have used privacy budget."
    )


def no_bundle_reason(run_id: int, not_private: Sequence[str], outcome: str = "") -> str:
    """Why a recorded run has no bundle: it failed after spending, or used raw domains."""
    if outcome.startswith("failed"):
        return (
            f"Run {run_id} has no release bundle: it failed after spending part of its budget "
            f"({outcome}), so nothing was released."
        )
    if outcome == "cancelled":
        return (
            f"Run {run_id} has no release bundle: it was cancelled after spending part of its "
            "budget, so no table was released."
        )
    columns = ", ".join(not_private) or "some columns"
    return (
        f"Run {run_id} has no release bundle: it read the domains of {columns} off the raw data "
        "(the raw-domains switch), so it is not end-to-end differentially private and was "
        "never a release. Declare those domains on the Data page, or turn the switch off, and "
        "run again to get one."
    )


def offer_bundle(
    run_id: int, bundle: bytes | None, randomness: str, why_none: str, key: str
) -> None:
    """A download of a run's stored bundle, labelled for what it is: a release, or a debug run
    that must not be released; without a bundle, ``why_none``."""
    if bundle is None:
        st.info(why_none)
        return
    release = randomness == RELEASE
    if not release:
        st.warning(
            f"Run {run_id} is a debug run (a seed was set; noise: {randomness}). Its bundle is "
            "**NOT for release**: the noise can be replayed. Its manifest says so too."
        )
    st.download_button(
        f"Download the release bundle of run {run_id}"
        if release
        else f"Download run {run_id}'s bundle (debug, NOT for release)",
        data=bundle,
        file_name=f"privsyn-run-{run_id}.zip" if release else f"privsyn-run-{run_id}-DEBUG.zip",
        mime="application/zip",
        key=key,
        on_click="ignore",
    )
    st.caption(
        "The bundle is the registry's stored copy: downloading it again spends no privacy "
        "budget. It holds the synthetic table, the noisy marginals, the released schema, the "
        "ledger, the configuration, the fitted model (for `privsyn generate` and Sample "
        "again) and a SHA-256 manifest."
    )
