"""The release bundle: one zip holding only what a DP run may publish, and the fitted model
that samples more tables from it at no privacy cost.

Contents (format ``privsyn-release``, version 2):

=================  ==========================================================================
``manifest.json``  format, version, randomness mode, ``for_release``, the model file's name,
                   and the SHA-256 of every other file
``synthetic.csv``  the synthetic table (absent when a model is saved without a sample)
``marginals.json`` the DP measurements themselves: noisy 1-way (declared codes) and selected
                   marginals (engine codes), each with rho and sigma
``schema.json``    the schema as released: every category, bound and bin edge with its
                   provenance (declared or DP estimate)
``ledger.json``    the privacy ledger (every measurement, totals, conversions); when loaded,
                   its figures must be what the noise scales of its measurements and of
                   ``marginals.json`` mean (:func:`load_model`)
``config.json``    the run's configuration; ``versions.json`` package versions
``convergence.json`` GUM's mean L1 error against the noisy marginals per iteration, while
                   it made ``synthetic.csv`` (its first block): post-processing, DP; absent
                   when no sample was saved with the model
``report.html``    the release report (:mod:`privsyn_core.release.report`): one offline HTML
                   page of the above, for people; readers make it again rather than trust it
``model.json``     the fitted model (format ``privsyn-model``, version 1): the engine's
                   domain; per column its codec (``category``, ``binned`` or ``codes``, with
                   every field needed to decode) and its grouping of low-count values
                   (``code_of``, ``members``, ``member_weights``, ``merged_code``); the
                   consistent 1-way and selected marginals (engine codes, flat C order of
                   ``shape``); the consistency report (its ``total`` is the default row
                   count); the default sampling settings (GUM's, appending, separate and join)
=================  ==========================================================================

Everything in it is a DP measurement, post-processing of one, or declared by the owner.
Owner-only diagnostics (fidelity against the real table) never go in, and a run whose domains
were read off the raw data cannot be bundled. Version 1 bundles (no ``model.json``) are still
releases but cannot be sampled again; :func:`load_model` says so.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import platform
import zipfile
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields, replace
from importlib import metadata
from itertools import combinations
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from privsyn_core.config import PrivSynConfig
from privsyn_core.data.atomic import write_atomically
from privsyn_core.data.codecs import BinnedCodec, CategoryCodec, CodesCodec
from privsyn_core.data.rules import rules_from_json
from privsyn_core.data.streamed import csv_text
from privsyn_core.domain import Domain
from privsyn_core.errors import InputError
from privsyn_core.file_schemas import LEDGER, MANIFEST, MODEL, check_file
from privsyn_core.generation.consistency import ConsistencyReport
from privsyn_core.generation.dependence import NoisyDependence
from privsyn_core.generation.fitted import FittedModel, SamplingSettings
from privsyn_core.generation.grouping import ValueGrouping
from privsyn_core.generation.gum import GumIterationRecord, GumSettings
from privsyn_core.generation.identifiers import Identifier
from privsyn_core.generation.rules import rule_pairs
from privsyn_core.marginals import MarginalTable, NoisyMarginal
from privsyn_core.privacy.ledger import (
    LedgerMismatchError,
    Measurement,
    PrivacyLedger,
    PrivacyUnit,
    agrees,
    gaussian_rho,
    verified,
)
from privsyn_core.release.bundle_limits import (
    REFETCH,
    BundleCheckError,
    check_convergence_json,
    check_marginals_json,
    check_member,
    check_model_json,
    member_sha256,
    prescan_json,
    unique_keys,
)
from privsyn_core.release.report import release_report

if TYPE_CHECKING:
    from privsyn_core.generation.synthesis import SynthesisResult

FORMAT = "privsyn-release"
#: 2: adds the fitted model (``model.json``); 1 held the release without it
VERSION = 2
MODEL_FORMAT = "privsyn-model"
MODEL_VERSION = 1
MODEL_FILE = "model.json"
CONVERGENCE_FILE = "convergence.json"
CONVERGENCE_WHAT = (
    "GUM's mean L1 error (0 to 2) between the synthetic table's marginals and the noisy "
    "marginals, per iteration, while it made synthetic.csv (its first block); "
    "post-processing of DP measurements"
)
REPORT_FILE = "report.html"
#: zlib's level 5, not its default 6: on Adult's synthetic CSV a third of the time
#: (0.05 s against 0.15 s, paid by every run the registry records) for 6% more bytes
_DEFLATE_LEVEL = 5
#: at most this many measurements of one marginal pooled into one (tree-first pools two)
_MOST_POOLED = 3
_PACKAGES = ("privsyn-studio", "numpy", "pandas", "scipy", "networkx", "opendp")


def _versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in _PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def released_schema(
    columns: Sequence[Any],
    groupings: Sequence[ValueGrouping],
    excluded: Sequence[tuple[str, str]],
    decoders: Sequence[Any] = (),
    identifiers: Sequence[Identifier] = (),
) -> list[dict[str, Any]]:
    """The released schema, JSON-ready: per column its codec and every structural choice
    with its provenance (``columns`` are a raw table's prepared columns; empty for a
    pre-coded table, whose declared codes, and categories if any, come from ``decoders``);
    identifiers by name, written as fresh ids."""
    out = []
    for item in columns:
        codec = item.codec
        entry: dict[str, Any] = {
            "name": codec.name,
            "provenance": item.provenance.value,
            "missing_code": codec.missing,
            # every structural choice (kind, whole numbers, date format, missing values,
            # domain) with where it came from: declared, or a DP estimate
            "choices": [
                {"choice": c.name, "value": c.value, "provenance": c.provenance.value}
                for c in item.choices
            ],
        }
        if isinstance(codec, BinnedCodec):
            entry.update(
                kind="datetime" if codec.datetime else "numeric",
                edges=list(codec.edges),
                integer=codec.integer,
            )
            if codec.datetime:
                entry["datetime_format"] = codec.datetime_format
        else:
            entry.update(
                kind="categorical",
                categories=[str(c) for c in codec.categories],
                other=codec.other,
            )
        out.append(entry)
    if not columns:  # a pre-coded table: its declared number of codes per column
        labels = {d.name: d.categories for d in decoders if isinstance(d, CodesCodec)}
        out = []
        for g in groupings:
            entry = {
                "name": g.attribute,
                "kind": "codes",
                "codes": g.declared_size,
                "provenance": "declared",
            }
            declared = labels.get(g.attribute)
            if declared is not None:
                entry["categories"] = [str(c) for c in declared]
            out.append(entry)
    out.extend(
        {"name": i.name, "kind": "identifier", "provenance": "fresh ids 1..n, not modelled"}
        for i in identifiers
    )
    # names only: a reason may quote counts read off the data (a draft schema's reasons do)
    out.extend({"name": name, "excluded": True} for name, _ in excluded)
    return out


def _marginals(noisy: Sequence[NoisyMarginal]) -> list[dict[str, Any]]:
    return [
        {
            "attributes": list(m.attributes),
            "shape": list(m.table.shape),
            "rho": m.rho,
            "sigma": m.sigma,
            "noisy_counts": [float(v) for v in m.table.values],
        }
        for m in noisy
    ]


def bundle_bytes(result: SynthesisResult, config: PrivSynConfig | None = None) -> bytes:
    """The release as a zip file's bytes (see the module docstring): the run's synthetic
    table and, when the result carries its fitted model (every run does), the model."""
    if not result.end_to_end_dp:
        raise InputError(
            "this run read domains off the raw data (--raw-domains), so it is not a DP release "
            "and cannot be bundled; rerun with declared or private domains"
        )
    model = result.model
    schema = (
        list(model.schema)
        if model is not None
        else released_schema(result.columns, result.groupings, result.excluded)
    )
    files = _files(
        None if result.synthetic_written else result.synthetic,  # streamed: in -o, not here
        result.noisy_marginals,
        schema,
        result.ledger,
        asdict(config) if config is not None else (model.config if model else None),
        model,
        result.history,
    )
    return _zipped(files, result.ledger)


def model_bytes(
    model: FittedModel,
    synthetic: pd.DataFrame | None = None,
    history: Sequence[GumIterationRecord] | None = None,
) -> bytes:
    """A fitted model as a release bundle's bytes (with ``synthetic`` if given, and GUM's
    ``history`` while it made it)."""
    if model.ledger.not_private:
        raise InputError(
            "this model read domains off the raw data (raw_domains=True), so it is not a DP "
            "release and cannot be bundled; fit it with declared or private domains"
        )
    files = _files(
        synthetic, model.noisy, list(model.schema), model.ledger, model.config, model, history
    )
    return _zipped(files, model.ledger)


def save_model(model: FittedModel, path: str | Path, synthetic: pd.DataFrame | None = None) -> None:
    """Write :func:`model_bytes` to ``path``, through a temporary file moved into place
    when complete (a failed write leaves nothing behind)."""
    write_atomically(model_bytes(model, synthetic), path)


def _files(
    synthetic: pd.DataFrame | None,
    noisy: Sequence[NoisyMarginal],
    schema: Sequence[Mapping[str, Any]],
    ledger: PrivacyLedger,
    config: Mapping[str, Any] | None,
    model: FittedModel | None,
    history: Sequence[GumIterationRecord] | None = None,
) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    if synthetic is not None:
        files["synthetic.csv"] = csv_text(synthetic).encode()
    config_json = json.dumps(
        dict(config) if config is not None else asdict(PrivSynConfig()), indent=2, default=str
    )
    files.update(
        {
            "marginals.json": json.dumps(_marginals(noisy)).encode(),
            "schema.json": json.dumps(schema, indent=2, default=str).encode(),
            "ledger.json": json.dumps(ledger.to_json(), indent=2).encode(),
            "config.json": config_json.encode(),
            "versions.json": json.dumps(_versions(), indent=2).encode(),
        }
    )
    convergence = None if history is None else tuple(float(h.mean_error) for h in history)
    if convergence is not None:
        files[CONVERGENCE_FILE] = json.dumps(
            {"what": CONVERGENCE_WHAT, "mean_l1": convergence}, indent=1
        ).encode()
    if model is not None:
        files[MODEL_FILE] = json.dumps(_model_json(model), default=_plain).encode()
        files[REPORT_FILE] = _report(model, files, noisy, convergence).encode()
    return files


def _report(
    model: FittedModel,
    files: Mapping[str, bytes],
    noisy: Sequence[NoisyMarginal],
    convergence: Sequence[float] | None,
) -> str:
    """The release report of the files written, read back as :func:`load_release` reads
    them (the ledger priced again from its noise scales), so that ``privsyn report`` makes
    the same page from the bundle."""
    ledger = json.loads(files["ledger.json"])
    written = replace(
        model,
        ledger=verified(ledger_from_json(ledger), ledger),
        noisy=tuple(noisy),
        schema=tuple(json.loads(files["schema.json"])),
        config=json.loads(files["config.json"]),
    )
    return release_report(written, convergence=convergence)


def _zipped(files: dict[str, bytes], ledger: PrivacyLedger) -> bytes:
    manifest = {
        "format": FORMAT,
        "version": VERSION,
        "randomness": ledger.randomness,
        "for_release": ledger.randomness == "release",
        "privacy_unit": ledger.unit.words,
        "model": MODEL_FILE if MODEL_FILE in files else None,
        "files": {name: hashlib.sha256(data).hexdigest() for name, data in files.items()},
    }
    buffer = io.BytesIO()
    with zipfile.ZipFile(
        buffer, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=_DEFLATE_LEVEL
    ) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
        archive.writestr("manifest.json", json.dumps(manifest, indent=2))
    return buffer.getvalue()


# --- the fitted model, written and read back ---------------------------------------------


def _plain(value: object) -> object:
    """JSON for what ``json`` does not know: NumPy scalars as Python values, else text."""
    if isinstance(value, np.generic):
        return value.item()
    return str(value)


def _table_json(table: MarginalTable) -> dict[str, Any]:
    return {
        "attributes": list(table.attributes),
        "shape": list(table.shape),
        "values": [float(v) for v in table.values],
    }


def _decoder_json(decoder: Any) -> dict[str, Any]:
    if isinstance(decoder, CategoryCodec):
        return {
            "codec": "category",
            "name": decoder.name,
            "categories": list(decoder.categories),
            "other": decoder.other,
            "missing": decoder.missing,
        }
    if isinstance(decoder, BinnedCodec):
        return {
            "codec": "binned",
            "name": decoder.name,
            "edges": [float(e) for e in decoder.edges],
            "integer": decoder.integer,
            "missing": decoder.missing,
            "datetime": decoder.datetime,
            "datetime_format": decoder.datetime_format,
            "unparsed": decoder.unparsed,
            "decimals": decoder.decimals,
            "points": list(decoder.points),
            "log": decoder.log,
            "fall": list(decoder.fall),
            "rise": list(decoder.rise),
            "bounds": None if decoder.bounds is None else [float(b) for b in decoder.bounds],
        }
    if isinstance(decoder, CodesCodec):
        dtype = decoder.dtype
        categorical = isinstance(dtype, pd.CategoricalDtype)
        return {
            "codec": "codes",
            "name": decoder.name,
            "size": decoder.size,
            "categories": None if decoder.categories is None else list(decoder.categories),
            "dtype": "category" if categorical else str(dtype),
            "ordered": isinstance(dtype, pd.CategoricalDtype) and bool(dtype.ordered),
        }
    raise InputError(f"cannot save a column decoder of type {type(decoder).__name__}")


def _model_json(model: FittedModel) -> dict[str, Any]:
    settings = model.defaults
    return {
        "format": MODEL_FORMAT,
        "version": MODEL_VERSION,
        "engine": {"attributes": list(model.engine.attributes), "sizes": list(model.engine.sizes)},
        "columns": [_decoder_json(d) for d in model.decoders],
        "groupings": [
            {
                "attribute": g.attribute,
                "code_of": [int(c) for c in g.code_of],
                "members": [list(m) for m in g.members],
                "member_weights": [[float(w) for w in m] for m in g.member_weights],
                "merged_code": g.merged_code,
            }
            for g in model.groupings
        ],
        "one_way": [_table_json(t) for t in model.one_way],
        "marginals": [_table_json(t) for t in model.marginals],
        "consistency": asdict(model.consistency),
        "sampling": {
            "gum": asdict(settings.gum),
            "append_attributes": settings.append_attributes,
            "separate_and_join": settings.separate_and_join,
            "synthesis": settings.synthesis,
            "independence_threshold": settings.independence_threshold,
            "empty_sigmas": settings.empty_sigmas,
        },
        # the noisy InDif scores above the diagonal; their sigma is the ledger's
        "indif": None if model.dependence is None else model.dependence.upper(),
        "identifiers": [{"name": i.name, "position": i.position} for i in model.identifiers],
        "rules": [rule.to_json() for rule in model.rules],
    }


class BundleError(InputError):
    """A file that is not a release bundle this version can sample from, and why."""


@dataclass(frozen=True)
class Release:
    """What :func:`load_release` reads from a bundle: the fitted model, and GUM's mean L1
    per iteration of the bundled sample (None when the bundle holds none)."""

    model: FittedModel
    convergence: tuple[float, ...] | None


def load_model(source: str | Path | bytes) -> FittedModel:
    """The fitted model in the release bundle at ``source`` (:func:`load_release`)."""
    return load_release(source).model


def load_release(source: str | Path | bytes) -> Release:
    """The fitted model in the release bundle at ``source`` (a path, or the bundle's bytes,
    such as the registry's stored copy), with the convergence record of its sample.

    Checked before use: a zip file, PrivSyn's manifest, a bundle version that holds a model,
    every file's SHA-256, the model's internal consistency (one grouping, target and
    decoder per column, table shapes that match the domain, finite non-negative counts), and
    its price (:func:`_priced`). Any failure is a :class:`BundleError` naming the file and what
    to do.

    The checksums catch damage and edits that forget to re-hash, nothing more: anyone can
    edit a file and re-hash it. So the model's ledger carries only figures recomputed from the
    noise scales it holds (:func:`~privsyn_core.privacy.ledger.verified`), and a ledger or
    noisy marginal that states another price is refused. A bundle whose noise figures were
    all edited consistently cannot be told from a real one; only the registry's stored copy
    (``privsyn runs export``) can be trusted as the run's own."""
    opened: io.BytesIO | Path
    if isinstance(source, bytes):
        where, opened = "the release bundle", io.BytesIO(source)
    else:
        where = str(source)
        if not Path(source).is_file():
            raise BundleError(f"cannot read {where}: no such file")
        opened = Path(source)
    try:
        with zipfile.ZipFile(opened) as archive:
            names = set(archive.namelist())
            if "manifest.json" not in names:
                raise BundleError(
                    f"{where} is a zip file but not a PrivSyn release bundle (no manifest.json)"
                )
            manifest = _json(_member(archive, "manifest.json", True), where, "manifest.json")
            _check_manifest(manifest, where)
            parsed = _PARSED | {manifest.get("model")}
            listed = [name for name in manifest["files"] if name in names]
            for name in listed:  # all of them, before a byte of any is inflated
                check_member(archive.getinfo(name), name in parsed)
            files = {name: archive.read(name) for name in listed if name in parsed}
            hashes = {name: member_sha256(archive, name, files) for name in listed}
    except zipfile.BadZipFile as exc:
        if "CRC" in str(exc):  # read as a zip, but a member's data was damaged
            raise BundleError(f"{where} is damaged: {exc}; {REFETCH}") from None
        raise BundleError(f"{where} is not a release bundle: it is not a zip file") from None
    except (zlib.error, EOFError) as exc:
        raise BundleError(
            f"{where} is damaged: a member cannot be inflated ({exc}); {REFETCH}"
        ) from None
    except BundleCheckError as exc:
        raise BundleError(f"{where}: {exc}") from None
    except OSError as exc:
        raise BundleError(f"cannot read {where}: {exc.strerror or exc}") from None
    for name, digest in manifest["files"].items():
        if name not in hashes:
            raise BundleError(f"{where} is damaged: {name} is listed in its manifest but missing")
        if hashes[name] != digest:
            raise BundleError(
                f"{where} is damaged or was edited: {name} does not match its SHA-256 in the "
                "manifest"
            )
    model_file = manifest.get("model")
    if not model_file or model_file not in files:
        raise BundleError(f"{where} holds no fitted model (its manifest names none)")
    for name in ("ledger.json", "marginals.json"):
        if name not in files:
            raise BundleError(
                f"{where} is damaged: it holds no {name}, without which its price cannot be "
                "checked; use the original bundle, or 'privsyn runs export' to get it again "
                "from the registry"
            )
    try:
        prescan_json(files[model_file], model_file)  # before parsing: see prescan_json
        prescan_json(files["marginals.json"], "marginals.json")
        model = _json(files[model_file], where, model_file)
        marginals = _json(files["marginals.json"], where, "marginals.json")
        ledger = _json(files["ledger.json"], where, "ledger.json")
        if isinstance(model, dict) and model.get("format") == MODEL_FORMAT:
            _checked_file(model, MODEL, where, "its model")
            check_model_json(model)  # before any array is built from them
            check_marginals_json(marginals)
        _checked_file(ledger, LEDGER, where, "its ledger")
        fitted = _model_from_json(
            model,
            ledger,
            marginals,
            _json(files["schema.json"], where, "schema.json") if "schema.json" in files else [],
            _json(files["config.json"], where, "config.json") if "config.json" in files else {},
        )  # fmt: skip
        _check_unit(manifest, fitted)
        convergence = None
        if CONVERGENCE_FILE in files:
            convergence = check_convergence_json(
                _json(files[CONVERGENCE_FILE], where, CONVERGENCE_FILE)
            )
        return Release(fitted, convergence)
    except BundleError:
        raise
    except BundleCheckError as exc:
        raise BundleError(f"{where}: {exc}; {REFETCH}") from None
    except LedgerMismatchError as exc:
        raise BundleError(
            f"{where}: {exc}; the bundle was edited after it was written. Use the original "
            "bundle, or 'privsyn runs export' to get it again from the registry"
        ) from None
    except (KeyError, TypeError, ValueError, IndexError, InputError) as exc:
        detail = f"{type(exc).__name__}: {exc}" if isinstance(exc, KeyError) else str(exc)
        raise BundleError(f"{where} holds a malformed model ({detail})") from None


#: the members :func:`load_model` parses (and so holds), with the model's; the others are
#: only hashed, in a stream
_PARSED = frozenset(
    {"ledger.json", "marginals.json", "schema.json", "config.json", CONVERGENCE_FILE}
)


def _member(archive: zipfile.ZipFile, name: str, parsed: bool) -> bytes:
    """A member's bytes, once :func:`check_member` has allowed them into memory."""
    info = archive.getinfo(name)
    check_member(info, parsed)
    return archive.read(info)


def _json(data: bytes, where: str, name: str) -> Any:
    try:
        return json.loads(data, object_pairs_hook=unique_keys)
    except BundleCheckError as exc:
        raise BundleError(f"{where}: its {name} {exc}; {REFETCH}") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise BundleError(f"{where} is damaged: {name} is not valid JSON ({exc})") from None


def _check_manifest(manifest: Any, where: str) -> None:
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise BundleError(f"{where} is not a PrivSyn release bundle (its manifest says otherwise)")
    version = manifest.get("version")
    if version == 1:
        raise BundleError(
            f"{where} is a version 1 release bundle, written before bundles held the fitted "
            "model, so it cannot be sampled again; its synthetic.csv is still a valid release. "
            "A run made with this version writes a bundle that can"
        )
    if isinstance(version, bool) or not isinstance(version, int):
        shown = json.dumps(version)[:40]
        raise BundleError(
            f"{where} is damaged: its manifest's version is {shown}, not a whole number; {REFETCH}"
        )
    if version < 1:
        raise BundleError(f"{where} is damaged: its manifest's version is {version}; {REFETCH}")
    if version > VERSION:
        shown = str(version) if version < 10**9 else f"a number of {len(str(version))} digits"
        raise BundleError(
            f"{where} is a release bundle of version {shown}, newer than this PrivSyn "
            f"Studio reads (version {VERSION}); upgrade privsyn-studio to sample from it"
        )
    if not isinstance(manifest.get("files"), dict):
        raise BundleError(f"{where} is damaged: its manifest lists no files")
    try:
        check_file(manifest, MANIFEST, "its manifest")
    except InputError as exc:
        raise BundleError(f"{where} is damaged: {exc}; {REFETCH}") from None


def _checked_file(data: Any, schema: Mapping[str, Any], where: str, what: str) -> None:
    """A bundle's JSON file against its declared shape (:mod:`privsyn_core.file_schemas`)."""
    try:
        check_file(data, schema, what)
    except InputError as exc:
        raise BundleError(f"{where} is damaged: {exc}; {REFETCH}") from None


def _check_unit(manifest: Mapping[str, Any], model: FittedModel) -> None:
    """The guarantee's unit one story: the manifest's words are the ledger's unit (whose
    every measurement :func:`~privsyn_core.privacy.ledger.verified` checked is calibrated for
    it), and a person-level model does not make its person column, which a run never
    synthesises."""
    unit = model.ledger.unit
    stated = manifest.get("privacy_unit")
    if stated is not None and stated != unit.words:
        raise LedgerMismatchError(
            f"its manifest says the guarantee is {stated!r}, but its ledger says {unit.words!r}"
        )
    if unit.person is not None and unit.person in model.columns:
        raise LedgerMismatchError(
            f"its ledger's guarantee is {unit.words}, but its model makes the person column "
            f"{unit.person!r}, which a person-level release never holds"
        )


def ledger_from_json(data: Mapping[str, Any]) -> PrivacyLedger:
    """A ledger back from :meth:`PrivacyLedger.to_json`, as the record states it (a claim:
    :func:`~privsyn_core.privacy.ledger.verified` prices it again)."""
    return PrivacyLedger(
        budget_rho=float(data["budget_rho"]),
        epsilon=None if data["epsilon"] is None else float(data["epsilon"]),
        delta=None if data["delta"] is None else float(data["delta"]),
        conversion=data["conversion"],
        entries=tuple(
            Measurement(
                step=e["step"],
                attributes=tuple(e["attributes"]),
                sensitivity=float(e["sensitivity"]),
                rho=float(e["rho"]),
                sigma=float(e["sigma"]),
                n_queries=int(e["queries"]),
                mechanism=e["mechanism"],
                delta=float(e.get("delta", 0.0)),
            )
            for e in data["measurements"]
        ),
        reserved_delta=float(data.get("reserved_delta", 0.0)),
        not_private=tuple(data.get("not_private", ())),
        randomness=data.get("randomness", "release"),
        unit=PrivacyUnit.from_json(data.get("privacy_unit")),
    )


def _table(data: Mapping[str, Any], counts: str = "values") -> MarginalTable:
    values = np.asarray(data[counts], dtype=float)
    if not np.all(np.isfinite(values)):
        raise ValueError("a marginal holds counts that are not finite numbers")
    return MarginalTable(tuple(data["attributes"]), tuple(int(s) for s in data["shape"]), values)


def _decoder(data: Mapping[str, Any]) -> Any:
    kind = data["codec"]
    if kind == "category":
        return CategoryCodec(
            data["name"], tuple(data["categories"]), bool(data["other"]), bool(data["missing"])
        )
    if kind == "binned":
        return BinnedCodec(
            data["name"],
            tuple(float(e) for e in data["edges"]),
            integer=bool(data["integer"]),
            missing=bool(data["missing"]),
            datetime=bool(data["datetime"]),
            datetime_format=data["datetime_format"],
            unparsed=data["unparsed"],
            decimals=data["decimals"],
            # bundles from before single-value bins and tails have none
            points=_bins(data.get("points", [])),
            log=bool(data.get("log", False)),
            fall=_bins(data.get("fall", [])),
            rise=_bins(data.get("rise", [])),
            bounds=_bounds(data.get("bounds")),
        )
    if kind == "codes":
        categories = None if data["categories"] is None else tuple(data["categories"])
        dtype: object
        if data["dtype"] == "category":
            dtype = pd.CategoricalDtype(list(categories or ()), ordered=bool(data["ordered"]))
        else:
            try:
                dtype = pd.api.types.pandas_dtype(data["dtype"])
            except TypeError:
                dtype = np.dtype(object)
        return CodesCodec(data["name"], int(data["size"]), categories, dtype)
    raise ValueError(f"unknown column codec {kind!r}")


def _bounds(entry: Any) -> tuple[float, float] | None:
    """A binned column's DP bounds before its tails (None: not widened, or an older bundle)."""
    if entry is None:
        return None
    if (
        not isinstance(entry, list)
        or len(entry) != 2
        or not all(isinstance(b, int | float) and not isinstance(b, bool) for b in entry)
        or not all(math.isfinite(b) for b in entry)
    ):
        raise ValueError("a binned column's bounds are not two finite numbers")
    return float(entry[0]), float(entry[1])


def _bins(entries: Any) -> tuple[int, ...]:
    """A list of bin numbers (the codec checks they are its bins)."""
    if not isinstance(entries, list) or not all(
        isinstance(b, int) and not isinstance(b, bool) for b in entries
    ):
        raise ValueError("a binned column's bin list is not a list of whole numbers")
    return tuple(entries)


def _known(cls: type, data: Mapping[str, Any]) -> dict[str, Any]:
    """``data``'s entries that ``cls`` takes (a newer or older version may add or drop
    settings; the rest keep their defaults)."""
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in data.items() if k in names}


