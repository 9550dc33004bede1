"""A table on disk is opened once and checked as opened (dashboard.sources,
privsyn_core.data.opened): a name swapped after the Data page's check, a hard link to a file
outside the root, or a named pipe is refused before anything is read or measured, and a normal
file is fingerprinted and counted through the one opening, with the same results as by name."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import ROOT

from dashboard import sources
from privsyn_core import synthesize
from privsyn_core.config import PrivSynConfig
from privsyn_core.data.opened import OpenedTable
from privsyn_core.errors import InputError
from privsyn_core.generation.gum_settings import GumSettings
from privsyn_core.measuring.counters.duckdb_counter import DuckDBCounter
from privsyn_core.privacy.ledger import FailedAfterSpending, PrivacyLedger
from privsyn_core.release.registry import file_fingerprint

DOMAIN = json.loads((ROOT / "assets" / "adult-coded-domain.json").read_text())
#: the checked file's rows and the outside file's: a count that saw the outside file says so
INSIDE_ROWS, OUTSIDE_ROWS = 5, 2997


def write(path: Path, rows: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    table = pd.read_csv(ROOT / "assets" / "adult-coded.csv").head(rows)
    if path.suffix == ".parquet":
        table.to_parquet(path, index=False)
    else:
        table.to_csv(path, index=False)
    return path


@pytest.fixture
def root(tmp_path, monkeypatch) -> Path:
    """The server's root (PRIVSYN_DISK_ROOT), beside a folder outside it."""
    folder = tmp_path / "root"
    folder.mkdir()
    (tmp_path / "outside").mkdir()
    monkeypatch.setenv(sources.ROOT_VARIABLE, str(folder))
    return folder.resolve()


def outside(root: Path, suffix: str = ".csv") -> Path:
    return write(root.parent / "outside" / f"secret{suffix}", OUTSIDE_ROWS)


def rows_counted(path: Path) -> int:
    """The number of rows DuckDB counts in the pre-coded file at ``path``."""
    counter = DuckDBCounter.for_file(path, DOMAIN)
    return int(counter.count([("sex",)])[0].values.sum())


class Recorder:
    """An engine call that records what it read (the count of rows), for DiskRun."""

    def __init__(self) -> None:
        self.seen: list[int] = []

    def __call__(self, path: Path, *, on_progress=None):
        self.seen.append(rows_counted(path))
        return "result"


def test_a_file_swapped_for_a_link_outside_the_root_after_the_check_is_refused(root):
    path = write(root / "table.csv", INSIDE_ROWS)
    assert sources.describe(str(path)).path == path  # the Data page's check: fine
    secret = outside(root)
    path.unlink()
    path.symlink_to(secret)  # swapped before the run opens it
    reading, count = sources.DiskRun(path, sources.allowed_root()), Recorder()
    with pytest.raises(InputError, match="outside") as refused:
        reading.fingerprint()
    message = str(refused.value)
    assert str(secret) in message and str(root) in message and "\n" not in message
    with pytest.raises(InputError, match="outside"):
        reading.synthesize(count)
    assert count.seen == []  # the outside file's rows were never counted


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_a_swap_after_the_open_changes_nothing_read(root, suffix):
    """Once opened, the fingerprint and the counts are of the opened file, whatever the name
    points at afterwards."""
    path = write(root / f"table{suffix}", INSIDE_ROWS)
    expected = file_fingerprint(path)
    reading, count = sources.DiskRun(path, sources.allowed_root()), Recorder()
    reading.table()
    path.unlink()
    path.symlink_to(outside(root, suffix))
    assert reading.fingerprint() == expected
    reading.synthesize(count)
    assert count.seen == [INSIDE_ROWS]


@pytest.mark.parametrize("proc", [True, False], ids=["proc", "walked-and-copied"])
def test_a_hard_link_inside_the_root_to_a_file_outside_is_refused(root, proc):
    link = root / "table.csv"
    os.link(outside(root), link)
    with pytest.raises(InputError, match="hard links") as refused:
        sources.describe(str(link))
    assert "copy the file into" in str(refused.value) and str(root) in str(refused.value)
    with pytest.raises(InputError, match="hard links"):
        OpenedTable.open(link, root, proc=proc)


@pytest.mark.parametrize("proc", [True, False], ids=["proc", "walked-and-copied"])
def test_a_link_inside_the_root_to_a_file_inside_it_is_read_as_that_file(root, proc):
    """Accepted: the file read (the open one) lies inside the root, with one name; the link
    only names it, as the path typed on the Data page may."""
    target = write(root / "data" / "table.parquet", INSIDE_ROWS)
    link = root / "latest.parquet"
    link.symlink_to(target)
    assert sources.describe(str(link)).columns == tuple(DOMAIN)
    with OpenedTable.open(link, root, proc=proc) as table:
        assert table.real == target and table.kind == "parquet"
        assert table.fingerprint() == file_fingerprint(target)
        assert rows_counted(table.path_for_reading) == INSIDE_ROWS


@pytest.mark.parametrize("proc", [True, False], ids=["proc", "walked-and-copied"])
def test_a_link_inside_the_root_to_a_file_outside_is_refused(root, proc):
    link = root / "table.csv"
    link.symlink_to(outside(root))
    with pytest.raises(InputError, match="outside"):
        OpenedTable.open(link, root, proc=proc)


