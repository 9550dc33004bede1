"""The planned synthesis (``privsyn_core/generation/planned.py``): the memory check before a
run spends anything counts what the check after measuring counts, so a run near the memory
limit is refused before it pays, not after."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from privsyn_core.errors import InputError
from privsyn_core.generation import memory
from privsyn_core.generation.memory import synthesis_bytes
from privsyn_core.generation.planned import plan_synthesis
from privsyn_core.model import PrivSyn
from privsyn_core.pipeline import synthesize
from privsyn_core.privacy.ledger import FailedAfterSpending
from privsyn_core.width_policy import WIDTH_POLICY

WIDE_TABLE_ATTRIBUTES = WIDTH_POLICY.mrf_from

ROWS = 2_000_000


def wide_table(rows: int = 400, columns: int = WIDE_TABLE_ATTRIBUTES) -> tuple[pd.DataFrame, dict]:
    rng = np.random.default_rng(0)
    table = pd.DataFrame({f"c{i}": rng.integers(0, 3, rows) for i in range(columns)})
    return table, {name: 3 for name in table.columns}


def test_auto_plans_gum_then_mrf_on_a_wide_table_and_gum_on_a_narrow_one():
    wide = plan_synthesis("auto", 20, 100_000, 2, WIDE_TABLE_ATTRIBUTES)
    assert (wide.method, wide.iterations, wide.block_rows, wide.workers) == (
        "gum+mrf", 20, 100_000, 2,
    )  # fmt: skip
    assert plan_synthesis("auto", 20, 100_000, 2, WIDE_TABLE_ATTRIBUTES - 1).method == "gum"
    assert plan_synthesis("auto", 0, 100_000, 2, 100).method == "gum"  # the start, as asked
    assert plan_synthesis("mrf", 20, 100_000, 2, 3).method == "mrf"


def test_the_model_plans_what_the_check_before_spending_planned():
    table, domain = wide_table()
    model = PrivSyn(4.0, 1e-9, domain=domain).fit(table, rng=np.random.default_rng(1))
    settings = model.defaults
    before = plan_synthesis(
        "auto", settings.gum.iterations, settings.block_rows, 2, len(table.columns)
    )
    assert model.planned(settings, 2) == before


def test_a_wide_run_that_fits_gum_alone_is_refused_before_it_spends(monkeypatch):
    """Between GUM's memory and GUM's plus the MRF's: the old check before spending counted
    plain GUM and let the run pay, then the check after measuring refused it."""
    table, domain = wide_table()
    columns = len(table.columns)
    gum = synthesis_bytes(ROWS, columns, 2)
    both = synthesis_bytes(ROWS, columns, 2, "gum+mrf", block_rows=100_000)
    assert gum < both
    monkeypatch.setattr(memory, "available_bytes", lambda: int((gum + both) / 2 / 0.8))
    with pytest.raises(InputError, match="fewer rows") as refused:
        synthesize(table, 4.0, 1e-9, domain=domain, n_records=ROWS, rng=np.random.default_rng(1))
    assert not isinstance(refused.value, FailedAfterSpending)  # nothing was spent
