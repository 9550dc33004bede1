"""The noisy marginals of a release as data: one CSV per marginal, in the table's own values.

A release bundle holds every DP measurement the run made (``marginals.json``: each column's
noisy 1-way marginal on its released values, then the noisy selected marginals on the values
after low counts were merged) and the same marginals after the consistency step (paper 4.3,
``model.json``), on engine codes. Both are DP (the second is post-processing of the first),
so both may be published at no further cost. :func:`marginal_files` writes them as CSV files,
each count labelled with the values it counts, decoded by the codecs' own
:meth:`labels` (the values decoding writes into the synthetic table; bins as ranges), with
a README and an index that say what they are: a differentially private release.

Noisy and consistent marginals of the same number are the same marginal: ``dp-noisy-09-...``
and ``dp-consistent-09-...``. Their cells differ only for the 1-way marginals of columns
whose low counts were merged (the noisy ones count every released value, the consistent
ones the merged values the synthetic table was sampled from).

File names hold the marginal's number and its columns' names reduced to letters, digits
and ``_`` (a column name is untrusted: it may hold ``/`` or ``..``); its cells are
written verbatim, or escaped for a spreadsheet on request
(:mod:`privsyn_core.release.csv_cells`).
"""

from __future__ import annotations

import io
import json
import re
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from privsyn_core.data.codecs import BinnedCodec
from privsyn_core.generation.fitted_data import ColumnDecoder, FittedData
from privsyn_core.generation.grouping import ValueGrouping
from privsyn_core.marginals import MarginalTable
from privsyn_core.privacy.ledger import guarantee
from privsyn_core.release.csv_cells import FormulaCells, csv_ready

#: how a merged value's members are joined in its label
JOIN = " | "
#: the label of a missing value inside a merged value's label (alone, it is an empty cell)
MISSING = "missing"
#: the longest part of a file name taken from the columns' names
_NAME_CHARS = 60


@dataclass(frozen=True)
class ReleasedMarginal:
    """One released marginal as a table: a row per cell, its values and its count."""

    number: int
    #: "noisy" (the DP measurement as made) or "consistent" (after consistency)
    stage: str
    attributes: tuple[str, ...]
    #: "released values" (declared or DP-estimated codes) or "merged values" (engine codes)
    values: str
    rho: float | None
    sigma: float | None
    frame: pd.DataFrame

    @property
    def file_name(self) -> str:
        slug = "-".join(
            re.sub(r"[^A-Za-z0-9_]+", "_", a).strip("_") or "column" for a in self.attributes
        )
        return f"dp-{self.stage}-{self.number:02d}-{slug[:_NAME_CHARS]}.csv"

    @property
    def count_column(self) -> str:
        return str(self.frame.columns[-1])


def merged_labels(decoder: ColumnDecoder, grouping: ValueGrouping) -> list[object]:
    """The label of each engine code: its one member's label (:meth:`labels` of the codec),
    or a merged value's members joined by :data:`JOIN` (adjacent bins as one range)."""
    declared = decoder.labels()
    out: list[object] = []
    for members in grouping.members:
        if len(members) == 1:
            out.append(declared[members[0]])
            continue
        parts: list[str] = []
        if isinstance(decoder, BinnedCodec):
            bins = sorted(m for m in members if m < decoder.bins)
            runs: list[list[int]] = []
            for k in bins:
                if runs and runs[-1][1] == k - 1:
                    runs[-1][1] = k
                else:
                    runs.append([k, k])
            parts = [decoder.span_label(first, last) for first, last in runs]
            parts += [MISSING for m in members if m >= decoder.bins]
        else:
            parts = [MISSING if declared[m] is None else str(declared[m]) for m in members]
        out.append(JOIN.join(parts))
    return out


def _frame(
    table: MarginalTable, labels: Mapping[str, Sequence[object]], count: str
) -> pd.DataFrame:
    cells = np.indices(table.shape).reshape(len(table.shape), -1)  # C order, as ``values``
    columns = {}
    for i, name in enumerate(table.attributes):
        column = np.empty(len(labels[name]), dtype=object)
        column[:] = labels[name]
        columns[name] = column[cells[i]]
    while count in columns:  # a column of the table may have the count's name
        count += "_"
    columns[count] = np.asarray(table.values, dtype=float)
    return pd.DataFrame(columns)


