"""Conditional samples from a fitted model: rows that satisfy conditions on released values.

``model.sample(n, where={"sex": "Female", "age": "30..40"})`` and ``privsyn generate
RELEASE.zip --rows N --where sex=Female --where age=30..40`` give ``n`` rows of the model's
distribution conditioned on every condition at once. It reads only the fitted model (DP
measurements made consistent, and public or DP metadata), so it is post-processing: nothing
is measured and nothing is spent.

**Conditions.** Each names a column and the released values it keeps: categories
(``sex=Female``, several as ``race=White|Black`` or a list in the API), or, on a numeric or
datetime column, a range (``age=30..40`` both ends included, ``age=30..``, ``age>=30``,
``age<40``, ``age=35``; dates as ``2020-01-01..2020-06-30``). They are parsed once into a
:class:`Condition` per column (two on the same column keep their intersection), which
maps to a weight per engine code: the share of the values decoding draws from that code that
satisfy the condition (1 for a bin fully inside a range, a fraction for a bin the range
covers partly, 0 outside). A partly covered bin is not dropped: decoding draws a value
uniformly inside its bin, and a row is kept when its decoded value falls in the range, so
rows in the range near its ends are made as often as the model makes them. A condition that
names an unknown column, a category not in the released domain, a malformed range, or that
selects no code the model can make, is refused (:class:`InputError`, one line) before
anything is drawn.

**Method: rejection with a bound** (chosen by ``benchmarks/conditional.py``; numbers in
``benchmarks/evidence/conditional-2026-11-26.txt``). The ``n`` rows are made as the blocks of
an unconditioned sample of ``n`` rows would be (:func:`~privsyn_core.generation.blocks.block_sizes`,
one generator per block): block ``i`` of ``m`` rows draws rounds from the unconditioned
model exactly as :func:`~privsyn_core.generation.sample_blocks.generated_blocks` draws
them, from its own generator,
keeps the rows that satisfy the conditions, and stops at ``m``. A block needs nothing but
the model, the conditions, its size and its generator, so Spark's tasks make the same
blocks (:mod:`privsyn_core.generation.spark_blocks`: ``privsyn generate --engine spark
--where``), row for row. Every kept row is then a row of the
model's own sample with the condition applied, so the conditional distribution is the
model's, with no further approximation; the alternative measured, conditioned targets
(every marginal containing a conditioned attribute restricted to the allowed codes), is
biased where the restricted marginals disagree with the unrestricted ones. The bound: the
model's own probability of the conditions (:func:`probability`, from the consistent 1-way
and joint marginals: DP, public) estimates the draws needed, and a request that would need
more than :data:`MAX_DRAWS` is refused before any draw, naming the estimate.

The same seed and conditions give the same rows (for the same block size), here with any
number of workers and on Spark.
"""

from __future__ import annotations

import math
import re
from collections.abc import Generator, Iterable, Mapping, Sequence
from contextlib import closing
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from privsyn_core.data.codecs import BinnedCodec, CategoryCodec, CodesCodec
from privsyn_core.data.values import canonical_text, categories_as_text
from privsyn_core.errors import InputError
from privsyn_core.generation.blocks import block_seeds, block_sizes
from privsyn_core.generation.condition import Condition
from privsyn_core.generation.fitted_data import FittedData, Sample, SamplingSettings
from privsyn_core.generation.grouping import member_shares
from privsyn_core.generation.sample_blocks import (
    BlockPlan,
    PlannedBlocks,
    generated_blocks,
    numbered,
)

#: the most rows drawn for one conditional sample: a condition the model makes so rarely
#: that ``n`` rows need more is refused before any draw (about 100 blocks of 100,000 rows;
#: a few minutes on two cores for Adult)
MAX_DRAWS = 10_000_000

#: the fewest rows a round of drawing makes (or one block, when blocks are smaller): a GUM
#: table of a few hundred rows fits the marginals worse than one of thousands
MIN_ROUND = 10_000

#: rounds draw this much more than the estimated need, so that one round usually suffices
MARGIN = 1.1

