"""The Data page's layout and missing cells, and History's tables told apart by more than a
file name (issue 41, points 4 and 5): AppTest flows and the pure helpers behind them."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest
from test_dashboard_app import _clear_caches, app, go  # noqa: F401 - fixture

from dashboard.views import history_runs
from dashboard.views.data_structure_tables import MAX_SHOWN_ROWS, ROW_PX, table_height
from privsyn_core.data.schema import ColumnSchema, Kind
from privsyn_core.privacy.budget import Budget
from privsyn_core.privacy.ledger import PrivacyLedger
from privsyn_core.release.registry import Registry, RunRecord, TableRecord, bytes_fingerprint


def page_order(at: AppTest) -> list[str]:
    """The page's headings ("## name") and tables ("table key", keyless ones "table"), in the
    order the page draws them."""
    found: list[str] = []

    def walk(node) -> None:
        for child in getattr(node, "children", {}).values():
            kind = getattr(child, "type", None)
            if kind == "subheader":
                found.append(f"## {child.value}")
            elif kind == "dataframe":
                found.append(f"table {child.key}" if child.key else "table")
            walk(child)

    walk(at.main)
    return found


def small_csv(rows: int, columns: int, seed: int) -> bytes:
    """A CSV of ``rows`` x ``columns`` small whole numbers (different seeds: other values)."""
    rng = np.random.default_rng(seed)
    table = pd.DataFrame({f"c{i}": rng.integers(0, 4, rows) for i in range(columns)})
    return table.to_csv(index=False).encode()


def record(dataset: str, name: str, epsilon: float) -> int:
    """A run on ``dataset`` recorded as every front end records one (nothing measured)."""
    ledger = PrivacyLedger(budget_rho=0.1, epsilon=epsilon, delta=1e-9)
    reservation = Registry().reserve(dataset, name, Budget(0.1), "test")
    run_id = reservation.spend(ledger, {"epsilon": epsilon})
    reservation.return_unspent()
    return run_id


def upload(at: AppTest, name: str, data: bytes) -> AppTest:
    go(at, "data").file_uploader(key="upload").set_value((name, data, "text/csv")).run()
    assert not at.exception and at.session_state["table_name"] == name, at.error
    return at


# --- the Data page -------------------------------------------------------------------------


def test_the_sample_is_named_in_the_example_without_an_open_bracket():
    at = app()
    (field,) = [box for box in at.text_input if box.key.startswith("table_label_")]
    assert field.placeholder == "e.g. UCI Adult sample 2024, second extract"


def test_the_schema_editors_have_their_own_heading_before_whose_privacy():
    """Under "Columns" come the two schema editors and nothing else with a heading; "Whose
    privacy" follows them, then where each choice comes from."""
    order = page_order(app())
    columns = order.index("## Columns")
    whose = order.index("## Whose privacy")
    where = order.index("## Where each structural choice comes from")
    assert order[columns + 1 : whose] == ["table schema_editor", "table schema_values_editor"]
    assert columns < whose < where


@pytest.mark.slow
def test_the_two_editors_show_one_schema_split_in_two():
    """What each column is, then its values: every column of the schema in both, a declared
    column's kind in the first and its bounds in the second."""
    at = app()
    editors = {d.key: d for d in at.dataframe if d.key}
    what, values = editors["schema_editor"].value, editors["schema_values_editor"].value
    assert list(what.columns) == [
        "column", "include", "kind", "whole numbers", "date format", "may be missing", "row id",
    ]  # fmt: skip
    assert list(values.columns) == ["column", "categories", "lower", "upper", "bins", "decimals"]
    assert (
        list(what["column"]) == list(values["column"]) == list(at.session_state["schema"].names())
    )
    age = ColumnSchema("age", Kind.NUMERIC, integer=True, lower=17.0, upper=90.0, bins=8)
    at.session_state["schema"] = at.session_state["schema"].with_column(age)
    at.run()
    editors = {d.key: d.value.set_index("column") for d in at.dataframe if d.key}
    assert editors["schema_editor"].loc["age", "kind"] == "numeric"
    row = editors["schema_values_editor"].loc["age"]
    assert (row["lower"], row["upper"], row["bins"]) == (17.0, 90.0, 8)


@pytest.mark.slow
def test_missing_cells_are_not_shown_as_none_and_a_value_none_stays_a_value():
    """A Parquet file can hold the text "None" and a missing cell in one column. The preview
    keeps them apart: the text is data, the missing cell is drawn as a pale "(missing)"
    (Streamlit's own mark for it would be "None"). Open cells of the schema editor are empty."""
    table = pd.DataFrame({"city": ["None", None, "Oslo"] * 40, "score": [1.5, np.nan, 2.0] * 40})
    data = io.BytesIO()
    table.to_parquet(data)
    at = app()
    at.file_uploader(key="upload").set_value(("t.parquet", data.getvalue(), "x")).run()
    assert not at.exception, at.error
    (preview,) = [d for d in at.dataframe if list(d.value.columns) == ["city", "score"]]
    assert preview.value["city"].iloc[0] == "None" and pd.isna(preview.value["city"].iloc[1])
    assert pd.isna(preview.value["score"].iloc[1])
    assert preview.proto.HasField("placeholder") and preview.proto.placeholder == "(missing)"
    assert any("(missing)" in c.value and "reads None" in c.value for c in at.caption)
    values = next(d for d in at.dataframe if d.key == "schema_values_editor")
    assert values.value["lower"].isna().all()  # nothing declared: open cells
    assert values.proto.HasField("placeholder") and values.proto.placeholder == ""


