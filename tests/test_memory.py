"""The memory check before GUM: a run that would not fit is refused with its size."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from privsyn_core import GumSettings, PrivSynConfig, synthesize
from privsyn_core.errors import InputError
from privsyn_core.generation import memory
from privsyn_core.generation.memory import check_fits, synthesis_bytes
from privsyn_core.privacy.ledger import FailedAfterSpending

FAST = PrivSynConfig(gum=GumSettings(iterations=2))


def table(n: int = 2000) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame({"a": rng.integers(0, 5, n), "b": rng.integers(0, 3, n)})


def test_the_estimate_grows_with_synthetic_rows_and_columns_only():
    one = synthesis_bytes(1_000_000, 10, 1)
    assert synthesis_bytes(2_000_000, 10, 1) == 2 * one
    assert synthesis_bytes(1_000_000, 20, 1) > one
    # the output frame alone holds 8 bytes a cell
    assert one > 1_000_000 * 10 * 8


def test_a_table_that_would_not_fit_names_its_size_and_the_rows_that_would():
    with pytest.raises(InputError) as info:
        check_fits(10**9, 50, 1, available=8 * 2**30)
    message = str(info.value)
    assert "1,000,000,000 rows x 50 columns" in message and "--rows" in message
    fitting = int(message.split("at most about ")[1].split(" fit")[0].replace(",", ""))
    assert synthesis_bytes(fitting, 50, 1) <= 0.8 * 8 * 2**30 < synthesis_bytes(fitting + 1, 50, 1)
    check_fits(10**6, 50, 1, available=8 * 2**30)  # fits: no error


def test_rows_asked_for_are_refused_before_anything_is_spent(monkeypatch):
    monkeypatch.setattr(memory, "available_bytes", lambda: 64 * 2**20)
    with pytest.raises(InputError) as info:
        synthesize(table(), 1.0, 1e-9, domain={"a": 5, "b": 3}, n_records=10**8,
                   config=FAST, rng=np.random.default_rng(0))  # fmt: skip
    assert not isinstance(info.value, FailedAfterSpending)


def test_the_noisy_total_is_checked_before_gum_and_the_spend_is_kept(monkeypatch):
    monkeypatch.setattr(memory, "available_bytes", lambda: 20_000)
    with pytest.raises(FailedAfterSpending) as info:
        synthesize(table(), 1.0, 1e-9, domain={"a": 5, "b": 3}, config=FAST,
                   rng=np.random.default_rng(0))  # fmt: skip
    assert "--rows" in str(info.value)
    assert info.value.ledger.spent_rho == pytest.approx(info.value.ledger.budget_rho)


def test_the_mrf_is_counted_for_one_block_beside_the_table():
    """The MRF's chains, kept table and candidate (and for gum+mrf the start it begins from)
    are held for one block at a time, on top of GUM's table."""
    gum = synthesis_bytes(1_000_000, 40, 1)
    mrf = synthesis_bytes(1_000_000, 40, 1, "mrf")
    both = synthesis_bytes(1_000_000, 40, 1, "gum+mrf")
    assert gum < mrf < both and mrf - gum == 1_000_000 * 3 * 40
    assert synthesis_bytes(1_000_000, 40, 1, "mcf") == gum
    blocked = synthesis_bytes(1_000_000, 40, 1, "mrf", block_rows=100_000)
    assert blocked - gum == (mrf - gum) // 10
    # a table GUM fits but the MRF beside it does not is refused, naming the rows that fit
    free = int(mrf / 0.8) - 1
    check_fits(1_000_000, 40, 1, available=free)
    with pytest.raises(InputError, match="at most about"):
        check_fits(1_000_000, 40, 1, available=free, synthesis="mrf")
