"""Did any real row come through? A check of a synthetic table for copied real rows.

OWNER-ONLY: this module reads the raw real rows and compares them one by one with the
synthetic rows, so every number it returns is about individual people in the private table.
It spends no privacy budget because it must never leave the data owner: show it to the owner,
never publish it, and never put it in a release bundle or an export. (The DP guarantee is what
protects the people in the table; this check can show that a synthesizer copies rows, it cannot
prove that one does not leak.)

What it measures, on rows whose values are normalised the same way in every table (a number is
a number however the file spells it, ``"40"``, ``40`` and ``40.0`` alike; a missing value
equals a missing value and differs from any present one):

* **Exact copies** - the share of synthetic rows identical in every column to some real row.
  Rows are compared by exact identity keys, so this runs on all rows, of both samples (the
  synthetic rows are not cut to the held-out count: the test below allows samples of
  different sizes, and more rows give it more power).
* **Distance to the closest real record (DCR)** - for a sample of rows, the Gower distance
  (Gower 1971) to the nearest real row: the mean over columns of a per-column distance in
  [0, 1], which is ``|x - y|`` divided by the real column's range (capped at 1) for numbers,
  0 or 1 for categories, 1 when exactly one side is missing. 0 means an identical row, 1 a
  row that differs in every column as much as it can. The range (not a robust spread) is
  Gower's own scale and SDMetrics' choice; a robust spread is zero on columns that are mostly
  one value (Adult's capital gain), which would make every other value maximally far.
* **The baseline fresh real rows give.** A distance means nothing alone: how close rows of
  the same population come to each other without any copying depends on the table (a table
  of a few binary columns is full of identical rows). So the real rows are split at random
  (with the seed) into a reference half and a held-out half, and the synthetic rows and the
  held-out real rows are each compared with the reference half. A synthesizer that saw every
  real row and memorised them shows about half of its rows as exact copies of the reference
  half, while the held-out half shows the table's natural rate of identical rows. When the
  owner has real rows that were never given to the synthesizer, they are the held-out rows
  and the whole real table is the reference. This is the design of SDMetrics'
  ``DCRBaselineProtection``, mostlyai-qa's DCR share and synthcity's privacy metrics, in this
  project's own code.

The verdict is two one-sided tests, each at half of ``alpha`` (Bonferroni), so that a
synthesizer whose rows behave like fresh real rows is warned about in at most ``alpha`` of
checks (1 in 100 by default):

* Exact copies: Fisher's exact test of "synthetic rows copy a reference row more often than
  held-out real rows do". Conditional on the reference rows, each fresh row of the
  population (the real rows taken as a random sample of it) is a copy independently with one
  probability, so the test is exact at any sample size.
* Near copies: the rows of both samples whose closest distance is at or below the pooled
  5th percentile of all of them; Fisher's exact test of "more synthetic rows than held-out
  rows are that close". Under the null hypothesis the two samples' distances are
  exchangeable, and the threshold is a symmetric function of the pooled sample, so this is
  an exact permutation test; it catches rows copied with small changes that the exact test
  misses.

Limits: a copy of a common row (a combination many people share) discloses little, yet counts
as a copy here, and it counts in both samples alike; a synthesizer whose rows pile up on the
commonest combinations more than real rows do may be warned about without leaking anyone.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd

from privsyn_core.errors import InputError

__all__ = [
    "DEFAULT_ALPHA",
    "MAX_QUERIES",
    "MAX_REFERENCE",
    "Closeness",
    "CopiedRowsReport",
    "copied_rows_report",
    "gower_distances",
]

#: the distance sample: at most this many reference rows and this many rows of each side, so
#: a check of any table takes seconds (the exact copies are counted on every row)
MAX_REFERENCE = 20_000
MAX_QUERIES = 2_000
#: the chance of warning about a synthesizer whose rows behave like fresh real rows
DEFAULT_ALPHA = 0.01
#: the quantile of the pooled closest distances below which a row counts as a near copy
NEAR_QUANTILE = 0.05

# Cells (query rows x reference rows) of one block of the distance matrix: 2**21 float32 cells
# are 8 MiB per buffer, so memory stays bounded whatever the table's length.
_BLOCK_CELLS = 1 << 21


# --------------------------------------------------------------------------------------------
# Normalised rows
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Rows:
    """Rows of one table on terms shared by every table of one check.

    ``keys`` holds every column's value as an integer code (equal code, equal normalised
    value; -1 missing); ``categories`` the codes of the categorical columns; ``numbers`` the
    numeric columns divided by the real column's range (NaN missing).
    """

    keys: np.ndarray  # (n, d) int64
    categories: np.ndarray  # (n, c) int64
    numbers: np.ndarray  # (n, m) float64

    def __len__(self) -> int:
        return int(self.keys.shape[0])

    def take(self, rows: np.ndarray) -> _Rows:
        return _Rows(self.keys[rows], self.categories[rows], self.numbers[rows])


def _normalised(real: pd.DataFrame, others: Sequence[pd.DataFrame]) -> list[_Rows]:
    """``real`` and ``others`` (same columns, in any order) on shared terms: each column is
    numeric if every table's values there are numbers or all dates (then compared as numbers,
    scaled by ``real``'s range), categorical otherwise (values compared as text, a number
    written the same way whatever its type)."""
    tables = [real, *(_same_columns(real, other, name) for other, name in _named(others))]
    sizes = [len(t) for t in tables]
    keys, categories, numbers = [], [], []
    for column in real.columns:
        values = _as_numbers([t[column] for t in tables])
        if values is None:
            codes = _shared_codes([_category_text(t[column]) for t in tables])
            keys.append(codes)
            categories.append(codes)
        else:
            keys.append(_shared_codes([pd.Series(v) for v in values]))
            low, spread = _span(values[0])
            numbers.append((np.concatenate(values) - low) / spread)
    ends = np.cumsum([0, *sizes])
    return [
        _Rows(
            _stack(keys, ends[i], ends[i + 1], np.int64),
            _stack(categories, ends[i], ends[i + 1], np.int64),
            _stack(numbers, ends[i], ends[i + 1], np.float64),
        )
        for i in range(len(tables))
    ]


def _named(others: Sequence[pd.DataFrame]) -> list[tuple[pd.DataFrame, str]]:
    names = ["synthetic", "held-out"]
    return [(t, names[i] if i < len(names) else f"table {i + 2}") for i, t in enumerate(others)]


def _same_columns(real: pd.DataFrame, other: pd.DataFrame, name: str) -> pd.DataFrame:
    """``other`` in ``real``'s column order, or an error naming the columns that differ (rows
    of different columns cannot be copies of each other)."""
    for which, frame in (("real", real), (name, other)):
        duplicated = list(frame.columns[frame.columns.duplicated()])
        if duplicated:
            raise InputError(f"the {which} table has duplicated columns: {_names(duplicated)}")
    missing = [c for c in real.columns if c not in set(other.columns)]
    extra = [c for c in other.columns if c not in set(real.columns)]
    if missing or extra:
        parts = [f"missing from the {name} table: {_names(missing)}"] if missing else []
        parts += [f"extra in the {name} table: {_names(extra)}"] if extra else []
        raise InputError(f"the real and {name} columns differ; " + "; ".join(parts))
    return other[list(real.columns)]


def _names(names: Sequence[object]) -> str:
    return ", ".join(repr(n) for n in names)


def _as_numbers(columns: list[pd.Series]) -> list[np.ndarray] | None:
    """The column in every table as float64 (NaN missing; dates as seconds), or None when some
    present value is not a finite number (the column is then categorical). Booleans are
    categories: two values, nothing between them."""
    if any(pd.api.types.is_bool_dtype(c.dtype) for c in columns):
        return None
    converted: list[np.ndarray | None]
    if any(pd.api.types.is_datetime64_any_dtype(c.dtype) for c in columns):
        converted = [_as_seconds(c) for c in columns]
    else:
        converted = [_numbers(c) for c in columns]
    out = []
    for original, numbers in zip(columns, converted, strict=True):
        if numbers is None:
            return None
        array = np.asarray(numbers, dtype=np.float64)
        present = ~original.isna().to_numpy()
        if not np.isfinite(array[present]).all():
            return None  # text, or infinities: compared as categories
        out.append(array)
    return out


def _numbers(column: pd.Series) -> np.ndarray:
    """The column as float64, a value that is not a number NaN. Distinct values of a text
    column are converted once each (a text column holds few)."""
    if pd.api.types.is_numeric_dtype(column.dtype):
        return column.to_numpy(dtype=np.float64, na_value=np.nan)
    codes, uniques = pd.factorize(column.astype(object), use_na_sentinel=True)
    converted = pd.to_numeric(pd.Series(uniques, dtype=object), errors="coerce")
    return np.append(converted.to_numpy(dtype=np.float64, na_value=np.nan), np.nan)[codes]


def _as_seconds(column: pd.Series) -> np.ndarray | None:
    try:
        dates = pd.to_datetime(column, errors="coerce", utc=True, format="mixed")
    except (TypeError, ValueError):
        return None
    seconds = (dates - pd.Timestamp(0, tz="UTC")).dt.total_seconds()
    return seconds.where(dates.notna()).to_numpy(dtype=np.float64, na_value=np.nan)


def _category_text(column: pd.Series) -> pd.Series:
    """Each value as text, a number spelled one way (``9``, ``9.0`` and ``"9"`` all ``"9"``),
    missing kept missing. Distinct values are converted once each."""
    codes, uniques = pd.factorize(column.astype(object), use_na_sentinel=True)
    texts = np.array([_text(v) for v in uniques] + [None], dtype=object)
    return pd.Series(texts[codes], dtype=object)


def _text(value: Any) -> str:
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value))
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return str(int(value)) if float(value).is_integer() else repr(float(value))
    return str(value)


def _shared_codes(columns: list[pd.Series]) -> np.ndarray:
    """One code per distinct value over all tables (-1 for missing)."""
    codes, _ = pd.factorize(pd.concat(columns, ignore_index=True), use_na_sentinel=True)
    return np.asarray(codes, dtype=np.int64)


def _span(real: np.ndarray) -> tuple[float, float]:
    """The real column's lowest value and range, Gower's scale (the values are shifted by the
    lowest so that float32 keeps their differences). The range is 1 when there is none (one
    value, or all missing), so that any other value is at the full distance 1 (the cap)."""
    present = real[~np.isnan(real)]
    if not present.size:
        return 0.0, 1.0
    low, spread = float(present.min()), float(present.max() - present.min())
    return low, spread if spread > 0 else 1.0


def _stack(columns: list[np.ndarray], start: int, end: int, dtype: type) -> np.ndarray:
    if not columns:
        return np.empty((end - start, 0), dtype=dtype)
    return np.stack([c[start:end] for c in columns], axis=1).astype(dtype, copy=False)


def _row_ids(tables: list[_Rows]) -> list[np.ndarray]:
    """An integer per row, equal exactly when two rows (of any of ``tables``) are identical:
    the columns' codes combined one column at a time, re-coded after each so the numbers never
    overflow."""
    keys = np.concatenate([t.keys for t in tables])
    ids = np.zeros(keys.shape[0], dtype=np.int64)
    for j in range(keys.shape[1]):
        combined = ids * (int(keys[:, j].max(initial=-1)) + 2) + (keys[:, j] + 1)
        ids = np.asarray(pd.factorize(combined)[0], dtype=np.int64)
    ends = np.cumsum([0, *(len(t) for t in tables)])
    return [ids[ends[i] : ends[i + 1]] for i in range(len(tables))]


# --------------------------------------------------------------------------------------------
# Gower distance
# --------------------------------------------------------------------------------------------


def _distance_blocks(queries: _Rows, reference: _Rows) -> Iterator[tuple[slice, np.ndarray]]:
    """The Gower distance matrix, a block of query rows at a time (bounded memory): each
    block's rows and their float32 distances to every reference row.

    Categorical mismatches are counted in one byte per cell and the codes held in the
    narrowest integers: the categories' passes over the block then move a quarter of the
    memory that float32 would (on a busy machine memory, not arithmetic, sets the pace).
    """
    n_ref, columns = len(reference), queries.keys.shape[1]
    step = max(1, _BLOCK_CELLS // max(n_ref, 1))
    top = max(queries.categories.max(initial=0), reference.categories.max(initial=0))
    cats_q = queries.categories.astype(np.promote_types(np.min_scalar_type(top), np.int8))
    cats_ref = np.ascontiguousarray(reference.categories.T, dtype=cats_q.dtype)
    count_type = np.uint8 if cats_q.shape[1] < 256 else np.uint32
    nums_q = queries.numbers.astype(np.float32)
    nums_ref = np.ascontiguousarray(reference.numbers.T, dtype=np.float32)
    missing_ref = np.isnan(nums_ref)
    for start in range(0, len(queries), step):
        rows = slice(start, min(start + step, len(queries)))
        shape = (rows.stop - rows.start, n_ref)
        unequal = np.empty(shape, dtype=bool)
        differ = np.zeros(shape, dtype=count_type)  # categorical columns that differ
        for j in range(cats_ref.shape[0]):
            np.not_equal(cats_q[rows, j, None], cats_ref[j], out=unequal)
            differ += unequal
        total = differ.astype(np.float32)
        scratch = np.empty_like(total)
        for j in range(nums_ref.shape[0]):
            values = nums_q[rows, j, None]
            np.subtract(values, nums_ref[j], out=scratch)
            np.abs(scratch, out=scratch)
            np.minimum(scratch, np.float32(1), out=scratch)
            missing_q = np.isnan(values)
            if missing_q.any() or missing_ref[j].any():
                either = missing_q | missing_ref[j]
                np.copyto(scratch, missing_q != missing_ref[j], where=either)
            total += scratch
        total /= np.float32(columns)
        yield rows, total


def _closest_distances(queries: _Rows, reference: _Rows) -> np.ndarray:
    """Each query row's Gower distance to its nearest reference row (the DCR)."""
    out = np.empty(len(queries))
    for rows, block in _distance_blocks(queries, reference):
        out[rows] = block.min(axis=1)
    return out