def _model_from_json(
    data: Mapping[str, Any],
    ledger: Mapping[str, Any],
    marginals: Sequence[Mapping[str, Any]],
    schema: Sequence[Mapping[str, Any]],
    config: Mapping[str, Any],
) -> FittedModel:
    if data.get("format") != MODEL_FORMAT or data.get("version") != MODEL_VERSION:
        raise ValueError(
            f"model format {data.get('format')!r} version {data.get('version')!r}; this "
            f"version reads {MODEL_FORMAT!r} version {MODEL_VERSION}"
        )
    engine = Domain(
        tuple(data["engine"]["attributes"]), tuple(int(s) for s in data["engine"]["sizes"])
    )
    decoders = tuple(_decoder(c) for c in data["columns"])
    groupings = tuple(
        ValueGrouping(
            g["attribute"],
            np.asarray(g["code_of"], dtype=np.int64),
            tuple(tuple(int(v) for v in m) for m in g["members"]),
            tuple(tuple(float(w) for w in m) for m in g["member_weights"]),
            None if g["merged_code"] is None else int(g["merged_code"]),
        )
        for g in data["groupings"]
    )
    one_way = tuple(_table(t) for t in data["one_way"])
    tables = tuple(_table(t) for t in data["marginals"])
    _check_model(engine, decoders, groupings, one_way, tables)
    sampling = data["sampling"]
    defaults = SamplingSettings(
        GumSettings(**_known(GumSettings, sampling["gum"])),
        bool(sampling["append_attributes"]),
        bool(sampling["separate_and_join"]),
        str(sampling.get("synthesis", "gum")),
        # bundles from before the test drew every pair as measured, and still do
        independence_threshold=sampling.get("independence_threshold"),
        # bundles from before the rule left rows in empty cells, and still do
        empty_sigmas=sampling.get("empty_sigmas"),
    )
    noisy = tuple(
        NoisyMarginal(_table(m, "noisy_counts"), float(m["rho"]), float(m["sigma"]))
        for m in marginals
    )
    priced = _priced(ledger, noisy, engine, tables)
    return FittedModel(
        ledger=priced,
        engine=engine,
        groupings=groupings,
        one_way=one_way,
        marginals=tables,
        consistency=ConsistencyReport(**_known(ConsistencyReport, data["consistency"])),
        decoders=decoders,
        defaults=defaults,
        noisy=noisy,
        schema=tuple(schema),
        config=dict(config),
        dependence=_dependence(data.get("indif"), engine, priced),
        identifiers=_identifiers(data.get("identifiers", []), decoders),
        rules=_rules(data.get("rules", []), decoders, tables),
    )


