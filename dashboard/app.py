"""PrivSyn Studio: load a table, set epsilon, watch PrivSyn work, download.

Run it with ``privsyn studio`` (the project's server settings, wherever the package is
installed) or, from the repository root, ``streamlit run dashboard/app.py`` (the same settings
from ``.streamlit/config.toml``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import streamlit as st

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
# Streamlit runs this file as a script, without a package. It imports its own folder as one,
# by the folder's name: "dashboard" in a checkout, "privsyn_dashboard" when installed (the
# name a wheel gives it so it cannot collide with another project's "dashboard").
__package__ = Path(__file__).resolve().parent.name

from . import state  # noqa: E402
from .status import run_status  # noqa: E402

# A run works in a background thread of this process (dashboard/worker.py). Python lets a
# thread that waits for the interpreter lock wait up to the switch interval (5 ms by default)
# before the busy thread must hand it over, and a page's script run waits like that many times.
# On a loaded 2-core machine, one A/B in the same moment: median page switch during a run
# 0.83 s at 5 ms, 0.31 s at 0.5 ms (idle: 0.29 s); repeats varied (0.37-0.9 s: the machine was
# shared). The run only yields when another thread is waiting, so it costs the run little.
sys.setswitchinterval(0.0005)

# no page_icon: Streamlit fetches material-icon favicons from a CDN, and the app stays offline
st.set_page_config(page_title="PrivSyn Studio", layout="wide")
state.init()

VIEWS = Path(__file__).resolve().parent / "views"
pages = [
    st.Page(VIEWS / "data.py", title="Data", default=True),
    st.Page(VIEWS / "privacy.py", title="Privacy"),
    st.Page(VIEWS / "run.py", title="Run"),
    st.Page(VIEWS / "marginals.py", title="Marginals"),
    st.Page(VIEWS / "results.py", title="Results"),
    st.Page(VIEWS / "history.py", title="History"),
    st.Page(VIEWS / "lab.py", title="Lab"),
    st.Page(VIEWS / "learn.py", title="Learn"),
]
page = st.navigation(pages)
if state.running() and page.title != "Run":
    with st.sidebar:
        run_status()
page.run()
