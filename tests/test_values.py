"""Reading one value at a time: canonical text, numbers, dates and value classes."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from privsyn_core.data.values import (
    ValueClass,
    canonical_text,
    class_counts,
    classify,
    parse_datetimes,
    parse_numbers,
)


def test_canonical_text_is_the_same_for_a_typed_column_and_its_csv_text():
    """pandas gives the same values different types depending on the other values: the text
    must not change with them."""
    cases = [
        (pd.Series([21, 41]), pd.Series([21.0, 41.0, np.nan])),  # a blank makes ints floats
        (pd.Series(["21", "41"]), pd.Series([21, 41])),
        (pd.Series([True, False]), pd.Series(["True", "False"])),
        (
            pd.Series(pd.to_datetime(["2020-01-05", "2020-02-01"])),
            pd.Series(["2020-01-05", "2020-02-01"]),
        ),
    ]
    for a, b in cases:
        assert canonical_text(a).tolist()[:2] == canonical_text(b).tolist()[:2]
    assert canonical_text(pd.Series([2.5, np.nan, -0.125])).tolist() == ["2.5", None, "-0.125"]
    stamps = pd.Series(pd.to_datetime(["2020-01-05 10:30:00", None]))
    assert canonical_text(stamps).tolist() == ["2020-01-05 10:30:00", None]
    assert canonical_text(pd.Series([" a ", "", None, 7], dtype=object)).tolist() == [
        "a", None, None, "7",
    ]  # fmt: skip


def test_numbers_are_plain_decimal_notation_only():
    text = pd.Series(["12", "-3.5", ".5", "1e3", "1,000", "12%", "inf", "nan", "1e999", None, "x"])
    numbers = parse_numbers(text)
    assert numbers[:4].tolist() == [12.0, -3.5, 0.5, 1000.0]
    assert np.isnan(numbers[4:]).all()


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, ValueClass.MISSING),
        ("42", ValueClass.INTEGER),
        ("42.0", ValueClass.INTEGER),
        ("-1e3", ValueClass.INTEGER),
        ("42.5", ValueClass.DECIMAL),
        ("2020-01-31", ValueClass.DATE_ISO),
        ("2020-02-30", ValueClass.TEXT),  # not a real day
        ("2020-01-31 10:15:00", ValueClass.DATETIME_ISO),
        ("2020-01-31T10:15", ValueClass.DATETIME_ISO),
        ("2020/01/31", ValueClass.DATE_YMD_SLASH),
        ("31/01/2020", ValueClass.DATE_DMY),
        ("01/31/2020", ValueClass.DATE_MDY),
        ("01/02/2020", ValueClass.DATE_SLASH_AMBIGUOUS),
        ("13/13/2020", ValueClass.TEXT),
        ("unknown", ValueClass.TEXT),
        ("inf", ValueClass.TEXT),
    ],
)
def test_every_value_falls_in_exactly_one_class(value, expected):
    assert classify(pd.Series([value], dtype=object)).tolist() == [expected]


def test_one_record_moves_one_class_count_by_one_in_each_column():
    """The structure measurement's sensitivity: a partition, so an added record changes one
    count of each column by exactly one, whatever it holds."""
    rng = np.random.default_rng(0)
    base = pd.Series(rng.integers(0, 100, 500).astype(str), dtype=object)
    for extra in ("unknown", None, "35.5", "13/01/2020", "2020-01-01", "7", ""):
        moved = class_counts(canonical_text(pd.concat([base, pd.Series([extra])])))
        difference = moved - class_counts(canonical_text(base))
        assert difference.sum() == 1 and np.abs(difference).sum() == 1, extra


def test_slashed_dates_follow_the_columns_day_order_only_when_ambiguous():
    text = pd.Series(["02/01/2020", "13/01/2020", "01/13/2020", "2020-01-05", "soon", None])
    day = pd.Timestamp("2020-01-01").timestamp()
    for day_first, second in ((True, 1), (False, 31)):
        seconds = parse_datetimes(text, day_first)
        assert (seconds[0] - day) / 86_400 == second
        assert ((seconds[1:4] - day) / 86_400).tolist() == [12, 12, 4]
        assert np.isnan(seconds[4:]).all()
