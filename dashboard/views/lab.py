"""Lab: two to four of the paper's choices on the loaded table, side by side, over seeds.

The engine does the work (``privsyn_core.lab``): configurations that differ only in how the
table is generated share one measurement per seed, and each measurement is a run's spend at the
Privacy page's epsilon and delta, recorded in the run registry as it is made. The comparison
runs in this page's script (a progress bar; the toolbar's Stop ends it), in one of the server's
run slots: when they are all busy the page says so instead of queueing. Convergence curves are
post-processing of DP measurements; the fidelity scores read the real table and are owner-only,
never exported.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from privsyn_core.errors import FailedAfterSpending, InputError
from privsyn_core.generation.gum import STRATEGY_NAMES
from privsyn_core.lab import MAX_ARMS, MAX_SEEDS, LabArm, LabProgress, plan_lab, run_lab
from privsyn_core.privacy.ledger import BudgetExceededError, PrivacyLedger, epsilon_from_rho

__package__ = f"{Path(__file__).resolve().parent.parent.name}.views"

from .. import records, state, worker
from ..charts import lab_convergence, lab_fidelity
from ..settings import current_config, parse_delta, parse_epsilon

#: ready-made comparisons: (name, paper section, [(configuration, top-level and GUM changes)])
PRESETS: dict[str, tuple[str, list[tuple[str, dict[str, Any]]]]] = {
    "GUM vs MCF": (
        "section 5 and appendix H: GUM against min-cost flow, one marginal at a time",
        [("GUM", {}), ("MCF", {"synthesis": "mcf"})],
    ),
    "How the marginal budget is split": (
        "section 6.4: budget by cells^(2/3), equal Gaussian shares, equal Laplace shares",
        [
            ("weighted Gaussian", {}),
            ("equal Gaussian", {"noise": "equal_gaussian"}),
            ("equal Laplace", {"noise": "equal_laplace"}),
        ],
    ),
    "DenseMarg vs PrivBayes": (
        "section 6.3: Algorithm 1's marginals against a PrivBayes network on InDif scores",
        [("DenseMarg", {}), ("PrivBayes-InDif", {"selection": "privbayes"})],
    ),
    "GUM update strategies": (
        "appendix I: S3 half-half (our default), S5 half-half + duplicate (the paper's), "
        "S6 half-half + replace",
        [("S3", {"strategy": "S3"}), ("S5", {"strategy": "S5"}), ("S6", {"strategy": "S6"})],
    ),
    "Alpha decay": (
        "section 5.3 and appendix J: how fast GUM's step size shrinks",
        [
            ("step", {}),
            ("exponential", {"decay_schedule": "exponential"}),
            ("none", {"decay_schedule": "none"}),
        ],
    ),
    "Consistency on or off": (
        "section 4.3: reconcile the noisy marginals before GUM, or not",
        [("consistent", {}), ("not consistent", {"consistency": False})],
    ),
}
CUSTOM = "Custom"
GUM_FIELDS = ("strategy", "decay_schedule")
#: the custom editor's choices: field -> (label, options)
CHOICES: dict[str, tuple[str, tuple[Any, ...]]] = {
    "selection": ("selection", ("densemarg", "privbayes", "all_pairs")),
    "noise": ("noise allocation", ("weighted_gaussian", "equal_gaussian", "equal_laplace")),
    "consistency": ("consistency", (True, False)),
    "synthesis": ("synthesis", ("gum", "mcf")),
    "strategy": ("GUM update strategy", ("S1", "S2", "S3", "S4", "S5", "S6")),
    "decay_schedule": ("alpha decay", ("step", "exponential", "linear", "sqrt", "none")),
}
METRICS = ("2-way L1", "3-way range error", "SVM misclassification")


def configured(changes: dict[str, Any]) -> Any:
    """The Privacy page's configuration with ``changes`` (GUM's fields go into ``gum``)."""
    base = current_config()
    gum = {k: v for k, v in changes.items() if k in GUM_FIELDS}
    top = {k: v for k, v in changes.items() if k not in GUM_FIELDS}
    return replace(base, gum=replace(base.gum, **gum), **top)


def shown(option: Any) -> str:
    """An option as a person reads it: on/off for switches, words for the engine's names."""
    if isinstance(option, bool):
        return "on" if option else "off"
    if option in STRATEGY_NAMES:
        return f"{option}: {STRATEGY_NAMES[option].replace('_', ' ')}"
    return str(option).replace("_", " ")


def custom_arms() -> list[LabArm]:
    engine = current_config()
    paper_name = {long: short for short, long in STRATEGY_NAMES.items()}
    default = {
        **{f: getattr(engine, f) for f in ("selection", "noise", "consistency", "synthesis")},
        "strategy": paper_name[engine.gum.strategy],
        "decay_schedule": engine.gum.decay_schedule,
    }
    count = st.number_input("configurations", 2, MAX_ARMS, 3, key="lab_count")
    arms = []
    for i, column in enumerate(st.columns(int(count))):
        with column:
            name = st.text_input("name", f"config {i + 1}", key=f"lab_name_{i}")
            changes = {
                field: st.selectbox(
                    label,
                    options,
                    index=options.index(default[field]),
                    format_func=shown,
                    key=f"lab_{field}_{i}",
                )
                for field, (label, options) in CHOICES.items()
            }
            arms.append(LabArm(name, configured(changes)))
    return arms


st.title("Lab: compare the paper's choices")
st.write(
    "PrivSyn's paper justifies each of its choices by comparing it with alternatives. Here "
    "you re-run such a comparison on your own table: pick two to four configurations, run "
    "each on the same table and budget with several seeds, and compare how GUM converges "
    "and how close each synthetic table comes to the real one."
)
ss = st.session_state
if state.disk() is not None:
    st.info(
        "The Lab compares configurations on a table in memory. The table in use is a file "
        "on disk (for full-size runs on the Run page): load a table, or a sample of this one, "
        "on the Data page to compare configurations."
    )
    st.stop()
