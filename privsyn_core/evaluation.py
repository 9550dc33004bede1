"""Fidelity of a synthetic table against the real one (PrivSyn paper, section 6.1).

Three measures, as in Zhang et al. (USENIX Security 2021), "Tasks and Metrics":

* **2-way marginal L1** - mean over all attribute pairs of the L1 distance between the
  normalised pairwise marginals of the real and synthetic tables (each term in [0, 2]).
* **Range query error** - mean absolute difference, over random conjunctive range queries,
  of the fraction of rows each table puts inside the query box.
* **SVM misclassification** - a linear SVM trained on the synthetic table and tested on
  real rows held out from the same split, next to two baselines computed on the real data
  only: always predicting the real training majority class, and a non-private SVM trained
  on the real training rows.

PRIVACY NOTE: every function here reads the *raw* real table, so its outputs are
**owner-only diagnostics**. They consume no privacy budget because they are never meant to
leave the data owner; they must never be published or shipped as part of a differentially
private release (a fidelity number computed on private data leaks information about it).

All functions are pure: randomness comes only from an explicit integer ``seed``, so two
synthetic tables scored with the same seed are compared on the same queries and splits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import pandas as pd
from scipy import sparse

from privsyn_core.data.columns import coded_frame
from privsyn_core.errors import InputError

if TYPE_CHECKING:
    from privsyn_core.generation.synthesis import SynthesisResult

__all__ = [
    "FidelityReport",
    "RangeQueries",
    "draw_range_queries",
    "encode_tables",
    "fidelity_report",
    "one_hot",
    "range_query_error",
    "split_rows",
    "svm_misclassification",
    "two_way_l1",
]

# LinearSVC settings: fixed so that the score of a table is reproducible; the iteration cap is
# far above what liblinear needs on one-hot Adult, so no ConvergenceWarning is raised there.
_SVM_RANDOM_STATE = 0
_SVM_MAX_ITER = 20_000

# Above this many cells a pairwise marginal is counted on the observed cells only, so that
# integer columns holding large raw values (size = max + 1) do not allocate huge histograms.
_DENSE_CELL_LIMIT = 1 << 22


# --------------------------------------------------------------------------------------------
# Encoding
# --------------------------------------------------------------------------------------------


def encode_tables(
    real: pd.DataFrame, synthetic: pd.DataFrame
) -> tuple[np.ndarray, np.ndarray, tuple[int, ...]]:
    """Code both tables on a shared per-column domain.

    The metrics compare counts cell by cell, so both tables must use the *same* code for the
    same value; coding each table on its own would silently misalign them.

    Columns must match by name (same set; ``synthetic`` is reordered to ``real``'s order);
    otherwise a ``ValueError`` names the missing and extra columns. Integer columns whose
    values are all >= 0 in both tables (and that hold no missing values) are taken to be codes
    already and keep their values (size = max + 1 over both tables), so an engine's coded
    output lines up with its declared domain. Any other column (strings, floats, bools,
    categoricals, negative integers, nullable integers with missing values) is factorised on
    the sorted union of its values in both tables; NaN/None count as one extra value, coded
    last.

    Returns ``(real_codes, synthetic_codes, sizes)`` with int64 arrays of shape ``(n_real, d)``
    and ``(n_synthetic, d)``.
    """
    _check_same_columns(real, synthetic)
    columns = list(real.columns)
    n_real, n_syn = len(real), len(synthetic)
    real_codes = np.empty((n_real, len(columns)), dtype=np.int64)
    syn_codes = np.empty((n_syn, len(columns)), dtype=np.int64)
    sizes: list[int] = []
    for j, name in enumerate(columns):
        r_col, s_col, size = _encode_column(real[name], synthetic[name])
        real_codes[:, j] = r_col
        syn_codes[:, j] = s_col
        sizes.append(size)
    return real_codes, syn_codes, tuple(sizes)


def _check_same_columns(real: pd.DataFrame, synthetic: pd.DataFrame) -> None:
    """Refuse tables whose columns differ, naming the culprits (a silent mismatch would score
    unrelated attributes against each other)."""
    for which, frame in (("real", real), ("synthetic", synthetic)):
        duplicated = frame.columns[frame.columns.duplicated()]
        if len(duplicated):
            raise InputError(f"{which} table has duplicated columns: {_names(duplicated)}")
    missing = [c for c in real.columns if c not in set(synthetic.columns)]
    extra = [c for c in synthetic.columns if c not in set(real.columns)]
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"missing from the synthetic table: {_names(missing)}")
        if extra:
            parts.append(f"extra in the synthetic table: {_names(extra)}")
        raise InputError("real and synthetic columns differ; " + "; ".join(parts))


def _names(names: Sequence[object] | pd.Index) -> str:
    return ", ".join(repr(n) for n in names)


def _encode_column(real: pd.Series, synthetic: pd.Series) -> tuple[np.ndarray, np.ndarray, int]:
    """Shared codes for one column of both tables (see ``encode_tables`` for the rules)."""
    if _is_code_column(real) and _is_code_column(synthetic):
        r = real.to_numpy(dtype=np.int64)
        s = synthetic.to_numpy(dtype=np.int64)
        if (r.size == 0 or r.min() >= 0) and (s.size == 0 or s.min() >= 0):
            top = max(int(r.max()) if r.size else -1, int(s.max()) if s.size else -1)
            return r, s, max(top + 1, 1)
    both = pd.concat([_as_plain(real), _as_plain(synthetic)], ignore_index=True)
    codes = _factorize_sorted(both)
    n_values = int(codes.max()) + 1 if codes.size else 0
    return codes[: len(real)], codes[len(real) :], max(n_values, 1)


def _is_code_column(column: pd.Series) -> bool:
    return pd.api.types.is_integer_dtype(column.dtype) and not bool(column.isna().any())


def _as_plain(column: pd.Series) -> pd.Series:
    """Categoricals are factorised on their values, not their (table-specific) categories."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        return column.astype(object)
    return column


def _factorize_sorted(values: pd.Series) -> np.ndarray:
    """Codes of ``values`` in sorted order of the distinct values; missing values get one
    extra code after all others. Unorderable mixtures (e.g. str and int) are ordered by
    (type name, repr) so the coding stays deterministic."""
    try:
        codes, uniques = pd.factorize(values, sort=True)
    except TypeError:
        codes, uniques = pd.factorize(values, sort=False)
        order = sorted(
            range(len(uniques)), key=lambda i: (type(uniques[i]).__name__, repr(uniques[i]))
        )
        rank = np.empty(len(uniques), dtype=np.int64)
        rank[order] = np.arange(len(uniques))
        codes = np.where(codes >= 0, rank[np.maximum(codes, 0)], -1)
    codes = np.asarray(codes, dtype=np.int64)
    return np.where(codes < 0, len(uniques), codes)


# --------------------------------------------------------------------------------------------
# Shared validation
# --------------------------------------------------------------------------------------------


def _check_codes(name: str, codes: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Coded tables must be 2-D integer arrays with every code inside its column's domain;
    an out-of-range code would otherwise land in a neighbouring cell without any error."""
    codes = np.asarray(codes)
    if codes.ndim != 2:
        raise InputError(f"{name} codes must be a 2-D array (rows x attributes)")
    if codes.shape[1] != sizes.size:
        raise InputError(
            f"{name} codes have {codes.shape[1]} columns but {sizes.size} sizes were given"
        )
    if codes.shape[0] == 0:
        raise InputError(f"{name} table has no rows; its fractions are undefined")
    if not np.issubdtype(codes.dtype, np.integer):
        raise InputError(f"{name} codes must be integers, got dtype {codes.dtype}")
    if codes.size and (bool((codes < 0).any()) or bool((codes >= sizes).any())):
        raise InputError(f"{name} codes fall outside [0, size) for some attribute")
    return codes.astype(np.int64, copy=False)


def _as_sizes(sizes: Sequence[int] | np.ndarray) -> np.ndarray:
    arr = np.asarray(sizes, dtype=np.int64).reshape(-1)
    if bool((arr < 1).any()):
        raise InputError("every attribute size must be >= 1")
    return arr


# --------------------------------------------------------------------------------------------
# 2-way marginals
# --------------------------------------------------------------------------------------------


def pairwise_l1(real: np.ndarray, synthetic: np.ndarray, sizes: Sequence[int]) -> np.ndarray:
    """The L1 distance between the normalised 2-way marginals of every attribute pair, as a
    symmetric d x d matrix with a zero diagonal (each entry in [0, 2])."""
    size_arr = _as_sizes(sizes)
    real = _check_codes("real", real, size_arr)
    synthetic = _check_codes("synthetic", synthetic, size_arr)
    d = size_arr.size
    out = np.zeros((d, d))
    for i in range(d - 1):
        for j in range(i + 1, d):
            p, q = _pair_counts(
                real[:, i],
                real[:, j],
                synthetic[:, i],
                synthetic[:, j],
                int(size_arr[i]),
                int(size_arr[j]),
            )
            out[i, j] = out[j, i] = float(np.abs(p / real.shape[0] - q / synthetic.shape[0]).sum())
    return out


def two_way_l1(real: np.ndarray, synthetic: np.ndarray, sizes: Sequence[int]) -> float:
    """Mean, over all d(d-1)/2 attribute pairs, of the L1 distance between the normalised
    2-way marginals of the two tables (each term in [0, 2]; 0 = identical marginals).

    PrivSyn's headline fidelity measure: it checks that the synthetic rows preserve pairwise
    dependencies, not just one-way frequencies. Tables of different lengths are fine since
    each marginal is normalised by its own row count. With fewer than two attributes there
    is no pair and the result is 0.0.
    """
    matrix = pairwise_l1(real, synthetic, sizes)
    d = matrix.shape[0]
    if d < 2:
        return 0.0
    return float(matrix[np.triu_indices(d, 1)].mean())


def _pair_counts(
    real_a: np.ndarray,
    real_b: np.ndarray,
    syn_a: np.ndarray,
    syn_b: np.ndarray,
    size_a: int,
    size_b: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Counts of both tables on a common cell axis for one attribute pair.

    Dense ``bincount`` over the full ``size_a * size_b`` grid when that is small; otherwise
    the codes are first re-ranked among the values actually observed, which drops only cells
    empty in both tables and therefore leaves the L1 distance unchanged.
    """
    if size_a * size_b <= max(_DENSE_CELL_LIMIT, 2 * (real_a.size + syn_a.size)):
        cells = size_a * size_b
        return (
            np.bincount(real_a * size_b + real_b, minlength=cells),
            np.bincount(syn_a * size_b + syn_b, minlength=cells),
        )
    n_real = real_a.size
    _, a = np.unique(np.concatenate([real_a, syn_a]), return_inverse=True)
    _, b = np.unique(np.concatenate([real_b, syn_b]), return_inverse=True)
    flat = a.reshape(-1) * (int(b.max()) + 1) + b.reshape(-1)
    _, cell = np.unique(flat, return_inverse=True)
    cell = cell.reshape(-1)
    n_cells = int(cell.max()) + 1
    return (
        np.bincount(cell[:n_real], minlength=n_cells),
        np.bincount(cell[n_real:], minlength=n_cells),
    )


# --------------------------------------------------------------------------------------------
# Range queries
# --------------------------------------------------------------------------------------------


class RangeQueries(NamedTuple):
    """A batch of conjunctive range queries: query ``q`` asks for the rows with
    ``lower[q, k] <= row[attributes[q, k]] <= upper[q, k]`` for every ``k``."""

    attributes: np.ndarray  # (n_queries, k) distinct attribute indices per query
    lower: np.ndarray  # (n_queries, k) inclusive lower code
    upper: np.ndarray  # (n_queries, k) inclusive upper code


def draw_range_queries(
    sizes: Sequence[int] | np.ndarray,
    *,
    n_queries: int = 1000,
    n_attributes: int = 3,
    seed: int = 0,
) -> RangeQueries:
    """The random queries used by ``range_query_error``, exposed so they can be inspected.

    Each query picks ``min(n_attributes, d)`` distinct attributes uniformly at random, and for
    each an interval ``[lo, hi]`` given by the sorted pair of two independent uniform codes in
    ``[0, size)``. Depends only on the public sizes and the seed, never on the data, so every
    synthetic table scored with the same seed faces the same queries.
    """
    size_arr = _as_sizes(sizes)
    if n_queries < 1:
        raise InputError("n_queries must be >= 1")
    if n_attributes < 1:
        raise InputError("n_attributes must be >= 1")
    rng = np.random.default_rng(seed)
    k = min(n_attributes, size_arr.size)
    # The first k entries of a uniformly random permutation form a uniform k-subset.
    attributes = np.argsort(rng.random((n_queries, size_arr.size)), axis=1)[:, :k]
    ends = rng.integers(0, size_arr[attributes][..., None], size=(n_queries, k, 2))
    return RangeQueries(attributes, ends.min(axis=2), ends.max(axis=2))


def range_query_error(
    real: np.ndarray,
    synthetic: np.ndarray,
    sizes: Sequence[int],
    *,
    n_queries: int = 1000,
    n_attributes: int = 3,
    seed: int = 0,
) -> float:
    """Mean absolute difference between the fractions of real and synthetic rows that fall
    inside random range queries (see ``draw_range_queries``); 0 = every query agrees.

    Range counts are what analysts typically ask of a released table, and unlike 2-way
    marginals they probe 3-way structure and ordered intervals of codes.
    """
    size_arr = _as_sizes(sizes)
    real = _check_codes("real", real, size_arr)
    synthetic = _check_codes("synthetic", synthetic, size_arr)
    queries = draw_range_queries(
        size_arr, n_queries=n_queries, n_attributes=n_attributes, seed=seed
    )
    real_frac = _range_fractions(real, queries)
    syn_frac = _range_fractions(synthetic, queries)
    return float(np.abs(real_frac - syn_frac).mean())


def _range_fractions(codes: np.ndarray, queries: RangeQueries) -> np.ndarray:
    """Fraction of rows inside each query: one boolean row mask per query, built with
    whole-column comparisons (no loop over rows)."""
    columns = np.ascontiguousarray(codes.T)  # one contiguous row of codes per attribute
    n_queries = queries.attributes.shape[0]
    fractions = np.empty(n_queries)
    inside = np.empty(codes.shape[0], dtype=bool)
    scratch = np.empty(codes.shape[0], dtype=bool)
    for q in range(n_queries):
        inside.fill(True)
        for a, lo, hi in zip(
            queries.attributes[q], queries.lower[q], queries.upper[q], strict=True
        ):
            column = columns[a]
            np.greater_equal(column, lo, out=scratch)
            inside &= scratch
            np.less_equal(column, hi, out=scratch)
            inside &= scratch
        fractions[q] = np.count_nonzero(inside)
    return fractions / codes.shape[0]


# --------------------------------------------------------------------------------------------
# Classification
# --------------------------------------------------------------------------------------------


def one_hot(codes: np.ndarray, sizes: Sequence[int]) -> sparse.csr_matrix:
    """Sparse one-hot features: attribute ``j`` occupies columns ``offset_j .. offset_j +
    size_j - 1``. Codes are nominal, so a linear model must see indicators, not raw codes."""
    size_arr = _as_sizes(sizes)
    codes = _check_codes("feature", codes, size_arr)
    n, d = codes.shape
    offsets = np.concatenate([[0], np.cumsum(size_arr)[:-1]]).astype(np.int64)
    indices = (codes + offsets).reshape(-1)
    indptr = np.arange(0, n * d + 1, d, dtype=np.int64)
    data = np.ones(n * d, dtype=np.float64)
    return sparse.csr_matrix((data, indices, indptr), shape=(n, int(size_arr.sum())))


def svm_misclassification(
    train: np.ndarray,
    train_labels: np.ndarray,
    test: np.ndarray,
    test_labels: np.ndarray,
    sizes: Sequence[int],
) -> float:
    """Misclassification rate on ``test`` of a linear SVM trained on ``train``.

    The paper's downstream-task measure: a synthetic table is useful for learning if a model
    trained on it does about as well on real rows as one trained on real rows. Features are
    the one-hot encoding of the codes (``sizes`` gives the feature offsets); the classifier
    is scikit-learn's ``LinearSVC`` with default C and a fixed random state. If the training
    labels hold a single class, that class is predicted (an SVM cannot be fit on one class).
    """
    train_labels = np.asarray(train_labels).reshape(-1)
    test_labels = np.asarray(test_labels).reshape(-1)
    x_train = one_hot(train, sizes)
    x_test = one_hot(test, sizes)
    if train_labels.size != x_train.shape[0]:
        raise InputError("train and train_labels have different numbers of rows")
    if test_labels.size != x_test.shape[0]:
        raise InputError("test and test_labels have different numbers of rows")
    classes = np.unique(train_labels)
    if classes.size == 1:
        predicted = np.full(test_labels.shape, classes[0])
    else:
        from sklearn.svm import LinearSVC  # deferred: scikit-learn is slow to import

        model = LinearSVC(dual="auto", max_iter=_SVM_MAX_ITER, random_state=_SVM_RANDOM_STATE)
        predicted = model.fit(x_train, train_labels).predict(x_test)
    return float(np.mean(predicted != test_labels))


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FidelityReport:
    """Fidelity of one synthetic table; owner-only diagnostics, never part of a DP release."""

    two_way_l1: float
    range_query_error: float
    svm_misclassification: float | None  # None when no label column
    majority_misclassification: float | None
    nonprivate_svm_misclassification: float | None
    label: str | None

    def as_dict(self) -> dict[str, float | str | None]:
        """Plain dict (e.g. for JSON benchmark logs)."""
        return asdict(self)

    def format(self) -> str:
        """Multi-line human-readable text, one metric per line, with the SVM baselines next
        to the SVM number so its quality can be judged at a glance."""
        lines = [
            "Fidelity vs the real table (owner-only diagnostics, not part of the DP release)",
            f"  2-way marginal L1 (mean over pairs, 0..2): {self.two_way_l1:.4f}",
            f"  range query error (mean |diff|, 0..1):     {self.range_query_error:.4f}",
        ]
        if self.label is None or self.svm_misclassification is None:
            lines.append("  SVM misclassification:                     n/a (no label column)")
        else:
            lines.append(
                f"  SVM misclassification on {self.label!r}: {self.svm_misclassification:.4f}"
                f"  (non-private SVM: {_fmt(self.nonprivate_svm_misclassification)},"
                f" majority class: {_fmt(self.majority_misclassification)})"
            )
        return "\n".join(lines)


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def split_rows(n_rows: int, test_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Random train/test row indices: ``round(test_fraction * n_rows)`` rows held out (at least
    one on each side). Exposed so a caller can reproduce the split a report used."""
    if not 0.0 < test_fraction < 1.0:
        raise InputError(f"test_fraction must be in (0, 1), got {test_fraction}")
    n_test = round(test_fraction * n_rows)
    if n_test < 1 or n_test > n_rows - 1:
        raise InputError(
            f"cannot hold out {test_fraction} of {n_rows} rows and keep both sides non-empty"
        )
    order = np.random.default_rng(seed).permutation(n_rows)
    return np.sort(order[n_test:]), np.sort(order[:n_test])


def fidelity_report(
    real: pd.DataFrame,
    synthetic: pd.DataFrame,
    *,
    label: str | None = None,
    test_fraction: float = 0.2,
    seed: int = 0,
) -> FidelityReport:
    """All section-6.1 measures of ``synthetic`` against ``real`` in one report.

    2-way L1 and range queries use every column of the full real table. With a ``label``,
    the real rows are split once (``split_rows`` with ``seed``); the SVM is trained on the
    whole synthetic table (features = all other columns, target = the label's code) and
    tested on the real held-out rows; the baselines - majority class of the real training
    rows, and an SVM trained on the real training rows - are tested on the same rows.
    """
    if label is not None and label not in real.columns:
        raise InputError(
            f"label column {label!r} is not a column of the real table "
            f"(columns: {_names(list(real.columns))})"
        )
    real_codes, syn_codes, sizes = encode_tables(real, synthetic)
    l1 = two_way_l1(real_codes, syn_codes, sizes)
    rq = range_query_error(real_codes, syn_codes, sizes, seed=seed)
    if label is None:
        return FidelityReport(l1, rq, None, None, None, None)

    y = list(real.columns).index(label)
    features = [j for j in range(len(sizes)) if j != y]
    feature_sizes = [sizes[j] for j in features]
    train_idx, test_idx = split_rows(len(real_codes), test_fraction, seed)
    x_train, y_train = real_codes[train_idx][:, features], real_codes[train_idx, y]
    x_test, y_test = real_codes[test_idx][:, features], real_codes[test_idx, y]

    synthetic_svm = svm_misclassification(
        syn_codes[:, features], syn_codes[:, y], x_test, y_test, feature_sizes
    )
    majority = int(np.argmax(np.bincount(y_train)))
    majority_error = float(np.mean(y_test != majority))
    nonprivate_svm = svm_misclassification(x_train, y_train, x_test, y_test, feature_sizes)
    return FidelityReport(l1, rq, synthetic_svm, majority_error, nonprivate_svm, label)


def fidelity_of(table: pd.DataFrame, result: SynthesisResult, label: str | None) -> FidelityReport:
    """Owner-only: ``result``'s synthetic table against the real one. A raw table is compared
    in the run's own codes (its bins and categories), a pre-coded one as it is."""
    if result.columns:
        real = coded_frame(result.columns, table)
        synthetic = coded_frame(result.columns, result.synthetic)
    else:
        real, synthetic = table, result.synthetic
    usable = label if label is not None and label in real.columns else None
    return fidelity_report(real, synthetic, label=usable)
