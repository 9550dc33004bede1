"""The table of synthesis strategies: every method is one entry, and "independent" is the
baseline, each column from its own noisy 1-way marginal with no pair fitted."""

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from privsyn_core import PrivSynConfig, synthesize
from privsyn_core.config import SYNTHESIS_METHODS
from privsyn_core.generation.draw import INDEPENDENT_COLUMNS
from privsyn_core.generation.gum_settings import GumSettings
from privsyn_core.generation.strategies import STRATEGIES
from privsyn_core.progress import StageFinished


def test_every_method_but_auto_is_one_strategy():
    assert set(STRATEGIES) == set(SYNTHESIS_METHODS) - {"auto"}


def _copies(rows: int, seed: int) -> pd.DataFrame:
    """Three columns of six values: b copies a in 90% of rows, c is independent."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 6, rows)
    b = np.where(rng.random(rows) < 0.9, a, rng.integers(0, 6, rows))
    return pd.DataFrame({"a": a, "b": b, "c": rng.integers(0, 6, rows)})


def _cramers_v(x: pd.Series, y: pd.Series) -> float:
    table = pd.crosstab(x, y).to_numpy(dtype=float)
    expected = table.sum(1, keepdims=True) * table.sum(0, keepdims=True) / table.sum()
    chi2 = ((table - expected) ** 2 / expected).sum()
    return float(np.sqrt(chi2 / table.sum() / (min(table.shape) - 1)))


@pytest.fixture(scope="module")
def fitted():
    table = _copies(20_000, 0)
    config = PrivSynConfig(gum=GumSettings(iterations=30))
    run = synthesize(
        table, 2.0, 1e-9, domain=dict.fromkeys(table, 6), config=config,
        rng=np.random.default_rng(1),
    )  # fmt: skip
    return table, run.model


def test_independent_columns_keep_each_column_and_no_pair(fitted):
    """The baseline keeps each column's distribution (total variation under 0.03 at 20,000
    rows and epsilon 2) and none of a's and b's dependence (Cramér's V under 0.05, where the
    real table has 0.88 and GUM keeps most of it)."""
    table, model = fitted
    events: list[object] = []
    independent = model.generate(
        len(table),
        seed=3,
        settings=replace(model.defaults, synthesis="independent"),
        on_progress=events.append,
    ).table
    gum = model.sample(len(table), seed=3)
    for column in table:
        real = table[column].value_counts(normalize=True)
        made = independent[column].astype(int).value_counts(normalize=True)
        assert 0.5 * made.sub(real, fill_value=0).abs().sum() < 0.03, column
    assert _cramers_v(table["a"], table["b"]) > 0.8
    assert _cramers_v(gum["a"].astype(int), gum["b"].astype(int)) > 0.6
    assert _cramers_v(independent["a"].astype(int), independent["b"].astype(int)) < 0.05
    done = [e.summary for e in events if isinstance(e, StageFinished)]
    assert INDEPENDENT_COLUMNS in done
