import math
import multiprocessing
import os
import signal
import sqlite3
import time
import warnings

import pandas as pd
import pytest

from privsyn_core.data.opened import OpenedTable
from privsyn_core.privacy.budget import Budget
from privsyn_core.privacy.conversion import rho_from_epsilon_delta
from privsyn_core.privacy.ledger import BudgetExceededError, Measurement, PrivacyLedger
from privsyn_core.progress import Stage, StageFinished
from privsyn_core.release.registry import (
    BudgetWarning,
    Registry,
    bytes_fingerprint,
    default_path,
    file_fingerprint,
    fingerprint,
)


def spent_ledger(rho: float, delta: float = 0.0) -> PrivacyLedger:
    ledger = PrivacyLedger(budget_rho=rho, epsilon=1.0, delta=1e-9, reserved_delta=delta)
    return ledger.charge(Measurement("marginal", ("a",), 1.0, rho, 1.0, delta=delta))


def record(
    registry: Registry,
    fingerprint: str,
    name: str,
    ledger: PrivacyLedger,
    config: dict,
    bundle: bytes | None = None,
) -> int:
    """A run as every front end keeps its books: reserve, record, return the rest."""
    reservation = registry.reserve(fingerprint, name, ledger.spent, "test")
    run_id = reservation.spend(ledger, config, bundle)
    reservation.return_unspent()
    return run_id


def test_runs_accumulate_per_dataset_and_keep_their_bundles(tmp_path):
    registry = Registry(tmp_path / "r.sqlite3")
    first = record(registry, "fp-a", "a.csv", spent_ledger(0.01), {"seed": 1}, b"zip-1")
    record(registry, "fp-a", "a.csv", spent_ledger(0.02), {"seed": 2})
    record(registry, "fp-b", "b.csv", spent_ledger(0.5), {})
    assert registry.budget("fp-a").spent.rho == pytest.approx(0.03)
    assert registry.budget("fp-b").spent.rho == pytest.approx(0.5)
    runs = registry.runs("fp-a")
    assert [r.config for r in runs] == [{"seed": 1}, {"seed": 2}]
    assert runs[0].has_bundle and not runs[1].has_bundle
    assert registry.bundle(first) == b"zip-1"
    assert runs[0].ledger["spent_rho"] == pytest.approx(0.01)
    # a restart (a new Registry on the same file) sees the same history
    assert len(Registry(tmp_path / "r.sqlite3").runs()) == 3


def test_lifetime_budget_warns_then_refuses(tmp_path):
    registry = Registry(tmp_path / "r.sqlite3")
    registry.set_lifetime_budget("fp", "t.csv", Budget(0.1, math.inf))
    record(registry, "fp", "t.csv", spent_ledger(0.05), {})
    with pytest.warns(BudgetWarning):
        record(registry, "fp", "t.csv", spent_ledger(0.04), {})
    with pytest.raises(BudgetExceededError):
        record(registry, "fp", "t.csv", spent_ledger(0.02), {})
    assert registry.budget("fp").spent.rho == pytest.approx(0.09)  # the refused run left nothing


