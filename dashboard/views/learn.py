"""Learn: the paper's worked examples, computed live by the engine, a noise explorer, and the
distinguishing game (an empirical privacy audit on generated tables)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from privsyn_core.generation.gum_update import update_towards
from privsyn_core.generation.target_scores import GumTarget
from privsyn_core.measuring.indif import indif_pair
from privsyn_core.privacy.audit import SEPARATION_ERRORS, AuditResult
from privsyn_core.privacy.conversion import rho_from_epsilon_delta
from privsyn_core.privacy.ledger import gaussian_sigma

# Streamlit runs a page as a script, without a package: it is named after its folders
# ("dashboard" in a checkout, "privsyn_dashboard" installed) for the imports below.
__package__ = f"{Path(__file__).resolve().parent.parent.name}.views"

from .. import charts, state
from ..state import session
from . import learn_game

st.title("Learn how PrivSyn works")

st.header("1. InDif: how dependent are two attributes?")
st.write(
    "Paper section 4.1, Figure 2. Compare the actual gender x age table with the table the "
    "1-way marginals would give if gender and age were independent. InDif is the L1 distance "
    "between them, counted in records."
)
n = st.slider("records", 100, 10_000, 1000, step=100, key="learn_n")
actual = {
    ("male", "teenager"): 0.10,
    ("male", "adult"): 0.10,
    ("male", "elderly"): 0.20,
    ("female", "teenager"): 0.10,
    ("female", "adult"): 0.20,
    ("female", "elderly"): 0.30,
}
genders, ages = ["male", "female"], ["teenager", "adult", "elderly"]
rows = [
    (genders.index(g), ages.index(a))
    for (g, a), share in actual.items()
    for _ in range(round(share * n))
]
records = np.array(rows).T
joint = pd.DataFrame([[actual[(g, a)] for a in ages] for g in genders], index=genders, columns=ages)
independent = pd.DataFrame(
    np.outer(joint.sum(axis=1), joint.sum(axis=0)), index=genders, columns=ages
)
left, right = st.columns(2)
left.write("Actual 2-way marginal")
left.dataframe(joint, key="learn_joint")
right.write("If independent (outer product of the 1-way marginals)")
right.dataframe(independent.round(3), key="learn_independent")
score = indif_pair(records, (0, 1), (2, 3))
st.metric("InDif (computed by the engine)", f"{score:.0f} records = {score / n:.2f} n")

st.header("2. One GUM update on five records")
st.write(
    "Paper section 5.2, Figure 4. The synthetic table has four (high, male) records and one "
    "(high, female); the noisy marginal wants 20% / 80%. GUM moves records towards the target "
    "but not all the way (alpha caps additions, beta removals), by duplicating whole records "
    "or replacing only the marginal's attributes."
)
alpha = st.slider("alpha", 0.1, 2.0, 2.0, step=0.1, key="learn_alpha")
seed = st.number_input("random seed", 0, 1000, 0, key="learn_seed")
incomes, genders2, ages2 = ["low", "high"], ["male", "female"], ["teenager", "adult", "elderly"]
before = np.array([[1, 1, 1, 1, 1], [0, 0, 0, 0, 1], [0, 1, 1, 0, 2]])
after = before.copy()
target = GumTarget(("income", "gender"), (0, 1), (2, 2), np.array([0.0, 0.0, 0.2, 0.8]))
update_towards(after, target, float(alpha), 0.5, np.random.default_rng(int(seed)))


def frame(array: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "income": [incomes[v] for v in array[0]],
            "gender": [genders2[v] for v in array[1]],
            "age": [ages2[v] for v in array[2]],
        },
        index=[f"v{i + 1}" for i in range(array.shape[1])],
    )


left, right = st.columns(2)
left.write("Before")
left.dataframe(frame(before), key="learn_before")
right.write("After one update")
right.dataframe(frame(after), key="learn_after")
female = float(np.mean(after[1] == 1))
st.write(f"Share of (high, female) after the update: **{female:.0%}** (target 80%).")

st.header("3. From epsilon to noise")
st.write(
    "A count changes by at most 1 when one person is added or removed. The Gaussian mechanism "
    "hides that change with noise of standard deviation sigma; smaller epsilon, larger sigma."
)
epsilon = st.select_slider(
    "epsilon", options=[0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0], value=1.0, key="learn_eps"
)
delta = 1e-9
sigma = gaussian_sigma(rho_from_epsilon_delta(float(epsilon), delta))
st.metric("sigma for one count measured with the whole budget (delta 1e-9)", f"{sigma:.2f}")
true_counts = np.array([120, 45, 300, 8, 60])
noisy = true_counts + np.random.default_rng(0).normal(0, sigma, true_counts.size)
chart = go.Figure(
    [
        go.Bar(x=list("ABCDE"), y=true_counts, name="true"),
        go.Bar(x=list("ABCDE"), y=noisy, name="noisy"),
    ]
).update_layout(barmode="group", height=320)
st.plotly_chart(chart, key="learn_noise")

st.header("4. Can you tell who is in the table?")
st.markdown(
    "Take a table D, and a table D' that is D plus one extra person. The engine runs one of its "
    "noisy steps on one of the two, and an attacker who knows both tables sees only the output "
    "and must guess: is the extra person in? Differential privacy limits every guessing rule "
    "there is: one that wrongly says *in* a share FPR of the time must miss the person at least "
    r"a share $\text{FNR} \ge 1 - \delta - e^{\varepsilon}\,\text{FPR}$ of the time. "
    "Here the real code plays the game thousands of times with the best possible attacker: "
    "the more the two histograms overlap, the less anyone can tell, and if they sit further "
    "apart than epsilon allows, the code leaks more than it promises. How far apart they sit "
    "is itself measured from random runs, so it comes with a range: the game calls a leak only "
    "when the whole range lies beyond what epsilon allows."
)
left, middle, right = st.columns(3)
game_epsilon = left.slider("epsilon", 0.1, 8.0, 1.0, step=0.1, key="learn_game_eps")
game_trials = middle.slider(
    "runs on each table", 1000, 20_000, 5000, step=1000, key="learn_game_trials"
)
game_seed = right.number_input(
    "random seed (same seed, same game)", 0, 10**6, 0, key="learn_game_seed"
)
game_step = st.radio("noisy step", learn_game.STEPS, horizontal=True, key="learn_game_step")
game_broken = st.toggle(
    "break the noise (halve it)",
    key="learn_game_broken",
    help="Runs every step with half the noise while still claiming the same epsilon, "
    "as a bug in the code would: watch whether the audit notices.",
)
st.caption(
    f"delta is fixed at {learn_game.DELTA:g}. Both tables are generated (3 small columns), so the "
    "noise is seeded debug noise: nothing private is measured."
)
game_inputs = learn_game.GameInputs(
    float(game_epsilon), int(game_trials), game_broken, int(game_seed)
)
if st.button("Play the game", key="learn_game_play", type="primary"):
    with st.spinner(f"Playing {game_inputs.trials:,} rounds on each table, for every step ..."):
        session.learn_game = learn_game.play(game_inputs)


def show_metrics(result: AuditResult) -> None:
    """Claimed vs measured vs best possible, first for epsilon, then for the separation mu;
    the separation's measurement shown with the range the verdict decides on."""
    st.markdown(
        "**Epsilon**: how much the output may reveal about the extra person (the promise, "
        "and what the attacker's error rates prove)."
    )
    claimed, measured, best = st.columns(3)
    claimed.metric("claimed epsilon", f"{result.claimed_epsilon:.2f}")
    measured.metric(
        "measured epsilon ≥",
        f"{result.epsilon_lower_bound:.2f}",
        help=f"Lower bound on the code's true epsilon, at {result.confidence:.0%} confidence, "
        "from the attacker's error rates. Above the claimed epsilon it proves a leak.",
    )
    best.metric(
        "best possible epsilon",
        f"{result.epsilon_of_neighbours:.2f}",
        help="For these two tables, with infinitely many runs: the most a perfect audit "
        "could measure.",
    )
    low, high = result.mu_range
    st.markdown(
        "**Separation**: how far apart the two histograms sit, counted in noise widths "
        "(standard deviations). The paper's analysis calls it mu."
    )
    allowed, measured_mu, possible = st.columns(3)
    allowed.metric(
        "allowed separation (at most)",
        f"{result.mu_claimed:.2f}",
        help="The farthest apart epsilon lets the two histograms sit: sqrt(2 rho) for the "
        "Gaussian noise at this epsilon and delta.",
    )
    measured_mu.metric(
        "measured separation",
        f"{result.mu_estimate:.2f}",
        help="Measured from the runs: itself an estimate, with a standard error of "
        f"{result.mu_standard_error:.3f}.",
    )
    possible.metric(
        "range of the measurement",
        f"{low:.2f} to {high:.2f}",
        help=f"The measured separation ± {SEPARATION_ERRORS:g} standard errors: where the "
        "true separation lies. Only a range wholly above the allowed separation shows a leak.",
    )


def show_play(play: learn_game.GamePlay, step: str) -> None:
    """The game of one step from a finished play: histograms, numbers, verdict."""
    result = play.step(step)
    state.generated_badge()
    st.subheader(f"{result.mechanism}: {result.trials:,} runs on each table")
    figure = charts.distinguishing_game(result.on_d, result.on_neighbour)
    st.plotly_chart(figure, key="learn_game_chart")
    show_metrics(result)
    found = learn_game.verdict(result)
    if found.leak:
        st.error(found.text)
    elif play.inputs.broken:
        # not a success: the leak is there (best possible epsilon exceeds the claim), unseen
        st.warning(
            f"{found.text} Yet the noise was halved: this game missed the leak. An audit can "
            "prove a leak, never its absence; try more runs or a larger epsilon."
        )
    else:
        st.success(found.text)
    st.caption(f"Played in {play.seconds:.1f} s (all four steps), seed {play.inputs.seed}.")


last_play: learn_game.GamePlay | None = session.learn_game
if last_play is not None and last_play.inputs == game_inputs:
    show_play(last_play, game_step)
elif last_play is not None:
    st.info("The settings changed since the last game: press **Play the game**.")
else:
    st.info("Press **Play the game** (a few seconds).")
