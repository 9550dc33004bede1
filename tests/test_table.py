"""Tests for privsyn_core.data.table: a user's table to the engine's code array and back.

Expected codes are written out by hand from the declared domains (integer columns keep their
value as code; categories are coded by their position in the declared list).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privsyn_core.data.table import decode_table, encode_table
from privsyn_core.domain import Domain
from privsyn_core.errors import TableError


def error_of(table: pd.DataFrame, domain: dict[str, object] | None) -> str:
    """The message of the TableError ``encode_table`` must raise."""
    with pytest.raises(TableError) as info:
        encode_table(table, domain)
    return str(info.value)


# --------------------------------------------------------------------------------------------
# Round trips
# --------------------------------------------------------------------------------------------


def test_integer_codes_round_trip():
    table = pd.DataFrame({"age": [0, 3, 2, 3, 1], "sex": [1, 0, 0, 1, 1]})
    records, domain, codecs = encode_table(table, {"age": 4, "sex": 2})

    assert records.shape == (2, 5)
    assert records[0].tolist() == [0, 3, 2, 3, 1]
    assert records[1].tolist() == [1, 0, 0, 1, 1]
    assert domain == Domain(("age", "sex"), (4, 2))

    back = decode_table(records, codecs)
    assert list(back.columns) == ["age", "sex"]
    assert all(pd.api.types.is_integer_dtype(back[c]) for c in back.columns)
    pd.testing.assert_frame_equal(back, table, check_dtype=False)


@settings(max_examples=40, derandomize=True, deadline=None)
@given(
    st.lists(st.integers(1, 300), min_size=1, max_size=4).flatmap(
        lambda sizes: st.tuples(
            st.just(sizes),
            st.lists(st.tuples(*(st.integers(0, s - 1) for s in sizes)), min_size=1, max_size=30),
        )
    )
)
def test_integer_round_trip_property(case):
    sizes, rows = case
    names = [f"c{i}" for i in range(len(sizes))]
    table = pd.DataFrame(rows, columns=names)
    records, domain, codecs = encode_table(table, dict(zip(names, sizes, strict=True)))

    assert records.T.tolist() == [list(r) for r in rows]
    assert domain.sizes == tuple(sizes)
    pd.testing.assert_frame_equal(decode_table(records, codecs), table, check_dtype=False)


def test_whole_number_floats_are_accepted_as_codes():
    table = pd.DataFrame({"a": [0.0, 2.0, 1.0]})
    records, _, codecs = encode_table(table, {"a": 3})
    assert records[0].tolist() == [0, 2, 1]
    back = decode_table(records, codecs)
    assert pd.api.types.is_integer_dtype(back["a"])
    assert back["a"].tolist() == [0, 2, 1]


@pytest.mark.parametrize("dtype", [object, "str"])
def test_string_categories_round_trip(dtype):
    table = pd.DataFrame({"colour": pd.Series(["red", "blue", "red", "green"], dtype=dtype)})
    # codes follow the declared order, not the order of appearance or the sorted order
    records, domain, codecs = encode_table(table, {"colour": ["red", "green", "blue"]})

    assert records[0].tolist() == [0, 2, 0, 1]
    assert domain == Domain(("colour",), (3,))

    back = decode_table(records, codecs)
    assert back["colour"].tolist() == ["red", "blue", "red", "green"]
    assert back["colour"].dtype == table["colour"].dtype


def test_decoding_codes_never_seen_gives_their_declared_labels():
    table = pd.DataFrame({"colour": ["red", "red"]})
    _, _, codecs = encode_table(table, {"colour": ["red", "green", "blue"]})
    back = decode_table(np.array([[2, 1, 0]], dtype=np.uint8), codecs)
    assert back["colour"].tolist() == ["blue", "green", "red"]


def test_categorical_column_round_trip_without_a_declared_domain():
    dtype = pd.CategoricalDtype(["low", "mid", "high", "unused"], ordered=True)
    table = pd.DataFrame(
        {
            "level": pd.Series(["mid", "low", "high", "mid"], dtype=dtype),
            "n": [1, 0, 1, 1],
        }
    )
    records, domain, codecs = encode_table(table, {"n": 2})

    assert records[0].tolist() == [1, 0, 2, 1]
    assert domain == Domain(("level", "n"), (4, 2))  # the unused category still counts

    back = decode_table(records, codecs)
    assert isinstance(back["level"].dtype, pd.CategoricalDtype)
    assert back["level"].dtype == dtype
    pd.testing.assert_frame_equal(back, table, check_dtype=False)
    pd.testing.assert_series_equal(back["level"], table["level"])


def test_categorical_column_with_the_same_categories_declared():
    table = pd.DataFrame({"s": pd.Categorical(["b", "a", "b"], categories=["a", "b"])})
    records, _, codecs = encode_table(table, {"s": ["a", "b"]})
    assert records[0].tolist() == [1, 0, 1]
    back = decode_table(records, codecs)
    pd.testing.assert_series_equal(back["s"], table["s"])


def test_integer_valued_categories_round_trip():
    table = pd.DataFrame({"zip": [75001, 10115, 75001]})
    records, domain, codecs = encode_table(table, {"zip": [10115, 75001, 20095]})
    assert records[0].tolist() == [1, 0, 1]
    assert domain.sizes == (3,)
    back = decode_table(records, codecs)
    assert pd.api.types.is_integer_dtype(back["zip"])
    assert back["zip"].tolist() == [75001, 10115, 75001]


def test_mixed_table_keeps_column_order():
    table = pd.DataFrame(
        {
            "zeta": [2, 0, 1],
            "alpha": ["y", "x", "y"],
            "mid": pd.Categorical(["q", "p", "p"], categories=["p", "q"]),
        }
    )
    records, domain, codecs = encode_table(table, {"alpha": ["x", "y"], "zeta": 3})
    assert domain == Domain(("zeta", "alpha", "mid"), (3, 2, 2))
    assert records.tolist() == [[2, 0, 1], [1, 0, 1], [1, 0, 0]]
    back = decode_table(records, codecs)
    assert list(back.columns) == ["zeta", "alpha", "mid"]
    assert back["alpha"].tolist() == ["y", "x", "y"]
    assert back["mid"].tolist() == ["q", "p", "p"]


@pytest.mark.parametrize(
    ("size", "dtype"),
    [
        (2, np.uint8),
        (256, np.uint8),
        (257, np.uint16),
        (65536, np.uint16),
        (65537, np.uint32),
    ],
)
def test_records_use_the_smallest_unsigned_dtype(size, dtype):
    table = pd.DataFrame({"small": [0, 1], "big": [0, size - 1]})
    records, _, _ = encode_table(table, {"small": 2, "big": size})
    assert records.dtype == dtype
    assert records[1].tolist() == [0, size - 1]


def test_category_count_sets_the_dtype_too():
    labels = [f"v{i}" for i in range(300)]
    table = pd.DataFrame({"s": ["v299", "v0"]})
    records, _, _ = encode_table(table, {"s": labels})
    assert records.dtype == np.uint16
    assert records[0].tolist() == [299, 0]


# --------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------


def test_missing_domain_for_a_plain_column():
    message = error_of(pd.DataFrame({"a": [0, 1], "income": [1, 0]}), {"a": 2})
    assert "'income'" in message
    assert "number of codes" in message and "categories" in message


def test_missing_domain_when_no_domain_at_all():
    message = error_of(pd.DataFrame({"a": [0, 1]}), None)
    assert "'a'" in message


def test_domain_naming_a_column_the_table_lacks():
    message = error_of(pd.DataFrame({"a": [0, 1]}), {"a": 2, "salary": 5})
    assert "'salary'" in message
    assert "does not have" in message


@pytest.mark.parametrize("bad", [7, 3, -1])
def test_code_out_of_range(bad):
    message = error_of(pd.DataFrame({"a": [0, 1], "grade": [0, bad]}), {"a": 2, "grade": 3})
    assert "'grade'" in message
    assert str(bad) in message
    assert "0..2" in message


def test_out_of_range_float_code():
    message = error_of(pd.DataFrame({"grade": [0.0, 9.0]}), {"grade": 3})
    assert "'grade'" in message and "9" in message


def test_non_integer_float_code():
    message = error_of(pd.DataFrame({"grade": [0.0, 1.0, 2.5]}), {"grade": 3})
    assert "'grade'" in message
    assert "2.5" in message
    assert "integer" in message


def test_string_value_in_an_integer_coded_column():
    table = pd.DataFrame({"a": [0, 1, 0], "grade": ["two", "0", "1"]})
    message = error_of(table, {"a": 2, "grade": 3})
    assert "'grade'" in message
    assert "'two'" in message
    assert "declare its categories" in message


def test_value_not_among_declared_categories():
    table = pd.DataFrame({"colour": ["red", "mauve", "blue"]})
    message = error_of(table, {"colour": ["red", "green", "blue"]})
    assert "'colour'" in message
    assert "'mauve'" in message
    assert "'red'" not in message and "'blue'" not in message  # only the offending values


def test_value_not_among_categories_of_a_categorical_column_declared_narrower():
    table = pd.DataFrame({"s": pd.Categorical(["a", "b", "c"])})
    message = error_of(table, {"s": ["a", "b"]})
    assert "'s'" in message and "'c'" in message


@pytest.mark.parametrize(
    ("column", "spec"),
    [
        (pd.Series([0.0, np.nan, 1.0]), 2),
        (pd.Series(["x", None, "y"], dtype=object), ["x", "y"]),
        (pd.Series(["0", None, "1"], dtype=object), 2),
        (pd.Series(["0", np.nan, "1"], dtype="str"), 2),
        (pd.Series(["x", None, "y"], dtype="str"), ["x", "y"]),
        (pd.Series(pd.Categorical(["x", None, "y"])), None),
        (pd.Series(pd.array([0, None, 1], dtype="Int64")), 2),
    ],
    ids=[
        "float-nan",
        "object-none",
        "codes-as-text-none",
        "codes-as-str-nan",
        "str-nan",
        "categorical-nan",
        "nullable-int-na",
    ],
)
def test_missing_value(column, spec):
    table = pd.DataFrame({"a": [0, 1, 0], "gap": column})
    domain: dict[str, object] = {"a": 2}
    if spec is not None:
        domain["gap"] = spec
    message = error_of(table, domain)
    assert "'gap'" in message
    assert "missing" in message
    assert "row 1" in message


def test_empty_table():
    table = pd.DataFrame({"a": pd.Series([], dtype=np.int64)})
    message = error_of(table, {"a": 2})
    assert "no rows" in message


def test_table_without_columns():
    message = error_of(pd.DataFrame(index=range(3)), {})
    assert "no columns" in message


def test_duplicate_categories():
    message = error_of(pd.DataFrame({"colour": ["red"]}), {"colour": ["red", "blue", "red"]})
    assert "'colour'" in message
    assert "more than once" in message


def test_empty_category_list():
    message = error_of(pd.DataFrame({"colour": ["red"]}), {"colour": []})
    assert "'colour'" in message and "empty" in message


@pytest.mark.parametrize("size", [0, -3])
def test_zero_or_negative_size(size):
    message = error_of(pd.DataFrame({"a": [0]}), {"a": size})
    assert "'a'" in message
    assert str(size) in message
    assert "at least 1" in message


@pytest.mark.parametrize("spec", [True, 2.5, "abc"], ids=["bool", "float", "string"])
def test_domain_entry_of_the_wrong_type(spec):
    message = error_of(pd.DataFrame({"a": [0]}), {"a": spec})
    assert "'a'" in message
    assert repr(spec) in message


def test_not_a_dataframe():
    with pytest.raises(TableError, match="DataFrame"):
        encode_table(np.zeros((2, 2)), {"0": 2})  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------


def test_categorical_column_with_categories_declared_in_another_order():
    table = pd.DataFrame({"s": pd.Categorical(["a", "b", "c"], categories=["a", "b", "c"])})
    records, _, codecs = encode_table(table, {"s": ["c", "b", "a"]})
    assert records[0].tolist() == [2, 1, 0]
    assert decode_table(records, codecs)["s"].tolist() == ["a", "b", "c"]


def test_categorical_column_with_more_categories_declared():
    table = pd.DataFrame({"s": pd.Categorical(["a", "b"])})
    _, _, codecs = encode_table(table, {"s": ["a", "b", "z"]})
    back = decode_table(np.array([[2, 0]], dtype=np.uint8), codecs)
    assert back["s"].tolist() == ["z", "a"]


def test_string_value_after_valid_codes_is_the_one_named():
    table = pd.DataFrame({"grade": ["0", "1", "two"]})
    message = error_of(table, {"grade": 3})
    assert "'two'" in message


def test_duplicate_category_is_named():
    message = error_of(pd.DataFrame({"colour": ["red"]}), {"colour": ["red", "blue", "red"]})
    assert "'red'" in message
