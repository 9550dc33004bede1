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

st.set_page_config(page_title="PrivSyn Studio", page_icon=":material/shield_lock:", layout="wide")
state.init()

VIEWS = ROOT / "dashboard" / "views"
pages = [
    st.Page(VIEWS / "data.py", title="Data", icon=":material/table:", default=True),
    st.Page(VIEWS / "privacy.py", title="Privacy", icon=":material/lock:"),
    st.Page(VIEWS / "run.py", title="Run", icon=":material/play_arrow:"),
    st.Page(VIEWS / "marginals.py", title="Marginals", icon=":material/hub:"),
    st.Page(VIEWS / "results.py", title="Results", icon=":material/download:"),
    st.Page(VIEWS / "learn.py", title="Learn", icon=":material/school:"),
]
st.navigation(pages).run()
