"""Learn: the paper's worked examples, computed live by the engine, and a noise explorer."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from privsyn_core.gum import GumTarget, update_towards
from privsyn_core.indif import indif_pair
from privsyn_core.privacy import gaussian_sigma, rho_from_epsilon_delta

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
