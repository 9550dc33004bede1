"""The compiled batch counting gives exactly NumPy's counts."""

from itertools import combinations

import numpy as np
import pytest

from privsyn_core import marginals
from privsyn_core.domain import Domain
from privsyn_core.generation.records import record_major
from privsyn_core.generation.target_scores import GumTarget, initial_errors, l1_error
from privsyn_core.marginals import count_marginal, count_marginals


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
def test_compiled_batch_counts_equal_numpy_counts(monkeypatch, dtype):
    rng = np.random.default_rng(0)
    sizes = (3, 7, 2, 300, 5) if dtype == np.uint16 else (3, 7, 2, 30, 5)
    records = np.vstack([rng.integers(0, s, 5_000) for s in sizes]).astype(dtype)
    domain = Domain(tuple("abcde"), sizes)
    sets = [*combinations("abcde", 2), ("a", "d", "e"), ("e", "a"), ("b",), ()]
    monkeypatch.setattr(marginals, "COMPILED_BATCH_FROM", 1)  # force the compiled path
    compiled = count_marginals(records, domain, sets)
    for table, attributes in zip(compiled, sets, strict=True):
        expected = count_marginal(records, domain, attributes)
        assert table.attributes == expected.attributes and table.shape == expected.shape
        assert np.array_equal(table.values, expected.values)


def test_initial_errors_equal_one_by_one_errors(monkeypatch):
    rng = np.random.default_rng(1)
    records = record_major(3, 4_000, np.uint8)
    for row, size in enumerate((4, 3, 5)):
        records[row] = rng.integers(0, size, 4_000)
    targets = [
        GumTarget(("a", "b"), (0, 1), (4, 3), rng.dirichlet(np.ones(12))),
        GumTarget(("c", "a", "b"), (2, 0, 1), (5, 4, 3), rng.dirichlet(np.ones(60))),
    ]
    expected = [l1_error(records, t) for t in targets]
    assert initial_errors(records, targets) == pytest.approx(expected, abs=1e-12)
    monkeypatch.setattr(
        "privsyn_core.generation.target_scores.COMPILED_BATCH_FROM", 1
    )  # the compiled batch
    assert initial_errors(records, targets) == pytest.approx(expected, abs=1e-12)
