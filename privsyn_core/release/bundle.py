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
                   count); the default sampling settings (GUM's, appending, separate and
                   join, the independence, empty-cell and quasi-independence rules):
                   :mod:`privsyn_core.release.model_json` writes and reads it
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
import platform
import zipfile
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from privsyn_core.config import PrivSynConfig
from privsyn_core.data.atomic import write_atomically
from privsyn_core.data.streamed import csv_text
from privsyn_core.errors import InputError
from privsyn_core.file_schemas import LEDGER, MANIFEST, MODEL, check_file
from privsyn_core.generation.fitted import FittedModel
from privsyn_core.generation.fitted_data import FittedData
from privsyn_core.generation.gum import GumIterationRecord
from privsyn_core.marginals import NoisyMarginal
from privsyn_core.privacy.ledger import LedgerMismatchError, PrivacyLedger, verified
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
from privsyn_core.release.model_json import (
    MODEL_FORMAT,
    json_default,
    model_from_json,
    model_json,
    released_schema,
)
from privsyn_core.release.pricing import ledger_from_json
from privsyn_core.release.report import release_report

if TYPE_CHECKING:
    from privsyn_core.generation.synthesis import SynthesisResult

FORMAT = "privsyn-release"
#: 2: adds the fitted model (``model.json``); 1 held the release without it
VERSION = 2
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
_PACKAGES = ("privsyn-studio", "numpy", "pandas", "scipy", "networkx", "opendp")


def _versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in _PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
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
    model: FittedData,
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


def save_model(model: FittedData, path: str | Path, synthetic: pd.DataFrame | None = None) -> None:
    """Write :func:`model_bytes` to ``path``, through a temporary file moved into place
    when complete (a failed write leaves nothing behind)."""
    write_atomically(model_bytes(model, synthetic), path)


def _files(
    synthetic: pd.DataFrame | None,
    noisy: Sequence[NoisyMarginal],
    schema: Sequence[Mapping[str, Any]],
    ledger: PrivacyLedger,
    config: Mapping[str, Any] | None,
    model: FittedData | None,
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
        files[MODEL_FILE] = json.dumps(model_json(model), default=json_default).encode()
        files[REPORT_FILE] = _report(model, files, noisy, convergence).encode()
    return files


def _report(
    model: FittedData,
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
    its price (:func:`~privsyn_core.release.pricing.priced`). Any failure is a
    :class:`BundleError` naming the file and what to do.

    The checksums catch damage and edits that forget to re-hash, nothing more: anyone can
    edit a file and re-hash it. So the model's ledger carries only figures recomputed from the
    noise scales it holds (:func:`~privsyn_core.privacy.ledger.verified`), and a ledger or
    noisy marginal that states another price is refused. A bundle whose noise figures were
    all edited consistently cannot be told from a real one; only the registry's stored copy
    (``privsyn runs export``) can be trusted as the run's own."""
    where, manifest, files, hashes = _read_bundle(source)
    _check_hashes(where, manifest, hashes)
    model_file = _check_held(where, manifest, files)
    try:
        return _parsed_release(where, manifest, files, model_file)
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


def _read_bundle(
    source: str | Path | bytes,
) -> tuple[str, dict[str, Any], dict[str, bytes], dict[str, str]]:
    """Where the bundle is (for messages), its checked manifest, the members it parses
    (:data:`_PARSED` and the model's file) and every listed member's SHA-256; each member's
    size is checked before a byte of any is inflated (:func:`check_member`)."""
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
    return where, manifest, files, hashes


def _check_hashes(where: str, manifest: Mapping[str, Any], hashes: Mapping[str, str]) -> None:
    """Every member the manifest lists is there, with the SHA-256 it states."""
    for name, digest in manifest["files"].items():
        if name not in hashes:
            raise BundleError(f"{where} is damaged: {name} is listed in its manifest but missing")
        if hashes[name] != digest:
            raise BundleError(
                f"{where} is damaged or was edited: {name} does not match its SHA-256 in the "
                "manifest"
            )


def _check_held(where: str, manifest: Mapping[str, Any], files: Mapping[str, bytes]) -> str:
    """The model's file name, once the bundle holds it and the files that price it."""
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
    return str(model_file)


def _parsed_release(
    where: str, manifest: Mapping[str, Any], files: Mapping[str, bytes], model_file: str
) -> Release:
    """The release of the bundle's files: each JSON file checked against its shape and
    limits before any array is built from it, then the model read and priced."""
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
    fitted = model_from_json(
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


def _check_unit(manifest: Mapping[str, Any], model: FittedData) -> None:
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