def _identifiers(entries: Any, decoders: Sequence[Any]) -> tuple[Identifier, ...]:
    """The model's identifier columns (older bundles have none), each a new name at a place
    among the synthetic table's columns."""
    if not isinstance(entries, list):
        raise ValueError("its identifiers are not a list")
    names = {d.name for d in decoders}
    found: list[Identifier] = []
    for entry in entries:
        if not isinstance(entry, Mapping):
            raise ValueError("an identifier is not a record")
        name, position = entry.get("name"), entry.get("position")
        if not isinstance(name, str) or not name or name in names:
            raise ValueError(f"identifier {name!r} is not a new column name")
        if isinstance(position, bool) or not isinstance(position, int):
            raise ValueError(f"identifier {name!r} has no whole-number position")
        if not 0 <= position <= len(decoders) + len(entries):
            raise ValueError(f"identifier {name!r} is placed beyond the table's columns")
        names.add(name)
        found.append(Identifier(name, position))
    return tuple(found)


def _rules(entries: Any, decoders: Sequence[Any], tables: Sequence[MarginalTable]) -> tuple:
    """The model's rules (older bundles have none), each naming its columns; a
    "determines" rule needs a measured marginal holding its pair, which gives its mapping."""
    try:
        rules = rules_from_json(entries, [d.name for d in decoders])
    except InputError as error:
        raise ValueError(str(error)) from None
    for pair in rule_pairs(rules):
        if not any(set(pair) <= set(t.attributes) for t in tables):
            raise ValueError(f"its rule on {' and '.join(pair)} has no measured marginal")
    return rules