def _record_many(path: str, start: int) -> None:
    registry = Registry(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i in range(20):
            record(registry, "fp", "t.csv", spent_ledger(0.001), {"i": start + i})


@pytest.mark.slow
def test_concurrent_writers_lose_nothing(tmp_path):
    path = str(tmp_path / "r.sqlite3")
    Registry(path)
    workers = [multiprocessing.Process(target=_record_many, args=(path, k * 100)) for k in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=60)
    registry = Registry(path)
    assert len(registry.runs()) == 80
    assert registry.budget("fp").spent.rho == pytest.approx(0.08)
    assert len({r.id for r in registry.runs()}) == 80


def _killed_mid_write(path: str) -> None:
    registry = Registry(path)
    with registry._transaction() as db:
        registry._ensure_dataset(db, "fp", "t.csv")
        db.execute(
            "INSERT INTO runs (fingerprint, created, rho, randomness, config, ledger) "
            "VALUES ('fp', 0, 1.0, 'release', '{}', '{}')"
        )
        os.kill(os.getpid(), signal.SIGKILL)  # dies before COMMIT


def test_a_process_killed_mid_write_leaves_no_half_record(tmp_path):
    path = str(tmp_path / "r.sqlite3")
    registry = Registry(path)
    finished = record(registry, "fp", "t.csv", spent_ledger(0.01), {}, b"release-zip-bytes")
    process = multiprocessing.Process(target=_killed_mid_write, args=(path,))
    process.start()
    process.join(timeout=30)
    assert process.exitcode == -signal.SIGKILL
    time.sleep(0.1)
    after = Registry(path)
    assert len(after.runs()) == 1 and after.budget("fp").spent.rho == pytest.approx(0.01)
    assert sqlite3.connect(path).execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert after.bundle(finished) == b"release-zip-bytes"  # the finished release is intact


def test_fingerprint_and_location(tmp_path, monkeypatch):
    table = pd.DataFrame({"a": [1, 2], "b": ["x", "y"]})
    assert fingerprint(table) == fingerprint(table.copy())
    assert fingerprint(table) != fingerprint(table.assign(a=[1, 3]))
    monkeypatch.setenv("PRIVSYN_REGISTRY", str(tmp_path / "elsewhere.db"))
    assert default_path() == tmp_path / "elsewhere.db"


def test_a_file_has_one_fingerprint_by_path_opening_or_upload(tmp_path):
    """The CLI hashes a path, the server an opened file, the Data page uploaded bytes: the
    same file must spend from one budget whichever way it arrived."""
    rows = "\n".join(f"{i},{i * 7 % 13},text {i}" for i in range(150_000))
    data = f"a,b,c\n{rows}\n".encode()
    assert len(data) > 2 * (1 << 20)  # read in more than one block by every path
    path = tmp_path / "table.csv"
    path.write_bytes(data)
    with OpenedTable.open(path) as opened, OpenedTable.open(path, proc=False) as copied:
        by_opening, by_copy = opened.fingerprint(), copied.fingerprint()
    assert file_fingerprint(path) == by_opening == by_copy == bytes_fingerprint(data)
    path.write_bytes(data[:-2] + b"4\n")  # one byte changed
    assert file_fingerprint(path) != by_opening
    assert file_fingerprint(path) != fingerprint(pd.read_csv(path))  # a file is not its values


@pytest.mark.slow
def test_the_cli_records_runs_and_refuses_past_a_lifetime_budget(tmp_path, capsys):
    from conftest import ROOT

    from privsyn_core.cli import main
    from privsyn_core.privacy.conversion import rho_from_epsilon_delta

    source = ROOT / "tests" / "data" / "penguins.csv"
    argv = ["synthesize", str(source), "--epsilon", "4", "--iterations", "3", "-q"]
    assert main([*argv, "-o", str(tmp_path / "one.csv")]) == 0
    assert main([*argv, "-o", str(tmp_path / "two.csv")]) == 0
    registry = Registry()
    dataset = file_fingerprint(source)  # a file is known by its bytes, on every engine
    assert len(registry.runs(dataset)) == 2
    one_run = registry.runs(dataset)[0].rho
    # private categories reserve half of delta, so a run costs a little under the rho of
    # (4, 1e-9); the CLI's up-front check uses the full figure, erring on the safe side
    assert one_run <= rho_from_epsilon_delta(4.0, 1e-9)
    assert registry.budget(dataset).spent.rho == pytest.approx(2 * one_run)
    assert main(["runs", "list", str(source)]) == 0
    assert len([line for line in capsys.readouterr().out.splitlines() if "release" in line]) == 2
    registry.set_lifetime_budget(dataset, "penguins.csv", Budget(2.5 * one_run, math.inf))
    assert main([*argv, "-o", str(tmp_path / "three.csv")]) == 2
    assert "lifetime budget" in capsys.readouterr().err
    assert not (tmp_path / "three.csv").exists()
    assert main(["runs", "show", "1"]) == 0
    assert '"ledger"' in capsys.readouterr().out


@pytest.mark.slow
def test_every_dp_run_keeps_its_bundle_and_runs_export_writes_it_again(tmp_path, capsys):
    import hashlib
    import json
    import zipfile

    from conftest import ROOT

    from privsyn_core.cli import main

    source = ROOT / "tests" / "data" / "penguins.csv"
    argv = ["synthesize", str(source), "--epsilon", "4", "--iterations", "3", "-q"]
    assert main([*argv, "-o", str(tmp_path / "a.csv"), "--bundle", str(tmp_path / "a.zip")]) == 0
    assert main([*argv, "-o", str(tmp_path / "b.csv")]) == 0  # no --bundle: still stored
    assert main([*argv, "-o", str(tmp_path / "c.csv"), "--raw-domains"]) == 0
    first, second, raw = Registry().runs()
    assert first.has_bundle and second.has_bundle and not raw.has_bundle
    capsys.readouterr()

    assert main(["runs", "export", str(first.id), "-o", str(tmp_path / "again.zip")]) == 0
    assert (tmp_path / "again.zip").read_bytes() == (tmp_path / "a.zip").read_bytes()
    assert main(["runs", "export", str(second.id), "-o", str(tmp_path / "b.zip")]) == 0
    with zipfile.ZipFile(tmp_path / "b.zip") as bundle:
        manifest = json.loads(bundle.read("manifest.json"))
        for name, digest in manifest["files"].items():
            assert hashlib.sha256(bundle.read(name)).hexdigest() == digest
        exported = pd.read_csv(bundle.open("synthetic.csv"))
    assert exported.equals(pd.read_csv(tmp_path / "b.csv"))
    # exports read the registry only: the dataset's spend is still what its three runs cost
    assert Registry().budget(first.fingerprint).spent.rho == pytest.approx(
        first.rho + second.rho + raw.rho
    )

    capsys.readouterr()
    assert main(["runs", "export", str(raw.id), "-o", str(tmp_path / "raw.zip")]) == 2
    message = capsys.readouterr().err.strip()
    assert "no release bundle" in message and len(message.splitlines()) == 1
    assert main(["runs", "export", "999", "-o", str(tmp_path / "none.zip")]) == 2
    assert "no run 999" in capsys.readouterr().err
    # the registry it reads is no place for a bundle: refused, the registry intact
    assert main(["runs", "export", str(first.id), "-o", str(Registry().path)]) == 2
    assert "it is the run registry" in capsys.readouterr().err
    assert len(Registry().runs()) == 3
    assert not (tmp_path / "raw.zip").exists() and not (tmp_path / "none.zip").exists()


def test_a_run_that_fails_after_spending_is_recorded_with_its_spend(tmp_path, capsys):
    from privsyn_core.cli import main

    source = tmp_path / "ids.csv"
    pd.DataFrame({"id": [f"user-{i}" for i in range(300)]}).to_csv(source, index=False)
    target = tmp_path / "out.csv"
    assert main(["synthesize", str(source), "-o", str(target), "--epsilon", "1", "-q"]) == 2
    message = capsys.readouterr().err.strip()
    assert "no column is left" in message and "recorded as run 1" in message
    assert len(message.splitlines()) == 1 and not target.exists()
    (run,) = Registry().runs()
    assert run.rho > 0 and not run.has_bundle
    assert run.config["outcome"].startswith("failed")
    # the structure, then the categories' first estimate and, as it released nothing, the
    # second (DomainSplit), then the identifier check it points to (300 rows are too few to
    # tell an id from free text): every spend before the failure is recorded
    steps = [e["step"] for e in run.ledger["measurements"]]
    assert steps == ["structure", "domain", "domain", "identifier"]


@pytest.mark.slow
def test_a_cli_run_interrupted_during_gum_records_what_it_had_spent(tmp_path, capsys, monkeypatch):
    from conftest import ROOT

    from privsyn_core import GumProgress, cli
    from privsyn_core.command_terminal import ProgressBar

    shown = ProgressBar.__call__

    def interrupt_in_gum(bar, event):
        shown(bar, event)
        if isinstance(event, GumProgress):  # Ctrl-C once GUM's error has been shown
            raise KeyboardInterrupt

    monkeypatch.setattr(ProgressBar, "__call__", interrupt_in_gum)
    target = tmp_path / "out.csv"
    coded, domain = ROOT / "assets" / "adult-coded.csv", ROOT / "assets" / "adult-coded-domain.json"
    argv = ["synthesize", str(coded), "-o", str(target), "--domain", str(domain), "--epsilon", "1"]
    assert cli.main(argv) == 130
    assert "recorded as run 1" in capsys.readouterr().err and not target.exists()
    (run,) = Registry().runs()
    assert run.config["outcome"] == "interrupted" and not run.has_bundle
    # every measurement precedes GUM: the whole budget was spent
    assert run.rho == pytest.approx(run.ledger["budget_rho"])


# --------------------------------------------------------------------------------------------
# reserve, then measure: the lifetime budget holds under races and kills (issue 21)
# --------------------------------------------------------------------------------------------


def test_a_reservation_holds_budget_until_its_spend_is_recorded_and_the_rest_given_back(tmp_path):
    registry = Registry(tmp_path / "r.sqlite3")
    registry.set_lifetime_budget("fp", "t.csv", Budget(1.0, math.inf))
    reservation = registry.reserve("fp", "t.csv", Budget(0.6), "privsyn synthesize, epsilon 1")
    assert registry.budget("fp").committed.rho == pytest.approx(0.6)
    assert registry.budget("fp").spent.rho == 0.0 and registry.runs() == []
    (held,) = registry.held("fp")
    assert held.rho == pytest.approx(0.6) and held.process_alive() is True
    with pytest.raises(BudgetExceededError, match="held by runs in progress"):
        registry.reserve("fp", "t.csv", Budget(0.5), "a second run")
    run_id = reservation.spend(spent_ledger(0.4), {"outcome": "finished"})
    # moved from held to spent in one transaction: the total did not dip
    assert registry.budget("fp").committed.rho == pytest.approx(0.6)
    assert registry.held("fp")[0].rho == pytest.approx(0.2)
    reservation.return_unspent()
    assert registry.held() == [] and [r.id for r in registry.runs()] == [run_id]
    assert registry.budget("fp").committed.rho == pytest.approx(0.4)
    with pytest.warns(
        BudgetWarning, match=r"spent or reserved rho 1, delta 0 of its lifetime budget \(rho 1,"
    ):
        registry.reserve("fp", "t.csv", Budget(0.6), "now it fits").return_unspent()


def test_a_reservation_as_a_block_keeps_its_budget_unless_nothing_was_measured(tmp_path):
    from privsyn_core.errors import InputError
    from privsyn_core.privacy.ledger import FailedAfterSpending

    registry = Registry(tmp_path / "r.sqlite3")
    with registry.reserve("fp", "t.csv", Budget(0.5), "clean"):
        pass
    with pytest.raises(InputError), registry.reserve("fp", "t.csv", Budget(0.5), "refused early"):
        raise InputError("a bad domain, found before measuring")
    assert registry.held() == []
    with (
        pytest.raises(FailedAfterSpending),
        registry.reserve("fp", "t.csv", Budget(0.5), "failed late"),
    ):
        raise FailedAfterSpending("no column left", spent_ledger(0.1))
    with pytest.raises(ZeroDivisionError), registry.reserve("fp", "t.csv", Budget(0.25), "a bug"):
        raise ZeroDivisionError
    # what those two measured is unknown to the registry: both reservations stay whole
    assert sorted(h.rho for h in registry.held()) == [0.25, 0.5]


def test_a_dead_processs_reservation_stays_counted_and_says_so(tmp_path):
    path = str(tmp_path / "r.sqlite3")
    Registry(path).set_lifetime_budget("fp", "t.csv", Budget(1.0, math.inf))
    child = multiprocessing.get_context("fork").Process(target=_reserve_and_die, args=(path,))
    child.start()
    child.join(timeout=60)
    assert child.exitcode == -signal.SIGKILL
    registry = Registry(path)
    (held,) = registry.held("fp")
    assert held.rho == pytest.approx(0.7) and held.process_alive() is False
    assert registry.budget("fp").remaining.rho == pytest.approx(0.3)
    with pytest.raises(BudgetExceededError):
        registry.reserve("fp", "t.csv", Budget(0.5), "after the crash")


def test_runs_list_shows_what_a_dead_run_still_holds(tmp_path, monkeypatch, capsys):
    from privsyn_core.cli import main

    path = str(tmp_path / "r.sqlite3")
    monkeypatch.setenv("PRIVSYN_REGISTRY", path)
    child = multiprocessing.get_context("fork").Process(target=_reserve_and_die, args=(path,))
    child.start()
    child.join(timeout=60)
    assert main(["runs", "list"]) == 0
    out = capsys.readouterr().out.splitlines()
    (line,) = [line for line in out if "stopped before recording" in line]
    assert "0.7" in line and "stopped before recording its spend (killed mid-run)" in line
    (books,) = [line for line in out if line.startswith("dataset ")]
    assert "together rho 0.7, delta 0 spent or held" in books and "no lifetime budget" in books


def _reserve_and_die(path: str) -> None:
    Registry(path).reserve("fp", "t.csv", Budget(0.7), "killed mid-run")
    os.kill(os.getpid(), signal.SIGKILL)


def _race_to_reserve(path: str, go, rho: float, released) -> None:
    """One of many processes started together: reserve, measure (a spend), release."""
    go.wait(30)
    try:
        reservation = Registry(path).reserve("fp", "t.csv", Budget(rho), "race")
    except BudgetExceededError:
        os._exit(0)
    time.sleep(0.01)  # the measurement
    reservation.spend(spent_ledger(rho), {})
    with released.get_lock():
        released.value += rho  # the table is written only now, after the books
    reservation.return_unspent()
    os._exit(0)


@pytest.mark.slow
def test_processes_racing_for_one_lifetime_budget_never_release_more_than_it(tmp_path):
    context = multiprocessing.get_context("fork")
    rho, lifetime, tries, processes = 0.1, 0.25, 25, 6
    for attempt in range(tries):
        path = str(tmp_path / f"r{attempt}.sqlite3")
        Registry(path).set_lifetime_budget("fp", "t.csv", Budget(lifetime, math.inf))
        go, released = context.Event(), context.Value("d", 0.0)
        racers = [
            context.Process(target=_race_to_reserve, args=(path, go, rho, released))
            for _ in range(processes)
        ]
        for racer in racers:
            racer.start()
        go.set()
        for racer in racers:
            racer.join(timeout=60)
        assert [r.exitcode for r in racers] == [0] * processes
        registry = Registry(path)
        assert released.value == pytest.approx(2 * rho)  # two fit; the other four are refused
        assert registry.budget("fp").committed.rho == pytest.approx(released.value)
        assert registry.budget("fp").committed.rho <= lifetime


def _synthesize_in_race(argv: list[str], go) -> None:
    import contextlib
    import io

    from privsyn_core.cli import main

    go.wait(30)
    with contextlib.redirect_stderr(io.StringIO()):
        status = main(argv)
    os._exit(status)


def _penguins_argv(tmp_path, output: str, *extra: str) -> list[str]:
    from conftest import ROOT

    source = ROOT / "tests" / "data" / "penguins.csv"
    return [
        "synthesize", str(source), "-o", str(tmp_path / output), "--epsilon", "4",
        "--iterations", "2", "--seed", "0", "-q", *extra,
    ]  # fmt: skip


@pytest.mark.slow
def test_cli_runs_started_together_never_release_more_than_the_lifetime_budget(
    tmp_path, monkeypatch
):
    """The issue's case: runs started at the same moment against a lifetime budget that
    holds 1.5 of them. Before reservations, both tables were written in 8 of 10 tries."""
    from conftest import ROOT

    dataset = file_fingerprint(ROOT / "tests" / "data" / "penguins.csv")
    one_run = rho_from_epsilon_delta(4.0, 1e-9)
    context = multiprocessing.get_context("fork")
    tries, processes = 4, 3
    for attempt in range(tries):
        monkeypatch.setenv("PRIVSYN_REGISTRY", str(tmp_path / f"r{attempt}.sqlite3"))
        registry = Registry()
        registry.set_lifetime_budget(dataset, "penguins.csv", Budget(1.5 * one_run, math.inf))
        go = context.Event()
        outputs = [f"o{attempt}-{k}.csv" for k in range(processes)]
        racers = [
            context.Process(target=_synthesize_in_race, args=(_penguins_argv(tmp_path, o), go))
            for o in outputs
        ]
        for racer in racers:
            racer.start()
        go.set()
        for racer in racers:
            racer.join(timeout=120)
        written = [o for o in outputs if (tmp_path / o).exists()]
        assert sorted(r.exitcode for r in racers) == [0] + [2] * (processes - 1)
        assert len(written) == 1
        (run,) = registry.runs(dataset)
        assert registry.held() == []
        assert registry.budget(dataset).committed.rho == pytest.approx(run.rho)
        assert run.rho <= 1.5 * one_run


#: where a CLI run is killed: after reserving, after each stage, after its books, after its
#: table is written
KILL_POINTS = ["reserved", *(stage.value for stage in Stage), "recorded", "written"]


def _killed_at(point: str, argv: list[str]) -> None:
    import contextlib
    import io

    from privsyn_core.cli import main
    from privsyn_core.command_terminal import ProgressBar
    from privsyn_core.data.streamed import TableFile
    from privsyn_core.release import registry as registry_module

    def die() -> None:
        os.kill(os.getpid(), signal.SIGKILL)

    def after(function, condition=lambda *a: True):
        def wrapped(*args, **kwargs):
            value = function(*args, **kwargs)
            if condition(*args):
                die()
            return value

        return wrapped

    if point == "reserved":
        registry_module.Registry.reserve = after(registry_module.Registry.reserve)
    elif point == "recorded":
        registry_module.Reservation.record_result = after(registry_module.Reservation.record_result)
    elif point == "written":  # the synthetic table moved into place
        TableFile.commit = after(TableFile.commit)
    else:
        ProgressBar.__call__ = after(
            ProgressBar.__call__,
            lambda bar, event: isinstance(event, StageFinished) and event.stage.value == point,
        )
    with contextlib.redirect_stderr(io.StringIO()):
        main(argv)
    os._exit(0)  # not killed: the point was never reached


@pytest.mark.parametrize("point", KILL_POINTS)
@pytest.mark.slow
def test_a_cli_run_killed_at_any_point_leaves_at_least_its_spend_on_the_books(
    point, tmp_path, monkeypatch
):
    from conftest import ROOT

    dataset = file_fingerprint(ROOT / "tests" / "data" / "penguins.csv")
    budget = rho_from_epsilon_delta(4.0, 1e-9)
    child = multiprocessing.get_context("fork").Process(
        target=_killed_at, args=(point, _penguins_argv(tmp_path, "out.csv"))
    )
    child.start()
    child.join(timeout=120)
    assert child.exitcode == -signal.SIGKILL, f"the run never reached {point!r}"
    registry = Registry()
    committed = registry.budget(dataset).committed.rho
    runs, held = registry.runs(dataset), registry.held(dataset)
    released = (tmp_path / "out.csv").exists()
    assert released == (point == "written")
    if point in ("recorded", "written"):  # on the books as a run, before any table exists
        (run,) = runs
        assert run.has_bundle and committed >= run.rho > 0
    else:  # still the whole reservation, whatever the stages before had measured
        assert runs == [] and len(held) == 1
        assert committed == pytest.approx(budget)
    assert committed <= budget * (1 + 1e-12)


def test_runs_record_their_thresholds_delta_and_the_lifetime_caps_it(tmp_path):
    """The delta of thresholded releases composes by addition like rho: a lifetime caps both,
    and a run that would pass only the delta part is refused before it measures."""
    registry = Registry(tmp_path / "r.sqlite3")
    registry.set_lifetime_budget("fp", "t.csv", Budget(1.0, 1e-9))
    record(registry, "fp", "t.csv", spent_ledger(0.1, delta=4.5e-10), {})
    with pytest.warns(BudgetWarning, match="delta 9e-10"):  # past 80% of the delta cap
        record(registry, "fp", "t.csv", spent_ledger(0.1, delta=4.5e-10), {})
    assert [r.spent for r in registry.runs("fp")] == [Budget(0.1, 4.5e-10)] * 2
    status = registry.budget("fp")
    assert status.spent.delta == pytest.approx(9e-10) and status.lifetime == Budget(1.0, 1e-9)
    # rho is far from its cap; delta is not
    with pytest.raises(BudgetExceededError, match=r"delta 1\.3e-09 > 1e-09"):
        registry.reserve("fp", "t.csv", Budget(0.1, 4e-10), "a third run")
    assert registry.held("fp") == [] and registry.budget("fp").committed == status.spent
    with pytest.warns(BudgetWarning):
        registry.reserve("fp", "t.csv", Budget(0.1, 1e-10), "fits exactly").return_unspent()


def test_a_reservation_holds_delta_until_its_spend_is_recorded(tmp_path):
    registry = Registry(tmp_path / "r.sqlite3")
    reservation = registry.reserve("fp", "t.csv", Budget(0.5, 5e-10), "a run")
    (held,) = registry.held("fp")
    assert (held.rho, held.delta) == (0.5, 5e-10)
    reservation.spend(spent_ledger(0.3, delta=2e-10), {})
    (held,) = registry.held("fp")
    assert held.rho == pytest.approx(0.2) and held.delta == pytest.approx(3e-10)
    assert registry.budget("fp").committed.delta == pytest.approx(5e-10)  # no dip
    reservation.return_unspent()
    committed = registry.budget("fp").committed
    assert (committed.rho, committed.delta) == pytest.approx((0.3, 2e-10))


#: the registry file as the versions before the (rho, delta) books wrote it
OLD_SCHEMA = """
CREATE TABLE datasets (fingerprint TEXT PRIMARY KEY, name TEXT NOT NULL,
    first_seen REAL NOT NULL, lifetime_rho REAL);
CREATE TABLE runs (id INTEGER PRIMARY KEY AUTOINCREMENT, fingerprint TEXT NOT NULL
    REFERENCES datasets(fingerprint), created REAL NOT NULL, epsilon REAL, delta REAL,
    rho REAL NOT NULL, randomness TEXT NOT NULL, config TEXT NOT NULL, ledger TEXT NOT NULL,
    bundle BLOB);
CREATE TABLE reservations (id INTEGER PRIMARY KEY AUTOINCREMENT, fingerprint TEXT NOT NULL
    REFERENCES datasets(fingerprint), created REAL NOT NULL, rho REAL NOT NULL,
    purpose TEXT NOT NULL, host TEXT NOT NULL, pid INTEGER NOT NULL);
"""


def test_an_earlier_registry_reads_its_runs_deltas_from_their_ledgers(tmp_path):
    import json

    path = tmp_path / "old.sqlite3"
    db = sqlite3.connect(path)
    db.executescript(OLD_SCHEMA)
    db.execute("INSERT INTO datasets VALUES ('fp', 't.csv', 0, 0.5)")
    ledgers = [
        json.dumps(spent_ledger(0.1, delta=5e-10).to_json()),  # states its spent delta
        json.dumps({"measurements": [{"delta": 2e-10}, {"delta": 1e-10}]}),  # sums its entries
        '{"spent_delta": "?"}',  # unreadable: the most the run could have spent, its delta
    ]
    for ledger in ledgers:
        db.execute(
            "INSERT INTO runs (fingerprint, created, epsilon, delta, rho, randomness, config, "
            "ledger) VALUES ('fp', 0, 1, 1e-9, 0.1, 'release', '{}', ?)",
            (ledger,),
        )
    db.execute("INSERT INTO reservations VALUES (1, 'fp', 0, 0.05, 'old', 'h', 1)")
    db.commit()
    db.close()
    registry = Registry(path)
    assert [r.spent_delta for r in registry.runs()] == pytest.approx([5e-10, 3e-10, 1e-9])
    status = registry.budget("fp")
    assert (status.spent.rho, status.spent.delta) == pytest.approx((0.3, 1.8e-9))
    assert status.held == Budget(0.05, 0.0)
    # a lifetime set in rho alone caps rho only, until it is set again
    assert status.lifetime == Budget(0.5, math.inf)
    with pytest.raises(BudgetExceededError, match=r"rho 0\.55 > 0\.5"):
        registry.reserve("fp", "t.csv", Budget(0.2, 1.0), "past the rho")
    Registry(path)  # opening it again changes nothing
    assert Registry(path).budget("fp") == status


def test_runs_list_states_the_composed_guarantee(tmp_path, monkeypatch, capsys):
    from privsyn_core.cli import main
    from privsyn_core.privacy.conversion import epsilon_from_rho

    monkeypatch.setenv("PRIVSYN_REGISTRY", str(tmp_path / "r.sqlite3"))
    registry = Registry()
    registry.set_lifetime_budget("fp", "t.csv", Budget(1.0, 1e-8))
    for _ in range(3):
        record(registry, "fp", "t.csv", spent_ledger(0.1, delta=5e-10), {})
    assert main(["runs", "list", "--delta", "1e-9"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len([line for line in out if "5e-10" in line and "release" in line]) == 3
    (books,) = [line for line in out if line.startswith("dataset ")]
    epsilon = epsilon_from_rho(0.3, 1e-9)
    assert f"(epsilon {epsilon:.4g}, delta 2.5e-09)-DP" in books  # 1e-9 + 3 x 5e-10
    assert "together rho 0.3, delta 1.5e-09" in books
    assert "lifetime budget: rho 1, delta 1e-08" in books


#: every stage of a run after its first measurement, as (module, name): a table's domain
#: estimates, its 1-way marginals, the selection's scores, the chosen marginals, the fit, the
#: sampling, and the writer
LATE_STAGES = [
    ("privsyn_core.pipeline", "_prepared"),
    ("privsyn_core.pipeline", "_one_way"),
    ("privsyn_core.pipeline", "_selection_scores"),
    ("privsyn_core.pipeline", "_published"),
    ("privsyn_core.generation.synthesis", "_fitted"),
    ("privsyn_core.generation.fitted.FittedModel", "generate_blocks"),
    ("privsyn_core.generation.synthesis", "written"),
]


@pytest.mark.parametrize("where, name", LATE_STAGES)
def test_an_input_error_after_a_spend_leaves_the_spend_on_the_books(
    where, name, tmp_path, monkeypatch, capsys
):
    """Each stage runs as usual (spending what it spends), then raises an input error: the
    CLI refuses in one line, the spend up to there is recorded as a run, nothing is held."""
    import importlib

    from conftest import ROOT

    from privsyn_core.cli import main
    from privsyn_core.errors import InputError

    module, _, owner = where.partition(".generation.fitted.")
    target = (
        getattr(importlib.import_module(module + ".generation.fitted"), owner)
        if owner
        else importlib.import_module(where)
    )
    original = getattr(target, name)
    seen = []

    def then_refuse(*args, **kwargs):
        result = original(*args, **kwargs)
        seen.append(result)
        raise InputError(f"planted after {name}")

    monkeypatch.setattr(target, name, then_refuse)
    source = ROOT / "tests" / "data" / "penguins.csv"
    out = tmp_path / "out.csv"
    argv = ["synthesize", str(source), "-o", str(out), "--epsilon", "4", "--iterations", "2"]
    assert main([*argv, "--seed", "1", "-q"]) == 2
    assert seen, "the stage ran"
    message = capsys.readouterr().err.strip()
    assert len(message.splitlines()) == 1 and f"planted after {name}" in message
    assert "was spent before this was found" in message and "recorded as run 1" in message
    registry = Registry()
    (run,) = registry.runs()
    assert run.rho > 0 and run.config["outcome"].startswith("failed: planted")
    assert run.rho == pytest.approx(run.ledger["spent_rho"])
    assert registry.held() == [] and not out.exists()


def test_a_dataset_keeps_its_owners_name_and_size_and_an_earlier_file_gains_them(tmp_path):
    """What tells two tables of one file name apart (TableRecord): a registry written before
    it existed gains the fields, empty, and keeps its books; a size given without rows (a
    file on disk) keeps the rows known; a blank name takes the name away."""
    path = tmp_path / "old.sqlite3"
    db = sqlite3.connect(path)
    db.executescript(OLD_SCHEMA)
    db.execute("INSERT INTO datasets VALUES ('fp', 'raw.csv', 0, 0.5)")
    db.commit()
    db.close()
    registry = Registry(path)
    (old,) = registry.tables()
    assert (old.fingerprint, old.name, old.label, old.columns, old.rows) == (
        "fp", "raw.csv", None, None, None,
    )  # fmt: skip
    assert registry.budget("fp").lifetime == Budget(0.5, math.inf)
    registry.describe_table("fp", "raw.csv", 15, 48842)
    registry.describe_table("fp", "raw.csv", 15)  # rows not counted this time: kept
    registry.name_table("fp", "raw.csv", "  census extract ")
    registry.name_table("other", "raw.csv", "second")  # a dataset not seen yet: recorded
    tables = {t.fingerprint: t for t in Registry(path).tables()}
    assert (tables["fp"].label, tables["fp"].columns, tables["fp"].rows) == (
        "census extract", 15, 48842,
    )  # fmt: skip
    assert (tables["other"].name, tables["other"].label) == ("raw.csv", "second")
    assert Registry(path).tables("other") == [tables["other"]]
    registry.name_table("fp", "raw.csv", "   ")
    assert registry.tables("fp")[0].label is None
    record(registry, "fp", "raw.csv", spent_ledger(0.1), {})
    assert registry.runs()[0].name == "raw.csv"  # the name a run was first recorded under
