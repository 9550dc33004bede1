"""The counting interface: the one door through which measurements read rows."""

from __future__ import annotations

import numpy as np

from privsyn_core.domain import Domain
from privsyn_core.generation.grouping import ValueGrouping
from privsyn_core.marginals import count_marginal
from privsyn_core.measuring.counters import ArrayCounter, RecodedCounter
from privsyn_core.measuring.one_way import recode


def test_recoded_counts_equal_counts_of_recoded_rows():
    """Grouping low-count values on the counts is exact: the same numbers as recoding every
    row and counting again, with no second pass over the rows."""
    rng = np.random.default_rng(0)
    domain = Domain(("a", "b", "c"), (5, 4, 3))
    records = np.stack([rng.integers(0, s, 2000) for s in domain.sizes]).astype(np.uint8)
    groupings = (
        ValueGrouping("a", np.array([0, 1, 2, 2, 0]), ((0,), (1,), (2, 3)), ((1.0,),) * 3, 2),
        ValueGrouping.identity("b", 4),
        ValueGrouping("c", np.array([0, 1, 0]), ((0,), (1,)), ((1.0,),) * 2, None),
    )
    recoded_rows, engine = recode(records, domain, groupings)
    counter = RecodedCounter(ArrayCounter(records, domain), groupings)
    assert counter.domain == engine
    sets = [("a",), ("c", "a"), ("a", "b", "c"), ("b",)]
    for table, attributes in zip(counter.count(sets), sets, strict=True):
        expected = count_marginal(recoded_rows, engine, attributes)
        assert table.shape == expected.shape
        assert np.array_equal(table.values, expected.values)
        assert table.values.sum() == 2000


def test_array_counter_counts_every_set_in_order():
    domain = Domain(("x", "y"), (2, 3))
    records = np.array([[0, 1, 1, 0], [2, 2, 0, 1]], dtype=np.uint8)
    x, xy = ArrayCounter(records, domain).count([("x",), ("x", "y")])
    assert x.values.tolist() == [2, 2]
    assert xy.values.reshape(2, 3).tolist() == [[0, 1, 1], [1, 0, 1]]
