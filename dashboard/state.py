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

from privsyn_core.io import read_table
from privsyn_core.pipeline import SynthesisResult
from privsyn_core.registry import fingerprint as registry_fingerprint
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
    """A finished run, what it was run on, and how the registry recorded it.

    Only recorded runs get here: a run the registry refused is discarded, so every result the
    dashboard shows or offers is on the record. ``bundle`` is the registry's own copy of the
    release (None for raw-domain runs), so a download is byte-identical to what it holds.
    """

    result: SynthesisResult
    fingerprint: str
    table_name: str
    epsilon: float
    delta: float
    seconds: float
    run_id: int
    bundle: bytes | None
    #: the registry's lifetime-budget warnings for this run, shown with the result
    budget_warnings: tuple[str, ...] = ()


def init() -> None:
    """Every run of the app: defaults on a session's first visit (the sample table, the default
    settings, no result), and the settings kept across pages."""
    ss = st.session_state
    for key, value in DEFAULTS.items():
        # re-assigned on every run, not just defaulted: Streamlit deletes a widget's value at
        # the end of any run that does not draw the widget, i.e. on every other page, and the
        # Run page would then synthesise at the default epsilon instead of the one set
        ss[key] = ss.get(key, value)
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
    ss["dataset_fingerprint"] = None
    # nothing declared: kinds, whole numbers, date formats and domains are decided privately
    ss["schema"] = Schema.undeclared(table.columns)
    ss["finished"] = None
    ss["run_state"] = "idle"
    ss["partial_history"] = []


def table() -> pd.DataFrame:
    return st.session_state["table"]


def schema() -> Schema:
    return st.session_state["schema"]


def dataset_fingerprint() -> str:
    """The registry's key for the session's table, hashed once per table (it reads every
    value). Owner-only: it identifies the data and stays on this machine."""
    ss = st.session_state
    if ss.get("dataset_fingerprint") is None:
        ss["dataset_fingerprint"] = registry_fingerprint(table())
    return ss["dataset_fingerprint"]


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


def generated_badge() -> None:
    """For what is computed on generated tables only: neither a DP release nor owner-only."""
    st.badge("generated tables, no private data", icon=":material/science:", color="gray")
