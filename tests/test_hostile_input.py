"""Hostile and careless input to the ``privsyn`` command line, one table of cases (issue 11).

Each refused case runs ``privsyn synthesize`` (or ``plan``, or ``generate`` on a release
bundle) in-process and checks what a person sees: status 2, nothing on stdout, exactly one
``privsyn: error:`` line on stderr (no traceback) that names the problem and the fix, no
output or temporary file left behind, and no spend in the run registry unless something was
measured (then the spend is recorded and the message says so). Each accepted case (a BOM,
Latin-1 with semicolons, quoted line breaks, degenerate columns, ...) checks that the run
succeeds and its output reads like the input: the same column names, only values the input
holds, no mojibake.

Every input is generated in ``tmp_path``, small: the Parquet bomb is 30 million rows of one
constant in about 100 KB, refused from its footer before a row is read. The free memory the
size checks see is fixed at :data:`FREE` (1 GiB) so that the answers do not depend on the
machine; the registry is each test's own (``conftest._private_registry``).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tracemalloc
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import privsyn_core.data.inputs as inputs
import privsyn_core.generation.memory as memory
from privsyn_core.cli import main
from privsyn_core.data.io import read_table
from privsyn_core.errors import InputError
from privsyn_core.model import PrivSyn
from privsyn_core.pipeline import synthesize
from privsyn_core.privacy.ledger import FailedAfterSpending, PrivacyLedger
from privsyn_core.release.bundle import load_model, model_bytes
from privsyn_core.release.registry import Registry

FREE = 2**30  # the free memory the size checks see
N = 600  # rows of the generated tables: enough for categories to survive at epsilon 2
COLOURS = ["red", "green", "blue"]
CITIES = ["Köln", "Zürich", "Malmö"]

# --------------------------------------------------------------------------------------------
# inputs
# --------------------------------------------------------------------------------------------


def colours(n: int = N, seed: int = 0) -> list[str]:
    return list(np.array(COLOURS)[np.random.default_rng(seed).integers(0, 3, n)])


def good_table() -> pd.DataFrame:
    rng = np.random.default_rng(1)
    return pd.DataFrame({"colour": colours(), "size": rng.integers(0, 4, N).astype(str)})


def write_csv(folder: Path, frame: pd.DataFrame, name: str = "in.csv") -> Path:
    path = folder / name
    frame.to_csv(path, index=False)
    return path


def write_text(folder: Path, text: str, name: str = "in.csv", encoding: str = "utf-8") -> Path:
    path = folder / name
    path.write_bytes(text.encode(encoding))
    return path


def synthesize_argv(folder: Path, source: Path, *extra: str, epsilon: str = "2") -> list[str]:
    return [
        "synthesize",
        str(source),
        "-o",
        str(folder / "out" / "synthetic.csv"),
        "--epsilon",
        epsilon,
        "--iterations",
        "2",
        "--seed",
        "0",
        "-q",
        *extra,
    ]


def on_good_table(*extra: str, epsilon: str = "2") -> Callable[[Path], list[str]]:
    def build(folder: Path) -> list[str]:
        return synthesize_argv(folder, write_csv(folder, good_table()), *extra, epsilon=epsilon)

    return build


def on_csv_text(text: str, *extra: str, encoding: str = "utf-8") -> Callable[[Path], list[str]]:
    def build(folder: Path) -> list[str]:
        return synthesize_argv(folder, write_text(folder, text, encoding=encoding), *extra)

    return build


def on_frame(frame: Callable[[], pd.DataFrame], *extra: str) -> Callable[[Path], list[str]]:
    def build(folder: Path) -> list[str]:
        return synthesize_argv(folder, write_csv(folder, frame()), *extra)

    return build


def on_bytes(data: bytes, name: str = "in.csv") -> Callable[[Path], list[str]]:
    def build(folder: Path) -> list[str]:
        path = folder / name
        path.write_bytes(data)
        return synthesize_argv(folder, path)

    return build


def csv_lines(header: str, rows: list[str]) -> str:
    return header + "\n" + "\n".join(rows) + "\n"


def nul_after_the_head(folder: Path) -> list[str]:
    """A NUL byte past the first 64 KB, where the header check does not look."""
    text = csv_lines("colour,size", [f"{c},{i % 4}" for i, c in enumerate(colours(12_000))])
    path = folder / "in.csv"
    path.write_bytes(text.encode() + b"gr\x00een,1\n")
    assert path.stat().st_size > 64 * 1024
    return synthesize_argv(folder, path)


def parquet(frame: pd.DataFrame) -> Callable[[Path], list[str]]:
    def build(folder: Path) -> list[str]:
        path = folder / "in.parquet"
        frame.to_parquet(path, index=False)
        return synthesize_argv(folder, path)

    return build


def truncated_parquet(folder: Path) -> list[str]:
    path = folder / "in.parquet"
    good_table().to_parquet(path, index=False)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return synthesize_argv(folder, path)


def duplicate_parquet(folder: Path) -> list[str]:
    """pandas refuses to write two columns of one name; pyarrow does not."""
    path = folder / "in.parquet"
    values = pa.array(colours())
    pq.write_table(pa.table([values, values], names=["colour", "colour"]), path)
    return synthesize_argv(folder, path)


def parquet_bomb(folder: Path) -> list[str]:
    """30 million rows of one constant: about 100 KB on disk, about 1.8 GB loaded."""
    path = folder / "in.parquet"
    chunk = pa.table({"flag": pa.array(np.zeros(10_000_000, dtype=np.int8))})
    with pq.ParquetWriter(path, chunk.schema) as writer:
        for _ in range(3):
            writer.write_table(chunk)
    assert path.stat().st_size < 1_000_000
    return synthesize_argv(folder, path)


def csv_bigger_than_memory(folder: Path) -> list[str]:
    """1.5 MB of short values, about 600,000 cells: over 20 MB loaded (with 16 MiB free)."""
    path = write_text(folder, csv_lines("a,b", ["0,1"] * 300_000))
    return synthesize_argv(folder, path)


def ten_thousand_columns(folder: Path) -> list[str]:
    header = ",".join(f"c{i}" for i in range(10_000))
    path = write_text(folder, csv_lines(header, [",".join(["1"] * 10_000)] * 5))
    return synthesize_argv(folder, path)


def missing_file(folder: Path) -> list[str]:
    return synthesize_argv(folder, folder / "nowhere.csv")


def a_folder(folder: Path) -> list[str]:
    (folder / "data").mkdir()
    return synthesize_argv(folder, folder / "data")


def missing_output_folder(folder: Path) -> list[str]:
    argv = on_good_table()(folder)
    argv[argv.index("-o") + 1] = str(folder / "no" / "such" / "out.csv")
    return argv


def output_at(where: Callable[[Path, list[str]], str]) -> Callable[[Path], list[str]]:
    """``privsyn synthesize`` on the good table with ``-o`` where ``where(folder, argv)``
    says (it may make a link or a pipe there first)."""

    def build(folder: Path) -> list[str]:
        argv = on_good_table("--domain", str(write_domain(folder)))(folder)
        argv[argv.index("-o") + 1] = where(folder, argv)
        return argv

    return build


def write_domain(folder: Path) -> Path:
    path = folder / "domain.json"
    path.write_text(json.dumps({"colour": COLOURS, "size": ["0", "1", "2", "3"]}))
    return path


def linked_to_input(kind: str) -> Callable[[Path, list[str]], str]:
    def where(folder: Path, argv: list[str]) -> str:
        link = folder / "out" / "link.csv"
        (os.symlink if kind == "symbolic" else os.link)(argv[1], link)
        return str(link)

    return where


def a_pipe(folder: Path, argv: list[str]) -> str:
    os.mkfifo(folder / "out" / "pipe")
    return str(folder / "out" / "pipe")


def a_link_to_a_device(folder: Path, argv: list[str]) -> str:
    """A link to /dev/null, not /dev/null itself: a regression must not replace the system's."""
    (folder / "out" / "null").symlink_to("/dev/null")
    return str(folder / "out" / "null")


