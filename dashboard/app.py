"""PrivSyn Studio: load a table, set epsilon, watch PrivSyn work, download.

Run from the repository root: ``streamlit run dashboard/app.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import streamlit as st

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from dashboard import state  # noqa: E402
from dashboard.status import run_status  # noqa: E402

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

VIEWS = ROOT / "dashboard" / "views"
pages = [
    st.Page(VIEWS / "data.py", title="Data", default=True),
    st.Page(VIEWS / "privacy.py", title="Privacy"),
    st.Page(VIEWS / "run.py", title="Run"),
    st.Page(VIEWS / "marginals.py", title="Marginals"),
    st.Page(VIEWS / "results.py", title="Results"),
    st.Page(VIEWS / "history.py", title="History"),
    st.Page(VIEWS / "learn.py", title="Learn"),
]
page = st.navigation(pages)
if state.running() and page.title != "Run":
    with st.sidebar:
        run_status()
page.run()
