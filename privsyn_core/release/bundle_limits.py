"""What a release bundle may hold, checked before the reader allocates for it.

Bundles are shared, so :func:`~privsyn_core.release.bundle.load_model` reads untrusted input.
A small zip can describe a very large amount of work: 1 GiB of zeros deflates to 1 MB, a
30-million-cell marginal is a few kilobytes of ``0.0, `` compressed, a 12 KB date format
string prints 150 MB of dates, and an edited iteration count runs forever. Each check here
runs on what the zip's directory or the parsed JSON *says* (a member's declared size, a
table's ``shape``), before the bytes are inflated or the arrays built, and ends in one
:class:`BundleCheckError` line that the reader prefixes with the bundle's name.

The limits are far above what a run of this version writes (:data:`MAX_MARGINAL_CELLS` is
what PrivSyn's counters hold in one scan four times over; GUM runs 100 iterations by
default), so a refusal means the bundle was damaged, edited or made by hand.
"""

from __future__ import annotations

import hashlib
import math
import re
import zipfile
from collections.abc import Mapping, Sequence
from typing import Any

from privsyn_core.errors import InputError
from privsyn_core.generation.memory import USABLE_SHARE, available_bytes
from privsyn_core.limits import MAX_ITERATIONS, MAX_MARGINAL_CELLS, check_iterations

#: the compression methods Python's zipfile reads (stored, deflate, bzip2, LZMA); the writer
#: uses deflate
READABLE_COMPRESSION = {
    zipfile.ZIP_STORED: "stored",
    zipfile.ZIP_DEFLATED: "deflate",
    zipfile.ZIP_BZIP2: "bzip2",
    zipfile.ZIP_LZMA: "LZMA",
}
#: the largest JSON member read into memory, whatever the machine (a model of
#: :data:`MAX_MODEL_CELLS` cells at about 8 characters a cell)
MAX_JSON_BYTES = 256 * 2**20
#: Python objects per byte of JSON once parsed, at worst (a list of small numbers: an
#: 8-byte pointer per two characters ``0,``, plus the float array built from it)
JSON_MEMORY_PER_BYTE = 8
#: the largest member hashed (never held: it is read in a stream); only the synthetic table
#: is neither JSON nor small
MAX_MEMBER_BYTES = 4 * 2**30
#: the most cells of all the model's marginals together
MAX_MODEL_CELLS = 1 << 25
#: the longest date format a binned column may carry (``%Y-%m-%dT%H:%M:%S.%f%z`` is 20)
MAX_FORMAT_CHARS = 64

#: what to do about a bundle that was damaged or edited
REFETCH = (
    "the bundle was damaged or edited: use the original bundle, or 'privsyn runs export' to "
    "get it again from the registry"
)

_STREAM = 1 << 20


class BundleCheckError(InputError):
    """What is wrong with a bundle, in words that follow its name."""


def check_member(info: zipfile.ZipInfo, json_member: bool, available: int | None = None) -> None:
    """Refuse a member that cannot be read, or would take too much memory to read, from what
    the zip's directory says of it: encrypted, compressed with a method Python cannot inflate,
    or larger (uncompressed) than the reader's limit for it. ``json_member``: the member is
    parsed (held in memory), not only hashed."""
    name = info.filename
    if info.flag_bits & 0x1:
        raise BundleCheckError(
            f"its member {name} is encrypted; a release bundle is never encrypted (encrypt the "
            "whole file for transport instead, and decrypt it before use)"
        )
    if info.compress_type not in READABLE_COMPRESSION:
        raise BundleCheckError(
            f"its member {name} uses zip compression method {info.compress_type}, which this "
            f"version cannot read (it reads {', '.join(READABLE_COMPRESSION.values())}); "
            "zip it again with deflate"
        )
    limit = MAX_JSON_BYTES if json_member else MAX_MEMBER_BYTES
    if json_member:
        free = available_bytes() if available is None else available
        if free is not None:
            limit = min(limit, int(USABLE_SHARE * free / JSON_MEMORY_PER_BYTE))
    if info.file_size > limit:
        raise BundleCheckError(
            f"its member {name} is {_size(info.file_size)} uncompressed, more than the "
            f"{_size(limit)} this version reads from a bundle"
            + (" with the memory free now" if json_member and limit < MAX_JSON_BYTES else "")
            + f"; {REFETCH}"
        )


def member_sha256(archive: zipfile.ZipFile, name: str, held: Mapping[str, bytes]) -> str:
    """The SHA-256 of a member: of its bytes in ``held`` if they were read, else read in a
    stream of 1 MiB pieces, so that a large member is never held in memory."""
    if name in held:
        return hashlib.sha256(held[name]).hexdigest()
    digest = hashlib.sha256()
    with archive.open(name) as stream:
        while piece := stream.read(_STREAM):
            digest.update(piece)
    return digest.hexdigest()


#: a table's ``"shape": [a, b, ...]`` as the writer spells it, found in the raw JSON
_SHAPE = re.compile(rb'"shape"\s*:\s*\[([0-9,\s]*)\]')


def prescan_json(data: bytes, name: str) -> None:
    """The table shapes in a model or marginals file, read off its raw bytes before it is
    parsed: parsing a 30-million-cell marginal takes a gigabyte or more (a Python object per
    number) before the parsed checks could refuse it. A file whose shapes understate its
    values is still bounded by its member size (:func:`check_member`) and refused once
    parsed."""
    shapes = []
    for match in _SHAPE.finditer(data):
        numbers = [int(n) for n in match.group(1).split(b",") if n.strip()]
        shapes.append((None, numbers))
    _check_tables(shapes, name)


