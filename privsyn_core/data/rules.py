"""Rules a data owner declares about combinations of columns, which every synthetic row keeps.

Two kinds, public knowledge about the table (a schema's ``"rules"`` list):

* ``{"determines": ["education", "education-num"]}``: each value of the first column goes
  with one value of the second (a functional dependency: the years of school of an education
  level). Which value is learned from the release (the measured marginal of the pair, which a
  run measures whatever the selection chooses), not declared.
* ``{"never": {"relationship": "Husband", "sex": "Female"}}``: this combination of values
  does not occur.

A rule costs nothing: it is declared, and enforcing it is post-processing of the synthetic
rows (:mod:`privsyn_core.generation.rules`). It holds exactly in every row, on every engine
and in every sample of a release (the rules travel in the bundle). The table's values are
never checked against a rule: that would read the private rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from privsyn_core.errors import InputError

#: the most rules a schema may declare, and the most columns a "never" rule may name
MAX_RULES = 1000
MAX_RULE_COLUMNS = 8


@dataclass(frozen=True)
class Determines:
    """Each value of ``cause`` goes with one value of ``effect``."""

    cause: str
    effect: str

    @property
    def columns(self) -> tuple[str, ...]:
        return (self.cause, self.effect)

    def to_json(self) -> dict[str, Any]:
        return {"determines": [self.cause, self.effect]}

    def words(self) -> str:
        return f"each {self.cause} goes with one {self.effect}"


@dataclass(frozen=True)
class Never:
    """The combination ``values`` (column, value) does not occur."""

    values: tuple[tuple[str, Any], ...]

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.values)

    def to_json(self) -> dict[str, Any]:
        return {"never": dict(self.values)}

    def words(self) -> str:
        return "never " + " with ".join(f"{name} = {value!r}" for name, value in self.values)


Rule = Determines | Never


def rules_from_json(data: Any, columns: Sequence[str]) -> tuple[Rule, ...]:
    """A schema's ``"rules"`` list, checked against its ``columns``: one readable line for
    the first rule that is not one."""
    if data is None:
        return ()
    if not isinstance(data, list):
        raise InputError('a schema\'s "rules" must be a list, such as [{"never": {...}}]')
    if len(data) > MAX_RULES:
        raise InputError(f"the schema declares {len(data):,} rules; at most {MAX_RULES:,}")
    return tuple(_rule(i, entry, columns) for i, entry in enumerate(data))


def check_rules(rules: Sequence[Rule], columns: Sequence[str], start: int = 0) -> None:
    """Refuse a rule that names a column not among ``columns`` (the synthesised ones), in
    one line; ``start`` numbers the first rule."""
    for i, rule in enumerate(rules, start=start):
        for name in rule.columns:
            if name not in columns:
                raise InputError(
                    f"schema rule {i} names column {name!r}, which is not a synthesised "
                    "column of the schema (absent, left out or a row id); fix the name or "
                    "remove the rule"
                )


def _rule(index: int, entry: Any, columns: Sequence[str]) -> Rule:
    where = f"schema rule {index}"
    if not isinstance(entry, Mapping) or len(entry) != 1:
        raise InputError(
            f'{where}: write {{"determines": [cause, effect]}} or {{"never": {{column: '
            "value, ...}}"
        )
    ((kind, body),) = entry.items()
    if kind == "determines":
        if (
            not isinstance(body, list)
            or len(body) != 2
            or not all(isinstance(n, str) for n in body)
            or body[0] == body[1]
        ):
            raise InputError(f'{where}: "determines" takes two different column names')
        rule: Rule = Determines(body[0], body[1])
    elif kind == "never":
        if not isinstance(body, Mapping) or not 2 <= len(body) <= MAX_RULE_COLUMNS:
            raise InputError(
                f'{where}: "never" takes a combination of 2 to {MAX_RULE_COLUMNS} columns and '
                "their values"
            )
        for name, value in body.items():
            if not isinstance(value, str | int | float | bool) or (
                isinstance(value, float)
                and (value != value or value in (float("inf"), float("-inf")))
            ):
                raise InputError(
                    f"{where}: the value of {name!r} must be text, a finite number or true/false"
                )
        rule = Never(tuple((str(name), value) for name, value in body.items()))
    else:
        raise InputError(f'{where}: unknown rule {kind!r}; use "determines" or "never"')
    check_rules([rule], columns, start=index)
    return rule
