"""The rules a schema declares (:mod:`privsyn_core.data.rules`), kept by every synthetic row.

Applied to each block's decoded rows (:func:`~privsyn_core.generation.draw.draw_block`),
so they hold in every sample of a release, on every engine, with or without conditions:

* **determines** (cause, effect): the effect is rewritten from the cause, by one mapping for
  the whole release: each of the cause's codes (a category, or a bin) goes with the effect's
  code the pair's consistent target holds most of (the run measures the pair whatever the
  selection chose: :func:`rule_pairs`), written as one value (a category, the whole number
  or the value a one-value bin holds, else one value of its bin, the same in every sample).
* **never** (values): a row holding the whole combination takes the last column's value of
  another row of the block that holds the same values in the rule's other columns without
  the combination (or, with none, of any row without it).

Post-processing of the release's DP content and of the synthetic rows: it costs nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from privsyn_core.data.codecs import BinnedCodec, CategoryCodec, CodesCodec
from privsyn_core.data.rules import Determines, Never, Rule
from privsyn_core.data.values import canonical_text, categories_as_text
from privsyn_core.generation.fitted_data import FittedData
from privsyn_core.generation.grouping import member_shares


def rule_pairs(rules: Sequence[Rule]) -> tuple[tuple[str, str], ...]:
    """The pairs of columns a run must measure for its rules to be kept: each
    ``determines`` rule's, whose consistent target gives the mapping."""
    return tuple(dict.fromkeys((r.cause, r.effect) for r in rules if isinstance(r, Determines)))


def kept_rules(table: pd.DataFrame, model: FittedData, rng: np.random.Generator) -> int:
    """``table`` (decoded rows of ``model``, changed in place) with every rule of the model
    kept; returns how many values were changed."""
    changed = 0
    for rule in model.rules:
        if isinstance(rule, Determines):
            changed += _determined(table, model, rule)
        else:
            changed += _never(table, rule, rng)
    return changed


def effect_of(model: FittedData, rule: Determines) -> dict[int, int]:
    """For each declared code of the cause, the effect's declared code the pair's
    consistent target holds most of (the member of a combined value with the most rows)."""
    cause, effect = model.modelled.index(rule.cause), model.modelled.index(rule.effect)
    target = next(t for t in model.marginals if {rule.cause, rule.effect} <= set(t.attributes))
    values = np.asarray(target.values).reshape(target.shape)
    axes = tuple(i for i, a in enumerate(target.attributes) if a not in (rule.cause, rule.effect))
    pair = values.sum(axis=axes) if axes else values
    if target.attributes.index(rule.cause) > target.attributes.index(rule.effect):
        pair = pair.T
    causes, effects = model.groupings[cause], model.groupings[effect]
    best_member = {
        code: members[int(np.argmax(member_shares(np.asarray(weights), 1.0)))]
        for code, (members, weights) in enumerate(
            zip(effects.members, effects.member_weights, strict=True)
        )
    }
    return {
        declared: best_member[int(np.argmax(pair[engine]))]
        for declared, engine in enumerate(causes.code_of)
    }


def _determined(table: pd.DataFrame, model: FittedData, rule: Determines) -> int:
    cause = model.decoders[model.modelled.index(rule.cause)]
    effect = model.decoders[model.modelled.index(rule.effect)]
    codes = _codes(cause, table[rule.cause])
    mapping = effect_of(model, rule)
    present = codes >= 0
    new = pd.Series(table[rule.effect].to_numpy(dtype=object), index=table.index, dtype=object)
    targets = np.array([mapping.get(int(c), -1) for c in codes[present]], dtype=np.int64)
    values = [_representative(effect, int(t)) for t in targets]
    before = table[rule.effect].copy()
    new[present] = values
    table[rule.effect] = _like(new, before)
    return int((~_same(before, table[rule.effect])).sum())


def _never(table: pd.DataFrame, rule: Never, rng: np.random.Generator) -> int:
    matches = np.ones(len(table), dtype=bool)
    for name, value in rule.values:
        matches &= _equals(table[name], value)
    bad = np.flatnonzero(matches)
    if bad.size == 0:
        return 0
    last = rule.values[-1][0]
    others = [name for name, _ in rule.values[:-1]]
    good = np.flatnonzero(~matches)
    column = table[last].to_numpy(dtype=object).copy()
    if good.size == 0:
        return 0  # every row holds it: nothing to take a value from
    keys = pd.MultiIndex.from_frame(table[others].astype(str)) if others else None
    for row in bad:
        donors = good
        if keys is not None:
            same = good[keys[good] == keys[row]]
            donors = same if same.size else good
        column[row] = column[rng.choice(donors)]
    table[last] = _like(pd.Series(column, index=table.index, dtype=object), table[last])
    return int(bad.size)


def _codes(decoder: Any, values: pd.Series) -> np.ndarray:
    """Each value's declared code (-1: missing)."""
    if isinstance(decoder, BinnedCodec | CategoryCodec):
        codes = decoder.encode(values)
        missing = decoder.missing_code
        return np.where(codes == missing, -1, codes) if missing is not None else codes
    assert isinstance(decoder, CodesCodec)
    labels = categories_as_text(decoder.labels())
    index = {label: code for code, label in enumerate(labels)}
    text = canonical_text(values)
    return np.array([-1 if pd.isna(t) else index.get(str(t), -1) for t in text])


def _representative(decoder: Any, code: int) -> Any:
    """The one value the effect's declared ``code`` is written as: its decoding by a
    generator seeded with the code, the same in every block of every sample."""
    if code < 0:
        return None
    return decoder.decode(np.array([code]), np.random.default_rng(code)).iloc[0]


def _equals(column: pd.Series, value: Any) -> np.ndarray:
    text = canonical_text(column)
    wanted = categories_as_text([value])[0]
    return (text == wanted).fillna(False).to_numpy(dtype=bool)


def _same(before: pd.Series, after: pd.Series) -> np.ndarray:
    a, b = canonical_text(before), canonical_text(after)
    return ((a == b) | (a.isna() & b.isna())).to_numpy(dtype=bool)


def _like(values: pd.Series, template: pd.Series) -> pd.Series:
    """``values`` in ``template``'s type where it holds them (whole numbers stay whole)."""
    try:
        return values.astype(template.dtype)
    except (TypeError, ValueError):
        return values
