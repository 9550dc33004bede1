"""``PrivSyn(epsilon, delta).fit(table)``: measure once, then sample as often as wanted.

The estimator form of :func:`privsyn_core.pipeline.synthesize`, as synthetic-data users know
it from SDV and smartnoise-synth::

    model = PrivSyn(1.0, 1e-9).fit(table)          # spends the budget, once
    first = model.sample(30_000, seed=1)            # free: post-processing
    bigger = model.sample(1_000_000, seed=2, gum=GumSettings(iterations=200))
    PrivSyn.save(model, "release.zip")              # the release bundle, with the model
    again = PrivSyn.load("release.zip").sample(100, seed=1)

:meth:`PrivSyn.fit` runs :func:`~privsyn_core.pipeline.measure` (the only code that reads the
table: every engine and source it accepts) and keeps its output as a
:class:`~privsyn_core.generation.fitted.FittedModel`, which holds DP measurements and public
metadata only. Sampling lives in :mod:`privsyn_core.generation.fitted`, beyond the private
boundary; saving and loading a model are the release bundle's
(:mod:`privsyn_core.release.bundle`), offered here as :meth:`PrivSyn.save` and
:meth:`PrivSyn.load`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from privsyn_core.config import PrivSynConfig
from privsyn_core.data.schema import Schema
from privsyn_core.data.sources import Engine, Source, source_width
from privsyn_core.data.table import DomainSpec
from privsyn_core.generation.fitted import FittedModel
from privsyn_core.generation.memory import check_width
from privsyn_core.generation.synthesis import fit_measurements
from privsyn_core.pipeline import measure
from privsyn_core.privacy.ledger import PrivacyUnit, charged_on_refusal
from privsyn_core.progress import ProgressCallback
from privsyn_core.release.bundle import load_model, save_model


@dataclass(frozen=True)
class PrivSyn:
    """PrivSyn's settings for one fit: the budget, where domains come from, where the table
    is counted (see :func:`~privsyn_core.pipeline.synthesize` for each argument)."""

    epsilon: float
    delta: float
    engine: Engine = "numpy"
    domain: DomainSpec | None = None
    schema: Schema | None = None
    raw_domains: bool = False
    config: PrivSynConfig = field(default_factory=PrivSynConfig)

    def fit(
        self,
        table: Source,
        *,
        rng: np.random.Generator | None = None,
        on_progress: ProgressCallback | None = None,
        spark: Any = None,
        person: str | None = None,
        max_rows_per_person: int | None = None,
    ) -> FittedModel:
        """Measure ``table`` (spending the whole budget) and return the fitted model.

        Without ``rng`` the noise is release mode (exact discrete Gaussian, secure
        randomness); a seeded ``rng`` is debug mode, reproducible and marked "not for
        release" in the ledger. Nothing of the table is kept but the measurements.

        ``person`` and ``max_rows_per_person`` (K) make the guarantee one per person, as in
        :func:`~privsyn_core.pipeline.synthesize`: at most K rows of each person are kept
        and the person column is neither modelled nor released."""
        unit = PrivacyUnit.of(person, max_rows_per_person)  # refused before anything is read
        check_width(source_width(table, self.engine) - (0 if unit.is_row else 1))
        measurements = measure(
            table,
            self.epsilon,
            self.delta,
            engine=self.engine,
            domain=self.domain,
            schema=self.schema,
            raw_domains=self.raw_domains,
            config=self.config,
            rng=rng,
            on_progress=on_progress,
            spark=spark,
            person=person,
            max_rows_per_person=max_rows_per_person,
        )
        with charged_on_refusal(lambda: measurements.ledger):  # fitting comes after the spend
            return fit_measurements(measurements, self.config, on_progress)

    @staticmethod
    def save(model: FittedModel, path: str | Path, synthetic: pd.DataFrame | None = None) -> None:
        """Write ``model`` as a release bundle (with ``synthetic``, if given, as its
        synthetic table), through a temporary file moved into place when complete;
        :meth:`load` reads it back."""
        save_model(model, path, synthetic)

    @staticmethod
    def load(path: str | Path) -> FittedModel:
        """The fitted model saved in a release bundle (:meth:`save`): checked (a clear
        :class:`~privsyn_core.errors.InputError` for a damaged, foreign or older bundle); no
        data is read and nothing is spent."""
        return load_model(path)