def ledger_on_the_output(folder: Path) -> list[str]:
    argv = on_good_table()(folder)
    return [*argv, "--ledger", argv[argv.index("-o") + 1]]


def bundle_as_its_own_output(folder: Path) -> list[str]:
    argv = generate()(folder)
    argv[argv.index("-o") + 1] = argv[1]
    return argv


def schema_over_its_table(folder: Path) -> list[str]:
    path = write_csv(folder, good_table())
    return ["schema", "infer", str(path), "-o", str(path)]


def bad_domain_json(folder: Path) -> list[str]:
    domain = folder / "domain.json"
    domain.write_text('{"colour": 3,')
    return synthesize_argv(folder, write_csv(folder, good_table()), "--domain", str(domain))


def value_outside_the_domain(folder: Path) -> list[str]:
    domain = folder / "domain.json"
    domain.write_text(json.dumps({"colour": ["red", "green"], "size": 4}))
    return synthesize_argv(folder, write_csv(folder, good_table()), "--domain", str(domain))


def plan(*extra: str) -> Callable[[Path], list[str]]:
    def build(folder: Path) -> list[str]:
        return ["plan", "--epsilon", "1", "--columns", "3", *extra]

    return build


@cache
def release_bundle() -> bytes:
    """A release bundle of the good table (fitted once; fitting records nothing)."""
    table = good_table()
    return model_bytes(PrivSyn(2.0, 1e-9).fit(table, rng=np.random.default_rng(0)))


def generate(
    *extra: str, bundle: Callable[[Path], Path] | None = None
) -> Callable[[Path], list[str]]:
    """``privsyn generate`` on the good table's release bundle (or on ``bundle(folder)``)."""

    def build(folder: Path) -> list[str]:
        if bundle is None:
            path = folder / "release.zip"
            path.write_bytes(release_bundle())
        else:
            path = bundle(folder)
        output = str(folder / "out" / "synthetic.csv")
        return ["generate", str(path), "-o", output, "--seed", "0", "-q", *extra]

    return build


def not_a_zip(folder: Path) -> Path:
    path = folder / "release.zip"
    path.write_bytes(b"colour,size\nred,1\n")
    return path


def old_bundle(folder: Path) -> Path:
    """A version 1 bundle: the release without its fitted model."""
    path = folder / "release.zip"
    with zipfile.ZipFile(io.BytesIO(release_bundle())) as archive:
        files = {name: archive.read(name) for name in archive.namelist()}
    manifest = json.loads(files.pop("manifest.json"))
    manifest.update(version=1)
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
        archive.writestr("manifest.json", json.dumps(manifest))
    return path


def repriced_bundle(folder: Path) -> Path:
    """The bundle with its ledger's epsilon edited to 0.01 and re-hashed in the manifest:
    every checksum holds, but the noise it carries means epsilon 2 (issue 21)."""
    path = folder / "release.zip"
    with zipfile.ZipFile(io.BytesIO(release_bundle())) as archive:
        files = {name: archive.read(name) for name in archive.namelist()}
    ledger = json.loads(files["ledger.json"])
    ledger.update(epsilon=0.01)
    files["ledger.json"] = json.dumps(ledger).encode()
    manifest = json.loads(files["manifest.json"])
    manifest["files"]["ledger.json"] = hashlib.sha256(files["ledger.json"]).hexdigest()
    files["manifest.json"] = json.dumps(manifest).encode()
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return path


# --------------------------------------------------------------------------------------------
# the cases
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Refused:
    """A case the CLI refuses: ``says`` are fragments of the one error line (the problem and
    the fix); ``spends`` marks a case found only after measuring, whose spend is recorded."""

    name: str
    build: Callable[[Path], list[str]]
    says: tuple[str, ...]
    spends: bool = False
    free: int = FREE
    #: a file under the case's folder that this user may not read (``chmod 0``)
    unreadable: str = ""


@dataclass(frozen=True)
class Accepted:
    """A case the CLI takes: ``columns`` the output's columns, and every output value of
    ``values`` lies in the given set (the input's values, plus missing and "other") or passes
    the given check (dates: synthesised, so new values, but dates near the input's)."""

    name: str
    build: Callable[[Path], list[str]]
    columns: tuple[str, ...]
    values: dict[str, set[str] | Callable[[str], bool]]


DELTA_FIX = "1/n^2 for a table of n rows"

