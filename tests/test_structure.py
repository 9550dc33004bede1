"""The structure step: kinds, whole numbers and date formats decided from DP counts.

The neighbouring-table tests are the point of the step: D and D' = D plus one record chosen
to flip pandas' reading of a column must give the same released structure.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from privsyn_core import GumSettings, PrivSynConfig, synthesize
from privsyn_core.data.codecs import BinnedCodec, CategoryCodec
from privsyn_core.data.column_structure import schema_from_dtypes
from privsyn_core.data.io import read_table
from privsyn_core.data.schema import Kind, Provenance
from privsyn_core.data.values import ValueClass, canonical_text, class_counts
from privsyn_core.measuring.structure import (
    KIND_SHARE,
    decide_structure,
    measure_structure,
    noisy_structure,
)
from privsyn_core.privacy.audit import audit_structure, structure_neighbours
from privsyn_core.privacy.ledger import gaussian_sigma
from privsyn_core.privacy.noise import SeededNoise

FAST = PrivSynConfig(gum=GumSettings(iterations=2))
CLASSES = len(ValueClass)


def counts(**by_class: float) -> np.ndarray:
    out = np.zeros(len(ValueClass))
    for name, value in by_class.items():
        out[ValueClass[name.upper()]] = value
    return out


# ---------------------------------------------------------------- the decision


def test_decisions_on_exact_counts():
    assert decide_structure(counts(integer=990, text=10), 0).kind is Kind.NUMERIC
    numeric = decide_structure(counts(integer=990, decimal_1=5, missing=300), 0)
    assert numeric.kind is Kind.NUMERIC and numeric.integer and numeric.decimals == 0
    assert not decide_structure(counts(integer=900, decimal_2=100), 0).integer
    assert decide_structure(counts(integer=700, text=300), 0).kind is Kind.CATEGORICAL
    dates = decide_structure(counts(date_dmy=50, date_slash_ambiguous=900, text=10), 0)
    assert (dates.kind, dates.datetime_format) == (Kind.DATETIME, "%d/%m/%Y")
    us = decide_structure(counts(date_mdy=50, date_slash_ambiguous=900), 0)
    assert us.datetime_format == "%m/%d/%Y"
    iso = decide_structure(counts(date_iso=500, datetime_iso=20), 0)
    assert iso.datetime_format == "%Y-%m-%d"
    assert decide_structure(counts(text=1000), 0).kind is Kind.CATEGORICAL
    assert decide_structure(counts(missing=1000), 0).kind is Kind.CATEGORICAL


def test_the_kind_threshold_sits_at_the_share_of_present_values():
    just_below = counts(integer=KIND_SHARE * 1000 - 1, text=1000 - KIND_SHARE * 1000 + 1)
    just_above = counts(integer=KIND_SHARE * 1000 + 1, text=1000 - KIND_SHARE * 1000 - 1)
    assert decide_structure(just_below, 0).kind is Kind.CATEGORICAL
    assert decide_structure(just_above, 0).kind is Kind.NUMERIC


def test_noise_alone_does_not_make_a_whole_number_column_fractional():
    """The noise floor of three sigmas: a column with no decimals at all stays integer under
    noise in 99.5% of draws (the one-sided 3-sigma tail is 0.13%; the old slack of two
    sigmas flipped 2.3%)."""
    rng = np.random.default_rng(0)
    sigma = 200.0
    flips = 0
    for _ in range(2000):
        noisy = counts(integer=3000) + rng.normal(0, sigma, len(ValueClass))
        flips += not decide_structure(noisy, sigma).integer
    assert flips / 2000 < 0.005


def test_noise_in_empty_classes_does_not_make_a_numeric_column_categorical():
    """Caravan at epsilon 1: 5,822 whole numbers a column, 86 columns, so the class counts get
    sigma 386. Summed, the noise of the seven classes a numeric column leaves empty made 7.7%
    of such columns categorical (about 6 of caravan's 86 in a run); read as empty under three
    sigmas, 0.15%."""
    rng = np.random.default_rng(0)
    sigma = 386.0
    draws = 4000
    categorical = sum(
        decide_structure(counts(integer=5822) + rng.normal(0, sigma, len(ValueClass)), sigma).kind
        is Kind.CATEGORICAL
        for _ in range(draws)
    )
    assert categorical / draws < 0.005
    # a real minority of text still counts: 38% text is categorical under the same noise
    # (unless the noise hides the text under the floor, 3.5 sigmas down: 0.02% of draws)
    mixed = counts(integer=4000, text=2500)
    numeric = sum(
        decide_structure(mixed + rng.normal(0, sigma, len(ValueClass)), sigma).kind
        is not Kind.CATEGORICAL
        for _ in range(2000)
    )
    assert numeric / 2000 < 0.005


def test_small_tables_decide_by_the_largest_noisy_group():
    """With few rows for the noise, shares mean little; the largest group still tells a
    numeric column from a text one far more often than not."""
    rng = np.random.default_rng(1)
    sigma = 60.0  # penguins (344 rows) at epsilon 2
    numeric = sum(
        decide_structure(counts(integer=342, missing=2) + rng.normal(0, sigma, CLASSES), sigma).kind
        is Kind.NUMERIC
        for _ in range(500)
    )
    text = sum(
        decide_structure(counts(text=344) + rng.normal(0, sigma, CLASSES), sigma).kind
        is Kind.CATEGORICAL
        for _ in range(500)
    )
    assert numeric > 450 and text > 450


def test_the_decimals_are_the_fewest_that_all_but_one_percent_of_the_numbers_fit():
    def decimals(**by_class: float) -> int | None:
        return decide_structure(counts(**by_class), 0).decimals

    assert decimals(integer=34, decimal_1=308, missing=2) == 1  # penguins' bill length
    assert decimals(integer=10, decimal_1=90, decimal_2=900) == 2  # prices: 2.50 reads 2.5
    assert decimals(integer=500, decimal_1=495, decimal_3=5) == 1  # 0.5% have 3: one outlier
    assert decimals(integer=500, decimal_1=480, decimal_3=20) == 3  # 2% have 3
    assert decimals(integer=100, decimal_4=900) == 4
    # floats written in full: no count of decimals, the bins' precision instead
    full = decide_structure(counts(decimal_more=990, decimal_4=10), 0)
    assert (full.integer, full.decimals) == (False, None)
    assert full.reason.endswith("numeric, more than 4 decimals")
    assert decide_structure(counts(integer=900, decimal_2=100), 0).reason.endswith(", 2 decimals")
    assert decide_structure(counts(integer=900, decimal_1=100), 0).reason.endswith(", 1 decimal")


@pytest.mark.parametrize(
    ("sigma", "exact"),
    [
        (16.6, 0.99),  # penguins at epsilon 8 (8 columns share the structure budget)
        (31.7, 0.99),  # ... at epsilon 4
        (60.0, 0.9),  # ... at epsilon 2
        (120.0, 0.0),  # ... at epsilon 1: 308 values are under the floor, read as whole
    ],
)
@pytest.mark.slow
def test_the_vote_on_decimals_errs_towards_fewer_and_almost_never_more(sigma, exact):
    """Penguins' bill length (308 values with 1 decimal, 34 whole) under the noise of the
    structure step at decreasing epsilon: the vote says 1 decimal at moderate noise, falls
    back to fewer (whole numbers) when the noise drowns the count, and says more than the
    data holds only when noise alone passes a decimal floor (five classes above the truth at
    0.027% each)."""
    rng = np.random.default_rng(7)
    truth = counts(integer=34, decimal_1=308, missing=2)
    draws = 4000
    votes = [
        decide_structure(truth + rng.normal(0, sigma, CLASSES), sigma).decimals
        for _ in range(draws)
    ]
    more = sum(v is None or v > 1 for v in votes)
    assert more / draws < 0.005
    assert sum(v == 1 for v in votes) / draws >= exact
    # and on a large column of prices (2 decimals; 2.50 reads 2.5) under caravan's noise
    prices = counts(integer=50, decimal_1=450, decimal_2=4500)
    votes = [
        decide_structure(prices + rng.normal(0, 386.0, CLASSES), 386.0).decimals
        for _ in range(1000)
    ]
    assert sum(v == 2 for v in votes) / 1000 > 0.99


@pytest.mark.slow
def test_the_measurement_adds_noise_of_the_calibrated_scale_to_each_count():
    column = canonical_text(pd.Series(["1", "2.5", "x", None] * 250))
    exact = class_counts(column)
    rho = 0.02
    draws = np.stack(
        [
            measure_structure(column, rho, SeededNoise(np.random.default_rng(seed))).noisy_counts
            for seed in range(3000)
        ]
    )
    sigma = gaussian_sigma(rho)
    assert np.abs(draws.mean(axis=0) - exact).max() < 5 * sigma / np.sqrt(3000)
    # the standard deviation of a sample of 3000 Gaussians is within 5% of sigma w.p. > 0.999
    assert np.allclose(draws.std(axis=0), sigma, rtol=0.05)
    estimate = noisy_structure("c", exact, rho, np.random.default_rng(0))
    assert estimate.measurement.step == "structure"
    assert estimate.measurement.sensitivity == 1.0
    assert estimate.measurement.rho == rho
    assert estimate.measurement.sigma == pytest.approx(sigma)


# ---------------------------------------------------------------- neighbouring tables


def base_table(rng: np.random.Generator, n: int = 3000) -> pd.DataFrame:
    days = pd.Timestamp("2020-01-01") + pd.to_timedelta(rng.integers(0, 700, n), unit="D")
    return pd.DataFrame(
        {
            "age": rng.integers(18, 91, n).astype(str),
            "visit": days.strftime("%Y-%m-%d"),
            "g": rng.choice(["a", "b", "c"], n),
            "w": np.round(rng.normal(70, 12, n), 1).astype(str),
        },
        dtype=object,
    )


#: one record each, chosen so that pandas' reading of D' differs from D's
FLIPS = {
    "text in a numeric column": {"age": "unknown", "visit": "2020-03-01", "g": "a", "w": "70.1"},
    "a blank": {"age": None, "visit": None, "g": None, "w": None},
    "a fraction in an integer column": {"age": "35.5", "visit": "2020-03-01", "g": "b", "w": "3"},
    "an odd date format": {"age": "40", "visit": "13/01/2020", "g": "c", "w": "71.0"},
    "a lone category": {"age": "41", "visit": "2020-05-05", "g": "Zzyzx", "w": "69.9"},
    "a word everywhere": {"age": "n/a", "visit": "someday", "g": "?", "w": "heavy"},
}


def released_structure(result) -> tuple:
    """Everything a release shows of the structure: columns, kinds, codes, formats. A binned
    column's bins are its bounds, how many there are and which are single values or tails;
    where the bins between its bounds are cut (at quantiles of a noisy histogram, which one
    record moves by a count) is compared by :func:`cuts`."""
    columns = []
    for item in result.columns:
        codec = item.codec
        if isinstance(codec, CategoryCodec):
            columns.append((codec.name, "categorical", codec.categories, codec.missing))
        else:
            assert isinstance(codec, BinnedCodec)
            kind = "datetime" if codec.datetime else "numeric"
            columns.append(
                (codec.name, kind, codec.integer, codec.datetime_format, codec.missing,
                 codec.edges[0], codec.edges[-1], codec.bounds, codec.points,
                 bool(codec.fall), bool(codec.rise))
            )  # fmt: skip
    return (
        tuple(columns),
        tuple(name for name, _ in result.excluded),
        tuple(str(result.synthetic[c].dtype) for c in result.synthetic.columns),
    )


def through_a_file(table: pd.DataFrame, path: Path) -> pd.DataFrame:
    table.to_csv(path, index=False)
    return read_table(path)


@pytest.mark.parametrize("flip", list(FLIPS))
@pytest.mark.slow
def test_one_record_does_not_change_the_released_structure(flip, tmp_path):
    d = base_table(np.random.default_rng(0))
    d_prime = pd.concat([d, pd.DataFrame([FLIPS[flip]], dtype=object)], ignore_index=True)
    # the record does flip pandas' reading: the bug this step exists to prevent
    inferred = [
        schema_from_dtypes(pd.read_csv(through_path)) for through_path in (
            _write(d, tmp_path / "d.csv"), _write(d_prime, tmp_path / "d1.csv")
        )
    ]  # fmt: skip
    dtypes = [
        pd.read_csv(tmp_path / name).dtypes.astype(str).tolist() for name in ("d.csv", "d1.csv")
    ]
    if flip not in ("an odd date format", "a lone category"):  # pandas reads dates as text
        assert dtypes[0] != dtypes[1] or inferred[0] != inferred[1]
    for seed in range(4):
        results = [
            synthesize(
                through_a_file(table, tmp_path / "t.csv"), 1.0, 1e-9, config=FAST,
                rng=np.random.default_rng(seed),
            )
            for table in (d, d_prime)
        ]  # fmt: skip
        released = [released_structure(r) for r in results]
        assert released[0] == released[1], (flip, seed)
        # how many bins a spread gets follows its noisy mass (number_bins.BIN_SIGMAS): one
        # record may move it across a whole number, by one bin at most; the cuts of equal
        # counts move by a sliver
        counts = [bin_counts(r) for r in results]
        assert all(abs(a - b) <= 1 for a, b in zip(*counts, strict=True)), (flip, seed, counts)
        if counts[0] == counts[1]:
            assert cuts(results[0]) == pytest.approx(cuts(results[1]), abs=0.005), (flip, seed)


def bin_counts(result) -> list[int]:
    return [len(i.codec.edges) - 1 for i in result.columns if isinstance(i.codec, BinnedCodec)]


def cuts(result) -> list[float]:
    """Each binned column's inner edges as shares of its range: one record moves a noisy
    count by one, so a quantile cut moves by a sliver of a bin, never to another place."""
    out = []
    for item in result.columns:
        if isinstance(item.codec, BinnedCodec):
            edges = np.asarray(item.codec.edges)
            out += list((edges[1:-1] - edges[0]) / (edges[-1] - edges[0]))
    return out


def _write(table: pd.DataFrame, path: Path) -> Path:
    table.to_csv(path, index=False)
    return path


def test_the_structure_is_decided_right_and_every_decision_is_in_the_ledger(tmp_path):
    d = base_table(np.random.default_rng(0))
    d_prime = pd.concat([d, pd.DataFrame([FLIPS["a word everywhere"]], dtype=object)])
    result = synthesize(
        through_a_file(d_prime, tmp_path / "t.csv"), 1.0, 1e-9, config=FAST,
        rng=np.random.default_rng(0),
    )  # fmt: skip
    kinds = {c.codec.name: c.choices for c in result.columns}
    as_tuples = {n: {(ch.name, ch.value, ch.provenance) for ch in c} for n, c in kinds.items()}
    private = Provenance.PRIVATE
    assert {("kind", "numeric", private), ("whole numbers", "yes", private)} <= as_tuples["age"]
    assert {("kind", "numeric", private), ("whole numbers", "no", private)} <= as_tuples["w"]
    assert {("kind", "datetime", private), ("date format", "%Y-%m-%d", private)} <= as_tuples[
        "visit"
    ]
    assert ("kind", "categorical", private) in as_tuples["g"]
    structure = [e for e in result.ledger.entries if e.step == "structure"]
    assert [e.attributes for e in structure] == [("age",), ("visit",), ("g",), ("w",)]
    assert sum(e.rho for e in structure) == pytest.approx(
        FAST.structure_share * result.ledger.budget_rho
    )
    out = result.synthetic
    assert str(out["age"].dtype) == "Int64"  # whole numbers, with a missing code
    assert out["visit"].dropna().str.fullmatch(r"\d{4}-\d{2}-\d{2}").all()
    assert result.end_to_end_dp


def test_a_typed_table_and_its_csv_text_give_the_same_release(tmp_path):
    """pandas' types carry no decision: the API with a typed frame and the CLI's text reading
    release the same structure and, in debug mode, the same table."""
    rng = np.random.default_rng(3)
    typed = pd.DataFrame(
        {
            "age": rng.integers(18, 91, 2000),
            "score": np.round(rng.normal(0, 1, 2000), 2),
            "g": rng.choice(["x", "y"], 2000),
        }
    )
    typed.loc[5, "age"] = None  # float64 with a blank
    text = through_a_file(typed, tmp_path / "t.csv")
    assert typed["age"].dtype == np.float64 and text["age"].dtype != np.float64
    a, b = (
        synthesize(t, 1.0, 1e-9, config=FAST, rng=np.random.default_rng(0)) for t in (typed, text)
    )
    assert released_structure(a) == released_structure(b)
    pd.testing.assert_frame_equal(a.synthetic, b.synthetic)


def test_raw_domains_read_the_structure_off_the_data_and_say_so():
    table = base_table(np.random.default_rng(0), 500)
    result = synthesize(table, 1.0, 1e-9, config=FAST, rng=np.random.default_rng(0),
                        raw_domains=True)  # fmt: skip
    assert "structure" not in result.ledger.spent_by_step()
    assert not result.end_to_end_dp
    assert set(result.ledger.not_private) == set(table.columns)
    for item in result.columns:
        assert item.choices[0].provenance is Provenance.RAW


# ---------------------------------------------------------------- the audit


@pytest.mark.slow
def test_the_audit_finds_the_structure_step_within_its_claim_and_catches_half_noise():
    neighbours = structure_neighbours(np.random.default_rng(0))
    rho = 0.05
    honest = audit_structure(neighbours, rho, SeededNoise(np.random.default_rng(1)), 1e-6, 4000)
    # the record moves one count in each of the three columns: it attains the bound
    assert honest.mu_of_neighbours == pytest.approx(honest.mu_claimed)
    assert not honest.violates_claim
    assert abs(honest.mu_estimate - honest.mu_claimed) < 4 * honest.mu_standard_error
    broken = audit_structure(
        neighbours, 4 * rho, SeededNoise(np.random.default_rng(2)), 1e-6, 4000, claimed_rho=rho
    )
    assert broken.violates_claim
