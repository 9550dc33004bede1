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
    written_decimals,
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
        ("42.5", ValueClass.DECIMAL_1),
        ("42.50", ValueClass.DECIMAL_1),  # trailing zeros are not decimals
        ("-0.25", ValueClass.DECIMAL_2),
        ("1E-3", ValueClass.DECIMAL_3),
        ("1.5e-3", ValueClass.DECIMAL_4),
        ("1.25e1", ValueClass.DECIMAL_1),  # 12.5: the exponent moves the point
        ("0.30000000000000004", ValueClass.DECIMAL_MORE),
        ("2020-01-31", ValueClass.DATE_ISO),
        ("2020-02-30", ValueClass.TEXT),  # not a real day
        ("2020-01-31 10:15:00", ValueClass.DATETIME_ISO),
        ("2020-01-31T10:15", ValueClass.DATETIME_ISO),
        ("2020/01/31", ValueClass.DATE_YMD_SLASH),
        ("2016/01/01 00:47:36", ValueClass.DATETIME_YMD_SLASH),
        ("2016/1/1 7:05:09", ValueClass.DATETIME_YMD_SLASH),
        ("2016/01/01 24:00:00", ValueClass.TEXT),  # not a time of day
        ("2016/02/30 10:00:00", ValueClass.TEXT),  # not a real day
        ("2016/01/01 10:00", ValueClass.TEXT),  # without seconds: not a recognised format
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
    for extra in ("unknown", None, "35.5", "0.125", "1e-9", "13/01/2020", "2020-01-01", "7", ""):
        moved = class_counts(canonical_text(pd.concat([base, pd.Series([extra])])))
        difference = moved - class_counts(canonical_text(base))
        assert difference.sum() == 1 and np.abs(difference).sum() == 1, extra


def test_decimals_are_read_as_written_without_trailing_zeros_and_with_the_exponent():
    text = pd.Series(["32.5", "32.50", "+.5", "5.", "12", "-2.5e+2", "1.5e-3", "2.50E1",
                      "0.000125e2", "123456.7890123"])  # fmt: skip
    assert written_decimals(text).tolist() == [1, 1, 1, 0, 0, 0, 4, 0, 4, 7]


def test_a_typed_float_and_its_csv_text_have_the_same_decimals():
    """A typed float reads as its shortest repr, so Parquet and CSV agree on the class."""
    floats = pd.Series([32.5, 0.25, 1.5e-7, 0.1 + 0.2, 44.0, np.nan])
    as_text = pd.Series(["32.5", "0.250", "0.00000015", "0.30000000000000004", "44.0", ""])
    assert classify(canonical_text(floats)).tolist() == classify(canonical_text(as_text)).tolist()
    assert [ValueClass(c) for c in classify(canonical_text(floats))] == [
        ValueClass.DECIMAL_1, ValueClass.DECIMAL_2, ValueClass.DECIMAL_MORE,
        ValueClass.DECIMAL_MORE, ValueClass.INTEGER, ValueClass.MISSING,
    ]  # fmt: skip


def test_slashed_dates_follow_the_columns_day_order_only_when_ambiguous():
    text = pd.Series(["02/01/2020", "13/01/2020", "01/13/2020", "2020-01-05", "soon", None])
    day = pd.Timestamp("2020-01-01").timestamp()
    for day_first, second in ((True, 1), (False, 31)):
        seconds = parse_datetimes(text, day_first)
        assert (seconds[0] - day) / 86_400 == second
        assert ((seconds[1:4] - day) / 86_400).tolist() == [12, 12, 4]
        assert np.isnan(seconds[4:]).all()