REFUSED = [
    # privacy parameters: refused as they are parsed, before any file is opened
    Refused("delta 1", on_good_table("--delta", "1"), ("got 1.0", "no privacy", DELTA_FIX)),
    Refused("delta 2", on_good_table("--delta", "2"), ("got 2.0", "no privacy", DELTA_FIX)),
    Refused("delta 0", on_good_table("--delta", "0"), ("delta must be positive", DELTA_FIX)),
    Refused(
        "delta 0 without registry",
        on_good_table("--delta", "0", "--no-registry"),
        ("delta must be positive", DELTA_FIX),
    ),
    Refused("delta 0.01", on_good_table("--delta", "0.01"), ("too large", "at most 0.001")),
    Refused("delta negative", on_good_table("--delta", "-1e-9"), ("positive", DELTA_FIX)),
    Refused("delta nan", on_good_table("--delta", "nan"), ("delta must be positive",)),
    Refused("delta text", on_good_table("--delta", "tiny"), ("delta must be a number", "1e-9")),
    Refused("epsilon 0", on_good_table(epsilon="0"), ("epsilon must be a positive", "such as 1")),
    Refused("epsilon negative", on_good_table(epsilon="-1"), ("epsilon", "got -1.0", "such as 1")),
    Refused("epsilon inf", on_good_table(epsilon="inf"), ("epsilon", "finite", "got inf")),
    Refused("epsilon -inf", on_good_table(epsilon="-inf"), ("epsilon", "got -inf", "such as 1")),
    Refused("epsilon nan", on_good_table(epsilon="nan"), ("epsilon", "got nan", "such as 1")),
    Refused("epsilon text", on_good_table(epsilon="one"), ("epsilon must be a number", "'one'")),
    Refused("plan delta 1", plan("--delta", "1"), ("no privacy", DELTA_FIX)),
    Refused("rows 0", on_good_table("--rows", "0"), ("--rows", "at least 1")),
    Refused("iterations negative", on_good_table("--iterations", "-3"), ("at least 0",)),
    Refused(
        "target not a column",
        on_good_table("--target", "income"),
        ("prediction target 'income' is not a column", "columns: colour, size"),
    ),
    # files that are not there or not tables
    Refused("missing file", missing_file, ("nowhere.csv", "no such file")),
    Refused("a folder", a_folder, ("it is a folder", "table file")),
    Refused("output folder missing", missing_output_folder, ("folder", "does not exist")),
    # outputs never replace inputs or each other (issue 21): each of these replaced a file
    Refused(
        "output is the input table",
        output_at(lambda folder, argv: argv[1]),
        ("is the input table", "give another file name"),
    ),
    Refused(
        "output is the domain file",
        output_at(lambda folder, argv: argv[argv.index("--domain") + 1]),
        ("is the domain file", "give another file name"),
    ),
    Refused(
        "output is a symbolic link to the input",
        output_at(linked_to_input("symbolic")),
        ("is the input table",),
    ),
    Refused(
        "output is a hard link to the input",
        output_at(linked_to_input("hard")),
        ("is the input table",),
    ),
    Refused(
        "output is the run registry",
        output_at(lambda folder, argv: os.environ["PRIVSYN_REGISTRY"]),
        ("is the run registry",),
    ),
    Refused("output is a pipe", output_at(a_pipe), ("not a regular file", "the name of a file")),
    Refused(
        "output is a link to a device",
        output_at(a_link_to_a_device),
        ("not a regular file", "the name of a file"),
    ),
    Refused(
        "ledger written over the table output",
        ledger_on_the_output,
        ("for both -o and --ledger", "its own file"),
    ),
    Refused(
        "generate writes over its bundle",
        bundle_as_its_own_output,
        ("is the bundle", "give another file name"),
    ),
    Refused("schema infer writes over its table", schema_over_its_table, ("is the input table",)),
    Refused("empty file", on_bytes(b""), ("is empty", "give a table with a header row")),
    Refused("header only", on_csv_text("colour,size\n"), ("header but no rows", "nothing")),
    Refused("NUL bytes in the head", on_bytes(b"a,b\n1,\x002\n"), ("NUL", "CSV or a Parquet")),
    Refused("NUL byte past 64 KB", nul_after_the_head, ("NUL byte at byte", "CSV or a Parquet")),
    Refused("truncated Parquet", truncated_parquet, ("not a readable Parquet", "truncated")),
    Refused("ragged rows", on_csv_text("a,b\n1,2\n3,4,5\n"), ("line 3", "as many values")),
    Refused("unnamed column", on_csv_text("a,,b\n1,2,3\n"), ("column 2 has no name", "name")),
    Refused("unknown encoding", on_good_table("--encoding", "klingon"), ("'klingon'", "latin-1")),
    Refused(
        "Latin-1 read as strict UTF-8",
        on_csv_text(csv_lines("stadt", CITIES * 200), "--encoding", "utf-8", encoding="latin-1"),
        ("not readable as utf-8", "latin-1"),
    ),
    # the layout
    Refused(
        "duplicate names in a CSV header",
        on_csv_text(csv_lines("colour,size,colour", [f"{c},1,{c}" for c in colours()])),
        ("two columns named 'colour'", "its own name"),
    ),
    Refused("duplicate names in Parquet", duplicate_parquet, ("two columns named 'colour'",)),
    Refused(
        "duplicate --names",
        on_csv_text(
            csv_lines("", [f"{c},1" for c in colours()]).lstrip("\n"),
            "--no-header",
            "--names",
            "a,a",
        ),
        ("--names has two columns named 'a'", "its own name"),
    ),
    Refused("10,000 columns", ten_thousand_columns, ("10,000 columns", "at most 1,000")),
    Refused("bad domain JSON", bad_domain_json, ("not valid JSON", "line 1")),
    Refused("value outside the domain", value_outside_the_domain, ("'blue'", "colour")),
    # too big to load: refused from the file's size or footer, before a row is read
    Refused(
        "Parquet bomb",
        parquet_bomb,
        ("30,000,000 rows x 1 column", "GB of memory", "--engine duckdb"),
    ),
    Refused(
        "CSV bigger than memory",
        csv_bigger_than_memory,
        ("rows x 2 columns", "MB of memory", "of the 16 MB free", "--engine duckdb"),
        free=16 * 2**20,
    ),
    # sampling again from a release bundle: only the bundle is read, nothing is spent
    Refused(
        "generate: no bundle",
        generate(bundle=lambda folder: folder / "nowhere.zip"),
        ("nowhere.zip", "no such file"),
    ),
    Refused("generate: not a zip", generate(bundle=not_a_zip), ("not a zip file",)),
    Refused("generate: old bundle", generate(bundle=old_bundle), ("version 1", "sampled again")),
    Refused(
        "generate: bundle whose ledger was edited and re-hashed",
        generate(bundle=repriced_bundle),
        ("release.zip: its ledger says epsilon 0.01", "mean epsilon 2 ", "'privsyn runs export'"),
    ),
    Refused("generate: rows 0", generate("--rows", "0"), ("--rows", "at least 1")),
    Refused("generate: rows negative", generate("--rows", "-5"), ("--rows", "at least 1")),
    # rows are made and written block by block (issue 23): memory holds the blocks in flight,
    # and a count beyond the disk is refused after the first block
    Refused(
        "generate: rows beyond the disk",
        generate("--rows", "100000000000", "--workers", "1"),
        ("100,000,000,000 rows", "of disk", "fewer rows"),
    ),
    Refused(
        "generate: blocks beyond memory",
        generate("--rows", "300000000", "--block-rows", "100000000", "--workers", "2"),
        ("2 blocks of 100,000,000 rows", "GB of memory", "--workers", "--block-rows"),
    ),
    Refused("generate: decay 0", generate("--decay", "0"), ("decay must lie in (0, 1]",)),
    # found only by measuring: the spend is recorded, and the message says so
    Refused(
        "one row",
        on_csv_text("colour,size\nred,1\n"),
        ("no column is left", "larger epsilon", "recorded as run 1"),
        spends=True,
    ),
]


# --------------------------------------------------------------------------------------------
# untrusted release bundles (issue 24): each answered from what the zip's directory or the
# parsed JSON says, before the reader inflates or allocates for it
# --------------------------------------------------------------------------------------------


@cache
def rich_bundle() -> bytes:
    """A release bundle with a category, a binned number and a binned date column."""
    rng = np.random.default_rng(1)
    days = pd.Timestamp("2020-01-01") + pd.to_timedelta(rng.integers(0, 365, N), "D")
    table = pd.DataFrame(
        {
            "colour": colours(),
            "amount": rng.uniform(0, 1000, N).round(2),
            "day": days.strftime("%Y-%m-%d"),
        }
    )
    return model_bytes(PrivSyn(2.0, 1e-9).fit(table, rng=np.random.default_rng(0)))


