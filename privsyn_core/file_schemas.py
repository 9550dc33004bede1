"""The shape of every file PrivSyn reads back, declared as JSON Schema and checked with
``jsonschema`` before a field is used: a release bundle's manifest, its fitted model and
ledger, a schema file and a domain file.

These files are untrusted (bundles are shared; schemas and domains are written by hand), so
a wrong type, a missing field or an absurd size must end in one line that names the field,
not in a ``KeyError`` deep in the reader. The schemas state the types and the sizes; what a
type cannot say (a lower bound above its upper bound, a price its noise contradicts, a table
larger than memory) stays with the reader that knows it (:mod:`privsyn_core.data.schema`,
:mod:`privsyn_core.privacy.ledger`, :mod:`privsyn_core.release.bundle_limits`).

Large arrays (a model's counts) are declared as arrays only: checking millions of numbers one
by one in Python would take longer than reading them, and the reader checks them as arrays.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError, best_match

from privsyn_core.errors import InputError
from privsyn_core.limits import MAX_CODES, MAX_MAGNITUDE

#: the longest name of a column, file or step a file may hold
MAX_NAME = 1_000
#: the most columns a declared file may describe (excluded columns included)
MAX_DECLARED_COLUMNS = 100_000

_NAME = {"type": "string", "maxLength": MAX_NAME}
_NUMBER = {"type": "number"}
_WITHIN = {"minimum": -MAX_MAGNITUDE, "maximum": MAX_MAGNITUDE}
_NAMES = {"type": "array", "items": _NAME, "maxItems": MAX_DECLARED_COLUMNS}
_CATEGORY = {"type": ["string", "number", "boolean"]}

#: a release bundle's ``manifest.json`` (:func:`~privsyn_core.release.bundle.bundle_bytes`)
MANIFEST: dict[str, Any] = {
    "type": "object",
    "required": ["format", "version", "files"],
    "properties": {
        "format": {"type": "string"},
        "version": {"type": "integer"},
        "randomness": {"type": "string", "maxLength": MAX_NAME},
        "for_release": {"type": "boolean"},
        "privacy_unit": {"type": "string", "maxLength": MAX_NAME},
        "model": {"type": ["string", "null"], "maxLength": MAX_NAME},
        "files": {
            "type": "object",
            "maxProperties": 256,
            "propertyNames": {"maxLength": MAX_NAME},
            "additionalProperties": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
        },
    },
}

#: a ledger record (:meth:`~privsyn_core.privacy.ledger.PrivacyLedger.to_json`)
LEDGER: dict[str, Any] = {
    "type": "object",
    "required": ["budget_rho", "epsilon", "delta", "conversion", "measurements"],
    "properties": {
        "budget_rho": _NUMBER,
        "epsilon": {"type": ["number", "null"]},
        "delta": {"type": ["number", "null"]},
        "conversion": {"enum": ["tight", "proposition"]},
        "reserved_delta": _NUMBER,
        "spent_rho": _NUMBER,
        "spent_delta": _NUMBER,
        "spent_epsilon": {"type": ["number", "null"]},
        "randomness": {"type": "string", "maxLength": MAX_NAME},
        "end_to_end_dp": {"type": "boolean"},
        "not_private": _NAMES,
        "privacy_unit": {
            "type": ["object", "null"],
            "properties": {
                "person": {"type": ["string", "null"], "maxLength": MAX_NAME},
                "rows_per_person": {"type": "integer", "minimum": 1},
                "words": {"type": "string", "maxLength": MAX_NAME},
            },
        },
        "measurements": {
            "type": "array",
            "maxItems": 10_000_000,
            "items": {
                "type": "object",
                "required": [
                    "step", "attributes", "sensitivity", "rho", "sigma", "queries", "mechanism",
                ],
                "properties": {
                    "step": _NAME,
                    "attributes": _NAMES,
                    "sensitivity": _NUMBER,
                    "rho": _NUMBER,
                    "sigma": _NUMBER,
                    "queries": {"type": "integer", "minimum": 1},
                    "mechanism": _NAME,
                    "delta": _NUMBER,
                },
            },
        },
    },
}  # fmt: skip

_TABLE = {
    "type": "object",
    "required": ["attributes", "shape", "values"],
    "properties": {
        "attributes": _NAMES,
        "shape": {"type": "array", "items": {"type": "integer", "minimum": 1}, "maxItems": 64},
        "values": {"type": "array"},
    },
}

#: a bundle's fitted model, ``model.json`` (:func:`~privsyn_core.release.model_json.model_json`)
MODEL: dict[str, Any] = {
    "type": "object",
    "required": [
        "format", "version", "engine", "columns", "groupings", "one_way", "marginals",
        "consistency", "sampling",
    ],
    "properties": {
        "format": {"type": "string"},
        "version": {"type": "integer"},
        "engine": {
            "type": "object",
            "required": ["attributes", "sizes"],
            "properties": {
                "attributes": _NAMES,
                "sizes": {
                    "type": "array",
                    "items": {"type": "integer", "minimum": 1, "maximum": MAX_CODES + 1},
                    "maxItems": MAX_DECLARED_COLUMNS,
                },
            },
        },
        "columns": {
            "type": "array",
            "maxItems": MAX_DECLARED_COLUMNS,
            "items": {
                "type": "object",
                "required": ["codec", "name"],
                "properties": {"codec": _NAME, "name": _NAME},
            },
        },
        "groupings": {
            "type": "array",
            "maxItems": MAX_DECLARED_COLUMNS,
            "items": {
                "type": "object",
                "required": ["attribute", "code_of", "members", "member_weights"],
                "properties": {
                    "attribute": _NAME,
                    "code_of": {"type": "array", "maxItems": MAX_CODES + 1},
                    "members": {"type": "array", "maxItems": MAX_CODES + 1},
                    "member_weights": {"type": "array", "maxItems": MAX_CODES + 1},
                },
            },
        },
        "one_way": {"type": "array", "items": _TABLE, "maxItems": MAX_DECLARED_COLUMNS},
        "marginals": {"type": "array", "items": _TABLE, "maxItems": 1_000_000},
        "consistency": {
            "type": "object",
            "required": ["total"],
            "properties": {"total": _NUMBER, "rounds": {"type": "integer", "minimum": 0}},
        },
        "sampling": {
            "type": "object",
            "required": ["gum"],
            "properties": {
                # its iterations are the run's limit (bundle_limits.check_model_json)
                "gum": {"type": "object"},
                "append_attributes": {"type": "boolean"},
                "separate_and_join": {"type": "boolean"},
                "synthesis": _NAME,
                "independence_threshold": {"type": ["number", "null"]},
                "empty_sigmas": {"type": ["number", "null"]},
                "quasi_independence": {"type": ["number", "null"]},
            },
        },
        "indif": {"type": ["array", "null"]},
        "identifiers": {
            "type": "array",
            "maxItems": MAX_DECLARED_COLUMNS,
            "items": {
                "type": "object",
                "required": ["name", "position"],
                "properties": {"name": _NAME, "position": {"type": "integer", "minimum": 0}},
            },
        },
        "rules": {"type": "array", "maxItems": MAX_DECLARED_COLUMNS},
    },
}  # fmt: skip

#: one column of a schema file (:class:`~privsyn_core.data.schema.ColumnSchema`), checked
#: entry by entry so that the message names the column
SCHEMA_COLUMN: dict[str, Any] = {
    "type": "object",
    "required": ["name"],
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": MAX_NAME},
        "kind": {"type": ["string", "null"]},
        # how many: the run's own limit, with its advice (limits.check_codes)
        "categories": {"type": ["array", "null"], "items": _CATEGORY},
        "lower": {"type": ["number", "null"], **_WITHIN},
        "upper": {"type": ["number", "null"], **_WITHIN},
        "bins": {"type": ["integer", "null"]},
        "edges": {"type": ["array", "null"], "items": {"type": "number", **_WITHIN}},
        "integer": {"type": ["boolean", "null"]},
        "datetime_format": {"type": ["string", "null"], "maxLength": 64},
        "missing": {"type": ["boolean", "null"]},
        "exclude": {"type": "boolean"},
        "reason": {"type": "string", "maxLength": MAX_NAME},
        "identifier": {"type": ["boolean", "null"]},
    },
}

#: a schema file (:class:`~privsyn_core.data.schema.Schema`): its columns (each a
#: :data:`SCHEMA_COLUMN`) and rules
SCHEMA_FILE: dict[str, Any] = {
    "type": "object",
    "required": ["columns"],
    "properties": {
        "version": {"type": "integer"},
        "columns": {"type": "array", "maxItems": MAX_DECLARED_COLUMNS},
    },
}

#: a domain file: each column's number of integer codes, or its list of categories
DOMAIN_FILE: dict[str, Any] = {
    "type": "object",
    "maxProperties": MAX_DECLARED_COLUMNS,
    "propertyNames": {"minLength": 1, "maxLength": MAX_NAME},
    "additionalProperties": {
        "description": "a number of codes (a whole number from 1) or a list of categories",
        "anyOf": [
            {"type": "integer", "minimum": 1},
            {"type": "array", "items": _CATEGORY, "minItems": 1},
        ],
    },
}

_VALIDATORS = {
    id(schema): Draft202012Validator(schema)
    for schema in (MANIFEST, LEDGER, MODEL, SCHEMA_COLUMN, SCHEMA_FILE, DOMAIN_FILE)
}


def check_file(
    instance: object, schema: Mapping[str, Any], what: str, fix: str = "", whole: str = "the file"
) -> None:
    """Refuse ``instance`` (parsed JSON) unless it has the shape ``schema`` declares: an
    :class:`InputError` line that names ``what`` ("its manifest", "the schema"), the field,
    what is wrong with it, and ``fix`` (what to do) when given. ``whole``: how the message
    names ``instance`` itself when the problem is in no one field."""
    validator = _VALIDATORS.get(id(schema)) or Draft202012Validator(schema)
    error = best_match(validator.iter_errors(instance))
    if error is not None:
        raise InputError(f"{what}: {describe(error, whole)}" + (f"; {fix}" if fix else ""))


def describe(error: ValidationError, whole: str = "the file") -> str:
    """One short line for a validation error: the field's path and the problem, with the
    value shown in at most 40 characters (a schema's messages quote it whole)."""
    path = field_path(error)
    where = whole if not path else f"the field {path}"
    value = _short(error.instance)
    rule = error.validator
    if "description" in error.schema:
        return f"{where} is {value}, not {error.schema['description']}"
    if rule == "required":
        missing = str(error.message).split("'")[1] if "'" in str(error.message) else "?"
        return f"{where} lacks the field {missing!r}"
    if rule == "type":
        wanted = error.validator_value
        wanted = " or ".join(wanted) if isinstance(wanted, list) else wanted
        return f"{where} is {value}, not of type {wanted}"
    if rule in ("maxItems", "maxProperties", "maxLength"):
        size = len(error.instance) if hasattr(error.instance, "__len__") else "?"
        return (
            f"{where} holds {size:,} {_unit(rule)}, more than the {error.validator_value:,} allowed"
        )
    if rule in ("maximum", "minimum"):
        side = "above the largest" if rule == "maximum" else "below the smallest"
        return f"{where} is {value}, {side} value allowed ({error.validator_value:g})"
    if rule == "additionalProperties" and error.validator_value is False:
        return f"{where} has an unknown field ({str(error.message)[:120]})"
    return f"{where} is {value}: {str(error.message)[-120:]}"


def field_path(error: ValidationError) -> str:
    """``columns[3].lower``: where in the file the error is."""
    out = ""
    for part in error.absolute_path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _unit(rule: str) -> str:
    return {"maxItems": "items", "maxProperties": "fields", "maxLength": "characters"}[rule]


def _short(value: object) -> str:
    """A value in a few words: a list or an object by its size, anything else as JSON cut to
    40 characters (a list of a million numbers is not printed to be refused)."""
    if isinstance(value, list):
        return f"a list of {len(value):,} items"
    if isinstance(value, dict):
        return f"an object of {len(value):,} fields"
    if isinstance(value, str) and len(value) > 40:
        value = value[:40]
    text = json.dumps(value, default=str)
    return text if len(text) <= 40 else text[:37] + "..."
