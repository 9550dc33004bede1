import pandas as pd
import pytest

from privsyn_core.cli import main
from privsyn_core.data.io import header_delimiter, read_table
from privsyn_core.data.schema import DRAFT_WARNING, Schema
from privsyn_core.errors import InputError

ADULT_NAMES = (
    "age,workclass,fnlwgt,education,education-num,marital-status,occupation,relationship,"
    "race,sex,capital-gain,capital-loss,hours-per-week,native-country,income"
)


def test_delimiter_comes_from_the_header_and_encoding_from_each_value(tmp_path):
    path = tmp_path / "semi.csv"
    path.write_bytes("ville;prix\nZürich;3\nGenève;4\n".encode("cp1252"))
    table = read_table(path)
    assert list(table.columns) == ["ville", "prix"]
    assert table["ville"].tolist() == ["Zürich", "Genève"]
    assert table["prix"].tolist() == ["3", "4"]  # text: no dtype is inferred
    assert header_delimiter("a\tb") == "\t"
    assert header_delimiter('"x;y",b,c') == ","  # delimiters inside quotes do not count
    assert header_delimiter("single") == ","


def test_one_record_in_another_encoding_changes_only_its_own_reading(tmp_path):
    """Deciding one encoding for the whole file from its bytes would let one cp1252 record
    turn every other record's UTF-8 "é" into mojibake."""
    utf8 = "name,city\nJosé,München\nAnn,Paris\n".encode()
    path = tmp_path / "mixed.csv"
    path.write_bytes(utf8 + "Zoë,Genève\n".encode("cp1252"))
    table = read_table(path)
    assert table["name"].tolist() == ["José", "Ann", "Zoë"]
    assert table["city"].tolist() == ["München", "Paris", "Genève"]


def test_a_bad_byte_far_past_the_header_is_still_read_as_cp1252(tmp_path):
    """The whole file is checked before the values are trusted to be UTF-8, not its head."""
    path = tmp_path / "long.csv"
    path.write_bytes(
        ("name,city\n" + "José,München\n" * 20_000).encode() + "Zoë,x\n".encode("cp1252")
    )
    table = read_table(path)
    assert len(table) == 20_001 and table["name"].iloc[-1] == "Zoë"
    assert set(table["city"].iloc[:-1]) == {"München"}


def test_a_record_full_of_semicolons_does_not_change_the_delimiter(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text('a,b\n1,x\n2,"y;z;w;v;u"\n')
    assert list(read_table(path).columns) == ["a", "b"]


@pytest.mark.slow
def test_uci_adult_as_distributed_reads_with_names_and_question_marks(tmp_path):
    from conftest import ROOT

    table = read_table(
        ROOT / "tests" / "data" / "adult.data",
        header=False,
        names=ADULT_NAMES.split(","),
        na_values=["?"],
    )
    assert table.shape == (32561, 15)
    assert table["workclass"].isna().sum() > 1000  # '?' became missing
    assert table["age"].iloc[0] == "39"  # values stay text
    assert (
        read_table(
            ROOT / "tests" / "data" / "adult.data",
            header=False,
            names=ADULT_NAMES.split(","),
            na_values=["?"],
            infer_types=True,
        )["age"].dtype.kind
        == "i"
    )
    assert table["workclass"].iloc[0] == "State-gov"  # the space after the comma is gone


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"", "is empty"),
        (b"a,b\n", "no rows"),
        (b"\x00\x01\x02\x03binary\x00", "does not look like text"),
        (b"a,,c\n1,2,3\n", "has no name"),
    ],
    ids=["empty", "header-only", "binary", "unnamed-column"],
)
def test_unreadable_files_get_a_clear_message(tmp_path, content, expected):
    path = tmp_path / "bad.csv"
    path.write_bytes(content)
    with pytest.raises(InputError, match=expected):
        read_table(path)


def test_parquet_round_trip(tmp_path):
    frame = pd.DataFrame({"x": [1, 2, 3], "y": ["a", "b", None]})
    frame.to_parquet(tmp_path / "t.parquet")
    pd.testing.assert_frame_equal(read_table(tmp_path / "t.parquet"), frame)
    (tmp_path / "broken.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(InputError, match="Parquet"):
        read_table(tmp_path / "broken.parquet")


def test_cli_schema_infer_warns_and_writes_a_loadable_draft(tmp_path, capsys):
    from conftest import ROOT

    out = tmp_path / "schema.json"
    assert (
        main(["schema", "infer", str(ROOT / "tests" / "data" / "penguins.csv"), "-o", str(out)])
        == 0
    )
    assert DRAFT_WARNING in capsys.readouterr().err
    schema = Schema.load(out)
    assert schema.names()[0] == "species"
    assert schema["species"].categories == ("Adelie", "Chinstrap", "Gentoo")


@pytest.mark.slow
def test_cli_synthesizes_raw_adult_with_private_domains(tmp_path, capsys):
    from conftest import ROOT

    out = tmp_path / "syn.parquet"
    argv = [
        "synthesize",
        str(ROOT / "tests" / "data" / "adult.data"),
        "--no-header",
        "--names",
        ADULT_NAMES,
        "--na",
        "?",
        "--epsilon",
        "1",
        "--seed",
        "0",
        "--iterations",
        "10",
        "-o",
        str(out),
    ]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "NOT end-to-end DP" not in err
    # the kinds the structure step decided, listed for the user to check
    decided = next(line for line in err.splitlines() if line.startswith("decided privately"))
    assert "age numeric whole" in decided and "workclass categorical" in decided
    synthetic = pd.read_parquet(out)
    assert list(synthetic.columns) == ADULT_NAMES.split(",")
    assert abs(len(synthetic) - 32561) < 500
    assert synthetic["age"].dtype.kind == "i"


def test_cli_raw_domains_says_it_is_not_end_to_end_dp(tmp_path, capsys):
    from conftest import ROOT

    out = tmp_path / "syn.csv"
    argv = [
        "synthesize",
        str(ROOT / "tests" / "data" / "penguins.csv"),
        "--raw-domains",
        "--epsilon",
        "2",
        "--seed",
        "0",
        "--iterations",
        "5",
        "-q",
        "-o",
        str(out),
    ]
    assert main(argv) == 0
    assert "NOT end-to-end DP" in capsys.readouterr().err
    assert out.exists()


def test_cli_rejects_domain_and_schema_together(tmp_path, capsys):
    from conftest import ROOT

    argv = [
        "synthesize",
        str(ROOT / "tests" / "data" / "penguins.csv"),
        "--domain",
        "d.json",
        "--schema",
        "s.json",
        "--epsilon",
        "1",
        "-o",
        str(tmp_path / "x.csv"),
    ]
    assert main(argv) == 2
    assert "not both" in capsys.readouterr().err
    assert not (tmp_path / "x.csv").exists()


@pytest.mark.slow
def test_cli_writes_the_ledger_as_json(tmp_path, capsys):
    import json

    from conftest import ROOT

    out, ledger = tmp_path / "syn.csv", tmp_path / "ledger.json"
    argv = [
        "synthesize", str(ROOT / "tests" / "data" / "penguins.csv"), "--epsilon", "8",
        "--seed", "0", "--iterations", "5", "-q", "-o", str(out), "--ledger", str(ledger),
    ]  # fmt: skip
    assert main(argv) == 0
    record = json.loads(ledger.read_text())
    steps = {m["step"] for m in record["measurements"]}
    assert {"structure", "domain", "one_way", "indif", "marginal"} <= steps
    assert record["spent_rho"] == pytest.approx(record["budget_rho"])