def zipped(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def edited_json(
    name: str,
    edit: Callable[[dict], None],
    base: Callable[[], bytes] = rich_bundle,
    manifest_edit: Callable[[dict], None] = lambda manifest: None,
):
    """A bundle whose JSON member ``name`` was edited by ``edit`` and re-hashed in the
    manifest (itself edited by ``manifest_edit``), as anyone can: every checksum holds."""

    def build(folder: Path) -> Path:
        with zipfile.ZipFile(io.BytesIO(base())) as archive:
            files = {n: archive.read(n) for n in archive.namelist()}
        value = json.loads(files[name])
        edit(value)
        files[name] = json.dumps(value).encode()
        manifest = json.loads(files["manifest.json"])
        manifest["files"][name] = hashlib.sha256(files[name]).hexdigest()
        manifest_edit(manifest)
        files["manifest.json"] = json.dumps(manifest).encode()
        path = folder / "release.zip"
        path.write_bytes(zipped(files))
        return path

    return build


def person_level(person: str, k: int) -> Callable[[Path], Path]:
    """The per-row bundle restated as per person with at most ``k`` rows, in its ledger and
    its manifest alike: the noise stays the per-row one."""
    unit = {"person": person, "rows_per_person": k}
    words = f"per person ({person}), at most {k} row" + ("s" if k > 1 else "")
    return edited_json(
        "ledger.json",
        set_in(("privacy_unit",), unit),
        manifest_edit=set_in(("privacy_unit",), words),
    )


def column(model: dict, name: str) -> dict:
    return next(c for c in model["columns"] if c["name"] == name)


def patched_member(member: str, *, flags: int = 0, method: int | None = None):
    """The bundle with the zip headers (local and central) of ``member`` patched: general
    purpose ``flags`` set (bit 0: encrypted), or the compression ``method`` replaced. Python
    cannot write either, so the bytes are edited."""

    def build(folder: Path) -> Path:
        data = bytearray(rich_bundle())
        encoded = member.encode()
        # signature, offsets of flags, method, name length and name
        for signature, at_flags, at_method, at_length, at_name in (
            (b"PK\x03\x04", 6, 8, 26, 30),
            (b"PK\x01\x02", 8, 10, 28, 46),
        ):
            start = data.find(signature)
            while start >= 0:
                length = int.from_bytes(data[start + at_length : start + at_length + 2], "little")
                if bytes(data[start + at_name : start + at_name + length]) == encoded:
                    old = int.from_bytes(data[start + at_flags : start + at_flags + 2], "little")
                    data[start + at_flags : start + at_flags + 2] = (old | flags).to_bytes(
                        2, "little"
                    )
                    if method is not None:
                        data[start + at_method : start + at_method + 2] = method.to_bytes(
                            2, "little"
                        )
                start = data.find(signature, start + 4)
        path = folder / "release.zip"
        path.write_bytes(bytes(data))
        return path

    return build


GIB = 2**30


@cache
def gib_member_bundle(member: str) -> bytes:
    """The bundle with a member of 1 GiB of zeros (about 1 MB deflated) named ``member``,
    listed in the manifest with a SHA-256 it does not have."""
    with zipfile.ZipFile(io.BytesIO(rich_bundle())) as archive:
        files = {n: archive.read(n) for n in archive.namelist()}
    manifest = json.loads(files.pop("manifest.json"))
    manifest["files"][member] = "0" * 64
    if member == "model.json":
        files.pop("model.json")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
        with archive.open(member, "w", force_zip64=True) as stream:
            zeros = bytes(2**24)
            for _ in range(GIB // len(zeros)):
                stream.write(zeros)
        archive.writestr("manifest.json", json.dumps(manifest))
    return buffer.getvalue()


def gib_member(member: str) -> Callable[[Path], Path]:
    def build(folder: Path) -> Path:
        path = folder / "release.zip"
        path.write_bytes(gib_member_bundle(member))
        return path

    return build


@cache
def thirty_million_cells_bundle() -> bytes:
    """The bundle with a 2-way marginal of 6,000 x 5,000 cells, every count written out (as
    ``0,``: 60 MB of JSON, 60 KB deflated): the old reader parsed it into gigabytes."""
    with zipfile.ZipFile(io.BytesIO(rich_bundle())) as archive:
        files = {n: archive.read(n) for n in archive.namelist()}
    model = json.loads(files.pop("model.json"))
    model["marginals"][0].update(shape=[6000, 5000], values="VALUES")
    head, tail = json.dumps(model).split('"VALUES"')
    manifest = json.loads(files.pop("manifest.json"))
    digest = hashlib.sha256()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
        with archive.open("model.json", "w", force_zip64=True) as stream:
            piece = b"0," * 1_000_000
            for part in [head.encode(), b"[", *[piece] * 29, piece[:-2], b"0]", tail.encode()]:
                stream.write(part)
                digest.update(part)
        manifest["files"]["model.json"] = digest.hexdigest()
        archive.writestr("manifest.json", json.dumps(manifest))
    return buffer.getvalue()


def thirty_million_cells(folder: Path) -> Path:
    path = folder / "release.zip"
    path.write_bytes(thirty_million_cells_bundle())
    return path


def corrupted_member(folder: Path) -> Path:
    """model.json's deflated bytes damaged in the middle (its CRC-32 no longer holds)."""
    data = bytearray(rich_bundle())
    with zipfile.ZipFile(io.BytesIO(rich_bundle())) as archive:
        info = archive.getinfo("model.json")
    start = info.header_offset + 30 + len(info.filename) + len(info.extra)
    middle = start + info.compress_size // 2
    data[middle : middle + 8] = bytes(8)
    path = folder / "release.zip"
    path.write_bytes(bytes(data))
    return path


def duplicate_key(folder: Path) -> Path:
    """ledger.json with ``epsilon`` stated twice, the first one small (what a reader that
    keeps the first value shows), re-hashed."""
    with zipfile.ZipFile(io.BytesIO(rich_bundle())) as archive:
        files = {n: archive.read(n) for n in archive.namelist()}
    files["ledger.json"] = b'{"epsilon": 0.01, ' + files["ledger.json"].lstrip()[1:]
    manifest = json.loads(files["manifest.json"])
    manifest["files"]["ledger.json"] = hashlib.sha256(files["ledger.json"]).hexdigest()
    files["manifest.json"] = json.dumps(manifest).encode()
    path = folder / "release.zip"
    path.write_bytes(zipped(files))
    return path


def set_in(path: tuple, value: object) -> Callable[[dict], None]:
    """An edit that sets the entry at ``path`` (keys and indices) to ``value``."""

    def edit(document: dict) -> None:
        target = document
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return edit


REFETCH = "'privsyn runs export'"
BUNDLE_REFUSED = [
    Refused(
        "bundle: total NaN",
        generate(bundle=edited_json("model.json", set_in(("consistency", "total"), float("nan")))),
        ("consistent total (the default row count) is nan", REFETCH),
    ),
    Refused(
        "bundle: total inf",
        generate(bundle=edited_json("model.json", set_in(("consistency", "total"), float("inf")))),
        ("consistent total (the default row count) is inf", REFETCH),
    ),
    Refused(
        "bundle: total negative",
        generate(bundle=edited_json("model.json", set_in(("consistency", "total"), -5.0))),
        ("consistent total (the default row count) is -5.0", REFETCH),
    ),
    Refused(
        "bundle: total beyond memory",
        generate(bundle=edited_json("model.json", set_in(("consistency", "total"), 1e15))),
        ("1,000,000,000,000,000 rows", "fewer rows"),  # of memory, or of disk when streamed
    ),
    Refused(
        "bundle: NaN grouping weight",
        generate(
            bundle=edited_json(
                "model.json", set_in(("groupings", 0, "member_weights", 0, 0), float("nan"))
            )
        ),
        ("column 'colour' has grouping weights that are not finite numbers", REFETCH),
    ),
    Refused(
        "bundle: infinite grouping weight",
        generate(
            bundle=edited_json(
                "model.json", set_in(("groupings", 0, "member_weights", 0, 0), float("inf"))
            )
        ),
        ("grouping weights that are not finite numbers",),
    ),
    Refused(
        "bundle: encrypted member",
        generate(bundle=patched_member("model.json", flags=0x1)),
        ("model.json is encrypted", "decrypt it before use"),
    ),
    Refused(
        "bundle: encrypted data member",
        generate(bundle=patched_member("versions.json", flags=0x1)),
        ("versions.json is encrypted",),
    ),
    Refused(
        "bundle: Deflate64 member",
        generate(bundle=patched_member("model.json", method=9)),
        ("compression method 9", "zip it again with deflate"),
    ),
    Refused(
        "bundle: AES member",
        generate(bundle=patched_member("ledger.json", method=99)),
        ("compression method 99", "zip it again with deflate"),
    ),
    Refused(
        "bundle: damaged deflate data",
        generate(bundle=corrupted_member),
        # zlib finds the damage either inflating or at the CRC-32, by where it falls
        ("release.zip is damaged", REFETCH),
    ),
    Refused(
        "bundle: infinite bin edge",
        generate(
            bundle=edited_json(
                "model.json", lambda m: column(m, "amount")["edges"].__setitem__(-1, float("inf"))
            )
        ),
        ("column 'amount' has a bin edge that is not a finite number (inf)", REFETCH),
    ),
    Refused(
        "bundle: NaN bin edge",
        generate(
            bundle=edited_json(
                "model.json", lambda m: column(m, "amount")["edges"].__setitem__(0, float("nan"))
            )
        ),
        ("bin edge that is not a finite number (nan)",),
    ),
    Refused(
        "bundle: 12 KB date format",
        generate(
            bundle=edited_json(
                "model.json", lambda m: column(m, "day").update(datetime_format="%Y-%m-%d" * 1500)
            )
        ),
        ("column 'day' has a date format of 12000 characters", "more than the 64"),
    ),
    Refused(
        "bundle: marginal of 30 million cells",
        generate(bundle=thirty_million_cells),
        ("model.json holds a marginal of 30,000,000 cells", "more than the 16,777,216", REFETCH),
    ),
    Refused(
        "bundle: a shape of 30 million cells",
        generate(bundle=edited_json("model.json", set_in(("marginals", 0, "shape"), [6000, 5000]))),
        ("of 30,000,000 cells", "more than the 16,777,216", REFETCH),
    ),
    Refused(
        "bundle: noisy marginal of 30 million cells",
        generate(bundle=edited_json("marginals.json", set_in((0, "shape"), [30_000_000]))),
        ("marginals.json holds a marginal", "of 30,000,000 cells"),
    ),
    Refused(
        "bundle: a billion codes",
        generate(
            bundle=edited_json(
                "model.json",
                lambda m: m["columns"].__setitem__(
                    0,
                    {
                        "codec": "codes",
                        "name": "colour",
                        "size": 10**9,
                        "categories": None,
                        "dtype": "int64",
                    },
                ),
            )
        ),
        ("declares 1,000,000,000 codes",),
    ),
    Refused(
        "bundle: GUM iterations 10^9",
        generate(
            bundle=edited_json(
                "model.json",
                lambda m: m["sampling"]["gum"].update(iterations=10**9, patience=None),
            )
        ),
        ("asks GUM for 1,000,000,000 iterations", "more than the 10,000", REFETCH),
    ),
    Refused(
        "bundle: GUM iterations as a float",
        generate(bundle=edited_json("model.json", set_in(("sampling", "gum", "iterations"), 1e9))),
        ("asks GUM for 1000000000.0 iterations",),
    ),
    Refused(
        "bundle: per-row noise sold as per person",
        generate(bundle=person_level("pid", 20)),
        (
            "its ledger's guarantee is per person (pid), at most 20 rows, so the structure "
            "measurement on ['colour'] has sensitivity 20, but it records 1: noise for 1 row "
            "per person",
            REFETCH,
        ),
    ),
    Refused(
        "bundle: the manifest states another unit",
        generate(
            bundle=edited_json(
                "ledger.json",
                lambda ledger: None,
                manifest_edit=set_in(("privacy_unit",), "per person (pid), at most 5 rows"),
            )
        ),
        (
            "its manifest says the guarantee is 'per person (pid), at most 5 rows', but its "
            "ledger says 'per row'",
            REFETCH,
        ),
    ),
    Refused(
        "bundle: a person-level model that makes its person column",
        generate(bundle=person_level("colour", 1)),
        ("its model makes the person column 'colour'", REFETCH),
    ),
    Refused(
        "bundle: a JSON key stated twice",
        generate(bundle=duplicate_key),
        ("its ledger.json names the key 'epsilon' twice in one object", REFETCH),
    ),
    Refused(
        "bundle: 1 GiB data member, hashed in a stream",
        generate(bundle=gib_member("synthetic.csv")),
        ("synthetic.csv does not match its SHA-256",),
    ),
    Refused(
        "bundle: 1 GiB model, refused unread",
        generate(bundle=gib_member("model.json")),
        ("model.json is 1.0 GB uncompressed", "more than the", REFETCH),
    ),
    # the shape of every file read back, declared (privsyn_core/file_schemas.py)
    Refused(
        "bundle: manifest names its model by a list",
        generate(
            bundle=edited_json(
                "ledger.json", lambda ledger: None, manifest_edit=set_in(("model",), ["model.json"])
            )
        ),
        ("its manifest: the field model is a list of 1 items, not of type string or null", REFETCH),
    ),
    Refused(
        "bundle: manifest version as text",
        generate(
            bundle=edited_json(
                "ledger.json", lambda ledger: None, manifest_edit=set_in(("version",), "2")
            )
        ),
        ('its manifest\'s version is "2", not a whole number', REFETCH),
    ),
    Refused(
        "bundle: manifest version 0",
        generate(
            bundle=edited_json(
                "ledger.json", lambda ledger: None, manifest_edit=set_in(("version",), 0)
            )
        ),
        ("its manifest's version is 0", REFETCH),
    ),
    Refused(
        "bundle: manifest hash is a number",
        generate(
            bundle=edited_json(
                "ledger.json",
                lambda ledger: None,
                manifest_edit=set_in(("files", "versions.json"), 12345),
            )
        ),
        ("its manifest: the field files.versions.json is 12345, not of type string", REFETCH),
    ),
    Refused(
        "bundle: manifest lists 100,000 files",
        generate(
            bundle=edited_json(
                "ledger.json",
                lambda ledger: None,
                manifest_edit=lambda m: m["files"].update(
                    {f"f{i}": "0" * 64 for i in range(10**5)}
                ),
            )
        ),
        ("its manifest: the field files holds 100,0", "fields, more than the 256 allowed"),
    ),
    Refused(
        "bundle: ledger rho as text",
        generate(bundle=edited_json("ledger.json", set_in(("measurements", 0, "rho"), "0.1"))),
        ('its ledger: the field measurements[0].rho is "0.1", not of type number', REFETCH),
    ),
    Refused(
        "bundle: ledger without its measurements",
        generate(bundle=edited_json("ledger.json", lambda ledger: ledger.pop("measurements"))),
        ("its ledger: the file lacks the field 'measurements'", REFETCH),
    ),
    Refused(
        "bundle: model domain of 10^12 codes",
        generate(bundle=edited_json("model.json", set_in(("engine", "sizes", 0), 10**12))),
        ("its model: the field engine.sizes[0] is 1000000000000, above the largest value",),
    ),
]
REFUSED += BUNDLE_REFUSED


# --------------------------------------------------------------------------------------------
# schemas, domain files and the input file itself (issue 24): each refused from the file's
# status, its size, its bytes or what it declares, before anything is built for it
# --------------------------------------------------------------------------------------------

TOO_MANY = 1_000_000  # categories: 100,000 a column at most (privsyn_core.limits.MAX_CODES)
MERGE = "merge rare categories"
WIDER = "use wider bins"


def schema_of(colour: dict, size: dict | None = None) -> dict:
    size = {"name": "size"} if size is None else {"name": "size", **size}
    return {"version": 1, "columns": [{"name": "colour", **colour}, size]}


def categorical(categories: list) -> dict:
    return {"kind": "categorical", "categories": categories}


def numeric(**declared: object) -> dict:
    return {"kind": "numeric", "lower": 0, "upper": 3, **declared}


def declared(
    option: str,
    content: object,
    *extra: str,
    table: Callable[[], pd.DataFrame] = good_table,
    engine: tuple[str, ...] = (),
) -> Callable[[Path], list[str]]:
    """``synthesize`` on ``table`` with ``--schema`` or ``--domain`` naming a file of
    ``content``: bytes as they are, text in UTF-8, anything else as JSON; or a callable that
    makes the file (a FIFO, a folder) and returns its path."""

    def build(folder: Path) -> list[str]:
        path = folder / f"{option}.json"
        if callable(content):
            path = content(folder)
        elif isinstance(content, bytes):
            path.write_bytes(content)
        else:
            text = content if isinstance(content, str) else json.dumps(content)
            path.write_text(text, encoding="utf-8")
        source = write_csv(folder, table())
        return synthesize_argv(folder, source, f"--{option}", str(path), *engine, *extra)

    return build


def coded_table() -> pd.DataFrame:
    rng = np.random.default_rng(3)
    return pd.DataFrame({"colour": rng.integers(0, 3, N), "size": rng.integers(0, 4, N)})


def nested(depth: int, key: str) -> str:
    return "{" + f'"{key}": ' + "[" * depth + "]" * depth + "}"


def a_fifo(folder: Path) -> Path:
    os.mkfifo(folder / "pipe.json")
    return folder / "pipe.json"


def a_subfolder(folder: Path) -> Path:
    (folder / "declared").mkdir()
    return folder / "declared"


def unreadable_json(folder: Path) -> Path:
    path = folder / "unreadable.json"
    path.write_text(json.dumps({"colour": COLOURS}))
    return path


def sparse(size: int) -> Callable[[Path], Path]:
    """A file of ``size`` bytes that takes no disk (and no time) to write."""

    def make(folder: Path) -> Path:
        path = folder / "huge.json"
        with path.open("wb") as handle:
            handle.truncate(size)
        return path

    return make


def table_at(make: Callable[[Path], Path], *extra: str) -> Callable[[Path], list[str]]:
    """``synthesize`` on the table file ``make(folder)`` (a FIFO, a folder, a device)."""

    def build(folder: Path) -> list[str]:
        return synthesize_argv(folder, make(folder), *extra)

    return build


def a_fifo_table(folder: Path) -> Path:
    os.mkfifo(folder / "in.csv")
    return folder / "in.csv"


def unreadable_table(folder: Path) -> Path:
    return write_csv(folder, good_table(), "unreadable.csv")


def many(n: int, prefix: str = "c") -> list[str]:
    return [f"{prefix}{i}" for i in range(n)]


DUCKDB = ("--engine", "duckdb")
CATEGORIES_TWICE = [*many(60_000), "c5"]  # under the limit, one repeated at the end

DECLARATION_REFUSED = [
    # schemas: what a column declares, checked before a list or a bin is built from it
    Refused(
        "schema: a million categories",
        declared("schema", schema_of(categorical(many(TOO_MANY)))),
        ("column 'colour' declares 1,000,000 categories", "(100,000 codes)", MERGE),
    ),
    Refused(
        "schema: 10^7 bins",
        declared("schema", schema_of(categorical(COLOURS), numeric(bins=10**7))),
        ("column 'size' declares 10,000,000 bins", WIDER),
    ),
    Refused(
        "schema: 10^9 bins",
        declared("schema", schema_of(categorical(COLOURS), numeric(bins=10**9))),
        ("column 'size' declares 1,000,000,000 bins", WIDER),
    ),
    Refused(
        "schema: a million bin edges",
        declared(
            "schema",
            schema_of(categorical(COLOURS), {"kind": "numeric", "edges": list(range(TOO_MANY))}),
        ),
        ("column 'size' declares 1,000,000 bin edges", "so 100,001 edges"),
    ),
    Refused(
        "schema: a pair of 5,000 x 5,000 categories",
        declared("schema", schema_of(categorical(many(5000)), categorical(many(5000, "s")))),
        ("columns 'colour' (5,000 codes) and 'size' (5,000 codes)", "25,000,000 cells", "wider"),
    ),
    Refused(
        "schema: a category that is a list",
        declared("schema", schema_of(categorical(["red", ["green"]]))),
        ("schema column 'colour': the field categories[1] is a list of 1 items, not of type",),
    ),
    Refused(
        "schema: nested 100,000 deep",
        declared("schema", nested(100_000, "columns")),
        ("schema file", "nests 100,001 levels deep", "plain JSON object"),
    ),
    Refused(
        "schema: Latin-1",
        declared(
            "schema",
            json.dumps(schema_of(categorical(CITIES)), ensure_ascii=False).encode("latin-1"),
        ),
        ("schema file", "is not UTF-8 text", "line 1", "save it as UTF-8"),
    ),
    Refused(
        "schema: UTF-16",
        declared("schema", json.dumps(schema_of(categorical(COLOURS))).encode("utf-16")),
        ("is not UTF-8 text", "save it as UTF-8"),
    ),
    Refused(
        "schema: a key stated twice in a column",
        declared(
            "schema",
            '{"version": 1, "columns": [{"name": "colour", "kind": "categorical", '
            '"kind": "numeric"}, {"name": "size"}]}',
        ),
        ("names the key 'kind' twice in one object", "state each key once"),
    ),
    Refused(
        "schema: the columns stated twice",
        declared("schema", '{"version": 1, "columns": [], "columns": [{"name": "colour"}]}'),
        ("names the key 'columns' twice",),
    ),
    Refused(
        "schema: a folder",
        declared("schema", a_subfolder),
        ("cannot read schema file", "it is a folder, not a schema file"),
    ),
    Refused(
        "schema: a FIFO",
        declared("schema", a_fifo),
        ("cannot read schema file", "it is a named pipe, not a regular file"),
    ),
    Refused(
        "schema: /dev/zero",
        declared("schema", lambda folder: Path("/dev/zero")),
        ("/dev/zero: it is a device or a socket", "save it to a file"),
    ),
    Refused(
        "schema: unreadable",
        declared("schema", unreadable_json),
        ("cannot read schema file", "no permission to read it", "chmod u+r"),
        unreadable="unreadable.json",
    ),
    Refused(
        "schema: 65 MB",
        declared("schema", sparse(65 * 2**20)),
        ("is 65 MB, more than the 64 MB", MERGE.replace("rare categories", "rare ones")),
    ),
    # domain files: the same reader, and what each column declares
    Refused(
        "domain: a million categories",
        declared("domain", {"colour": many(TOO_MANY), "size": ["0", "1", "2", "3"]}),
        ("column 'colour' declares 1,000,000 categories", MERGE),
    ),
    Refused(
        "domain: a category twice in 60,001, found in linear time",
        declared("domain", {"colour": CATEGORIES_TWICE, "size": ["0", "1", "2", "3"]}),
        ("lists the category 'c5' more than once", "once in the domain"),
    ),
    Refused(
        "domain: 10^9 codes",
        declared("domain", {"colour": 10**9, "size": 4}, table=coded_table),
        ("column 'colour' declares 1,000,000,000 codes", "recode the column into fewer codes"),
    ),
    Refused(
        "domain: 10^7 codes",
        declared("domain", {"colour": 10**7, "size": 4}, table=coded_table),
        ("declares 10,000,000 codes", "(100,000 codes)"),
    ),
    Refused(
        "domain: a pair of 10,000 x 10,000 codes",
        declared("domain", {"colour": 10_000, "size": 10_000}, table=coded_table),
        ("a pair marginal of 100,000,000 cells", "more than the 16,777,216"),
    ),
    Refused(
        "domain: nested 100,000 deep",
        declared("domain", nested(100_000, "colour")),
        ("domain file", "nests 100,001 levels deep"),
    ),
    Refused(
        "domain: Latin-1",
        declared("domain", json.dumps({"stadt": CITIES}, ensure_ascii=False).encode("latin-1")),
        ("domain file", "is not UTF-8 text", "save it as UTF-8"),
    ),
    Refused(
        "domain: a key stated twice",
        declared("domain", '{"colour": ["red", "green", "blue"], "size": 4, "size": ["0"]}'),
        ("domain file", "names the key 'size' twice in one object"),
    ),
    Refused(
        "domain: a folder",
        declared("domain", a_subfolder),
        ("cannot read domain file", "it is a folder"),
    ),
    Refused(
        "domain: a FIFO",
        declared("domain", a_fifo),
        ("cannot read domain file", "it is a named pipe"),
    ),
    Refused(
        "domain: unreadable",
        declared("domain", unreadable_json),
        ("cannot read domain file", "no permission to read it"),
        unreadable="unreadable.json",
    ),
    # the input table: checked for what it is before the fingerprint or a reader reads it
    Refused(
        "input: a FIFO",
        table_at(a_fifo_table),
        ("in.csv: it is a named pipe, not a regular file", "save it to a file"),
    ),
    Refused(
        "input: /dev/zero",
        table_at(lambda folder: Path("/dev/zero")),
        ("/dev/zero: it is a device or a socket",),
    ),
    Refused(
        "input: unreadable",
        table_at(unreadable_table),
        ("cannot read", "unreadable.csv: no permission to read it", "chmod u+r"),
        unreadable="unreadable.csv",
    ),
    Refused(
        "duckdb: a FIFO",
        table_at(a_fifo_table, *DUCKDB),
        ("it is a named pipe, not a regular file",),
    ),
    Refused(
        "duckdb: /dev/zero",
        table_at(lambda folder: Path("/dev/zero"), *DUCKDB),
        ("/dev/zero: it is a device or a socket",),
    ),
    Refused("duckdb: a folder", table_at(a_subfolder, *DUCKDB), ("it is a folder", "table file")),
    Refused(
        "duckdb: unreadable",
        table_at(unreadable_table, *DUCKDB),
        ("unreadable.csv: no permission to read it",),
        unreadable="unreadable.csv",
    ),
    Refused(
        "duckdb: domain of 10^9 codes",
        declared("domain", {"colour": 10**9, "size": 4}, table=coded_table, engine=DUCKDB),
        ("column 'colour' declares 1,000,000,000 codes",),
    ),
    # GUM's iterations: the limit the bundle reader checks (privsyn_core.limits)
    Refused(
        "iterations 20,000",
        on_good_table("--iterations", "20000"),
        ("20,000 iterations, more than the 10,000", "100 is the default"),
    ),
    Refused(
        "iterations 10^9",
        on_good_table("--iterations", "1000000000"),
        ("1,000,000,000 iterations, more than the 10,000",),
    ),
    Refused(
        "generate: iterations 10^9",
        generate("--iterations", "1000000000"),
        ("1,000,000,000 iterations, more than the 10,000",),
    ),
    Refused(
        "runs list of a FIFO",
        lambda folder: ["runs", "list", str(a_fifo_table(folder))],
        ("it is a named pipe, not a regular file",),
    ),
    Refused(
        "schema: bounds near the float limit",
        declared("schema", schema_of(categorical(COLOURS), numeric(lower=-1.7e308, upper=1.7e308))),
        (
            "schema column 'size': the field upper is 1.7e+308, above the largest value allowed",
            "privsyn schema infer",
        ),
    ),
    Refused(
        "schema: bounds beyond 64-bit whole numbers",
        declared("schema", schema_of(categorical(COLOURS), numeric(lower=0, upper=1e30))),
        ("schema column 'size': the field upper is 1e+30",),
    ),
    Refused(
        "schema: a bound as text",
        declared("schema", schema_of(categorical(COLOURS), numeric(lower="0"))),
        ("schema column 'size': the field lower is \"0\", not of type number or null",),
    ),
    Refused(
        "domain: a size as text",
        declared("domain", {"colour": "three", "size": 4}, table=coded_table),
        ('the field colour is "three", not a number of codes', "its categories, such as"),
    ),
    Refused(
        "csv: header over 64 KB",
        on_csv_text(csv_lines("x" * 70_000 + ",size", ["a,1"] * 50)),
        ("its header line is longer than 64 KB", "shorten its column names"),
    ),
    Refused(
        "duckdb: header over 64 KB",
        on_csv_text(csv_lines("x" * 70_000 + ",size", ["a,1"] * 50), *DUCKDB),
        ("its header line is longer than 64 KB", "shorten its column names"),
    ),
]
REFUSED += DECLARATION_REFUSED


def all_missing_constant_unique() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "missing": [""] * N,
            "constant": ["k"] * N,
            "unique": [f"id{i}" for i in range(N)],
            "colour": colours(),
        }
    )


