"""Lab: two to four of the paper's choices on the loaded table, side by side, over seeds.

The engine does the work (``privsyn_core.lab``): configurations that differ only in how the
table is generated share one measurement per seed, and each measurement is a run's spend at the
Privacy page's epsilon and delta, recorded in the run registry as it is made. Nothing is spent
on the first click: it states the whole spend (``LabPlan.budget``, as epsilon and delta) and
what the table's lifetime budget keeps after it, and only a second click, on "Spend epsilon
... and run", starts it; a setting changed in between withdraws the question. The comparison
runs in a background thread in one of the server's run slots, like a run (``lab_jobs.py``,
beside this page): past the cap it waits in line; a fragment polls its progress (seed,
configuration, GUM iteration) and Cancel stops it at the next step or iteration. Convergence
curves are post-processing of DP measurements; the fidelity scores read the real table and are
owner-only, never exported.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from privsyn_core.errors import InputError
from privsyn_core.generation.gum_settings import STRATEGY_NAMES
from privsyn_core.generation.independence import DEFAULT_THRESHOLD
from privsyn_core.lab import MAX_ARMS, MAX_SEEDS, LabArm, plan_lab, run_lab
from privsyn_core.privacy.conversion import epsilon_from_rho
from privsyn_core.release.registry import Registry
from privsyn_core.width_policy import WIDTH_POLICY

__package__ = f"{Path(__file__).resolve().parent.parent.name}.views"

from .. import records, state, worker
from ..charts import lab_convergence, lab_fidelity
from ..settings import current_config, parse_delta, parse_epsilon, small_number
from ..state import session
from . import lab_jobs

#: ready-made comparisons: (name, paper section, [(configuration, top-level and GUM changes)])
PRESETS: dict[str, tuple[str, list[tuple[str, dict[str, Any]]]]] = {
    "GUM vs MCF": (
        "the paper's section 5 and appendix H: GUM against min-cost flow, one marginal at a time",
        [("GUM", {}), ("MCF", {"synthesis": "mcf"})],
    ),
    "PrivSyn vs independent columns": (
        "the baseline every method must beat: each column drawn on its own from its noisy "
        "1-way marginal, no pair of columns fitted (same measurements, no extra cost)",
        [("PrivSyn", {}), ("independent columns", {"synthesis": "independent"})],
    ),
    "How the marginal budget is split": (
        "the paper's section 6.4: budget by cells^(2/3), equal Gaussian shares, equal Laplace "
        "shares",
        [
            ("weighted Gaussian", {}),
            ("equal Gaussian", {"noise": "equal_gaussian"}),
            ("equal Laplace", {"noise": "equal_laplace"}),
        ],
    ),
    "DenseMarg vs PrivBayes": (
        "the paper's section 6.3: Algorithm 1's marginals against a PrivBayes network on InDif "
        "scores",
        [
            ("DenseMarg", {"selection": "densemarg"}),
            ("PrivBayes-InDif", {"selection": "privbayes"}),
        ],
    ),
    "GUM update strategies": (
        "the paper's appendix I: S3 half-half (our default), S5 half-half + duplicate (the "
        "paper's), S6 half-half + replace",
        [("S3", {"strategy": "S3"}), ("S5", {"strategy": "S5"}), ("S6", {"strategy": "S6"})],
    ),
    "What a GUM duplication copies": (
        "the paper's section 5.2 duplicates whole records; our default copies only the marginal's "
        "neighbourhood (the attributes measured with it), so that on wide tables the pairs no "
        "marginal covers do not drift towards dependence",
        [("neighbourhood", {}), ("whole record", {"copy": "row"})],
    ),
    "Alpha decay": (
        "the paper's section 5.3 and appendix J: how fast GUM's step size shrinks",
        [
            ("step", {}),
            ("exponential", {"decay_schedule": "exponential"}),
            ("none", {"decay_schedule": "none"}),
        ],
    ),
    "Combining marginals (Algorithm 2)": (
        "the paper's appendix G: measure the selected pairs as they are (our default), merge only "
        "cliques that add no noise, or merge every clique under 5,000 cells (the paper's)",
        [
            ("pairs", {"combine": "off"}),
            ("no added noise", {"combine": "no_added_noise"}),
            ("paper's cliques", {"combine": "paper"}),
        ],
    ),
    "Consistency on or off": (
        "the paper's section 4.3: reconcile the noisy marginals before GUM, or not",
        [("consistent", {}), ("not consistent", {"consistency": False})],
    ),
}
CUSTOM = "Custom"
GUM_FIELDS = ("strategy", "decay_schedule", "copy")
#: the custom editor's choices: field -> (label, options)
CHOICES: dict[str, tuple[str, tuple[Any, ...]]] = {
    "selection": ("selection", ("auto", "densemarg", "treefirst", "privbayes", "all_pairs")),
    "combine": ("merge pairs (Algorithm 2)", ("off", "no_added_noise", "paper")),
    "noise": ("noise allocation", ("weighted_gaussian", "equal_gaussian", "equal_laplace")),
    "consistency": ("consistency", (True, False)),
    "synthesis": ("synthesis", ("auto", "gum", "mcf", "mrf", "gum+mrf", "independent")),
    "independence_threshold": ("pairs within their noise", (DEFAULT_THRESHOLD, None)),
    "strategy": ("GUM update strategy", ("S1", "S2", "S3", "S4", "S5", "S6")),
    "decay_schedule": ("alpha decay", ("step", "exponential", "linear", "sqrt", "none")),
    "copy": ("what a duplication copies", ("blanket", "row")),
}
#: what each option is, in a sentence, with the paper's section (Zhang et al. 2021)
OPTION_HELP: dict[str, str] = {
    "selection": "Which marginals are measured (sections 4.1-4.2, compared in 6.3). "
    f"auto (our default): treefirst on a table of {WIDTH_POLICY.tree_first_from} or more columns, "
    "densemarg on a narrower one. densemarg: the paper's Algorithm 1 picks pairs by their "
    "noisy InDif dependency (and Algorithm 2 may merge them, next choice). treefirst: a tree "
    "of the strongest dependencies measured first, then the pairs it does not explain (beats "
    "MST on wide tables). privbayes: a PrivBayes network whose "
    "parents are chosen on InDif scores. all_pairs: every 2-way marginal, none chosen.",
    "combine": "Whether DenseMarg's pairs are merged into larger marginals (Algorithm 2, "
    "appendix G). off (our default): the pairs are measured as they are. no added noise: a "
    "clique is merged only if it does not raise the noise error of the pairs it replaces. "
    "paper: every clique under 5,000 cells is merged. Only applies to densemarg.",
    "noise": "How the marginals' budget is split among them (section 4.2, Equation 1; compared "
    "in 6.4). weighted Gaussian: a marginal with more cells gets more (rho ~ cells^(2/3)). "
    "equal Gaussian: the same share each. equal Laplace: the same share each, as Laplace noise.",
    "consistency": "Make the noisy marginals agree with each other where they overlap, and "
    "be non-negative, before synthesis (section 4.3). Post-processing: no privacy cost.",
    "synthesis": "How rows are made to match the marginals (section 5). auto (our "
    f"default): gum+mrf on a table of {WIDTH_POLICY.mrf_from} or more columns, gum on a "
    "narrower one. gum: Gradually "
    "Update Method, moving records a few at a time. mcf: the min-cost-flow strawman of "
    "section 5.1, one marginal at a time. mrf (not the paper's): a Markov random field "
    "fitted to all the marginals at once, its samples the rows (Private-PGM's estimator, "
    "by Gibbs sampling); it helps wide tables at large budgets. gum+mrf: both from the "
    "same start, keeping for each group of connected columns the table closer to the "
    "noisy measurements (the MRF is skipped where GUM is already within the noise). "
    "independent: each column drawn on its own from its noisy 1-way marginal, no pair "
    "fitted: the baseline every method must beat. Post-processing: no privacy cost.",
    "independence_threshold": "Measured pairs whose marginal shows no more dependence than "
    "its noise would on its own are drawn as independent, from their 1-way margins (not the "
    f"paper's). {DEFAULT_THRESHOLD:g} (our default): where the dependence is at most "
    f"{DEFAULT_THRESHOLD:g} times what the noise gives, fitting the pair would copy more "
    "noise than dependence into the table; a pair independent but for a few cells (a column "
    "that copies another) is drawn from that fit, which averages the noise off those cells. "
    "off: every pair drawn as measured, as the paper does. Post-processing: no privacy cost.",
    "strategy": "How GUM changes records to fix a marginal (section 5.2, compared in "
    "appendix I): replace records, duplicate others, or half of each, and mixes.",
    "decay_schedule": "How fast GUM's step size alpha shrinks over the iterations (section "
    "5.3, compared in appendix J).",
    "copy": "What a record GUM duplicates brings along (section 5.2 copies the whole record). "
    "blanket: only the marginal's attributes and those measured together with them, so pairs "
    "no marginal covers do not drift towards dependence on wide tables. row: the whole record.",
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
    if option is None:  # the independence threshold's "off"
        return "off"
    if isinstance(option, float):
        return f"{option:g}"
    if option in STRATEGY_NAMES:
        return f"{option}: {STRATEGY_NAMES[option].replace('_', ' ')}"
    return str(option).replace("_", " ")


def custom_arms() -> list[LabArm]:
    engine = current_config()
    paper_name = {long: short for short, long in STRATEGY_NAMES.items()}
    default = {
        **{
            f: getattr(engine, f)
            for f in (
                "selection",
                "combine",
                "noise",
                "consistency",
                "synthesis",
                "independence_threshold",
            )
        },
        "strategy": paper_name[engine.gum.strategy],
        "decay_schedule": engine.gum.decay_schedule,
        "copy": engine.gum.copy,
    }
    count = st.number_input(
        "configurations", 2, MAX_ARMS, 3, key="lab_count", persist_state="session"
    )
    arms = []
    for i, column in enumerate(st.columns(int(count))):
        with column:
            name = st.text_input(
                "name", f"config {i + 1}", key=f"lab_name_{i}", persist_state="session"
            )
            changes = {
                field: st.selectbox(
                    label,
                    options,
                    index=options.index(default[field]),
                    format_func=shown,
                    help=OPTION_HELP[field],
                    key=f"lab_{field}_{i}",
                    persist_state="session",
                )
                for field, (label, options) in CHOICES.items()
            }
            arms.append(LabArm(name, configured(changes)))
    return arms


def plus_minus(values: pd.Series) -> str:
    """``mean ± std`` with the mean given to the precision of the standard deviation (two
    significant digits of it), e.g. 0.0881 ± 0.0040."""
    mean, std = values.mean(), values.std()
    if not math.isfinite(std) or std <= 0:
        return f"{mean:.4g}"
    decimals = max(0, 1 - math.floor(math.log10(std)))
    return f"{mean:.{decimals}f} ± {std:.{decimals}f}"


def counted(number: int, thing: str) -> str:
    """ "1 seed", "3 seeds"."""
    return f"{number} {thing}{'' if number == 1 else 's'}"


def in_words(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


#: seconds between two looks at a comparison's progress
POLL = 0.5


def collect() -> None:
    """Move the session's finished comparison out of its worker and into the session."""
    job = session.lab_job
    outcome = None if job is None else job.tracker.snapshot().outcome
    if job is None or outcome is None:
        return
    session.lab_job = None
    if isinstance(outcome, lab_jobs.LabDone):
        request = job.request
        session.lab_result = (request.preset, request.label, outcome.result, outcome.run_ids)
        session.lab_stopped = None
        session.lab_notes = outcome.budget_warnings
    else:
        session.lab_stopped = outcome


