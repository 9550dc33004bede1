"""``privsyn studio``: find the dashboard next to this package and hand over to its launcher.

The engine never imports Streamlit: the dashboard package (``privsyn_dashboard`` when
installed, the checkout's ``dashboard/`` folder otherwise) owns the server settings and starts
Streamlit (:mod:`dashboard.launch`). This module only decides which dashboard is this
privsyn's own.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
from pathlib import Path
from types import ModuleType

from privsyn_core.errors import UsageError

INSTALLED_NAME = "privsyn_dashboard"


def dashboard_package() -> str:
    """The import name of this privsyn's dashboard.

    In a source checkout (``dashboard/`` beside this package and a ``pyproject.toml`` above
    it, whether run with ``PYTHONPATH=.`` or installed editable) it is ``dashboard``, the name
    the tests import; a wheel installs it as ``privsyn_dashboard``. A ``dashboard`` of another
    project never qualifies: only the folder beside this file does.
    """
    here = Path(__file__).resolve().parent
    checkout = here.parent / "dashboard"
    if (here.parent / "pyproject.toml").is_file() and (checkout / "launch.py").is_file():
        spec = importlib.util.find_spec("dashboard")
        if spec is not None and spec.origin and Path(spec.origin).resolve().parent == checkout:
            return "dashboard"
    if importlib.util.find_spec(INSTALLED_NAME) is not None:
        return INSTALLED_NAME
    raise UsageError(
        "the dashboard is not installed with this privsyn; reinstall the package "
        "(pip install privsyn-studio, or pip install -e . in a checkout)"
    )


def launcher() -> ModuleType:
    return importlib.import_module(f"{dashboard_package()}.launch")


def studio(args: argparse.Namespace) -> int:
    return launcher().serve(
        args.port,
        args.address,
        allow_remote=args.allow_remote,
        open_browser=not args.no_browser,
    )