_OPERATOR = re.compile(r"(>=|<=|=|>|<)")
_RANGE_HINT = "a range reads {c}=30..40 (both ends included), {c}=30.., {c}>=30 or {c}<40"


def parse_where(texts: Iterable[str]) -> list[tuple[str, str]]:
    """``--where`` texts (``sex=Female``, ``age>=30``, ``age=30..40``) as (column, value)
    pairs, ``>=30`` kept with its operator. A text with no operator or no column is
    refused."""
    pairs = []
    for text in texts:
        found = _OPERATOR.search(text)
        column = text[: found.start()].strip() if found else ""
        if found is None or not column:
            raise InputError(
                f"condition {text!r} is not COLUMN=VALUE: write sex=Female, age=30..40 or age>=30"
            )
        operator, value = found.group(1), text[found.end() :].strip()
        pairs.append((column, value if operator == "=" else operator + value))
    return pairs


def split_where(text: str) -> list[str]:
    """One line of conditions (``sex=Female, age=30..40``; commas or semicolons between
    them) as ``--where`` texts; a piece with no operator belongs to the one before it (a
    category with a comma in it)."""
    pieces: list[str] = []
    for piece in re.split(r"[,;]", text):
        if not piece.strip():
            continue
        if pieces and not _OPERATOR.search(piece):
            pieces[-1] += "," + piece.rstrip()
        else:
            pieces.append(piece.strip())
    return pieces


def resolve(model: FittedData, where: Mapping[str, Any] | Sequence[str]) -> tuple[Condition, ...]:
    """``where`` as one :class:`Condition` per column, checked against the model's released
    domain. ``where`` maps columns to a value (a category, a number, or a range text such as
    ``"30..40"`` or ``">=30"``) or to a list of categories (any of them); or it is a list of
    ``--where`` texts (:func:`parse_where`), where a column named twice keeps the
    intersection. Refused in one line when a column or value is unknown, a range is
    malformed, or the conditions select nothing the model makes."""
    if isinstance(where, str):
        where = [where]
    if isinstance(where, Mapping):
        pairs = list(where.items())
    elif isinstance(where, Sequence) and all(isinstance(t, str) for t in where):
        pairs = parse_where(where)
    else:
        raise InputError("where must map column names to values, e.g. {'sex': 'Female'}")
    columns = model.modelled
    by_column: dict[str, Condition] = {}
    for column, value in pairs:
        if column in {i.name for i in model.identifiers}:
            raise InputError(
                f"condition on {column!r}: a row id, written as fresh ids 1..n, not modelled; "
                "condition on another column"
            )
        if column not in columns:
            shown = ", ".join(columns[:20]) + (", ..." if len(columns) > 20 else "")
            raise InputError(f"condition on {column!r}: no such column; the columns: {shown}")
        condition = _condition(column, model.decoders[columns.index(column)], value)
        earlier = by_column.get(column)
        by_column[column] = condition if earlier is None else _intersect(earlier, condition)
    return tuple(_weighted(model, condition) for condition in by_column.values())


def _weighted(model: FittedData, condition: Condition) -> Condition:
    """``condition`` with its weight per engine code; refused when it selects nothing the
    model makes."""
    index = model.modelled.index(condition.column)
    decoder = model.decoders[index]
    declared = _declared_weights(condition, decoder)
    grouping = model.groupings[index]
    weights = np.zeros(grouping.size)
    for k, (members, shares) in enumerate(
        zip(grouping.members, grouping.member_weights, strict=True)
    ):
        share = member_shares(np.asarray(shares, dtype=float), 1.0)
        total = share.sum()
        share = share / total if total > 0 else np.full(len(members), 1 / len(members))
        weights[k] = float(np.dot(share, declared[list(members)]))
    mass = np.asarray(model.one_way[model.engine.index(grouping.attribute)].values)
    if not (weights * np.clip(mass, 0, None)).sum() > 0:
        if declared.sum() > 0:
            why = "the release never makes these values (their DP counts were too low)"
        elif condition.labels is not None:
            why = "no category satisfies all of it"
        else:
            assert isinstance(decoder, BinnedCodec)
            why = (
                f"no released value lies in the range (the released bins of "
                f"{condition.column!r} span {decoder.span_label(0, decoder.bins - 1)})"
            )
        raise InputError(f"condition {condition.text!r} selects nothing: {why}")
    return replace(condition, weights=tuple(float(w) for w in weights))