def _dependence(upper: Any, engine: Domain, ledger: PrivacyLedger) -> NoisyDependence | None:
    """The model's noisy InDif scores, priced by the ledger's one InDif measurement (older
    bundles carry none: GUM then judges its tables on the measured marginals alone)."""
    if upper is None:
        return None
    paid = [e for e in ledger.entries if e.step == "indif"]
    if len(paid) != 1 or tuple(paid[0].attributes) != tuple(engine.attributes):
        raise LedgerMismatchError(
            "its model carries InDif scores that no single InDif measurement in its ledger paid for"
        )
    if not isinstance(upper, list) or not all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in upper
    ):
        raise ValueError("its InDif scores are not a list of numbers")
    return NoisyDependence.from_upper(engine.attributes, upper, paid[0].sigma)


def _priced(
    ledger: Mapping[str, Any],
    noisy: Sequence[NoisyMarginal],
    engine: Domain,
    targets: Sequence[MarginalTable],
) -> PrivacyLedger:
    """The bundle's ledger with every figure recomputed from its noise scales, once the noisy
    marginals it carries are the ones it paid for.

    The model is fitted to exactly the noisy marginals of ``marginals.json`` (each column's
    1-way, then one per target, paper 4.3). Each must state the rho its sigma buys (the
    Gaussian budget of its per-cell variance, :class:`NoisyMarginal`) and match a ledger
    measurement of its own: same attributes, one query per cell, sensitivity 1 per row (K for a
    person of at most K rows: the ledger's unit), same sigma.
    So a price edited in the ledger alone, or a sigma edited in one file but not the other,
    is a :class:`LedgerMismatchError`."""
    priced = verified(ledger_from_json(ledger), ledger)
    fitted = [*((name,) for name in engine), *(t.attributes for t in targets)]
    carried = [m.attributes for m in noisy]
    if carried != fitted:
        first = next(
            (i for i, (a, b) in enumerate(zip(carried, fitted, strict=False)) if a != b),
            min(len(carried), len(fitted)),
        )
        got, want = (
            str(list(names[first])) if first < len(names) else "none" for names in (carried, fitted)
        )
        raise LedgerMismatchError(
            f"its marginals.json holds {len(carried)} noisy marginals and its model is fitted "
            f"to {len(fitted)}: number {first + 1} is on {got} in one and on {want} in the other"
        )
    unpaid = list(priced.entries)
    sensitivity = priced.unit.sensitivity()
    for marginal in noisy:
        name, sigma = list(marginal.attributes), marginal.sigma
        if not (math.isfinite(sigma) and sigma > 0):
            raise LedgerMismatchError(
                f"its marginals.json gives the noisy marginal on {name} sigma {sigma!r}, not a "
                "positive number"
            )
        means = gaussian_rho(sigma, sensitivity)
        if not agrees(marginal.rho, means):
            raise LedgerMismatchError(
                f"its marginals.json says rho {marginal.rho:.6g} for the noisy marginal on "
                f"{name}, but its sigma {sigma:.6g} means rho {means:.6g}"
            )
        paid = _paid_by(marginal, sensitivity, unpaid)
        if paid is None:
            raise LedgerMismatchError(
                f"its marginals.json holds a noisy marginal on {name} with sigma {sigma:.6g} "
                "that no measurement in its ledger paid for"
            )
        for entry in paid:
            unpaid.remove(entry)
    return priced