@pytest.mark.slow
def test_the_structure_table_fits_its_rows_up_to_a_cap(monkeypatch):
    """Sized to its rows (not a 10-row box with 60 rows in it), up to a cap past which it
    scrolls, and keyed by the table, so another table's starts at its own top. AppTest keeps
    neither the height nor the key of a plain table: they are read off the call."""
    drawn: list[tuple[str, object, object]] = []
    dataframe = st.dataframe

    def recording(data, *args, **kwargs):
        if "whole numbers / date format" in getattr(data, "columns", ()):
            drawn.append((str(kwargs.get("key")), kwargs.get("height"), len(data)))
        return dataframe(data, *args, **kwargs)

    monkeypatch.setattr(st, "dataframe", recording)
    at = app()
    key, height, rows = drawn[-1]
    assert rows == 15 and height == table_height(15) == ROW_PX * 16 + 3  # the sample's columns
    upload(at, "wide.csv", small_csv(50, MAX_SHOWN_ROWS + 10, seed=1))
    wide_key, height, rows = drawn[-1]
    assert rows == MAX_SHOWN_ROWS + 10
    assert height == table_height(MAX_SHOWN_ROWS) == ROW_PX * (MAX_SHOWN_ROWS + 1) + 3
    assert wide_key != key
    assert table_height(3) == ROW_PX * 4 + 3


@pytest.mark.slow
def test_a_name_given_on_the_data_page_is_kept_with_the_table_and_shown_again():
    at = upload(app(), "raw.csv", small_csv(300, 3, seed=1))
    dataset = at.session_state["dataset_fingerprint"]
    token = at.session_state["table_token"]
    at.text_input(key=f"table_label_{token}").set_value("  first extract ").run()
    (known,) = Registry().tables(dataset)
    assert (known.label, known.name, known.columns, known.rows) == (
        "first extract", "raw.csv", 3, 300,
    )  # fmt: skip
    upload(at, "other.csv", small_csv(300, 2, seed=2))
    upload(at, "raw.csv", small_csv(300, 3, seed=1))  # the same file again: its name is back
    token = at.session_state["table_token"]
    assert at.text_input(key=f"table_label_{token}").value == "first extract"
    # the example names the table as a person would, without its file's suffix
    assert at.text_input(key=f"table_label_{token}").placeholder == "e.g. raw 2024, second extract"


# --- History --------------------------------------------------------------------------------


def two_tables_named_raw_csv() -> tuple[bytes, bytes, list[int]]:
    """Two different files, both raw.csv, with runs recorded A, B, A, B."""
    first, second = small_csv(6000, 3, seed=1), small_csv(4000, 2, seed=2)
    runs = [
        record(bytes_fingerprint(data), "raw.csv", epsilon)
        for data, epsilon in ((first, 1.0), (second, 1.0), (first, 2.0), (second, 2.0))
    ]
    return first, second, runs


def titles_shown(at: AppTest) -> list[str]:
    """The bold table titles above History's runs, as a person reads them."""
    shown = (m.value.replace("\\", "") for m in at.markdown)
    return [text[2:].split("**")[0] for text in shown if text.startswith("**") and " · #" in text]


@pytest.mark.slow
def test_two_tables_with_one_file_name_are_told_apart_in_history():
    first, second, _ = two_tables_named_raw_csv()
    at = upload(app(), "raw.csv", first)
    token = at.session_state["table_token"]
    at.text_input(key=f"table_label_{token}").set_value("first extract").run()
    upload(at, "raw.csv", second)
    go(at, "history")
    at.toggle(key="history_all").set_value(True).run()
    a, b = (bytes_fingerprint(data)[:8] for data in (first, second))
    assert titles_shown(at) == [
        f"raw.csv · 2 columns · 4,000 rows · #{b}",  # the table in use first
        f"first extract · raw.csv · 3 columns · 6,000 rows · #{a}",
    ]
    runs = [d.value for d in at.dataframe if "noise" in d.value.columns]
    assert [list(r["id"]) for r in runs] == [[4, 2], [3, 1]]  # one table each, newest first
    assert all("table" not in r.columns for r in runs)  # named above, never cut in a column