def finishes(call, seconds: float = 10.0) -> BaseException | None:
    """What ``call`` raised, asserting it returned within ``seconds`` (a blocked open of a
    named pipe never would)."""
    raised: list[BaseException | None] = []

    def target() -> None:
        try:
            call()
            raised.append(None)
        except BaseException as exc:
            raised.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert raised, "it returned (it did not wait on the named pipe)"
    return raised[0]


@pytest.mark.parametrize("proc", [True, False], ids=["proc", "walked-and-copied"])
def test_a_named_pipe_at_the_path_is_refused_without_hanging(root, proc):
    path = write(root / "table.csv", INSIDE_ROWS)
    sources.describe(str(path))
    path.unlink()
    os.mkfifo(path)  # swapped for a FIFO nobody writes to
    raised = finishes(sources.DiskRun(path, root).fingerprint)
    assert isinstance(raised, InputError) and "named pipe" in str(raised)
    raised = finishes(lambda: OpenedTable.open(path, root, proc=proc))
    assert isinstance(raised, InputError) and "named pipe" in str(raised)


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
@pytest.mark.parametrize("proc", [True, False], ids=["proc", "walked-and-copied"])
@pytest.mark.slow
def test_a_normal_file_counts_and_hashes_as_by_its_name(root, suffix, proc):
    path = write(root / f"table{suffix}", 400)
    with OpenedTable.open(path, root, proc=proc) as table:
        assert table.fingerprint() == file_fingerprint(path)
        assert table.size == path.stat().st_size and table.real == path
        reading = table.path_for_reading
        assert reading.suffix == suffix and reading.parent.stat().st_mode & 0o777 == 0o700
        ours = DuckDBCounter.for_file(reading, DOMAIN).count([("sex", "race"), ("age",)])
        theirs = DuckDBCounter.for_file(path, DOMAIN).count([("sex", "race"), ("age",)])
        for a, b in zip(ours, theirs, strict=True):
            assert np.array_equal(a.values, b.values)
        held = table._fd
    assert not reading.parent.exists()  # the private folder goes with the file
    with pytest.raises(OSError):
        os.fstat(held)


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
@pytest.mark.slow
def test_a_run_through_the_opening_equals_a_run_by_name(root, suffix):
    """Same seed, same file: the same synthetic table and ledger by its name and through
    DiskRun (debug mode, so the noise is reproducible)."""
    path = write(root / f"table{suffix}", 1000)
    config = PrivSynConfig(gum=GumSettings(iterations=3, patience=None))

    def count(source, on_progress=None):
        return synthesize(
            source, 1.0, 1e-9, engine="duckdb", domain=DOMAIN, config=config,
            rng=np.random.default_rng(7), on_progress=on_progress,
        )  # fmt: skip

    reading = sources.DiskRun(path, root)
    assert reading.fingerprint() == file_fingerprint(path)
    ours, theirs = reading.synthesize(count), count(path)
    pd.testing.assert_frame_equal(ours.synthetic, theirs.synthetic)
    assert ours.ledger.spent_rho == theirs.ledger.spent_rho
    assert reading._table is not None
    with pytest.raises(OSError):
        os.fstat(reading._table._fd)  # closed after the run


def test_reader_messages_name_the_file_not_the_reading_path(root):
    path = root / "table.parquet"
    path.write_bytes(b"PAR1 not really parquet")
    reading = sources.DiskRun(path, root)

    def count(source, on_progress=None):
        return DuckDBCounter.for_file(source, {"a": 3})

    with pytest.raises(InputError, match="not a readable table") as refused:
        reading.synthesize(count)
    assert str(path) in str(refused.value) and "privsyn-opened" not in str(refused.value)


def test_a_file_written_to_during_the_run_is_not_released(root):
    path = write(root / "table.csv", INSIDE_ROWS)
    reading = sources.DiskRun(path, root)
    reading.fingerprint()

    class Result:
        ledger = PrivacyLedger.from_epsilon_delta(1.0, 1e-9)

    def count(source, on_progress=None):
        with path.open("a") as handle:  # the same file, written while it is counted
            handle.write("0,0,0,0,0,0,0,0,0,0,0,0,0,0,0\n")
        return Result()

    with pytest.raises(FailedAfterSpending, match="changed while it was being read") as failed:
        reading.synthesize(count)
    assert failed.value.ledger is Result.ledger  # its spend is recorded, nothing released


def test_a_file_written_to_before_its_fingerprint_is_checked_is_refused(root):
    path = write(root / "table.csv", INSIDE_ROWS)
    reading = sources.DiskRun(path, root)
    reading.table()
    with path.open("a") as handle:
        handle.write("0,0,0,0,0,0,0,0,0,0,0,0,0,0,0\n")
    with pytest.raises(InputError, match="changed while it was being read"):
        reading.fingerprint()


def open_files() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts open files in /proc")
def test_refusals_and_runs_leave_no_file_open(root):
    path = write(root / "table.csv", INSIDE_ROWS)
    link = root / "hard.csv"
    os.link(outside(root), link)
    os.mkfifo(root / "pipe.csv")
    (root / "folder.csv").mkdir()
    before = open_files()
    for refused in ("hard.csv", "pipe.csv", "folder.csv", "absent.csv", "notes.json"):
        (root / "notes.json").write_text("{}")
        with pytest.raises(InputError):
            OpenedTable.open(root / refused, root)
    reading = sources.DiskRun(path, root)
    reading.fingerprint()  # a run the registry then refuses: synthesize is never called
    folder = reading.table().path_for_reading.parent
    assert open_files() == before + 1 and folder.is_dir()
    del reading  # the worker drops the request: the file closes with it
    assert open_files() == before and not folder.exists()