def _condition(column: str, decoder: object, value: Any) -> Condition:
    shown = value if isinstance(value, str) else repr(value)
    text = f"{column}{shown}" if shown[:1] in ("<", ">") else f"{column}={shown}"
    if isinstance(decoder, BinnedCodec):
        return _range(column, decoder, value, text)
    labels = _labels_of(decoder)
    if isinstance(value, list | tuple | set | frozenset):
        wanted = [str(v) for v in value]
    else:
        whole = _text(value)
        wanted = [whole] if whole in labels or "|" not in whole else whole.split("|")
    keys = [_text(v) for v in wanted]
    unknown = [w for w, k in zip(wanted, keys, strict=True) if k not in labels]
    if unknown:
        listed = ", ".join(labels[:15]) + (", ..." if len(labels) > 15 else "")
        raise InputError(
            f"condition {text!r}: column {column!r} has no category {unknown[0]!r}; its "
            f"released categories: {listed}"
        )
    return Condition(column, text, labels=frozenset(keys))


def _text(value: Any) -> str:
    """A value as the canonical text categories are matched in."""
    return str(canonical_text(pd.Series([value], dtype=object)).iloc[0])


def _labels_of(decoder: object) -> list[str]:
    if isinstance(decoder, CategoryCodec):
        return [*categories_as_text(decoder.categories), *([decoder.other_label] * decoder.other)]
    if isinstance(decoder, CodesCodec):
        return categories_as_text(decoder.labels())
    raise InputError(f"conditions are not offered on a column decoded by {type(decoder).__name__}")


def _range(column: str, codec: BinnedCodec, value: Any, text: str) -> Condition:
    hint = _RANGE_HINT.format(c=column)
    if isinstance(value, bool) or not isinstance(value, str | int | float | np.number):
        raise InputError(f"condition {text!r}: column {column!r} is numeric; {hint}")
    if not isinstance(value, str):
        number = float(value)
        return Condition(column, text, low=number, high=number)
    value = value.strip()
    for operator in (">=", "<=", ">", "<"):
        if value.startswith(operator):
            bound = _number(codec, value[len(operator) :], text, hint)
            if operator[0] == ">":
                return Condition(column, text, low=bound, low_open=operator == ">")
            return Condition(column, text, high=bound, high_open=operator == "<")
    if ".." in value:
        first, _, last = value.partition("..")
        if not first.strip() and not last.strip():
            raise InputError(f"condition {text!r}: the range has no end; {hint}")
        low = _number(codec, first, text, hint) if first.strip() else -math.inf
        high = _number(codec, last, text, hint) if last.strip() else math.inf
        if low > high:
            raise InputError(f"condition {text!r}: the range is empty ({first} > {last})")
        return Condition(column, text, low=low, high=high)
    number = _number(codec, value, text, hint)
    return Condition(column, text, low=number, high=number)


def _number(codec: BinnedCodec, text: str, condition: str, hint: str) -> float:
    text = text.strip()
    if codec.datetime:
        try:
            stamp = pd.Timestamp(text)
        except (ValueError, TypeError):
            stamp = pd.NaT
        if stamp is pd.NaT or not text:
            raise InputError(f"condition {condition!r}: {text!r} is not a date; {hint}")
        if stamp.tzinfo is not None:
            stamp = stamp.tz_convert("UTC").tz_localize(None)
        return stamp.value / 1e9
    try:
        number = float(text)
    except ValueError:
        number = math.nan
    if not math.isfinite(number):
        raise InputError(f"condition {condition!r}: {text!r} is not a number; {hint}")
    return number


