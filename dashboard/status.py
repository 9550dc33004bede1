"""The run in progress, in the sidebar of every other page: the worker keeps running while the
user looks at other pages, and this says how far it is and when it ends."""

from __future__ import annotations

import streamlit as st

from . import state
from .state import session

#: seconds between two looks at the run's progress (the Run page itself looks more often)
POLL = 1.0
#: seconds between two looks at a run waiting for a slot: its place changes only when a run
#: ends (the Run page's WAIT_POLL)
WAIT_POLL = 2.0


def run_status() -> None:
    """The session's run in the sidebar, looked at as often as it can change."""
    current = session.job
    if current is None:
        return
    if current.progress.snapshot().ahead is None:
        _running()
    else:
        _waiting()


@st.fragment(run_every=WAIT_POLL)
def _waiting() -> None:
    watched = state.still_waiting()
    if watched is None:
        return
    current, snap = watched
    place = "next in line" if snap.ahead == 0 else f"{snap.ahead} ahead of it in line"
    st.caption(
        f"A synthesis of {current.request.name} is waiting for a free slot ({place}, "
        f"{snap.waited:.0f} s so far); it starts by itself"
    )
    st.page_link("views/run.py", label="See it or cancel it on the Run page")


@st.fragment(run_every=POLL)
def _running() -> None:
    current = session.job
    if current is None:
        return
    snap = current.progress.snapshot()
    if snap.outcome is not None:
        st.rerun()  # the whole app: state.collect() takes the outcome into the session
    st.caption(f"A synthesis of {current.request.name} is running ({snap.seconds:.0f} s)")
    st.progress(min(1.0, snap.stage_fraction), text=snap.stage_text)
    if snap.gum_text is not None:
        st.progress(min(1.0, snap.gum_fraction or 0.0), text=snap.gum_text)
    st.page_link("views/run.py", label="Watch it or cancel it on the Run page")
