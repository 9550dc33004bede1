"""The fitted model as a release bundle's JSON, and back: ``model.json`` and ``schema.json``.

``model.json`` (format ``privsyn-model``, version 1) holds everything sampling needs: the
engine's domain; per column its codec (``category``, ``binned`` or ``codes``, with every
field needed to decode) and its grouping of low-count values; the consistent 1-way and
selected marginals (engine codes, flat C order of ``shape``); the consistency report; the
default sampling settings; the noisy InDif scores; identifiers and rules. All of it is a DP
measurement, post-processing of one, or declared by the owner.

Reading it back (:func:`model_from_json`) checks everything sampling relies on
(:func:`_check_model`), so a damaged model fails with a reason rather than deep inside GUM,
and prices it again from its noise scales (:func:`~privsyn_core.release.pricing.priced`).
Errors are ``ValueError`` or :class:`~privsyn_core.privacy.ledger.LedgerMismatchError`; the
bundle reader names the file.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, fields
from typing import Any

import numpy as np
import pandas as pd

from privsyn_core.data.codecs import BinnedCodec, CategoryCodec, CodesCodec
from privsyn_core.data.rules import rules_from_json
from privsyn_core.domain import Domain
from privsyn_core.errors import InputError
from privsyn_core.generation.consistency import ConsistencyReport
from privsyn_core.generation.dependence import NoisyDependence
from privsyn_core.generation.fitted import FittedModel
from privsyn_core.generation.fitted_data import FittedData, SamplingSettings
from privsyn_core.generation.grouping import ValueGrouping
from privsyn_core.generation.gum_settings import GumSettings
from privsyn_core.generation.identifiers import Identifier
from privsyn_core.generation.rules import rule_pairs
from privsyn_core.marginals import MarginalTable, NoisyMarginal
from privsyn_core.privacy.ledger import LedgerMismatchError, PrivacyLedger
from privsyn_core.release.pricing import priced

MODEL_FORMAT = "privsyn-model"
MODEL_VERSION = 1


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


def json_default(value: object) -> object:
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


def model_json(model: FittedData) -> dict[str, Any]:
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
            "quasi_independence": settings.quasi_independence,
        },
        # the noisy InDif scores above the diagonal; their sigma is the ledger's
        "indif": None if model.dependence is None else model.dependence.upper(),
        "identifiers": [{"name": i.name, "position": i.position} for i in model.identifiers],
        "rules": [rule.to_json() for rule in model.rules],
    }


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


def model_from_json(
    data: Mapping[str, Any],
    ledger: Mapping[str, Any],
    marginals: Sequence[Mapping[str, Any]],
    schema: Sequence[Mapping[str, Any]],
    config: Mapping[str, Any],
) -> FittedModel:
    """The model of a bundle's parsed ``model.json`` (``data``), ``ledger.json``,
    ``marginals.json``, ``schema.json`` and ``config.json``: checked, and priced from its
    noise scales (the module docstring)."""
    if data.get("format") != MODEL_FORMAT or data.get("version") != MODEL_VERSION:
        raise ValueError(
            f"model format {data.get('format')!r} version {data.get('version')!r}; this "
            f"version reads {MODEL_FORMAT!r} version {MODEL_VERSION}"
        )
    engine = Domain(
        tuple(data["engine"]["attributes"]), tuple(int(s) for s in data["engine"]["sizes"])
    )
    decoders = tuple(_decoder(c) for c in data["columns"])
    groupings = tuple(_grouping(g) for g in data["groupings"])
    one_way = tuple(_table(t) for t in data["one_way"])
    tables = tuple(_table(t) for t in data["marginals"])
    _check_model(engine, decoders, groupings, one_way, tables)
    noisy = tuple(
        NoisyMarginal(_table(m, "noisy_counts"), float(m["rho"]), float(m["sigma"]))
        for m in marginals
    )
    paid = priced(ledger, noisy, engine, tables)
    return FittedModel(
        ledger=paid,
        engine=engine,
        groupings=groupings,
        one_way=one_way,
        marginals=tables,
        consistency=ConsistencyReport(**_known(ConsistencyReport, data["consistency"])),
        decoders=decoders,
        defaults=_sampling(data["sampling"]),
        noisy=noisy,
        schema=tuple(schema),
        config=dict(config),
        dependence=_dependence(data.get("indif"), engine, paid),
        identifiers=_identifiers(data.get("identifiers", []), decoders),
        rules=_rules(data.get("rules", []), decoders, tables),
    )


def _grouping(g: Mapping[str, Any]) -> ValueGrouping:
    return ValueGrouping(
        g["attribute"],
        np.asarray(g["code_of"], dtype=np.int64),
        tuple(tuple(int(v) for v in m) for m in g["members"]),
        tuple(tuple(float(w) for w in m) for m in g["member_weights"]),
        None if g["merged_code"] is None else int(g["merged_code"]),
    )


def _sampling(sampling: Mapping[str, Any]) -> SamplingSettings:
    """The model's default sampling settings; a setting an older bundle lacks is read as
    that bundle was sampled."""
    return SamplingSettings(
        GumSettings(**_known(GumSettings, sampling["gum"])),
        bool(sampling["append_attributes"]),
        bool(sampling["separate_and_join"]),
        str(sampling.get("synthesis", "gum")),
        # bundles from before the test drew every pair as measured, and still do
        independence_threshold=sampling.get("independence_threshold"),
        # bundles from before the rule left rows in empty cells, and still do
        empty_sigmas=sampling.get("empty_sigmas"),
        # bundles from before its own setting ran it with the independence rule's threshold
        quasi_independence=sampling.get(
            "quasi_independence", sampling.get("independence_threshold")
        ),
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
