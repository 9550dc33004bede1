"""The quick tier, ``pytest -m "not slow"``, keeps some tests of every test module.

The quick tier is for everyday work: it leaves out what takes long (browsers, Spark, a fresh
install, syntheses through the dashboard, statistical sweeps) and keeps each module's unit tests,
so a change to any module of privsyn_core or dashboard still meets its own tests. A new test
module is in the quick tier unless someone marks it slow; these tests make sure nobody marks a
whole module slow by accident, and that plain ``pytest`` (what CI runs) still runs every test.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
import tomllib

import pytest
from conftest import QUICK_MODULES, ROOT

#: test modules with no test in the quick tier, and why each is slow as a whole
WHOLLY_SLOW = {
    "tests/test_dashboard_browser.py": "Chromium against a Streamlit server",
    "tests/test_dashboard_convergence_browser.py": "Chromium against a Streamlit server",
    "tests/test_dashboard_lab_browser.py": "Chromium against a Streamlit server",
    "tests/test_dashboard_pages_browser.py": "Chromium against a Streamlit server",
    "tests/test_dashboard_privacy_browser.py": "Chromium against a Streamlit server",
    "tests/test_dashboard_upload_browser.py": "Chromium against a Streamlit server",
    "tests/test_soak_runs.py": "a hundred runs in one process",
    "tests/test_spark_counter.py": "a Spark session (a JVM), or spark-submit",
    "tests/test_dashboard_resample.py": "a synthesis through the dashboard before each test",
    "tests/test_dashboard_copied_rows.py": "a synthesis through the dashboard first",
    "tests/test_dashboard_downloads.py": "a synthesis through the dashboard before each test",
    "tests/test_types.py": "mypy over the whole package (run mypy itself while working)",
}


def module_files() -> list[str]:
    return sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "tests").glob("test_*.py"))


@pytest.fixture(scope="module")
def has_quick_test(request) -> dict[str, bool]:
    """For each test module, whether at least one of its tests is in the quick tier: what
    tests/conftest.py recorded when this session collected every module, or else (a run of a
    few files) what a fresh ``pytest --collect-only -m "not slow"`` of tests/ lists."""
    recorded = request.config.stash.get(QUICK_MODULES, {})
    if set(module_files()) <= recorded.keys():
        return recorded
    listed = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "not slow", "tests"],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )  # fmt: skip
    quick = {line.split("::", 1)[0] for line in listed.stdout.splitlines() if "::" in line}
    return {module: module in quick for module in module_files()}


def test_every_test_module_keeps_a_quick_test_or_is_named_wholly_slow(has_quick_test):
    dropped = [
        m for m in module_files() if not has_quick_test.get(m, False) and m not in WHOLLY_SLOW
    ]
    assert not dropped, (
        "no test of these modules is in the quick tier: leave their fast tests unmarked, or "
        f"name the module in WHOLLY_SLOW with the reason: {dropped}"
    )


def test_the_wholly_slow_modules_exist_and_have_no_quick_test(has_quick_test):
    """The list stays true: a module that gained a quick test, or is gone, leaves it."""
    stale = [m for m in WHOLLY_SLOW if not (ROOT / m).is_file() or has_quick_test.get(m, False)]
    assert not stale, stale


def test_plain_pytest_and_ci_deselect_nothing():
    """CI runs the whole suite: no ``-m`` in the default options, none in .ci/run's pytest."""
    options = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]
    addopts = shlex.split(options["ini_options"].get("addopts", ""))
    assert "-m" not in addopts and not any("slow" in option for option in addopts), addopts
    ci = (ROOT / ".ci" / "run").read_text()
    runs = [line.split("-m pytest", 1)[1] for line in ci.splitlines() if "-m pytest" in line]
    assert runs, "CI runs pytest"
    for arguments in runs:
        words = shlex.split(arguments.split("&&")[0])
        assert "-m" not in words and not any("slow" in word for word in words), arguments