def check_model_json(model: Mapping[str, Any]) -> None:
    """The parsed ``model.json``, before any array is built from it: table sizes, the
    default row count, GUM's iteration count, and the numbers its decoders and groupings
    compute with. A ValueError or TypeError from a malformed field is left to the reader,
    which reports it as a malformed model."""
    _check_cells(model)
    total = float(model["consistency"]["total"])
    if not (math.isfinite(total) and total >= 0):
        raise BundleCheckError(
            f"its model's consistent total (the default row count) is {total!r}, not a "
            "finite number of rows"
        )
    gum = model["sampling"]["gum"]
    iterations = gum.get("iterations", 0)
    try:  # the limit a run checks: a bundle asking for more was not written by one
        check_iterations(iterations, "its model")
    except InputError as exc:
        raise BundleCheckError(str(exc)) from None
    for column in model["columns"]:
        _check_decoder(column)
    for grouping in model["groupings"]:
        # noisy counts, so possibly negative (projected when decoding), but numbers
        weights = [w for member in grouping["member_weights"] for w in member]
        if not all(_finite_number(w) for w in weights):
            raise BundleCheckError(
                f"its column {grouping['attribute']!r} has grouping weights that are not "
                "finite numbers"
            )


def check_marginals_json(marginals: Sequence[Mapping[str, Any]]) -> None:
    """The parsed ``marginals.json``: every noisy marginal within :data:`MAX_MARGINAL_CELLS`
    and all of them within :data:`MAX_MODEL_CELLS`, before their arrays are built."""
    _check_tables([(m["attributes"], m["shape"]) for m in marginals], "marginals.json")


def check_convergence_json(data: Any) -> tuple[float, ...]:
    """The parsed ``convergence.json``: GUM's mean L1 per iteration, at most one more than
    :data:`MAX_ITERATIONS` finite numbers from 0 to 2 (an L1 distance between frequency
    tables)."""
    errors = data.get("mean_l1") if isinstance(data, Mapping) else None
    if not isinstance(errors, list) or not all(_finite_number(e) and 0 <= e <= 2 for e in errors):
        raise BundleCheckError(
            "its convergence.json is not a list of GUM's errors (numbers from 0 to 2)"
        )
    if len(errors) > MAX_ITERATIONS + 1:
        raise BundleCheckError(
            f"its convergence.json records {len(errors):,} GUM iterations, more than the "
            f"{MAX_ITERATIONS:,} this version runs"
        )
    return tuple(float(e) for e in errors)


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``json.loads``' ``object_pairs_hook``: an object that names a key twice is refused.
    Python keeps the last value and other readers the first, so a duplicated key can show a
    reviewer one price or setting and the sampler another."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise BundleCheckError(f"names the key {key!r} twice in one object")
        out[key] = value
    return out


def _check_cells(model: Mapping[str, Any]) -> None:
    sizes = [int(s) for s in model["engine"]["sizes"]]
    if any(s < 1 for s in sizes):
        raise BundleCheckError("its model's domain has a column of no codes")
    tables = [(t["attributes"], t["shape"]) for t in (*model["one_way"], *model["marginals"])]
    _check_tables(tables, "model.json")
    for column in model["columns"]:
        if column.get("codec") == "codes" and int(column["size"]) > MAX_MARGINAL_CELLS:
            raise BundleCheckError(
                f"its column {column.get('name')!r} declares {int(column['size']):,} codes, "
                f"more than the {MAX_MARGINAL_CELLS:,} this version reads"
            )


def _check_tables(tables: Sequence[tuple[Any, Any]], where: str) -> None:
    total = 0
    for attributes, shape in tables:
        cells = math.prod(int(s) for s in shape)
        if cells > MAX_MARGINAL_CELLS:
            on = "" if attributes is None else f" on {list(attributes)}"
            raise BundleCheckError(
                f"its {where} holds a marginal{on} of {cells:,} cells, more "
                f"than the {MAX_MARGINAL_CELLS:,} this version reads (about "
                f"{_size(8 * cells)} a copy)"
            )
        total += cells
    if total > MAX_MODEL_CELLS:
        raise BundleCheckError(
            f"its {where} holds marginals of {total:,} cells in all, more than the "
            f"{MAX_MODEL_CELLS:,} this version reads"
        )


def _check_decoder(column: Mapping[str, Any]) -> None:
    if column.get("codec") != "binned":
        return
    name = column.get("name")
    edges = column["edges"]
    if not all(_finite_number(e) for e in edges):
        raise BundleCheckError(
            f"its column {name!r} has a bin edge that is not a finite number "
            f"({next(e for e in edges if not _finite_number(e))!r})"
        )
    for key in ("points", "fall", "rise"):
        named = column.get(key, [])
        if isinstance(named, list) and len(named) > max(0, len(edges) - 1):
            raise BundleCheckError(
                f"its column {name!r} names {len(named):,} bins as {key!r}, more than its "
                f"{max(0, len(edges) - 1):,} bins"
            )
    spelling = column.get("datetime_format")
    if spelling is not None and (not isinstance(spelling, str) or len(spelling) > MAX_FORMAT_CHARS):
        length = len(spelling) if isinstance(spelling, str) else "?"
        raise BundleCheckError(
            f"its column {name!r} has a date format of {length} characters, more than the "
            f"{MAX_FORMAT_CHARS} a date format needs"
        )


def _finite_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _size(n: int) -> str:
    for unit, scale in (("GB", 2**30), ("MB", 2**20), ("KB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"