@st.fragment(run_every=POLL)
def live() -> None:
    """The comparison in progress, redrawn from a snapshot every POLL seconds."""
    job = session.lab_job
    if job is None:
        return
    snap = job.tracker.snapshot()
    if snap.outcome is not None:
        st.rerun()  # the whole page: collect() takes the outcome into the session
    if snap.ahead is not None:
        st.info(
            "**Waiting for a free slot.** This server runs at most "
            f"{worker.max_runs()} syntheses at once for all its users, and they are all busy"
            + ("" if snap.ahead == 0 else f" ({snap.ahead} ahead of this comparison)")
            + ". It starts by itself when a slot frees; nothing is measured until then.",
            icon=":material/hourglass_top:",
        )
        return
    if snap.cancelling:
        st.warning("Cancelling: the comparison stops at the end of the current step.")
    progress = snap.progress
    if progress is None:
        st.progress(0.0, text="Checking the table's privacy budget")
        return
    step = min(progress.done + 1, progress.total)
    st.progress(progress.fraction, text=f"Step {step} of {progress.total}: {progress.step}")
    if progress.gum is not None:
        gum = progress.gum
        st.progress(
            min(1.0, (gum.iteration + 1) / gum.iterations),
            text=f"iteration {gum.iteration + 1} of at most {gum.iterations}: mean L1 "
            f"{gum.mean_error:.4f} against the noisy marginals",
        )
    st.caption(
        f"Running for {snap.seconds:.0f} s in the background: other pages keep working "
        "meanwhile, and the results will be here when it is done."
    )