def released_marginals(model: FittedData) -> list[ReleasedMarginal]:
    """The model's noisy marginals, then the same after consistency, as tables."""
    engine = list(model.engine.attributes)
    d = len(engine)
    declared = {
        name: decoder.labels() for name, decoder in zip(engine, model.decoders, strict=True)
    }
    merged = {
        name: merged_labels(decoder, grouping)
        for name, decoder, grouping in zip(engine, model.decoders, model.groupings, strict=True)
    }
    out = []
    for i, noisy in enumerate(model.noisy):
        labels = declared if i < d else merged
        out.append(
            ReleasedMarginal(
                i + 1, "noisy", noisy.attributes, "released values" if i < d else "merged values",
                noisy.rho, noisy.sigma, _frame(noisy.table, labels, "dp_noisy_count"),
            )
        )  # fmt: skip
    for i, table in enumerate((*model.one_way, *model.marginals)):
        frame = _frame(table, merged, "dp_consistent_count")
        out.append(
            ReleasedMarginal(
                i + 1, "consistent", table.attributes, "merged values", None, None, frame
            )
        )
    return out


def _readme(model: FittedData, source: str, marginals: Sequence[ReleasedMarginal]) -> str:
    ledger = model.ledger
    epsilon = "-" if ledger.epsilon is None else f"{ledger.epsilon:g}"
    delta = "-" if ledger.delta is None else f"{ledger.delta:g}"
    debug = "not for release" in ledger.randomness
    noisy = sum(m.stage == "noisy" for m in marginals)
    lines = [
        "DIFFERENTIALLY PRIVATE RELEASE: noisy marginal counts",
        "=====================================================",
        "",
        f"These files are the noisy marginals of the PrivSyn release bundle {source}. They are",
        "differentially private: every count carries the Gaussian noise its privacy ledger paid",
        f"for. The whole release cost epsilon {epsilon}, delta {delta} (zCDP rho "
        f"{ledger.spent_rho:.6g});",
        "publishing these files as well costs nothing more (post-processing).",
        f"Guarantee: {guarantee(ledger.unit)}.",
        f"Noise: {ledger.randomness}.",
    ]
    if debug:
        lines += [
            "",
            "*** NOT FOR RELEASE: a seed was set (debug mode), so the noise can be replayed. ***",
        ]
    lines += [
        "",
        "Files",
        "  index.csv                one line per file: stage, columns, cells, rho and sigma",
        f"  dp-noisy-NN-*.csv        the {noisy} DP measurements as made: a count per cell with",
        "                           Gaussian noise of standard deviation sigma (index.csv);",
        "                           counts may be fractional or negative. The first one per",
        "                           column counts its released values; the others count the",
        "                           values after low counts were merged.",
        "  dp-consistent-NN-*.csv   the same marginals after the consistency step (PrivSyn,",
        "                           section 4.3): non-negative, one total, agreeing wherever",
        "                           they share columns. Post-processing of the noisy counts:",
        "                           also DP. The synthetic table was sampled to match these.",
        "  The same NN is the same marginal.",
        "",
        "Values (as the synthetic table writes them)",
        "  categories   the category; '(other)' stands for the values not released one by one",
        "  numbers      a bin: [low, high), or 'low to high' for whole numbers (both included);",
        "               values beyond a column's bounds were counted in its first or last bin",
        "  dates        a bin: [from, until), in the column's date format",
        "  missing      an empty cell",
        f"  merged       values with low counts merged into one, joined by '{JOIN}'",
        "",
        "The counts estimate the real table's; the real counts are not released and cannot be",
        "read back from these.",
    ]
    return "\n".join(lines) + "\n"


def _index(marginals: Sequence[ReleasedMarginal]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "file": [m.file_name for m in marginals],
            "release": "differentially private",
            "stage": [m.stage for m in marginals],
            "number": [m.number for m in marginals],
            "columns": [json.dumps(list(m.attributes)) for m in marginals],
            "values": [m.values for m in marginals],
            "cells": [len(m.frame) for m in marginals],
            "rho": [m.rho for m in marginals],
            "sigma": [m.sigma for m in marginals],
            "total": [float(m.frame[m.count_column].sum()) for m in marginals],
        }
    )


def marginal_files(
    model: FittedData, source: str, escape_formulas: bool = False
) -> tuple[dict[str, bytes], FormulaCells]:
    """The files of ``privsyn marginals`` (name to bytes: ``README.txt``, ``index.csv`` and
    one CSV per marginal) for the model of the bundle named ``source``, and the cells a
    spreadsheet would run as formulas (escaped with ``escape_formulas``)."""
    marginals = released_marginals(model)
    found = FormulaCells()
    files = {"README.txt": _readme(model, source, marginals).encode()}
    for name, frame in [("index.csv", _index(marginals))] + [
        (m.file_name, m.frame) for m in marginals
    ]:
        ready, cells = csv_ready(frame, escape_formulas)
        found = found.merged(cells)
        files[name] = ready.to_csv(index=False).encode()
    return files, found


def marginals_zip(files: dict[str, bytes], folder: str) -> bytes:
    """``files`` as a zip whose members lie in ``folder`` (the dashboard's download)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            archive.writestr(f"{folder}/{name}", data)
    return buffer.getvalue()
