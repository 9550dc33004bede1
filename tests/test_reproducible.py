"""The same seeds give the same tables: pinned digests of seeded runs.

A refactor must not change what a seeded (debug-mode) run makes. Each case below runs a
small configuration and hashes two things: the synthetic table (its CSV bytes) and the
noisy measurements (every noisy marginal's counts, the noisy InDif scores, the marginals
chosen and the ledger). The digests are pinned in ``tests/data/reproducible-digests.json``.

When a change is *meant* to change seeded output (a new default, a fixed bug), re-pin and
say why in the commit::

    .venv/bin/python tests/test_reproducible.py --pin

The digests are exact, so they also hold the floating point of the NumPy and pandas they
were pinned with (recorded in the file): after an upgrade of either, a failure here with
the seeded-twice test passing is the upgrade's, and re-pinning is the answer.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from privsyn_core import GumSettings, PrivSyn, PrivSynConfig, synthesize
from privsyn_core.marginals import NoisyMarginal
from privsyn_core.privacy.ledger import PrivacyLedger

ROOT = Path(__file__).resolve().parents[1]
PINNED = ROOT / "tests" / "data" / "reproducible-digests.json"
PIN_COMMAND = ".venv/bin/python tests/test_reproducible.py --pin"
EPSILON, DELTA = 1.0, 1e-9


def table_digest(table: pd.DataFrame) -> str:
    """sha256 of the table's CSV bytes (header, no index, ``\\n`` line ends)."""
    return hashlib.sha256(table.to_csv(index=False, lineterminator="\n").encode()).hexdigest()


def measurements_digest(
    noisy: Iterable[NoisyMarginal],
    ledger: PrivacyLedger,
    extra: Iterable[str] = (),
) -> str:
    """sha256 of the DP measurements: each noisy marginal's attributes, shape, counts (as
    little-endian float64 bytes), rho and sigma (exact, as hex), the ledger's entries, and
    ``extra`` lines (the noisy InDif table, the marginals chosen)."""
    digest = hashlib.sha256()
    for marginal in noisy:
        table = marginal.table
        digest.update(repr((table.attributes, table.shape)).encode())
        digest.update(np.ascontiguousarray(table.values, dtype="<f8").tobytes())
        digest.update(f"{marginal.rho.hex()} {marginal.sigma.hex()}".encode())
    for entry in ledger.entries:
        digest.update(repr(entry).encode())
    for line in extra:
        digest.update(line.encode())
    return digest.hexdigest()


def _raw_adult(rows: int) -> pd.DataFrame:
    """The bundled Adult sample's first ``rows`` rows, as text (what a CSV upload gives)."""
    sample = resources.files("privsyn_core") / "samples" / "adult.csv"
    with sample.open() as handle:
        return pd.read_csv(handle, dtype=str, keep_default_na=False, nrows=rows)


def _coded_adult(rows: int, columns: int) -> tuple[pd.DataFrame, dict[str, int]]:
    table = pd.read_csv(ROOT / "assets" / "adult-coded.csv", nrows=rows)
    domain = json.loads((ROOT / "assets" / "adult-coded-domain.json").read_text())
    names = list(table.columns[:columns])
    return table[names], {name: domain[name] for name in names}


Digests = dict[str, str]


def _synthesized(seed: int, config: PrivSynConfig | None = None) -> Digests:
    """A raw table (structure, private domains, DenseMarg, GUM), counted in memory."""
    result = synthesize(
        _raw_adult(5000), EPSILON, DELTA, config=config, rng=np.random.default_rng(seed)
    )
    extra = [result.noisy_indif.to_csv(lineterminator="\n"), repr(result.marginals)]
    return {
        "table": table_digest(result.synthetic),
        "measurements": measurements_digest(result.noisy_marginals, result.ledger, extra),
    }


def _on_duckdb_with_mcf(tmp: Path) -> Digests:
    """A pre-coded CSV counted on DuckDB, PrivBayes's selection and the MCF strawman."""
    table, domain = _coded_adult(5000, 10)
    path = tmp / "coded.csv"
    table.to_csv(path, index=False)
    config = PrivSynConfig(
        selection="privbayes", synthesis="mcf", gum=GumSettings(iterations=6, noise_floor=None)
    )
    result = synthesize(
        str(path),
        EPSILON,
        DELTA,
        engine="duckdb",
        domain=domain,
        config=config,
        rng=np.random.default_rng(3),
    )
    extra = [result.noisy_indif.to_csv(lineterminator="\n"), repr(result.marginals)]
    return {
        "table": table_digest(result.synthetic),
        "measurements": measurements_digest(result.noisy_marginals, result.ledger, extra),
    }