st.title("Lab: compare the paper's choices")
st.write(
    "PrivSyn's paper justifies each of its choices by comparing it with alternatives. Here "
    "you re-run such a comparison on your own table: pick two to four configurations, run "
    "each on the same table and budget with several seeds, and compare how GUM converges "
    "and how close each synthetic table comes to the real one."
)
collect()
job = session.lab_job
if job is not None:
    request = job.request
    st.write(
        f"Comparing **{request.preset}** ({in_words([a.name for a in request.plan.arms])}) "
        f"over {request.plan.seeds} seeds on **{request.name}**: "
        f"{request.plan.measurements} measurements."
    )
    st.button("Run the comparison", type="primary", key="lab_run", disabled=True)
    # outside the polling fragment, as on the Run page: a click reruns the whole page
    st.button(
        "Cancel",
        key="lab_cancel",
        on_click=job.cancel,
        disabled=job.tracker.snapshot().cancelling,
        help="stops at the next step or GUM iteration; measurements already made stay spent "
        "(and recorded); a comparison still waiting for a slot spends nothing",
    )
    live()
    st.stop()

if session.disk is not None:
    st.info(
        "The Lab compares configurations on a table in memory. The table in use is a file "
        "on disk (for full-size runs on the Run page): load a table, or a sample of this one, "
        "on the Data page to compare configurations."
    )
    st.stop()