def gower_distances(
    left: pd.DataFrame, right: pd.DataFrame, *, real: pd.DataFrame | None = None
) -> np.ndarray:
    """The full Gower distance matrix between the rows of ``left`` and those of ``right`` (for
    small tables: it holds every pair), with numbers scaled by ``real``'s range (default:
    ``left``'s). OWNER-ONLY when any of them holds real rows."""
    scale = left if real is None else real
    _, a, b = _normalised(scale, [left, right])
    return np.vstack([block for _, block in _distance_blocks(a, b)] or [np.empty((0, len(b)))])


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Closeness:
    """How close one set of rows comes to the reference real rows.

    ``copies`` of the ``rows`` are identical to some reference row; the distances are those of
    a sample of ``sampled`` rows to their closest reference row; ``at_zero`` of them are at
    distance 0 and ``near`` at or below the report's near-copy threshold.
    """

    rows: int
    copies: int
    sampled: int
    median: float
    p5: float
    at_zero: int
    near: int

    @property
    def copy_share(self) -> float:
        return self.copies / self.rows

    @property
    def zero_share(self) -> float:
        return self.at_zero / self.sampled

    @property
    def near_share(self) -> float:
        return self.near / self.sampled


@dataclass(frozen=True)
class CopiedRowsReport:
    """Whether a synthetic table copies real rows; OWNER-ONLY, never part of a DP release.

    ``copies_of_real`` of the ``synthetic_rows`` are identical to some of the ``real_rows``.
    The test compares ``synthetic`` and ``held_out`` (real rows the comparison set aside:
    ``holdout_given`` says whether the owner gave them, or they are half of the real rows)
    with ``reference_rows`` real rows; distances are measured to a sample of
    ``distance_reference_rows`` of them. ``near_distance`` is the near-copy threshold, and
    ``copies_p`` and ``near_p`` the one-sided p-values of the two tests (module docstring).
    """

    real_rows: int
    synthetic_rows: int
    columns: int
    copies_of_real: int
    holdout_given: bool
    reference_rows: int
    distance_reference_rows: int
    synthetic: Closeness
    held_out: Closeness
    near_distance: float
    copies_p: float
    near_p: float
    alpha: float

    @property
    def copies_flagged(self) -> bool:
        """More exact copies than held-out real rows show, beyond chance."""
        return self.copies_p < self.alpha / 2

    @property
    def near_flagged(self) -> bool:
        """More synthetic rows than held-out ones very close to a real row, beyond chance."""
        return self.near_p < self.alpha / 2

    @property
    def suspicious(self) -> bool:
        return self.copies_flagged or self.near_flagged

    def verdict(self) -> str:
        """The finding in one sentence, with the numbers that support it."""
        syn, held = self.synthetic, self.held_out
        if self.copies_flagged:
            return (
                f"Warning: {_pct(syn.copy_share)} of synthetic rows are exact copies of real "
                f"rows, against {_pct(held.copy_share)} for real rows held out from them: more "
                "than chance explains. Do not share this table."
            )
        if self.near_flagged:
            return (
                f"Warning: {_pct(syn.near_share)} of synthetic rows lie almost on a real row "
                f"(distance {self.near_distance:.3g} or less), against "
                f"{_pct(held.near_share)} of real rows held out from them: the synthetic rows "
                "sit closer to real rows than fresh real rows do. Do not share this table."
            )
        return (
            "No sign of copied rows: synthetic rows are no closer to real rows than fresh real "
            f"rows are (exact copies {_pct(syn.copy_share)}, against {_pct(held.copy_share)} "
            "for real rows held out from them)."
        )

    def as_dict(self) -> dict[str, Any]:
        """Plain dict (e.g. for the owner's JSON logs; never for a release)."""
        return {**asdict(self), "suspicious": self.suspicious, "verdict": self.verdict()}

    def format(self) -> str:
        """Multi-line text for the command line: the headline, the comparison with held-out
        real rows side by side, what the distance means, and the verdict."""
        syn, held = self.synthetic, self.held_out
        if self.holdout_given:
            how = (
                f"the synthetic rows and the {held.rows:,} held-out real rows you gave (never "
                f"given to the synthesizer) are each compared with all {self.reference_rows:,} "
                "real rows"
            )
        else:
            how = (
                f"the real rows split at random into a reference half of "
                f"{self.reference_rows:,} and a held-out half of {held.rows:,}; the synthetic "
                "rows and the held-out half are each compared with the reference half"
            )
        rows = [
            ("exact copies (of all rows)", _pct(syn.copy_share), _pct(held.copy_share)),
            ("closest distance, median", f"{syn.median:.4f}", f"{held.median:.4f}"),
            ("closest distance, 5th percentile", f"{syn.p5:.4f}", f"{held.p5:.4f}"),
            ("at distance 0 (identical)", _pct(syn.zero_share), _pct(held.zero_share)),
            (
                f"at distance <= {self.near_distance:.4f} (pooled 5%)",
                _pct(syn.near_share),
                _pct(held.near_share),
            ),
        ]
        width = max(len(r[0]) for r in rows)
        lines = [
            "Copied rows: did any real row come through? (owner-only: reads the real rows; "
            "never share these numbers or put them in a release)",
            f"  synthetic rows identical to one of the {self.real_rows:,} real rows: "
            f"{_pct(self.copies_of_real / self.synthetic_rows)} "
            f"({self.copies_of_real:,} of {self.synthetic_rows:,})",
            f"  against real rows held out: {how}",
            f"    {'':<{width}}  {'synthetic':>10}  {'held-out real':>13}",
            *(f"    {name:<{width}}  {a:>10}  {b:>13}" for name, a, b in rows),
            f"  distance: Gower, the mean over the {self.columns} columns of 0 (same value) to 1 "
            "(a different category, a number a whole range away, or missing against present); "
            f"the last four lines measure {syn.sampled:,} synthetic and {held.sampled:,} "
            f"held-out rows against {self.distance_reference_rows:,} of the reference rows"
            + (
                ", so a copy of a row outside those is not at distance 0"
                if self.distance_reference_rows < self.reference_rows
                else ""
            ),
            f"  tests (one-sided, Fisher's exact): copies p = {self.copies_p:.3g}, near copies "
            f"p = {self.near_p:.3g}; a warning needs p < {self.alpha / 2:g} "
            f"(false alarms at most {self.alpha:.0%} of checks)",
            f"  verdict: {self.verdict()}",
        ]
        return "\n".join(lines)