INF_NAN = ["1.5", "inf", "-inf", "Infinity", "NaN", "nan", "NA", "2"]
MIXED = ["1", "2", "abc", "3.5", "2020-01-01"]
DATES = ["2020-01-05", "05/01/2020", "5 Jan 2020", "2020/01/05"]


def column_of(values: list[str], name: str) -> Callable[[], pd.DataFrame]:
    """``values`` drawn uniformly, on enough rows (4N) that each passes the thresholds."""

    def frame() -> pd.DataFrame:
        rng = np.random.default_rng(2)
        return pd.DataFrame({name: rng.choice(values, 4 * N), "colour": colours(4 * N)})

    return frame


def near_the_input_date(text: str) -> bool:
    """A date (in the format decided privately, one of the input's) within a year of the one
    date the input holds: the noisy range estimate widens it, never by years."""
    formats = ["%Y-%m-%d", "%d/%m/%Y", "%d %b %Y", "%Y/%m/%d"]
    for spelling in formats:
        try:
            day = pd.to_datetime(text, format=spelling)
        except ValueError:
            continue
        return abs((day - pd.Timestamp("2020-01-05")).days) <= 366
    return False


def five_million_character_cell(folder: Path) -> list[str]:
    rows = [f"{'x' * 5_000_000},1"] + [f"{c},{i % 3}" for i, c in enumerate(colours())]
    return synthesize_argv(folder, write_text(folder, csv_lines("colour,size", rows)))