try:
    epsilon = parse_epsilon(session.epsilon)
    delta = parse_delta(session.delta_text)
    current_config()
except InputError as exc:
    st.error(f"{exc} (fix it on the Privacy page)")
    st.stop()

with st.expander("What the options mean"):
    st.markdown(
        "\n".join(f"- **{CHOICES[field][0]}**: {text}" for field, text in OPTION_HELP.items())
        + "\n\nMeasurement options (selection, noise allocation) change what is spent. The "
        "others are generation (Algorithm 3, lines 5-6): configurations that differ only "
        "there share one measurement per seed, one spend for all of them."
    )
preset = st.selectbox("comparison", [*PRESETS, CUSTOM], key="lab_preset", persist_state="session")
if preset == CUSTOM:
    arms = custom_arms()
else:
    about, members = PRESETS[preset]
    st.caption(f"{about[:1].upper()}{about[1:]}.")
    arms = [LabArm(name, configured(changes)) for name, changes in members]
left, right = st.columns(2)
seeds = left.number_input(
    "seeds (each a fresh measurement)",
    1,
    MAX_SEEDS,
    3,
    key="lab_seeds",
    persist_state="session",
    help="every seed measures the table again with fresh noise, so the spread over seeds "
    "shows the DP noise as well as GUM's randomness",
)
columns = [c.name for c in session.schema.included()]
label = right.selectbox(
    "column to predict for the SVM score (optional)",
    [None, *columns],
    index=[None, *columns].index(session.target) if session.target in columns else 0,
    format_func=lambda name: "none" if name is None else name,
    # a choice of none kept across a comparison comes back as no choice, which shows the
    # placeholder rather than format_func(None): it must read as the choice it is
    placeholder="none",
    key="lab_label",
    persist_state="session",
)
try:
    plan = plan_lab(arms, int(seeds))