def _pct(share: float) -> str:
    if 0 < share < 0.001:
        return "<0.1%"
    return f"{share:.1%}"


def copied_rows_report(
    real: pd.DataFrame,
    synthetic: pd.DataFrame,
    *,
    holdout: pd.DataFrame | None = None,
    seed: int = 0,
    max_reference: int = MAX_REFERENCE,
    max_queries: int = MAX_QUERIES,
    alpha: float = DEFAULT_ALPHA,
) -> CopiedRowsReport:
    """Check ``synthetic`` for rows copied from ``real`` (module docstring). OWNER-ONLY.

    ``holdout``: real rows that were never given to the synthesizer, if the owner has them;
    otherwise half of ``real`` (chosen with ``seed``) is held out. Exact copies are counted
    on every row; distances on at most ``max_queries`` rows of each side against at most
    ``max_reference`` reference rows, all drawn with ``seed``.
    """
    if real.shape[1] == 0:
        raise InputError("the real table has no columns: there are no rows to compare")
    if len(real) == 0 or len(synthetic) == 0:
        which = "real" if len(real) == 0 else "synthetic"
        raise InputError(f"the {which} table has no rows: there is nothing to compare")
    if holdout is not None and len(holdout) == 0:
        raise InputError("the held-out table has no rows: give real rows the synthesizer never saw")
    if holdout is None and len(real) < 2:
        raise InputError("the real table needs at least 2 rows to hold half of them out")
    if max_reference < 1 or max_queries < 1:
        raise InputError("max_reference and max_queries must be at least 1")
    if not 0 < alpha < 1:
        raise InputError(f"alpha must be in (0, 1), got {alpha}")

    rng = np.random.default_rng(seed)
    tables = _normalised(real, [synthetic] if holdout is None else [synthetic, holdout])
    real_rows, syn_rows = tables[0], tables[1]
    ids = _row_ids(tables)
    real_ids, syn_ids = ids[0], ids[1]
    if holdout is None:
        order = rng.permutation(len(real))
        held_idx, ref_idx = np.sort(order[: len(real) // 2]), np.sort(order[len(real) // 2 :])
        reference, held = real_rows.take(ref_idx), real_rows.take(held_idx)
        ref_ids, held_ids = real_ids[ref_idx], real_ids[held_idx]
    else:
        reference, held = real_rows, tables[2]
        ref_ids, held_ids = real_ids, ids[2]

    distance_idx = _sample(rng, len(reference), max_reference)
    distance_reference, distance_ids = reference.take(distance_idx), ref_ids[distance_idx]
    syn_sample = _sample(rng, len(syn_rows), max_queries)
    held_sample = _sample(rng, len(held), max_queries)
    syn_dcr = _closest_distances(syn_rows.take(syn_sample), distance_reference)
    held_dcr = _closest_distances(held.take(held_sample), distance_reference)
    near = float(np.quantile(np.concatenate([syn_dcr, held_dcr]), NEAR_QUANTILE, method="lower"))

    syn = _closeness(
        np.isin(syn_ids, ref_ids), syn_dcr, np.isin(syn_ids[syn_sample], distance_ids), near
    )
    hold = _closeness(
        np.isin(held_ids, ref_ids), held_dcr, np.isin(held_ids[held_sample], distance_ids), near
    )
    return CopiedRowsReport(
        real_rows=len(real),
        synthetic_rows=len(synthetic),
        columns=real.shape[1],
        copies_of_real=int(np.isin(syn_ids, real_ids).sum()),
        holdout_given=holdout is not None,
        reference_rows=len(reference),
        distance_reference_rows=len(distance_reference),
        synthetic=syn,
        held_out=hold,
        near_distance=near,
        copies_p=_more_often(syn.copies, syn.rows, hold.copies, hold.rows),
        near_p=_more_often(syn.near, syn.sampled, hold.near, hold.sampled),
        alpha=alpha,
    )


def _sample(rng: np.random.Generator, n: int, at_most: int) -> np.ndarray:
    if n <= at_most:
        return np.arange(n)
    return np.sort(rng.choice(n, size=at_most, replace=False))


def _closeness(
    copies: np.ndarray, dcr: np.ndarray, identical: np.ndarray, near: float
) -> Closeness:
    """One side's figures; ``identical``: which sampled rows equal a distance-reference row
    (exactly, by their keys, rather than by a float distance that rounds to 0)."""
    return Closeness(
        rows=int(copies.size),
        copies=int(copies.sum()),
        sampled=int(dcr.size),
        median=float(np.median(dcr)),
        p5=float(np.quantile(dcr, 0.05)),
        at_zero=int(identical.sum()),
        near=int((dcr <= near).sum()),
    )


def _more_often(hits: int, rows: int, baseline_hits: int, baseline_rows: int) -> float:
    """One-sided p-value of Fisher's exact test that the first proportion exceeds the second:
    the chance, given both totals, that at least ``hits`` of the pooled hits fall on the first
    sample (the upper tail of the hypergeometric distribution, summed in logs)."""
    from scipy.special import gammaln, logsumexp  # deferred: scipy is slow to import

    total, pooled = rows + baseline_rows, hits + baseline_hits
    lowest = max(0, rows + pooled - total)
    if hits <= lowest:
        return 1.0
    x = np.arange(hits, min(rows, pooled) + 1)

    def log_choose(n: Any, k: Any) -> Any:
        return gammaln(n + 1) - gammaln(k + 1) - gammaln(n - k + 1)

    log_p = log_choose(pooled, x) + log_choose(total - pooled, rows - x) - log_choose(total, rows)
    return float(min(1.0, np.exp(logsumexp(log_p))))