@pytest.mark.slow
def test_compare_picks_a_table_first_then_two_of_its_runs():
    """Recorded A, B, A, B: the two newest runs are of two tables, but the comparison starts
    from one table (the one in use, else the latest) and its own two newest runs."""
    first, second, (a1, b1, a2, b2) = two_tables_named_raw_csv()
    at = go(app(), "history")  # the sample is in use; it has no runs
    at.toggle(key="history_all").set_value(True).run()
    table = at.selectbox(key="compare_table")
    b, a = bytes_fingerprint(second), bytes_fingerprint(first)
    assert table.options[0].endswith(f"#{b[:8]}") and len(table.options) == 2
    assert table.value == b  # the latest table, whose runs were recorded last
    assert (
        at.selectbox(key=f"compare_a_{b[:16]}").value,
        at.selectbox(key=f"compare_b_{b[:16]}").value,
    ) == (b1, b2)
    settings = next(d.value for d in at.dataframe if "setting" in d.value.columns)
    assert list(settings.columns) == ["setting", f"run {b1}", f"run {b2}"]
    table.set_value(a).run()
    assert at.selectbox(key=f"compare_a_{a[:16]}").value == a1
    assert at.selectbox(key=f"compare_b_{a[:16]}").value == a2
    assert [o.split(":")[0] for o in at.selectbox(key=f"compare_a_{a[:16]}").options] == [
        f"run {a2}",
        f"run {a1}",
    ]
    # the table in use comes first, and without "every table" there is nothing to choose
    upload(at, "raw.csv", first)
    go(at, "history")
    at.toggle(key="history_all").set_value(True).run()
    assert at.selectbox(key="compare_table").value == a
    at.toggle(key="history_all").set_value(False).run()
    assert not [s for s in at.selectbox if s.key == "compare_table"]
    assert at.selectbox(key=f"compare_b_{a[:16]}").value == a2


@pytest.mark.slow
def test_comparing_needs_two_runs_of_one_table():
    first, second = small_csv(300, 3, seed=1), small_csv(300, 2, seed=2)
    record(bytes_fingerprint(first), "raw.csv", 1.0)
    record(bytes_fingerprint(second), "raw.csv", 1.0)
    at = go(app(), "history")
    at.toggle(key="history_all").set_value(True).run()
    assert any("Two recorded runs of one table" in i.value for i in at.info)
    assert not [s for s in at.selectbox if s.key and s.key.startswith("compare_")]


# --- the pure helpers ----------------------------------------------------------------------


def run_on(fingerprint: str, run_id: int, name: str = "raw.csv") -> RunRecord:
    return RunRecord(
        run_id, fingerprint, float(run_id), 1.0, 1e-9, 0.1, "release", {}, {}, False, name
    )


def test_a_table_title_names_it_and_tells_it_apart():
    fp = "1a2b3c4d" + "0" * 56
    assert history_runs.table_title(TableRecord(fp, "raw.csv", 0.0)) == "raw.csv · #1a2b3c4d"
    described = TableRecord(fp, "raw.csv", 0.0, None, 15, 48842)
    assert history_runs.table_title(described) == "raw.csv · 15 columns · 48,842 rows · #1a2b3c4d"
    named = TableRecord(fp, "raw.csv", 0.0, "Census", 1, 1)
    assert history_runs.table_title(named) == "Census · raw.csv · 1 column · 1 row · #1a2b3c4d"
    on_disk = TableRecord(fp, "big.parquet", 0.0, None, 40, None)
    assert history_runs.table_title(on_disk) == "big.parquet · 40 columns · #1a2b3c4d"


def test_runs_are_grouped_by_table_the_one_in_use_first():
    runs = [run_on("a" * 64, 1), run_on("b" * 64, 2), run_on("a" * 64, 3), run_on("c" * 64, 4)]
    groups = history_runs.by_table(runs, first="b" * 64)
    assert list(groups) == ["b" * 64, "c" * 64, "a" * 64]
    assert [r.id for r in groups["a" * 64]] == [1, 3]
    assert list(history_runs.by_table(runs)) == ["c" * 64, "a" * 64, "b" * 64]
    assert history_runs.comparable(groups) == ["a" * 64]
    # a table the registry did not list (recorded after it was read) keeps its runs' name
    titles = history_runs.titles(runs, [TableRecord("a" * 64, "x.csv", 0.0, "mine")])
    assert (
        titles["a" * 64] == "mine · x.csv · #aaaaaaaa" and titles["c" * 64] == "raw.csv · #cccccccc"
    )


def test_a_setting_a_run_left_unset_does_not_read_none():
    a = RunRecord(
        1, "f", 1.0, 1.0, 1e-9, 0.1, "release", {"person": None, "domain": "None"}, {}, False
    )
    b = RunRecord(2, "f", 2.0, 1.0, 1e-9, 0.1, "release", {"person": "pid"}, {}, False)
    settings = history_runs.settings_frame(a, b).set_index("setting")
    assert settings.loc["person"].tolist() == [history_runs.NOT_SET, "pid"]
    assert settings.loc["domain"].tolist() == ["None", ""]  # a value that reads None stays
