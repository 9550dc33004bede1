"""Where a table comes from: the names each engine is given to read exactly one file (issue 21;
the end-to-end reads beside decoys are in test_sql_encoding, test_duckdb_counter and
test_spark_counter)."""

from __future__ import annotations

import pytest

from privsyn_core.data.paths import duckdb_path, spark_path
from privsyn_core.errors import InputError


def test_duckdb_reads_a_name_without_a_pattern_by_its_absolute_path(tmp_path, monkeypatch):
    """Absolute: DuckDB would read ``~g.csv`` from the home folder."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "~g.csv").write_text("v\nx\n")
    links = tmp_path / "links"
    links.mkdir()
    assert duckdb_path("~g.csv", links) == str(tmp_path.resolve() / "~g.csv")
    assert list(links.iterdir()) == []


def test_duckdb_reads_a_name_with_a_pattern_through_a_link_without_one(tmp_path):
    named = tmp_path / "g\\[*].csv"
    named.write_text("v\nx\n")
    links = tmp_path / "links"
    links.mkdir()
    link = duckdb_path(named, links)
    assert link == str(links.resolve() / "table.csv")
    assert (links / "table.csv").resolve() == named.resolve()
    assert duckdb_path(named, links) == link  # a second reader of the file shares the link


def test_duckdb_refuses_a_temporary_folder_whose_path_holds_a_pattern(tmp_path):
    named = tmp_path / "g*.csv"
    named.write_text("v\nx\n")
    links = tmp_path / "tmp[1]"
    links.mkdir()
    with pytest.raises(InputError, match="set TMPDIR"):
        duckdb_path(named, links)


def test_spark_escapes_hadoops_pattern_characters_and_nothing_else():
    assert spark_path("/d/a{b,c}[d]*?\\e.csv") == "/d/a\\{b\\,c\\}\\[d\\]\\*\\?\\\\e.csv"
    assert spark_path("/d/plain name-~'.csv") == "/d/plain name-~'.csv"
