"""The release bundle: one zip holding only what a DP run may publish.

Contents: the synthetic table, the noisy marginals (the actual DP measurements), the schema
as released (every category, bound and bin edge with its provenance, all declared or DP
estimates), the ledger, the configuration, package versions, the randomness mode, and a
manifest with the SHA-256 of every file. Owner-only diagnostics (fidelity against the real
table) never go in, and a run whose domains were read off the raw data cannot be bundled.
"""

from __future__ import annotations

import hashlib
import io
import json
import platform
import zipfile
from dataclasses import asdict
from importlib import metadata
from typing import TYPE_CHECKING, Any

from privsyn_core.config import PrivSynConfig
from privsyn_core.data.codecs import BinnedCodec
from privsyn_core.errors import InputError

if TYPE_CHECKING:
    from privsyn_core.pipeline import SynthesisResult

FORMAT = "privsyn-release"
_PACKAGES = ("privsyn-studio", "numpy", "pandas", "scipy", "networkx", "opendp")


def _versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in _PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def _released_schema(result: SynthesisResult) -> list[dict[str, Any]]:
    columns = []
    for item in result.columns:
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
        columns.append(entry)
    if not result.columns:  # a pre-coded table: its declared number of codes per column
        columns = [
            {
                "name": g.attribute,
                "kind": "codes",
                "codes": g.declared_size,
                "provenance": "declared",
            }
            for g in result.groupings
        ]
    # names only: a reason may quote counts read off the data (a draft schema's reasons do)
    columns.extend({"name": name, "excluded": True} for name, _ in result.excluded)
    return columns


def _marginals(result: SynthesisResult) -> list[dict[str, Any]]:
    return [
        {
            "attributes": list(m.attributes),
            "shape": list(m.table.shape),
            "rho": m.rho,
            "sigma": m.sigma,
            "noisy_counts": [float(v) for v in m.table.values],
        }
        for m in result.noisy_marginals
    ]


def bundle_bytes(result: SynthesisResult, config: PrivSynConfig | None = None) -> bytes:
    """The release as a zip file's bytes (see the module docstring)."""
    if not result.end_to_end_dp:
        raise InputError(
            "this run read domains off the raw data (--raw-domains), so it is not a DP release "
            "and cannot be bundled; rerun with declared or private domains"
        )
    files: dict[str, bytes] = {
        "synthetic.csv": result.synthetic.to_csv(index=False).encode(),
        "marginals.json": json.dumps(_marginals(result)).encode(),
        "schema.json": json.dumps(_released_schema(result), indent=2, default=str).encode(),
        "ledger.json": json.dumps(result.ledger.to_json(), indent=2).encode(),
        "config.json": json.dumps(asdict(config or PrivSynConfig()), indent=2).encode(),
        "versions.json": json.dumps(_versions(), indent=2).encode(),
    }
    manifest = {
        "format": FORMAT,
        "version": 1,
        "randomness": result.ledger.randomness,
        "for_release": result.ledger.randomness == "release",
        "files": {name: hashlib.sha256(data).hexdigest() for name, data in files.items()},
    }
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
        archive.writestr("manifest.json", json.dumps(manifest, indent=2))
    return buffer.getvalue()