def _intersect(a: Condition, b: Condition) -> Condition:
    text = f"{a.text}, {b.text}"
    if a.labels is not None and b.labels is not None:
        return Condition(a.column, text, labels=a.labels & b.labels)
    low, low_open = max((a.low, a.low_open), (b.low, b.low_open))
    high, high_open = min((a.high, not a.high_open), (b.high, not b.high_open))
    return Condition(a.column, text, low=low, high=high, low_open=low_open, high_open=not high_open)


def _declared_weights(condition: Condition, decoder: Any) -> np.ndarray:
    """Per declared code, the share of its decoded values that satisfy ``condition``."""
    if condition.labels is not None:
        labels = _labels_of(decoder)
        weights = np.array([float(label in condition.labels) for label in labels])
        return np.concatenate([weights, np.zeros(decoder.size - weights.size)])
    codec: BinnedCodec = decoder
    weights = np.zeros(codec.size)  # the missing code is never in a range
    for k in range(codec.bins):
        low, high = codec.edges[k], codec.edges[k + 1]
        if codec.integer or not codec.datetime:
            # decoding draws among the multiples of 10**-precision in [low, high)
            scale = 10.0**codec.precision
            first = math.ceil(round(low * scale, 6))
            last = math.ceil(round(high * scale, 6)) - 1
            if last < first:
                first = last = round((low + high) / 2 * scale)
            grid = np.arange(first, last + 1) / scale
            weights[k] = (
                float(condition.contains(grid).mean())
                if grid.size <= 100_000
                else (_overlap(condition, low, high))
            )
        else:
            weights[k] = _overlap(condition, low, high)
    return weights


def _overlap(condition: Condition, low: float, high: float) -> float:
    """The share of ``[low, high)`` inside the condition's range (uniform draws)."""
    if high <= low:
        return float(condition.contains(np.array([low]))[0])
    inside = min(high, condition.high) - max(low, condition.low)
    return float(np.clip(inside / (high - low), 0.0, 1.0))


def probability(model: FittedData, conditions: Sequence[Condition]) -> float:
    """The model's own probability of all ``conditions`` at once, from its consistent
    marginals (DP and public): the largest joint marginals over the conditioned attributes
    first, 1-way marginals for the rest, independent between those factors."""
    weights = {c.column: np.asarray(c.weights) for c in conditions}
    attribute = {
        c.column: model.groupings[model.modelled.index(c.column)].attribute for c in conditions
    }
    by_attribute = {attribute[c]: weights[c] for c in weights}
    left = set(by_attribute)
    result = 1.0
    joints = sorted(
        (t for t in model.marginals if len(set(t.attributes) & left) >= 2),
        key=lambda t: -len(set(t.attributes) & left),
    )
    for table in joints:
        covered = set(table.attributes) & left
        if len(covered) < 2 or covered != set(table.attributes) & set(by_attribute):
            continue
        values = np.clip(np.asarray(table.values, dtype=float), 0, None).reshape(table.shape)
        values = values / max(values.sum(), 1e-300)
        for axis, name in enumerate(table.attributes):
            if name in covered:
                shape = [1] * values.ndim
                shape[axis] = -1
                values = values * by_attribute[name].reshape(shape)
        result *= float(values.sum())
        left -= covered
    for name in left:
        mass = np.clip(np.asarray(model.one_way[model.engine.index(name)].values), 0, None)
        result *= float(np.dot(mass, by_attribute[name]) / max(mass.sum(), 1e-300))
    return result


def matching(table: pd.DataFrame, model: FittedData, conditions: Sequence[Condition]) -> np.ndarray:
    """Which rows of a decoded ``table`` satisfy every condition."""
    keep = np.ones(len(table), dtype=bool)
    for condition in conditions:
        decoder = model.decoders[model.modelled.index(condition.column)]
        keep &= condition.matches(table[condition.column], decoder)
    return keep


def check_bound(model: FittedData, n: int, conditions: Sequence[Condition]) -> float:
    """The model's probability of ``conditions``; refuses (one line) when ``n`` rows would
    need more than :data:`MAX_DRAWS` draws by that estimate."""
    p = probability(model, conditions)
    shown = "; ".join(c.text for c in conditions)
    if p <= 0:
        raise InputError(
            f"conditions {shown!r} have probability 0 under the release's model: no row it "
            "makes would match"
        )
    needed = n / p
    if needed > MAX_DRAWS:
        raise InputError(
            f"conditions {shown!r} have probability about {p:.2g} under the release's model "
            f"(from its DP marginals), so {n:,} rows would need about {needed:,.0f} draws, more "
            f"than the {MAX_DRAWS:,} allowed; ask for fewer rows or a broader condition"
        )
    return p


