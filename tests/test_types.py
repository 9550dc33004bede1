"""The package stays type-clean: mypy, with the settings in pyproject.toml ([tool.mypy]), finds
nothing in privsyn_core. A type error fails the suite like any other test (mypy comes with
the test extra, as ruff does for tests/test_lint.py)."""

import subprocess
import sys
from pathlib import Path

import pytest

# slow as a whole: mypy over the package: about 20 s on a cold cache; while working, run mypy itself
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent


def test_mypy_reports_nothing():
    # the cache lives in .mypy_cache at the root (mypy keeps it out of git): a second run
    # checks only what changed, in about a second instead of about twenty
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
