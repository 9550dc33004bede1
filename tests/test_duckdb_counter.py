"""DuckDB counting: the same exact counts as the in-memory backend, from the file itself."""

from __future__ import annotations

import json
from itertools import combinations

import numpy as np
import pandas as pd
import pytest
from conftest import ROOT
from glob_names import GLOB_NAMES, ROWS, GlobName, beside_decoys

from privsyn_core.data.table import encode_table
from privsyn_core.domain import Domain
from privsyn_core.errors import InputError
from privsyn_core.measuring.counters import ArrayCounter
from privsyn_core.measuring.counters.duckdb_counter import DuckDBCounter

ADULT = ROOT / "assets" / "adult-coded.csv"


@pytest.fixture(scope="module")
def adult() -> tuple[pd.DataFrame, Domain]:
    domain = json.loads((ROOT / "assets" / "adult-coded-domain.json").read_text())
    table = pd.read_csv(ADULT)
    return table, Domain.from_mapping({c: domain[c] for c in table.columns})


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
@pytest.mark.slow
def test_counts_equal_the_in_memory_backend_on_adult(adult, suffix, tmp_path):
    table, domain = adult
    path = ADULT
    if suffix == ".parquet":
        path = tmp_path / "adult.parquet"
        table.to_parquet(path)
    records, declared, _ = encode_table(table, domain.as_dict())
    memory = ArrayCounter(records, declared)
    disk = DuckDBCounter(path, declared)
    names = declared.attributes
    # every 1-way, every pair (InDif's counts) and a few triples, in more than one batch
    sets = [(a,) for a in names] + list(combinations(names, 2)) + [names[:3], names[4:7]]
    for ours, theirs in zip(disk.count(sets), memory.count(sets), strict=True):
        assert ours.attributes == theirs.attributes and ours.shape == theirs.shape
        assert np.array_equal(ours.values, theirs.values)


@pytest.mark.parametrize(
    ("cells", "needle"),
    [("5", "'5'"), ("-1", "'-1'"), ("1.5", "'1.5'"), ("x", "'x'"), ("", "missing")],
)
def test_a_value_outside_the_declared_codes_is_named_before_counting(tmp_path, cells, needle):
    path = tmp_path / "t.csv"
    path.write_text(f"a,b\n0,1\n1,0\n{cells},1\n")
    with pytest.raises(InputError) as info:
        DuckDBCounter(path, Domain.from_mapping({"a": 3, "b": 2}))
    assert "'a'" in str(info.value) and needle in str(info.value)


@pytest.mark.slow
def test_the_cli_on_duckdb_writes_the_same_table_and_ledger_as_in_memory(tmp_path, capsys):
    """In debug mode with the same seed the two engines count the same numbers, so every
    later step (noise included) is the same."""
    from privsyn_core.cli import main

    domain = ROOT / "assets" / "adult-coded-domain.json"
    outputs = {}
    for engine in ("numpy", "duckdb"):
        out, ledger = tmp_path / f"{engine}.csv", tmp_path / f"{engine}.json"
        argv = [
            "synthesize", str(ADULT), "--domain", str(domain), "--epsilon", "1", "--seed", "3",
            "--iterations", "5", "-q", "--no-registry", "--engine", engine, "-o", str(out),
            "--ledger", str(ledger),
        ]  # fmt: skip
        assert main(argv) == 0, capsys.readouterr().err
        outputs[engine] = (out.read_bytes(), json.loads(ledger.read_text()))
    assert outputs["numpy"][0] == outputs["duckdb"][0]
    assert outputs["numpy"][1] == outputs["duckdb"][1]


def test_the_cli_says_duckdb_reads_codes_or_a_schema_not_categories_in_a_domain(tmp_path, capsys):
    from privsyn_core.cli import main

    domain = tmp_path / "d.json"
    domain.write_text('{"a": ["x", "y"]}')
    out = tmp_path / "o.csv"
    argv = ["synthesize", str(ADULT), "--epsilon", "1", "--engine", "duckdb", "-o", str(out)]
    assert main([*argv, "--domain", str(domain)]) == 2
    message = capsys.readouterr().err
    assert "give --schema instead" in message and len(message.splitlines()) == 1
    assert main([*argv, "--delimiter", ";"]) == 2
    assert "drop the reading options" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
@pytest.mark.parametrize("case", GLOB_NAMES, ids=GlobName.id)
@pytest.mark.slow
def test_the_file_named_is_counted_never_what_its_name_matches_as_a_pattern(case, suffix, tmp_path):
    path = beside_decoys(tmp_path, case, suffix, named="0", decoy="1")
    (counts,) = DuckDBCounter.for_file(path, {"v": 2, "n": 2}).count([("v",)])
    assert counts.values.tolist() == [ROWS, 0]