def _paid_by(
    marginal: NoisyMarginal, sensitivity: float, unpaid: Sequence[Measurement]
) -> tuple[Measurement, ...] | None:
    """The ledger measurements that paid for ``marginal``: one of the same attributes, cells,
    sensitivity and sigma; or, for a marginal measured more than once and pooled by inverse
    variance (tree-first's pairs, :func:`~privsyn_core.selection.tree_first.pooled`), the
    fewest such measurements whose precisions ``1 / sigma^2`` add up to the marginal's."""
    same = [
        e
        for e in unpaid
        if e.attributes == marginal.attributes
        and e.n_queries == marginal.cells
        and e.sensitivity == sensitivity
    ]
    for size in range(1, min(len(same), _MOST_POOLED) + 1):
        for group in combinations(same, size):
            if agrees(math.fsum(e.sigma**-2 for e in group), marginal.sigma**-2):
                return group
    return None


def _check_model(
    engine: Domain,
    decoders: Sequence[Any],
    groupings: Sequence[ValueGrouping],
    one_way: Sequence[MarginalTable],
    tables: Sequence[MarginalTable],
) -> None:
    """Everything sampling relies on, so a damaged model fails here with a reason rather
    than deep inside GUM."""
    d = len(engine)
    if not (len(decoders) == len(groupings) == len(one_way) == d) or d == 0:
        raise ValueError(
            f"{d} columns, but {len(decoders)} decoders, {len(groupings)} groupings and "
            f"{len(one_way)} 1-way marginals"
        )
    for name, decoder, grouping, table in zip(engine, decoders, groupings, one_way, strict=True):
        size = engine.size(name)
        if decoder.name != name or grouping.attribute != name or table.attributes != (name,):
            raise ValueError(f"the parts of column {name!r} name different columns")
        if grouping.declared_size != decoder.size or grouping.size != size:
            raise ValueError(f"column {name!r}: its codes and its grouping do not match")
        codes = grouping.code_of
        if codes.size and (codes.min() < 0 or codes.max() >= size):
            raise ValueError(f"column {name!r}: a code outside 0..{size - 1}")
        members = [v for m in grouping.members for v in m]
        weights = grouping.member_weights
        if (
            any(not 0 <= v < decoder.size for v in members)
            or len(weights) != len(grouping.members)
            or any(len(m) != len(w) for m, w in zip(grouping.members, weights, strict=True))
        ):
            raise ValueError(f"column {name!r}: a grouping member outside its codes")
        if table.shape != (size,):
            raise ValueError(f"column {name!r}: its 1-way marginal has the wrong shape")
    for table in (*one_way, *tables):
        if table.shape != tuple(engine.size(a) for a in table.attributes):
            raise ValueError(f"the marginal on {list(table.attributes)} has the wrong shape")
        if (table.values < 0).any():
            raise ValueError(f"the marginal on {list(table.attributes)} has negative counts")
