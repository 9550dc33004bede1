"""The hostile and careless input of ``test_hostile_input.py``, on the dashboard (issue 11).

One table of cases serves both front ends: every case of the command line's table
(:data:`test_hostile_input.REFUSED` and :data:`~test_hostile_input.ACCEPTED`, built by the same
functions into the same files) is listed in :data:`DASHBOARD`, either with how the dashboard
answers it or with why it does not apply there. A case added to the command line's table fails
:func:`test_every_case_of_the_command_line_is_answered_here` until it is placed here too.

What a person sees is checked as the command line's test checks its one error line: one
error on the page naming the problem and the fix, no exception (no traceback), no run in the
registry unless something was measured, and no half state: a refused upload leaves the table in
use as it was (and says which it is), a refused setting blocks the Run page. Accepted files load
as the command line reads them and run to a synthetic table that reads like the input.

The free memory the load checks see is fixed (:data:`test_hostile_input.FREE`) once the app has
started; the registry is each test's own (``conftest._private_registry``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest
import streamlit as st
from conftest import ROOT
from streamlit.testing.v1 import AppTest
from test_hostile_input import (
    ACCEPTED,
    BUNDLE_REFUSED,
    DELTA_FIX,
    FREE,
    REFUSED,
    Accepted,
    N,
    Refused,
)

import privsyn_core.generation.memory as memory
from dashboard.state import SAMPLE_NAME as SAMPLE
from privsyn_core.data.io import read_table
from privsyn_core.data.schema import ColumnSchema, Kind
from privsyn_core.release.registry import Registry

APP = str(ROOT / "dashboard" / "app.py")
#: what the Run page adds to a refused setting
ON_PRIVACY = "(fix it on the Privacy page)"
#: what the Data page says to do with a table too big to load
TABLE_ON_DISK = "use Table on disk (below)"


@dataclass(frozen=True)
class Answer:
    """How the dashboard answers a case: where the input is given (``via``) and fragments of
    the one message a person sees. ``via`` is ``upload`` (the Data page's uploader),
    ``privacy`` (epsilon and delta), ``disk path`` (Table on disk), ``disk domain`` (a
    pre-coded file's domain JSON) or ``run`` (loads, and the Run page answers)."""

    via: str
    says: tuple[str, ...] = ()
    #: found only after the dashboard's run measured (where the command line finds it first)
    spends: bool = False


@dataclass(frozen=True)
class NotHere:
    """A case with no dashboard counterpart, and why."""

    why: str


NO_ENCODING = (
    "the dashboard has no encoding to choose: it reads an upload as the command line does "
    "without --encoding (UTF-8 per value, else Windows-1252)"
)

DASHBOARD: dict[str, Answer | NotHere] = {
    # privacy parameters: the Privacy page says what is wrong; the Run page will not run
    "delta 1": Answer("privacy", ("got 1.0", "no privacy", DELTA_FIX)),
    "delta 2": Answer("privacy", ("got 2.0", "no privacy", DELTA_FIX)),
    "delta 0": Answer("privacy", ("delta must be positive", DELTA_FIX)),
    "delta 0 without registry": NotHere(
        "every dashboard run goes through the registry; delta 0 itself is case 'delta 0'"
    ),
    "delta 0.01": Answer("privacy", ("too large", "at most 0.001")),
    "delta negative": Answer("privacy", ("positive", DELTA_FIX)),
    "delta nan": Answer("privacy", ("delta must be positive",)),
    "delta text": Answer("privacy", ("delta must be a number", "1e-9")),
    "epsilon 0": Answer("privacy", ("epsilon must be a positive", "such as 1", "got 0.0")),
    "epsilon negative": Answer("privacy", ("epsilon", "got -1.0", "such as 1")),
    # Streamlit hands the page no infinite or NaN number: the box comes back empty
    "epsilon inf": Answer("privacy", ("epsilon is empty", "finite", "such as 1")),
    "epsilon -inf": Answer("privacy", ("epsilon is empty", "finite", "such as 1")),
    "epsilon nan": Answer("privacy", ("epsilon is empty", "finite", "such as 1")),
    "epsilon text": NotHere(
        "epsilon is a number box: the browser types no letters into it "
        "(test_dashboard_upload_browser types 'one' and checks nothing changes)"
    ),
    "plan delta 1": Answer("privacy", ("no privacy", DELTA_FIX)),
    "rows 0": NotHere("the dashboard asks for no number of rows"),
    "iterations negative": NotHere(
        "the iterations box is bounded (1 to 500): the browser does not send a value outside"
    ),
    # files that are not there or not tables
    "missing file": Answer("disk path", ("there is no file at", "nowhere.csv")),
    "a folder": Answer("disk path", ("is a folder", "give the path of one CSV or Parquet")),
    "output folder missing": NotHere("the dashboard writes no file: the output is a download"),
    **{
        name: NotHere("the dashboard writes no file: the output is a download")
        for name in (
            "output is the input table",
            "output is the domain file",
            "output is a symbolic link to the input",
            "output is a hard link to the input",
            "output is the run registry",
            "output is a pipe",
            "output is a link to a device",
            "ledger written over the table output",
            "generate writes over its bundle",
            "schema infer writes over its table",
        )
    },
    "empty file": Answer("upload", ("it is empty", "give a table with a header row")),
    "header only": Answer("upload", ("header but no rows", "nothing")),
    "NUL bytes in the head": Answer("upload", ("NUL", "CSV or a Parquet")),
    "NUL byte past 64 KB": Answer("upload", ("NUL byte at byte", "CSV or a Parquet")),
    "truncated Parquet": Answer("upload", ("not a readable Parquet", "truncated")),
    "ragged rows": Answer("upload", ("line 3", "as many values")),
    "unnamed column": Answer("upload", ("column 2 has no name", "name every column")),
    "unknown encoding": NotHere(NO_ENCODING),
    "Latin-1 read as strict UTF-8": NotHere(NO_ENCODING + "; see 'Latin-1 with semicolons'"),
    # the layout
    "duplicate names in a CSV header": Answer(
        "upload", ("two columns named 'colour'", "its own name")
    ),
    "duplicate names in Parquet": Answer("upload", ("two columns named 'colour'",)),
    "duplicate --names": NotHere("an upload's column names are its header or Parquet schema"),
    "10,000 columns": Answer("upload", ("10,000 columns", "at most 1,000")),
    "bad domain JSON": Answer("disk domain", ("is not valid JSON", "line 1")),
    # the column editor declares colour's categories, but size stays open: its private
    # estimate is made before the rows are coded, so that spend is recorded
    "value outside the domain": Answer(
        "run",
        ("'blue'", "colour", "was spent before this was found", "recorded as run 1"),
        spends=True,
    ),
    # too big to load: refused from the file's size or footer, before a row is read
    "Parquet bomb": Answer(
        "upload", ("30,000,000 rows x 1 column", "GB of memory", "GB free", TABLE_ON_DISK)
    ),
    "CSV bigger than memory": Answer(
        "upload", ("rows x 2 columns", "MB of memory", "of the 16 MB free", TABLE_ON_DISK)
    ),
    # found only by measuring: the spend is recorded, and the message says so
    "one row": Answer("run", ("no column is left", "larger epsilon", "recorded as run 1")),
    # privsyn generate: the dashboard's "Sample again" (dashboard/resample.py)
    "generate: rows 0": NotHere("Sample again's rows box is bounded (1 to 2,000,000)"),
    "generate: rows negative": NotHere("Sample again's rows box is bounded (1 to 2,000,000)"),
    "generate: rows beyond the disk": NotHere(
        "Sample again's rows box stops at 2,000,000 and the table is held, not written to disk"
    ),
    "generate: blocks beyond memory": NotHere(
        "Sample again's rows box stops at 2,000,000; FittedModel.sample's memory check "
        "(tests/test_fitted_model.py) answers as 'Cannot draw that table'"
    ),
    "generate: no bundle": NotHere("Sample again reads bundles the dashboard stored itself"),
    "generate: not a zip": NotHere("Sample again reads bundles the dashboard stored itself"),
    "generate: old bundle": NotHere(
        "History explains why a version-1 release cannot be sampled again "
        "(test_dashboard_resample.py)"
    ),
    "generate: decay 0": NotHere("Sample again offers rows, seed and GUM iterations only"),
    "generate: bundle whose ledger was edited and re-hashed": NotHere(
        "Sample again reads bundles the dashboard stored itself; an edited one is refused by "
        "load_model (tests/test_bundle.py)"
    ),
    "target not a column": NotHere("the Run page's target box lists the table's columns only"),
    # untrusted release bundles (issue 24): the dashboard samples only from bundles it stored
    **{
        case.name: NotHere(
            "Sample again reads bundles the dashboard stored itself; a bundle from elsewhere "
            "is read by load_model, whose refusals these are"
        )
        for case in BUNDLE_REFUSED
    },
    # issue 24's inputs: a path on disk (Table on disk) is checked as the command line checks it
    **{
        f"{engine}: {name}": Answer("disk path", says)
        for engine in ("duckdb", "input")
        for name, says in (
            ("a FIFO", ("it is a named pipe, not a regular file",)),
            ("/dev/zero", ("/dev/zero: it is a device or a socket",)),
        )
    },
    **{
        f"{engine}: unreadable": NotHere(
            "Table on disk checks a path with the command line's readable_file, whose "
            "refusal test_hostile_input checks; that test makes the file unreadable by "
            "refusing the open call, since this machine runs the suite as root"
        )
        for engine in ("duckdb", "input")
    },
    "duckdb: a folder": Answer("disk path", ("is a folder",)),
    "duckdb: header over 64 KB": Answer("disk path", ("its header line is longer than 64 KB",)),
    "csv: header over 64 KB": Answer(
        "upload", ("its header line is longer than 64 KB", "shorten its column names")
    ),
    "domain: a size as text": Answer("disk domain", ("column 'colour' needs a number of codes",)),
    # a domain file's content, uploaded for a pre-coded table on disk: the same limits
    "duckdb: domain of 10^9 codes": Answer(
        "disk domain", ("column 'colour' declares 1,000,000,000 codes",)
    ),
    "domain: 10^7 codes": Answer("disk domain", ("declares 10,000,000 codes", "(100,000 codes)")),
    "domain: 10^9 codes": Answer(
        "disk domain", ("declares 1,000,000,000 codes", "recode the column into fewer codes")
    ),
    "domain: Latin-1": Answer("disk domain", ("is not UTF-8 text", "save it as UTF-8")),
    # a pre-coded table's domain gives numbers of codes: a list of categories is refused
    "domain: a category twice in 60,001, found in linear time": Answer(
        "disk domain", ("needs a number of codes", "got a list of 60,001 values")
    ),
    "domain: a key stated twice": Answer("disk domain", ("names the key 'size' twice",)),
    "domain: a million categories": Answer(
        "disk domain", ("needs a number of codes", "got a list of 1,000,000 values")
    ),
    "domain: a pair of 10,000 x 10,000 codes": Answer(
        "disk domain", ("a pair marginal of 100,000,000 cells", "more than the 16,777,216")
    ),
    "domain: nested 100,000 deep": Answer("disk domain", ("nests 100,001 levels deep",)),
    **{
        f"domain: {name}": NotHere(
            "the dashboard's domain file is an upload (bytes): it cannot be a folder, a pipe "
            "or a file without read permission"
        )
        for name in ("a FIFO", "a folder", "unreadable")
    },
    # schema files: the dashboard reads none (the Data page's column editor is the schema)
    **{
        case.name: NotHere(
            "the dashboard reads no schema file: the Data page's column editor builds the "
            "schema, one column at a time"
        )
        for case in REFUSED
        if case.name.startswith("schema: ")
    },
    "iterations 20,000": NotHere(
        "the iterations box is bounded (1 to 500): the browser does not send a value outside"
    ),
    "iterations 10^9": NotHere(
        "the iterations box is bounded (1 to 500): the browser does not send a value outside"
    ),
    "generate: iterations 10^9": NotHere("Sample again's iterations box is bounded"),
    "runs list of a FIFO": NotHere(
        "the dashboard opens its own run registry, never a path a person gives"
    ),
    # accepted: loaded as the command line reads them, and run
    **{case.name: Answer("upload") for case in ACCEPTED},
}

CASES = {case.name: case for case in REFUSED + ACCEPTED}
ANSWERED = [name for name, answer in DASHBOARD.items() if isinstance(answer, Answer)]


# --------------------------------------------------------------------------------------------
# driving the app
# --------------------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _clear_caches():
    st.cache_data.clear()
    st.cache_resource.clear()


@pytest.fixture
def free(monkeypatch: pytest.MonkeyPatch):
    """Set the free memory the load checks see."""

    def set_free(size: int) -> None:
        monkeypatch.setattr(memory, "available_bytes", lambda: size)

    set_free(FREE)
    return set_free


def app() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def go(at: AppTest, page: str) -> AppTest:
    at.switch_page(f"views/{page}.py")
    at.run()
    return at


def run_and_wait(at: AppTest, timeout: float = 120) -> AppTest:
    """Click Run and rerun until the background run has ended (the browser's polling
    fragment does this in a real session)."""
    at.button(key="run").click().run()
    deadline = time.monotonic() + timeout
    while at.session_state["run_state"] == "running" and time.monotonic() < deadline:
        time.sleep(0.2)
        at.run()
    assert at.session_state["run_state"] != "running", "the run ended in time"
    return at


def option(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


def upload(at: AppTest, source: Path) -> AppTest:
    kind = "application/octet-stream" if source.suffix == ".parquet" else "text/csv"
    at.file_uploader(key="upload").set_value((source.name, source.read_bytes(), kind)).run()
    return at


def the_one_error(at: AppTest) -> str:
    """The page's one error message: no exception, no traceback, no second message."""
    assert not at.exception, [e.value for e in at.exception]
    errors = [e.value for e in at.error]
    assert len(errors) == 1, errors
    assert "Traceback" not in errors[0] and "internal error" not in errors[0]
    return errors[0]


def assert_says(message: str, says: tuple[str, ...]) -> None:
    for fragment in says:
        assert fragment in message, f"{fragment!r} not in {message!r}"


def spend() -> list[float]:
    return [run.rho for run in Registry().runs()]


# --------------------------------------------------------------------------------------------
# the cases
# --------------------------------------------------------------------------------------------


def test_every_case_of_the_command_line_is_answered_here():
    assert set(DASHBOARD) == set(CASES)
    assert len(ANSWERED) >= 30


@pytest.mark.parametrize("name", ANSWERED)
@pytest.mark.slow
def test_the_dashboard_answers_with_one_message(name: str, tmp_path: Path, free) -> None:
    case, answer = CASES[name], DASHBOARD[name]
    at = app()
    free(case.free if isinstance(case, Refused) else FREE)
    argv = case.build(tmp_path)
    if answer.via == "upload":
        source = Path(argv[1])
        if isinstance(case, Accepted):
            accepted_upload(at, case, source, float(option(argv, "--epsilon")), tmp_path)
        else:
            refused_upload(at, answer, source)
    elif answer.via == "privacy":
        refused_setting(at, answer, argv)
    elif answer.via == "disk path":
        at.text_input(key="disk_path").set_value(argv[1]).run()
        at.button(key="use_disk").click().run()
        assert_says(the_one_error(at), answer.says)
        assert at.session_state["disk"] is None and at.session_state["table_name"] == SAMPLE
    elif answer.via == "disk domain":
        refused_domain(at, answer, argv)
    else:
        assert answer.via == "run"
        refused_by_the_run(at, answer, argv)
    if isinstance(case, Refused) and not (case.spends or answer.spends):
        assert spend() == [], "nothing was measured, nothing is recorded"
    if answer.spends:
        assert len(spend()) == 1 and spend()[0] > 0, "what was measured is recorded"


def refused_upload(at: AppTest, answer: Answer, source: Path) -> None:
    """The refusal names the upload and the fix; the table in use stays as it was."""
    before = at.session_state["table"]
    upload(at, source)
    message = the_one_error(at)
    assert message.startswith(f"Could not use {source.name}: ")
    assert_says(message, answer.says)
    assert str(source.parent) not in message and "/tmp" not in message  # the server's copy
    assert message.endswith(f"The table in use is still {SAMPLE}.")
    assert at.session_state["table"] is before and at.session_state["table_name"] == SAMPLE
    at.run()  # the message stays while the file is shown in the uploader, read once
    assert the_one_error(at) == message


def accepted_upload(
    at: AppTest, case: Accepted, source: Path, epsilon: float, tmp_path: Path
) -> None:
    """Loaded as the command line reads it, then run at the command line's epsilon: the
    output reads like the input."""
    upload(at, source)
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any(s.value == f"Loaded {source.name}." for s in at.success)
    pd.testing.assert_frame_equal(at.session_state["table"], read_table(source))
    go(at, "privacy").number_input(key="epsilon").set_value(epsilon).run()
    go(at, "run")
    at.number_input(key="iterations").set_value(2).run()
    at.text_input(key="seed_text").set_value("0").run()
    run_and_wait(at)
    assert not at.exception, [e.value for e in at.exception]
    finished = at.session_state["finished"]
    assert finished is not None, at.session_state.get("run_message")
    # the Results page's download, read back as the command line's test reads its file
    written = tmp_path / "synthetic.csv"
    written.write_bytes(finished.result.synthetic.to_csv(index=False).encode())
    synthetic = read_table(written)
    assert tuple(synthetic.columns) == case.columns
    assert len(synthetic) > 0.8 * N
    for name, allowed in case.values.items():
        present = set(synthetic[name].dropna())
        assert present, name
        if callable(allowed):
            assert all(allowed(value) for value in present), (name, sorted(present)[:5])
        else:
            assert present <= allowed | {"other"}, (name, present - allowed)
    text = written.read_text(encoding="utf-8")
    assert "Ã" not in text and "\ufffd" not in text and "\ufeff" not in text  # no mojibake
    assert len(spend()) == 1


def refused_setting(at: AppTest, answer: Answer, argv: list[str]) -> None:
    """Said on the Privacy page; the Run page sends the person there and offers no Run."""
    go(at, "privacy")
    epsilon, delta = option(argv, "--epsilon"), option(argv, "--delta")
    if delta is not None:
        at.text_input(key="delta_text").set_value(delta).run()
    if epsilon not in (None, "1", "2"):
        at.number_input(key="epsilon").set_value(float(epsilon)).run()
    assert_says(the_one_error(at), answer.says)
    assert not any("sigma" in f.value.columns for f in at.dataframe), "no plan for it"
    go(at, "run")
    message = the_one_error(at)
    assert_says(message, answer.says)
    assert message.endswith(ON_PRIVACY)
    assert not [b for b in at.button if b.key == "run"], "no Run button under a bad setting"


def refused_domain(at: AppTest, answer: Answer, argv: list[str]) -> None:
    """A pre-coded file on disk with a domain file that is not JSON."""
    at.text_input(key="disk_path").set_value(argv[1]).run()
    at.button(key="use_disk").click().run()
    at.radio(key="disk_mode").set_value(at.radio(key="disk_mode").options[1]).run()
    codes = dict(at.session_state["disk_codes"])
    domain = Path(option(argv, "--domain"))
    at.file_uploader(key="disk_domain").set_value(
        (domain.name, domain.read_bytes(), "application/json")
    )
    at.run()
    message = the_one_error(at)
    assert message.startswith(f"Cannot use {domain.name}: ")
    assert_says(message, answer.says)
    assert at.session_state["disk_codes"] == codes


def refused_by_the_run(at: AppTest, answer: Answer, argv: list[str]) -> None:
    """The table loads; the run says what is wrong (after measuring, with the spend)."""
    upload(at, Path(argv[1]))
    assert not at.error, [e.value for e in at.error]
    domain = option(argv, "--domain")
    if domain is not None:  # the command line's domain file, declared in the column editor
        schema = at.session_state["schema"]
        for name, values in pd.read_json(domain, typ="series").items():
            if isinstance(values, list):
                schema = schema.with_column(
                    ColumnSchema(name, Kind.CATEGORICAL, categories=tuple(values))
                )
        at.session_state["schema"] = schema
    # the command line's budget and seed: a refusal that rests on DP noise (the one-row table
    # loses its columns to the private domain estimate) must not depend on a random draw
    go(at, "privacy").number_input(key="epsilon").set_value(float(option(argv, "--epsilon"))).run()
    go(at, "run")
    at.number_input(key="iterations").set_value(2).run()
    at.text_input(key="seed_text").set_value(option(argv, "--seed")).run()
    run_and_wait(at)
    assert at.session_state["finished"] is None
    assert at.session_state["run_state"] in ("failed", "refused")
    assert_says(the_one_error(at), answer.says)


# --------------------------------------------------------------------------------------------
# what the table alone does not show
# --------------------------------------------------------------------------------------------


def test_a_refused_upload_keeps_the_good_table_loaded_before_it(tmp_path, free):
    good = tmp_path / "good.csv"
    good.write_text("colour,size\n" + "red,1\n" * 50)
    at = upload(app(), good)
    loaded = at.session_state["table"]
    assert at.session_state["table_name"] == "good.csv"
    broken = tmp_path / "broken.csv"
    broken.write_bytes(b"a,b\n1,\x002\n")
    upload(at, broken)
    assert the_one_error(at).endswith("The table in use is still good.csv.")
    assert at.session_state["table"] is loaded


@pytest.mark.slow
def test_a_file_left_in_the_uploader_does_not_come_back_over_the_sample(tmp_path, free):
    good = tmp_path / "good.csv"
    good.write_text("colour,size\n" + "red,1\n" * 50)
    at = upload(app(), good)
    at.button(key="use_sample").click().run()
    at.run()  # any later rerun: the file still shown in the uploader is not read again
    assert at.session_state["table_name"] == SAMPLE
    upload(at, good)  # uploading it again does
    assert at.session_state["table_name"] == "good.csv"


@pytest.mark.slow
def test_the_parquet_bomb_never_reaches_pandas(tmp_path, free, monkeypatch):
    """Refused from the footer alone: no reader of rows is called."""

    def no_rows(*args, **kwargs):
        raise AssertionError("the bomb's rows were read")

    source = Path(CASES["Parquet bomb"].build(tmp_path)[1])
    at = app()  # the sample is read first, by read_csv
    monkeypatch.setattr(pd, "read_parquet", no_rows)
    monkeypatch.setattr(pd, "read_csv", no_rows)
    message = the_one_error(upload(at, source))
    assert "30,000,000 rows x 1 column" in message and TABLE_ON_DISK in message


@pytest.mark.slow
def test_the_upload_limit_and_the_way_around_it_are_stated_next_to_the_uploader():
    at = app()
    limit = st.get_option("server.maxUploadSize")
    hint = next(c.value for c in at.caption if "server.maxUploadSize" in c.value)
    assert f"Files up to {limit:,} MB" in hint and "Table on disk" in hint


# --------------------------------------------------------------------------------------------
# the same files through Table on disk (read by DuckDB where they lie)
# --------------------------------------------------------------------------------------------

#: what Table on disk says of each file case it refuses when the path is given (the rest it
#: takes: their problems, if any, are found by the run, as with the command line's DuckDB engine)
ON_DISK: dict[str, tuple[str, ...]] = {
    "empty file": ("is empty",),
    "NUL bytes in the head": ("NUL bytes", "CSV or a Parquet"),
    "truncated Parquet": ("not a readable table",),
    "ragged rows": ("header names 2 columns but its rows hold 3 values", "as many values"),
    "unnamed column": ("column 2 has no name", "name every column"),
    "duplicate names in a CSV header": ("two columns named 'colour'", "its own name"),
    "duplicate names in Parquet": ("two columns named 'colour'", "its own name"),
    "10,000 columns": ("10,000 columns", "at most 1,000"),
    "Latin-1 with semicolons": ("UTF-8", "or as Parquet"),
    "UTF-16 with its byte-order mark": ("UTF-8", "or as Parquet"),
    "a 5-million-character cell": ("lines of up to 2 MB", "or as Parquet"),
}


@pytest.mark.parametrize("name", list(ON_DISK))
@pytest.mark.slow
def test_table_on_disk_refuses_what_it_cannot_read_by_name(name, tmp_path, free):
    """DuckDB would rename a repeated name (colour_1), name an unnamed column (column1) and
    make up a header for a ragged file: the names as written are checked first."""
    source = CASES[name].build(tmp_path)[1]
    at = app()
    at.text_input(key="disk_path").set_value(source).run()
    at.button(key="use_disk").click().run()
    message = the_one_error(at)
    assert message.startswith("Cannot use that path: ")
    assert_says(message, ON_DISK[name])
    assert at.session_state["disk"] is None and at.session_state["table_name"] == SAMPLE