except InputError as exc:
    st.error(str(exc))
    st.stop()

cost = plan.budget(epsilon, delta)
composed_epsilon, composed_delta = cost.stated(delta)
shared = [in_words([plan.arms[i].name for i in g]) for g in plan.groups if len(g) > 1]
measurements = counted(plan.measurements, "measurement")
st.info(
    f"**Privacy cost: {measurements} of the table** ({len(plan.groups)} per "
    f"seed{'; ' + ', '.join(shared) + ' share one, since they differ only after measuring' if shared else ''}). "  # noqa: E501
    f"Each is a run's spend at epsilon {epsilon:g}, delta {delta:g}: together up to "
    f"{cost.words} (the delta of thresholded releases), that is (epsilon "
    f"{composed_epsilon:.3g}, delta {composed_delta:.2g})-DP for this table, recorded in the "
    "run registry like any run."
)
if session.raw_domains:
    st.caption(
        "The Lab keeps every comparison end-to-end DP: it decides open domains privately, as "
        "declared on the Data page, and does not use the raw-domain shortcut you chose there "
        "for runs."
    )


@dataclass(frozen=True)
class Books:
    """What the table's books say about this comparison: a line for the page, whether it
    fits, and what the lifetime budget would have left after it (None: no lifetime budget,
    or a registry that cannot be read)."""

    note: str
    fits: bool
    left_after: str | None = None


def budget_left() -> Books:
    """The table's lifetime budget against this comparison (the worker's reservation is the
    check that holds: another session may spend meanwhile)."""
    try:
        status = Registry().budget(state.dataset_fingerprint())
    except records.REGISTRY_ERRORS as exc:
        return Books(records.unavailable(exc), False)
    if status.lifetime is None or status.remaining is None:
        return Books(
            f"This table has spent epsilon {status.committed.stated(delta)[0]:.3g} so far over "
            f"all its runs, at delta {small_number(status.committed.stated(delta)[1])} "
            f"({status.committed.words}; no lifetime budget set).",
            True,
        )
    left = status.remaining
    if not cost.fits(left):
        return Books(records.refusal(status, cost, delta), False)
    after = cost.left_of(left)
    now_epsilon, after_epsilon = (epsilon_from_rho(b.rho, delta) for b in (left, after))
    return Books(
        f"It fits this table's lifetime budget: {left.words} of {status.lifetime.words} is left.",
        True,
        f"This table's lifetime budget has about epsilon {now_epsilon:.3g} left; after this "
        f"comparison about epsilon {after_epsilon:.3g} would be left (both at delta "
        f"{delta:g}). Privacy losses add up in rho, not in epsilon, so the epsilon left falls "
        f"by less than the {composed_epsilon:.3g} this comparison is worth on its own.",
    )


def start_comparison() -> None:
    """Hand the confirmed comparison to a worker (it reserves the cost before measuring)."""
    table, schema = session.table, session.schema
    known = state.dataset_fingerprint()
    started = lab_jobs.start(
        lab_jobs.LabRequest(
            compare=partial(run_lab, table, epsilon, delta, plan, schema=schema, label=label),
            dataset=lambda: known,
            name=session.table_name,
            preset=preset,
            label=label,
            epsilon=epsilon,
            delta=delta,
            plan=plan,
        )
    )
    if started is None:
        st.warning(
            f"The server is busy: it runs {worker.SLOTS.busy} syntheses, its limit for all "
            f"users together, and {worker.SLOTS.waiting} more are waiting for a slot, as many "
            "as it lets wait. Nothing was started and no budget was spent: try again in a while."
        )
        st.stop()
    session.lab_job = started
    st.rerun()


def forget_confirmation() -> None:
    session.lab_confirming = None


