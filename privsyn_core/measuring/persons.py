"""A person-level guarantee: at most K rows per person, chosen at random, before anything is
counted.

With a :class:`~privsyn_core.privacy.ledger.PrivacyUnit` naming a person column, the private
table is replaced, before any measurement reads it, by a table that keeps at most K
(``rows_per_person``) rows of each person, chosen uniformly at random among that person's rows,
and that no longer holds the person column: it is never counted, synthesised nor released.
Adding or removing one person then adds or removes at most K rows of the bounded table (the
choice among a person's rows depends on that person's rows alone), so every count's
sensitivity is K times its per-row one (:meth:`PrivacyUnit.sensitivity`). Rows whose person
is missing are one person together: they are bounded to K as well.

The choice is made where the table lies: in memory with a random permutation (the run's
debug generator, or secure randomness in release mode), and in SQL on DuckDB and Spark with
``ROW_NUMBER() OVER (PARTITION BY person ORDER BY <a seeded hash of the row>) <= K``, kept
once (a DuckDB table, a cached Spark table) so every count reads the same rows. Identical
rows tie under the hash, and which of them is kept makes no difference.
"""

from __future__ import annotations

import weakref
from dataclasses import replace

import numpy as np
import pandas as pd

from privsyn_core.errors import InputError
from privsyn_core.measuring.counters import FrameTable, RawTable
from privsyn_core.privacy.ledger import PrivacyUnit
from privsyn_core.privacy.noise import NoiseSource, shuffling_rng


def check_person_column(unit: PrivacyUnit, names: tuple[str, ...] | list[str]) -> None:
    """Refuse a person column the table does not have (column names are public: free)."""
    if unit.person is not None and unit.person not in names:
        raise InputError(
            f"the person column {unit.person!r} is not in the table (its columns: "
            f"{', '.join(map(str, names))})"
        )


def kept_rows(people: pd.Series, k: int, rng: np.random.Generator) -> np.ndarray:
    """Positions of at most ``k`` rows of each person of ``people`` (missing is one person),
    chosen uniformly at random by ``rng``, in the table's order."""
    order = rng.permutation(len(people))
    shuffled = people.iloc[order].reset_index(drop=True)
    rank = shuffled.groupby(shuffled, dropna=False, sort=False).cumcount().to_numpy()
    return np.sort(order[rank < k])


def bounded_frame(frame: pd.DataFrame, unit: PrivacyUnit, rng: np.random.Generator) -> pd.DataFrame:
    """``frame`` with at most K rows per person and without the person column."""
    check_person_column(unit, [str(c) for c in frame.columns])
    assert unit.person is not None
    keep = kept_rows(frame[unit.person], unit.rows_per_person, rng)
    return frame.iloc[keep].drop(columns=[unit.person]).reset_index(drop=True)


def bounded(raw: RawTable, unit: PrivacyUnit, noise: NoiseSource) -> RawTable:
    """``raw`` as the measurements may read it under ``unit``: unchanged per row; otherwise at
    most K rows per person, without the person column (see the module docstring)."""
    if unit.person is None:
        return raw
    if isinstance(raw, FrameTable):
        return FrameTable(bounded_frame(raw.frame, unit, shuffling_rng(noise)))
    from privsyn_core.measuring.counters.sql_encoding import SqlTable, quoted

    if not isinstance(raw, SqlTable):
        raise InputError("a person-level guarantee needs a table read in memory or in SQL")
    check_person_column(unit, raw.columns)
    seed = int(shuffling_rng(noise).integers(0, 2**62))
    keep = [i for i, c in enumerate(raw.columns) if c != unit.person]
    dialect = raw.dialect
    columns = ", ".join(quoted(raw.columns[i], dialect) for i in keep)
    every = ", ".join(quoted(c, dialect) for c in raw.columns)
    hashed = f"xxhash64({seed}, {every})" if dialect.name == "spark" else f"hash({seed}, {every})"
    person = quoted(unit.person, dialect)
    ranked = (
        f"SELECT {columns}, ROW_NUMBER() OVER (PARTITION BY {person} ORDER BY {hashed}) "
        f"AS privsyn_rank FROM {raw.source}"
    )
    view = f"privsyn_bounded_{seed % 10**9}"
    k = unit.rows_per_person
    raw.store(view, f"SELECT {columns} FROM ({ranked}) AS ranked WHERE privsyn_rank <= {k}")
    table = replace(
        raw,
        source=view,
        columns=tuple(raw.columns[i] for i in keep),
        types=tuple(raw.types[i] for i in keep),
        _classes={},
    )
    # the engine's connection closes when the table that opened it goes: keep that one
    # alive as long as this one
    weakref.finalize(table, _keep, raw)
    return table


def _keep(_: object) -> None:
    """Nothing: holding its argument until the finalizer runs is the point."""