def conditioned_blocks(
    model: FittedData,
    n: int,
    where: Mapping[str, Any] | Sequence[str],
    settings: SamplingSettings,
    rng: np.random.Generator,
    workers: int | None,
) -> PlannedBlocks:
    """The blocks of ``n`` rows satisfying ``where`` (see
    :meth:`~privsyn_core.generation.fitted.FittedModel.generate_where`): the conditions
    resolved and their bound checked now, before any draw; each block then made by
    rejection (:func:`block_where`) when asked for."""
    conditions = resolve(model, where)
    check_bound(model, int(n), conditions)  # before any draw
    # the blocks of an unconditioned sample of n rows, each made by rejection
    sizes = block_sizes(int(n), settings.block_rows)
    plan = BlockPlan(model, sizes, settings, block_seeds(rng, len(sizes)), where=conditions)
    blocks = (sample for i in range(len(sizes)) for sample in block_where(plan, i, workers))
    return PlannedBlocks(numbered(model.identifiers, blocks), plan)


def block_where(
    plan: BlockPlan, index: int, workers: int | None = 1
) -> Generator[Sample, None, None]:
    """Block ``index`` of a conditional ``plan`` (made by
    :meth:`~privsyn_core.generation.fitted.FittedData.generate_where`, its ``where``
    resolved and bounded): ``plan.sizes[index]`` rows satisfying ``plan.where``, by
    rejection from the block's own generator, in rounds of blocks made by ``workers``
    processes (the rows do not depend on their number). Its share of :data:`MAX_DRAWS`
    bounds its draws."""
    n = plan.sizes[index]
    share = math.ceil(MAX_DRAWS * n / plan.sizes.rows)
    p = probability(plan.model, plan.where)
    rng = plan.seeds.generator(index)
    return _rejection(plan.model, n, plan.where, p, rng, plan.settings, workers, share)


def _rejection(
    model: FittedData,
    n: int,
    conditions: Sequence[Condition],
    p: float,
    rng: np.random.Generator,
    settings: SamplingSettings,
    workers: int | None,
    limit: int,
) -> Generator[Sample, None, None]:
    kept = drawn = 0
    rate = p
    smallest = min(MIN_ROUND, settings.block_rows)
    while kept < n:
        if drawn >= limit:
            shown = "; ".join(c.text for c in conditions)
            raise InputError(
                f"conditions {shown!r}: {drawn:,} rows drawn and only {kept:,} of {n:,} "
                f"matched (rate {kept / drawn:.2g}; the release's model estimated {p:.2g}); "
                "ask for fewer rows or a broader condition"
            )
        need = n - kept
        rows = min(max(math.ceil(need / max(rate, 1e-12) * MARGIN), smallest), limit - drawn)
        round_seed, pick_seed = (int(s) for s in rng.integers(2**63, size=2))
        picker = np.random.default_rng(pick_seed)
        generator = np.random.default_rng(round_seed)
        blocks = generated_blocks(model, rows, settings, generator, workers, None)
        accepted = 0
        with closing(blocks):
            for block in blocks:
                table = block.table
                rows_kept = np.flatnonzero(matching(table, model, conditions))
                if rows_kept.size > n - kept:  # a random subset: GUM's row order is not random
                    rows_kept = np.sort(picker.choice(rows_kept, n - kept, replace=False))
                accepted += int(rows_kept.size)
                kept += int(rows_kept.size)
                drawn += block.n_records
                chosen = table.iloc[rows_kept].reset_index(drop=True)
                yield replace(block, table=chosen, n_records=len(chosen))
                if kept >= n:
                    return
        observed = kept / drawn if drawn else 0.0
        rate = observed if observed > 0 else rate / 10