try:
    epsilon = parse_epsilon(ss["epsilon"])
    delta = parse_delta(ss["delta_text"])
    current_config()
except InputError as exc:
    st.error(f"{exc} (fix it on the Privacy page)")
    st.stop()

preset = st.selectbox("comparison", [*PRESETS, CUSTOM], key="lab_preset")
if preset == CUSTOM:
    arms = custom_arms()
else:
    about, members = PRESETS[preset]
    st.caption(f"Paper, {about}.")
    arms = [LabArm(name, configured(changes)) for name, changes in members]
left, right = st.columns(2)
seeds = left.number_input("seeds (each a fresh measurement)", 1, MAX_SEEDS, 3, key="lab_seeds")
columns = [c.name for c in state.schema().included()]
label = right.selectbox(
    "column to predict for the SVM score (optional)",
    [None, *columns],
    index=[None, *columns].index(ss["target"]) if ss.get("target") in columns else 0,
    format_func=lambda name: "none" if name is None else name,
    key="lab_label",
)
try:
    plan = plan_lab(arms, int(seeds))
except InputError as exc:
    st.error(str(exc))
    st.stop()

rho = plan.rho(epsilon, delta)


def in_words(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


shared = [in_words([plan.arms[i].name for i in g]) for g in plan.groups if len(g) > 1]
st.info(
    f"**Privacy cost: {plan.measurements} measurements of the table** ({len(plan.groups)} per "
    f"seed{'; ' + ', '.join(shared) + ' share one, since they differ only after measuring' if shared else ''}). "  # noqa: E501
    f"Each is a run's spend at epsilon {epsilon:g}, delta {delta:g}: together up to rho "
    f"{rho:.3g}, that is (epsilon {epsilon_from_rho(rho, delta):.3g}, delta {delta:g})-DP "
    "for this table, recorded in the run registry like any run."
)

if st.button("Run the comparison", key="lab_run", type="primary"):
    dataset = state.dataset_fingerprint()
    refusal = None
    try:
        registry = records.Registry()
        registry.check(dataset, rho)
    except BudgetExceededError:
        refusal = records.refusal(registry.budget(dataset), rho, delta)
    except records.REGISTRY_ERRORS as exc:
        refusal = records.unavailable(exc)
    if refusal:
        st.error(refusal)
        st.stop()
    if not worker.SLOTS.try_take():
        st.warning(
            f"The server is running its limit of {worker.max_runs()} syntheses at once. "
            "Nothing was measured: run the comparison again when one of them has finished."
        )
        st.stop()
    bar = st.progress(0.0, text="starting")
    recorded: list[int] = []

    def show(progress: LabProgress) -> None:
        bar.progress(progress.done / progress.total, text=progress.text)

    def record(ledger: PrivacyLedger) -> None:
        config = {"outcome": f"lab: {preset}", "epsilon": epsilon, "delta": delta,
                  "configurations": [a.name for a in plan.arms], "seeds": plan.seeds}  # fmt: skip
        with records.budget_warnings():
            recorded.append(records.Registry().record(dataset, ss["table_name"], ledger, config))

    try:
        result = run_lab(
            state.table(), epsilon, delta, plan, schema=state.schema(), label=label,
            on_progress=show, on_measured=record,
        )  # fmt: skip
    except FailedAfterSpending as exc:
        st.error(f"{exc}. What was spent is recorded (runs {', '.join(map(str, recorded))}).")
        st.stop()
    except (InputError, BudgetExceededError) as exc:
        st.error(str(exc))
        st.stop()
    finally:
        worker.SLOTS.give_back()
    bar.empty()
    ss["lab_result"] = (preset, label, result, tuple(recorded))

if ss.get("lab_result") is not None:
    preset_run, label_run, result, run_ids = ss["lab_result"]
    st.subheader(f"{preset_run}: {result.plan.seeds} seeds")
    st.caption(
        f"Spent rho {result.spent_rho:.3g} in {len(result.ledgers)} measurements, recorded as "
        f"runs {', '.join(map(str, run_ids))} (History)."
    )
    st.markdown("**How GUM converges** (DP: against the noisy marginals, no real data)")
    errors: dict[str, list] = {}
    for r in result.runs:
        errors.setdefault(r.arm, []).append(r.errors)
    st.plotly_chart(lab_convergence(errors), key="lab_convergence")
    st.markdown("**How close to the real table**")
    st.warning(
        "Owner-only: these scores compare with the private table. They are not differentially "
        "private, are never exported, and are for you to judge the configurations, not to share."
    )
    frame = result.frame()
    metrics = [m for m in METRICS if frame[m].notna().any()]
    summary = (
        frame.melt(id_vars="configuration", value_vars=metrics, var_name="metric")
        .groupby(["configuration", "metric"], sort=False)["value"]
        .agg(["mean", "std"])
        .reset_index()
    )
    st.plotly_chart(lab_fidelity(summary, metrics), key="lab_fidelity")
    table = pd.DataFrame(
        {
            "configuration": name,
            **{m: f"{group[m].mean():.4g} ± {group[m].std():.2g}" for m in metrics},
            "iterations": f"{group['iterations'].mean():.0f}",
            "seconds per run": f"{group['seconds'].mean():.1f}",
        }
        for name, group in frame.groupby("configuration", sort=False)
    )
    st.dataframe(table, hide_index=True, key="lab_table")
    st.caption(
        "Lower is better everywhere: mean ± standard deviation over seeds."
        + (f" SVM: trained on the synthetic table to predict '{label_run}'." if label_run else "")
    )