def _fitted_sample() -> Digests:
    """``PrivSyn.fit`` on a pre-coded table (all pairs), then ``FittedModel.sample``."""
    table, domain = _coded_adult(4000, 8)
    config = PrivSynConfig(selection="all_pairs")
    model = PrivSyn(EPSILON, DELTA, domain=domain, config=config).fit(
        table, rng=np.random.default_rng(4)
    )
    sample = model.sample(3000, seed=5, gum=GumSettings(iterations=30, noise_floor=None))
    return {
        "table": table_digest(sample),
        "measurements": measurements_digest(model.noisy, model.ledger),
    }


def _wide_defaults() -> Digests:
    """A pre-coded table of 34 columns at the defaults: the wide-table path (tree-first
    selection with its pooled pairs, quasi-independence, GUM then the MRF). At epsilon 4 the
    MRF's table is the one kept (with ``synthesis="gum"`` the table differs)."""
    rng = np.random.default_rng(11)
    rows, answer = 3000, rng.integers(0, 4, 3000)
    columns = {}
    for i in range(34):  # a chain: each answer mostly the one before
        answer = np.where(rng.random(rows) < 0.85, answer, rng.integers(0, 4, rows))
        columns[f"q{i}"] = answer
    table = pd.DataFrame(columns)
    result = synthesize(
        table, 4.0, DELTA, domain=dict.fromkeys(table.columns, 4), rng=np.random.default_rng(6)
    )
    extra = [result.noisy_indif.to_csv(lineterminator="\n"), repr(result.marginals)]
    return {
        "table": table_digest(result.synthetic),
        "measurements": measurements_digest(result.noisy_marginals, result.ledger, extra),
    }


def _per_person() -> Digests:
    """The raw Adult sample as the rows of people (three rows each, at most two kept): the
    person-level run, its bounding and its K-times noise."""
    table = _raw_adult(4500)
    table.insert(0, "pid", [str(i // 3) for i in range(len(table))])
    result = synthesize(
        table, EPSILON, DELTA, person="pid", max_rows_per_person=2, rng=np.random.default_rng(7)
    )
    extra = [result.noisy_indif.to_csv(lineterminator="\n"), repr(result.marginals)]
    return {
        "table": table_digest(result.synthetic),
        "measurements": measurements_digest(result.noisy_marginals, result.ledger, extra),
    }


@dataclass(frozen=True)
class Case:
    name: str
    run: Callable[[Path], Digests]


CASES = (
    # default settings: GUM stops at the noise floor
    Case("raw-seed0", lambda _: _synthesized(0)),
    Case("raw-seed1", lambda _: _synthesized(1)),
    # the plateau rule stops GUM; S5's all-duplicate odd iterations, whole-row copies
    Case(
        "raw-seed2-plateau",
        lambda _: _synthesized(
            2,
            PrivSynConfig(
                gum=GumSettings(iterations=40, noise_floor=None, strategy="S5", copy="row")
            ),
        ),
    ),
    Case("coded-duckdb-privbayes-mcf", _on_duckdb_with_mcf),
    Case("fitted-all-pairs-sample", lambda _: _fitted_sample()),
    Case("wide-coded-defaults", lambda _: _wide_defaults()),
    Case("raw-per-person", lambda _: _per_person()),
)


def _pinned() -> dict[str, Digests]:
    return json.loads(PINNED.read_text())["digests"]


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
@pytest.mark.slow
def test_seeded_run_matches_its_pinned_digests(case, tmp_path):
    pinned = json.loads(PINNED.read_text())
    got = case.run(tmp_path)
    assert got == pinned["digests"][case.name], (
        f"seeded output of {case.name!r} changed (pinned with {pinned['pinned_with']}). If the "
        f"change is intended, re-pin with `{PIN_COMMAND}` and say why in the commit."
    )


@pytest.mark.slow
def test_the_same_seed_twice_in_one_process_gives_the_same_bytes():
    first, second = _synthesized(0), _synthesized(0)
    assert first == second
    assert _synthesized(1) != first  # the digests see the seed


def test_pinned_file_has_exactly_the_cases():
    assert set(_pinned()) == {case.name for case in CASES}


def pin() -> None:
    """Rewrite the pinned digests from this checkout (see the module docstring)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        digests = {case.name: case.run(Path(tmp)) for case in CASES}
    versions = {"numpy": np.__version__, "pandas": pd.__version__}
    PINNED.write_text(json.dumps({"pinned_with": versions, "digests": digests}, indent=2) + "\n")
    print(f"pinned {len(digests)} cases in {PINNED.relative_to(ROOT)}")


if __name__ == "__main__":
    if sys.argv[1:] != ["--pin"]:
        sys.exit(f"usage: {PIN_COMMAND}")
    pin()
