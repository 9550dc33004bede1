"""Shared fixtures: the bundled real tables and small planted tables."""

from __future__ import annotations

import hashlib
import io
import json
import threading
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parent.parent

#: fixtures that make every test using them (directly or through another fixture) slow, so such
#: tests leave the quick tier (``pytest -m "not slow"``) without a mark of their own: each
#: starts a program that alone takes longer than most test modules
SLOW_FIXTURES = {
    "chromium": "a real browser, usually with a Streamlit server behind it",
    "spark": "a local Spark session (a JVM)",
    "installed": "the project's wheel built and installed into a fresh virtual environment",
}

#: which collected test modules have at least one test in the quick tier, recorded before ``-m``
#: deselects anything (tests/test_quick_tier.py reads it)
QUICK_MODULES: pytest.StashKey[dict[str, bool]] = pytest.StashKey()


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Marks the tests that use a :data:`SLOW_FIXTURES` fixture slow, then records for each
    module whether any of its tests is quick. ``tryfirst``: both happen before pytest's own
    hook applies ``-m``, so ``-m "not slow"`` sees the marks and the record sees every test."""
    quick: dict[str, bool] = {}
    for item in items:
        if SLOW_FIXTURES.keys() & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
        module = item.nodeid.split("::", 1)[0]
        quick[module] = quick.get(module, False) or item.get_closest_marker("slow") is None
    config.stash[QUICK_MODULES] = quick


@pytest.fixture(scope="session")
def adult() -> tuple[pd.DataFrame, dict[str, int]]:
    table = pd.read_csv(ROOT / "assets" / "adult-coded.csv")
    domain = json.loads((ROOT / "assets" / "adult-coded-domain.json").read_text())
    return table, domain


@pytest.fixture(scope="session")
def nltcs() -> tuple[pd.DataFrame, dict[str, int]]:
    table = pd.read_csv(ROOT / "tests" / "data" / "nltcs.csv")
    domain = json.loads((ROOT / "tests" / "data" / "nltcs-domain.json").read_text())
    return table, domain


def planted_pair(n: int, flip: float, rng: np.random.Generator, extra: int = 2) -> pd.DataFrame:
    """Columns a, b equal except for a ``flip`` share of rows, plus independent noise columns."""
    a = rng.integers(0, 4, n)
    b = np.where(rng.random(n) < flip, rng.integers(0, 4, n), a)
    data = {"a": a, "b": b}
    for k in range(extra):
        data[f"noise{k}"] = rng.integers(0, 3, n)
    return pd.DataFrame(data)


@pytest.fixture(autouse=True)
def _private_registry(tmp_path_factory, monkeypatch):
    """Every test gets its own run registry (outside its tmp_path), never the user's."""
    folder = tmp_path_factory.mktemp("registry")
    monkeypatch.setenv("PRIVSYN_REGISTRY", str(folder / "registry.sqlite3"))


@contextmanager
def only_slot_held(monkeypatch) -> Iterator[None]:
    """The dashboard server's cap set to one run, and that slot held by another session's run
    until the block ends (then that run ends, refused, and frees its slot)."""
    from dashboard import worker
    from privsyn_core.config import PrivSynConfig
    from privsyn_core.errors import InputError

    monkeypatch.setenv(worker.MAX_RUNS_VARIABLE, "1")
    release = threading.Event()

    def blocked(*, on_progress):
        release.wait(60)
        raise InputError("stopped by the test")

    other = worker.start(
        worker.RunRequest(blocked, lambda: "other", "other.csv", 1.0, 1e-9, PrivSynConfig(), {})
    )
    try:
        yield
    finally:
        release.set()
        other.thread.join(timeout=30)


def edited_bundle(
    data: bytes, name: str, edit: Callable[[bytes], bytes], rehash: bool = True
) -> bytes:
    """``data`` (a release bundle) with its file ``name`` edited, and that file's SHA-256 in the
    manifest updated as anyone can (``rehash``) or left stale."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        files = {n: archive.read(n) for n in archive.namelist()}
    files[name] = edit(files[name])
    if rehash and name != "manifest.json":
        manifest = json.loads(files["manifest.json"])
        manifest["files"][name] = hashlib.sha256(files[name]).hexdigest()
        files["manifest.json"] = json.dumps(manifest).encode()
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for n, content in files.items():
            archive.writestr(n, content)
    return out.getvalue()
