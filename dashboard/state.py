"""Per-session state: the table, its schema, the settings and the last result.

Streamlit keeps ``st.session_state`` per browser session, so two people never see each
other's table, settings or results. Results live here with a fingerprint of their inputs;
the DP synthesis is never cached (a cache hit would replay the same noise).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from privsyn_core.columns import schema_from_dtypes
from privsyn_core.io import read_table
from privsyn_core.pipeline import SynthesisResult
from privsyn_core.schema import Schema

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "assets" / "adult.csv"
SAMPLE_NAME = "UCI Adult sample (assets/adult.csv)"

DEFAULTS: dict[str, Any] = {
    "epsilon": 1.0,
    "delta_text": "1e-9",
    "one_way_share": 0.1,
    "indif_share": 0.1,
    "domain_share": 0.05,
    "iterations": 100,
    "stop_at_plateau": True,
    "seed_text": "",
    "raw_domains": False,
}


@dataclass(frozen=True)
class Finished:
    """A finished run and what it was run on."""

    result: SynthesisResult
    fingerprint: str
    table_name: str
    epsilon: float
    delta: float
    seconds: float


def init() -> None:
    """First visit of a session: the sample table, the default settings, no result."""
    ss = st.session_state
    for key, value in DEFAULTS.items():
        ss.setdefault(key, value)
    if "table" not in ss:
        set_table(load_sample(), SAMPLE_NAME)
    ss.setdefault("run_state", "idle")
    ss.setdefault("finished", None)
    ss.setdefault("partial_history", [])


def load_sample() -> pd.DataFrame:
    return read_table(SAMPLE)


def set_table(table: pd.DataFrame, name: str) -> None:
    ss = st.session_state
    ss["table"] = table
    ss["table_name"] = name
    ss["schema"] = schema_from_dtypes(table)
    ss["finished"] = None
    ss["run_state"] = "idle"
    ss["partial_history"] = []


def table() -> pd.DataFrame:
    return st.session_state["table"]


def schema() -> Schema:
    return st.session_state["schema"]


def fingerprint(frame: pd.DataFrame, schema: Schema, settings: dict[str, Any]) -> str:
    digest = hashlib.sha256()
    digest.update(pd.util.hash_pandas_object(frame, index=False).to_numpy().tobytes())
    digest.update(schema.dumps().encode())
    digest.update(repr(sorted(settings.items())).encode())
    return digest.hexdigest()[:16]


def finished_or_stop(message: str) -> Finished:
    """The session's finished run; without one, show ``message`` and end this page's script."""
    finished = st.session_state.get("finished")
    if finished is None:
        st.info(message)
        st.stop()
    return finished


def dp_badge() -> None:
    st.badge("DP release", icon=":material/verified_user:", color="green")


def owner_badge() -> None:
    st.badge("owner-only: reads the raw data", icon=":material/visibility_lock:", color="orange")