books = budget_left()
(st.caption if books.fits else st.error)(books.note)
# what a confirmation is for: any change of the comparison, its budget or its table after
# the first click asks again, so the spend confirmed is the spend made
asked_for = (preset, label, plan, epsilon, delta, state.dataset_fingerprint())
if session.lab_confirming is not None and session.lab_confirming != asked_for:
    session.lab_confirming = None
if session.lab_confirming is None:
    if st.button(
        "Run the comparison",
        key="lab_run",
        type="primary",
        disabled=not books.fits,
        help="shows what the comparison will spend and asks you to confirm: nothing is "
        "spent on this click",
    ):
        session.lab_confirming = asked_for
        st.rerun()
else:
    with st.container(border=True, key="lab_confirmation"):
        st.markdown(
            f"**This comparison will spend up to epsilon {composed_epsilon:.3g} and delta "
            f"{composed_delta:.2g} of this table's privacy budget**, for good: "
            f"{measurements} at epsilon {epsilon:g} each, together (what they turn out not "
            "to need is given back). Cancelling now spends nothing."
        )
        if books.left_after is not None:
            st.markdown(books.left_after)
        confirm, cancel = st.columns([2, 1])
        if confirm.button(
            f"Spend epsilon {composed_epsilon:.3g} and run",
            key="lab_confirm",
            type="primary",
            disabled=not books.fits,
            width="stretch",
        ):
            session.lab_confirming = None
            start_comparison()
        cancel.button(
            "Cancel", key="lab_cancel_confirm", on_click=forget_confirmation, width="stretch"
        )

stopped = session.lab_stopped
if stopped is not None:
    if stopped.kind == "cancelled":
        st.warning(f"The last comparison was cancelled: {stopped.message}")
    else:
        st.error(stopped.message)

if session.lab_result is not None:
    preset_run, label_run, result, run_ids = session.lab_result
    st.subheader(f"{preset_run}: {counted(result.plan.seeds, 'seed')}")
    if preset_run in PRESETS:
        about_run = PRESETS[preset_run][0]
        st.caption(f"{about_run[:1].upper()}{about_run[1:]}.")
    spent_epsilon, spent_delta = result.spent.stated(delta)
    st.caption(
        f"Spent epsilon {spent_epsilon:.3g} (delta {small_number(spent_delta)}; rho "
        f"{result.spent_rho:.3g}) in {counted(len(result.ledgers), 'measurement')}, recorded "
        f"as runs {', '.join(map(str, run_ids))} (History)."
    )
    for note in session.lab_notes:
        st.warning(f"Lifetime budget: {note}. See the History page before running again.")
    st.markdown(
        "**How GUM converges**: mean L1 distance between each synthetic table's marginals and "
        "the noisy (measured) marginals, after every iteration. DP post-processing: computed "
        "from the measurements only, not from the real table."
    )
    errors: dict[str, list] = {}
    for r in result.runs:
        errors.setdefault(r.arm, []).append(r.errors)
    st.plotly_chart(lab_convergence(errors), key="lab_convergence")
    unfitted = [name for name, runs in errors.items() if not any(len(run) for run in runs)]
    if unfitted:
        st.caption(
            f"Not drawn: {', '.join(unfitted)}, which fit no marginal of two or more columns, "
            "so there is no iteration to show."
        )
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
    # no mode bar: its "download plot as png" would export the owner-only scores
    st.plotly_chart(
        lab_fidelity(summary, metrics), key="lab_fidelity", config={"displayModeBar": False}
    )
    table = pd.DataFrame(
        {
            "configuration": name,
            **{m: plus_minus(group[m]) for m in metrics},
            "GUM iterations": f"{group['iterations'].mean():.0f}",
            "seconds per run": f"{group['seconds'].mean():.1f}",
        }
        for name, group in frame.groupby("configuration", sort=False)
    )
    # a static table: a data frame's toolbar would offer the owner-only scores as a CSV
    st.table(table.set_index("configuration"))
    st.caption(
        "Lower is better everywhere: mean ± standard deviation over seeds, the mean given to "
        "the standard deviation's precision."
        + (f" SVM: trained on the synthetic table to predict '{label_run}'." if label_run else "")
    )