def named_beside_decoys(name: str, *extra: str) -> Callable[[Path], list[str]]:
    """The good table in a file called ``name`` (a glob pattern), beside ``g1`` and ``g2``
    files the pattern matches, each of 3N rows coloured "DECOY": a reader that globs would
    synthesise DECOY, charging the budget to the named file alone (issue 21)."""

    def build(folder: Path) -> list[str]:
        suffix = Path(name).suffix
        decoy = pd.DataFrame({"colour": ["DECOY"] * (3 * N), "size": ["9"] * (3 * N)})
        tables = {f"g1{suffix}": decoy, f"g2{suffix}": decoy, name: good_table()}
        for file, frame in tables.items():
            data = io.BytesIO()  # through a file object: no writer globs the name
            if suffix == ".parquet":
                frame.to_parquet(data, index=False)
            else:
                frame.to_csv(data, index=False)
            (folder / file).write_bytes(data.getvalue())
        return synthesize_argv(folder, folder / name, *extra)

    return build


ACCEPTED = [
    Accepted(
        "UTF-8 byte-order mark",
        on_csv_text("\ufeff" + csv_lines("colour,size", [f"{c},1" for c in colours()])),
        ("colour", "size"),
        {"colour": set(COLOURS)},
    ),
    Accepted(
        "UTF-16 with its byte-order mark",
        on_csv_text(csv_lines("stadt,n", [f"{c},1" for c in CITIES * 200]), encoding="utf-16"),
        ("stadt", "n"),
        {"stadt": set(CITIES)},
    ),
    Accepted(
        "Latin-1 with semicolons",
        on_csv_text(
            csv_lines("stadt;wert", [f"{c};{i % 4}" for i, c in enumerate(CITIES * 200)]),
            encoding="latin-1",
        ),
        ("stadt", "wert"),
        {"stadt": set(CITIES)},
    ),
    Accepted(
        "Windows line ends",
        on_csv_text(csv_lines("colour,size", [f"{c},1" for c in colours()]).replace("\n", "\r\n")),
        ("colour", "size"),
        {"colour": set(COLOURS), "size": {"1"}},
    ),
    Accepted(
        "quoted line breaks",
        on_csv_text(csv_lines("note,size", [f'"first\nthen {c}",1' for c in colours()])),
        ("note", "size"),
        {"note": {f"first\nthen {c}" for c in COLOURS}},
    ),
    Accepted(
        "one column",
        on_frame(lambda: pd.DataFrame({"colour": colours()})),
        ("colour",),
        {"colour": set(COLOURS)},
    ),
    Accepted(
        "a 5-million-character cell",
        five_million_character_cell,
        ("colour", "size"),
        {"colour": set(COLOURS)},  # the long value is rare: it never survives thresholding
    ),
    Accepted(
        "all-missing, constant and all-unique columns",
        on_frame(all_missing_constant_unique),
        ("constant", "colour"),  # nothing of the other two survives the private estimates
        {"constant": {"k"}, "colour": set(COLOURS)},
    ),
    Accepted(
        "inf and NaN spellings",
        on_frame(column_of(INF_NAN, "x")),
        ("x", "colour"),
        {"x": set(INF_NAN)},
    ),
    Accepted(
        "mixed types in one column",
        on_frame(column_of(MIXED, "x")),
        ("x", "colour"),
        {"x": set(MIXED)},
    ),
    Accepted(
        "dates in several formats",
        on_frame(column_of(DATES, "when")),
        ("when", "colour"),
        {"when": near_the_input_date},
    ),
    Accepted(
        "duckdb file named with a glob",
        named_beside_decoys("g*.csv", "--engine", "duckdb"),
        ("colour", "size"),
        {"colour": set(COLOURS), "size": {"0", "1", "2", "3"}},
    ),
    Accepted(
        "duckdb Parquet file named with brackets",
        named_beside_decoys("g[12].parquet", "--engine", "duckdb"),
        ("colour", "size"),
        {"colour": set(COLOURS), "size": {"0", "1", "2", "3"}},
    ),
]


# --------------------------------------------------------------------------------------------
# the checks
# --------------------------------------------------------------------------------------------


def files_under(folder: Path) -> dict[str, str]:
    """Every path under ``folder`` with its regular file's content hash, so that a refused
    case that replaced a file (an input named as the output) shows as a change too."""
    return {
        str(p.relative_to(folder)): _content(p) if p.is_file() else "" for p in folder.rglob("*")
    }


def _content(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except PermissionError:  # an unreadable case's file: its status must not change
        return f"unreadable {path.stat().st_mtime_ns}"


def make_unreadable(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``chmod 0``; where that binds no one (root reads anything), the open is refused as
    the kernel refuses it to anyone else."""
    path.chmod(0)
    if not os.access(path, os.R_OK):
        return
    opener = inputs._open

    def refused(name: str | Path) -> int:
        if Path(name).resolve() == path.resolve():
            raise PermissionError(13, "Permission denied", str(name))
        return opener(name)

    monkeypatch.setattr(inputs, "_open", refused)


def registry_spend() -> list[float]:
    return [run.rho for run in Registry().runs()]


@pytest.fixture
def free_memory(monkeypatch: pytest.MonkeyPatch) -> Callable[[int], None]:
    def set_free(free: int) -> None:
        monkeypatch.setattr(memory, "available_bytes", lambda: free)

    return set_free


def test_there_are_at_least_30_cases():
    assert len(REFUSED) + len(ACCEPTED) >= 30
    assert len({case.name for case in REFUSED + ACCEPTED}) == len(REFUSED) + len(ACCEPTED)


@pytest.mark.parametrize("case", REFUSED, ids=lambda case: case.name)
@pytest.mark.slow
def test_refused_with_one_line_naming_the_problem_and_the_fix(
    case: Refused,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    free_memory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    free_memory(case.free)
    (tmp_path / "out").mkdir()
    argv = case.build(tmp_path)
    if case.unreadable:
        make_unreadable(tmp_path / case.unreadable, monkeypatch)
    capsys.readouterr()
    before = files_under(tmp_path)

    status = main(argv)

    out, err = capsys.readouterr()
    assert status == 2, err
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1, err
    line = lines[0]
    assert line.startswith("privsyn: error: "), line
    assert "Traceback" not in err and "internal error" not in line
    for fragment in case.says:
        assert fragment in line, f"{fragment!r} not in {line!r}"
    assert files_under(tmp_path) == before, "a file was left behind"
    spend = registry_spend()
    if case.spends:
        assert len(spend) == 1 and spend[0] > 0
    else:
        assert spend == []


@pytest.mark.parametrize("case", ACCEPTED, ids=lambda case: case.name)
@pytest.mark.slow
def test_accepted_with_output_that_reads_like_the_input(
    case: Accepted, tmp_path: Path, capsys: pytest.CaptureFixture[str], free_memory
) -> None:
    free_memory(FREE)
    (tmp_path / "out").mkdir()
    argv = case.build(tmp_path)

    status = main(argv)

    out, err = capsys.readouterr()
    assert status == 0, err
    assert (out, err) == ("", "")
    written = sorted(files_under(tmp_path / "out"))
    assert written == ["synthetic.csv"]
    synthetic = read_table(tmp_path / "out" / "synthetic.csv")
    assert tuple(synthetic.columns) == case.columns
    assert len(synthetic) > 0.8 * N
    for name, allowed in case.values.items():
        present = set(synthetic[name].dropna())
        assert present, name
        if callable(allowed):
            assert all(allowed(value) for value in present), (name, sorted(present)[:5])
        else:
            assert present <= allowed | {"other"}, (name, present - allowed)
    text = (tmp_path / "out" / "synthetic.csv").read_text(encoding="utf-8")
    assert "Ã" not in text and "\ufffd" not in text and "\ufeff" not in text  # no mojibake
    assert len(registry_spend()) == 1


# --------------------------------------------------------------------------------------------
# the same refusals from the engine, for front ends other than the CLI
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "delta, says",
    [
        (1.0, "no privacy"),
        (2.0, "got 2.0"),
        (0.0, "delta must be positive"),
        (0.01, "too large"),
        (float("nan"), "delta must be positive"),
    ],
)
def test_the_engine_refuses_delta_before_reading_the_table(delta, says):
    with pytest.raises(InputError, match=says) as refused:
        synthesize(good_table(), 1.0, delta, rng=np.random.default_rng(0))
    assert "reserved" not in str(refused.value)
    with pytest.raises(InputError, match=says):
        PrivacyLedger.from_epsilon_delta(1.0, delta, reserved_delta=0.0)


def test_the_engine_refuses_a_wide_table_before_measuring():
    wide = pd.DataFrame(np.ones((3, 1_001), dtype=int).astype(str))
    wide.columns = [f"c{i}" for i in range(1_001)]
    with pytest.raises(InputError, match="1,001 columns") as refused:
        synthesize(wide, 1.0, 1e-9, rng=np.random.default_rng(0))
    assert not isinstance(refused.value, FailedAfterSpending)


def test_the_load_check_refuses_from_the_footer_alone(tmp_path, free_memory):
    free_memory(FREE)
    path = tmp_path / "in.parquet"
    parquet_bomb(tmp_path)
    with pytest.raises(InputError, match="--engine duckdb"):
        read_table(path)
    # with room enough, the same estimate lets it through (not loaded here)
    memory.check_load_fits(str(path), 30_000_000, 1, "parquet", available=64 * FREE)


def peak_while_refused(path: Path, says: str) -> int:
    """The most bytes Python held at once while :func:`load_model` refused ``path``."""
    tracemalloc.start()
    try:
        with pytest.raises(InputError, match=says):
            load_model(path)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.slow
def test_a_gib_member_is_hashed_in_a_stream_not_held(tmp_path):
    """The 1 GiB member of ``bundle: 1 GiB data member`` costs the reader its 1 MiB pieces,
    not the 2.2 GB it once read before the checksum refused it."""
    peak = peak_while_refused(gib_member("synthetic.csv")(tmp_path), "does not match its SHA")
    assert peak < 32 * 2**20, f"{peak / 2**20:.0f} MiB held"


@pytest.mark.slow
def test_a_marginal_of_30_million_cells_is_refused_before_it_is_parsed(tmp_path):
    """Its 60 MB of JSON are read (within the member limit) but never parsed: the shape is
    read off the raw bytes first."""
    path = thirty_million_cells(tmp_path)
    with zipfile.ZipFile(path) as archive:
        assert archive.getinfo("model.json").file_size > 60_000_000
    peak = peak_while_refused(path, "30,000,000 cells")
    assert peak < 200 * 2**20, f"{peak / 2**20:.0f} MiB held"


@pytest.mark.parametrize(
    "text, says",
    [
        (b'{"colour": 1000000000, "size": 4}', "declares 1,000,000,000 codes"),
        (b'{"colour": 10000, "size": 10000}', "a pair marginal of 100,000,000 cells"),
        (b'{"colour": 3, "colour": 4, "size": 4}', "names the key 'colour' twice"),
        (nested(100_000, "colour").encode(), "nests 100,001 levels deep"),
    ],
)
def test_the_dashboards_domain_file_is_held_to_the_same_limits(text, says):
    from dashboard.sources import domain_codes

    with pytest.raises(InputError, match=says):
        domain_codes(text, ("colour", "size"))
