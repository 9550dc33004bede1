"""What a release changed of the table, said column by column, from its DP content alone.

A synthetic table from a raw CSV is not the CSV: a column whose range the budget could not
estimate comes out narrower, rare categories come out as one label, a row id comes out as
new numbers, combinations a measured marginal shows as empty are kept out. An analyst who
opens the download must not have to find that out: :func:`changes` lists each such change
of a fitted model, with its size and what to declare to avoid it, and the CLI summary, the
release report and the dashboard's Results page show the same list.

Everything here is read off the model, which holds DP outputs only: the released codecs
(bounds, categories, bins), the consistent 1-way targets (the share of rows in a bin or in
"(other)") and the consistent targets of the measured marginals with their public noise
scales. The numbers are estimates, as every number of a release is; none is read off the
table. Each change carries a schema entry pre-filled from the same DP content (``declare``),
which the dashboard's column editor offers as the fix: the estimated bounds to correct, the
released categories to complete.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from privsyn_core.data.codecs import BinnedCodec, CategoryCodec
from privsyn_core.generation.empty_cells import emptied_targets
from privsyn_core.generation.fitted_data import FittedData
from privsyn_core.generation.grouping import declared_shares
from privsyn_core.generation.independence import noise_pairs

#: a tail (the values beyond an estimated bound) is reported from this share of the rows
TAIL_SHARE = 0.001


@dataclass(frozen=True)
class Change:
    """One change the release made to the table: the column (or pair of columns) it
    concerns, what kind of change, one line in plain words with its numbers, the fix in
    words, and a schema entry pre-filled from the release's DP content (None: nothing to
    declare)."""

    column: str
    kind: str
    text: str
    fix: str
    declare: Mapping[str, Any] | None = field(default=None, compare=False)

    @property
    def detail(self) -> str:
        """The text without the column it starts with (for a table with a column column)."""
        prefix = f"{self.column}: "
        return self.text[len(prefix) :] if self.text.startswith(prefix) else self.text


#: the kinds of change, in the order they are listed, with their headings
KINDS = {
    "left out": "columns left out",
    "identifier": "row ids written anew",
    "collapsed": "columns collapsed to one value",
    "range": "ranges estimated (values beyond them thinned)",
    "merged": "categories merged",
    "dropped": "rare values dropped",
    "combinations": "combinations kept out",
    "rules": "declared rules",
}


def changes(
    model: FittedData,
    excluded: Sequence[tuple[str, str]] = (),
    dropped_rules: Sequence[tuple[str, str]] = (),
) -> tuple[Change, ...]:
    """Every change ``model`` makes to its table (see the module docstring), in the order
    of :data:`KINDS`; ``excluded`` are the columns left out, with the reason, and
    ``dropped_rules`` the schema's rules no synthesised column pair could keep (in words,
    with the reason)."""
    found: list[Change] = [
        Change(name, "left out", f"{name}: left out ({why})", _left_out_fix(why))
        for name, why in excluded
    ]
    found += [
        Change(
            i.name,
            "identifier",
            f"{i.name}: a row id, not modelled; written as fresh ids 1 to n",
            'declare "identifier": false if it is data, not an id',
            {"name": i.name, "identifier": True},
        )
        for i in model.identifiers
    ]
    for row, decoder in enumerate(model.decoders):
        shares = declared_shares(model.one_way[row].values, model.groupings[row])
        if isinstance(decoder, BinnedCodec):
            found += _binned(decoder, shares)
        if not isinstance(decoder, CategoryCodec):
            continue
        found += _categories(decoder, shares)
        dropped = [  # released categories never output (not the missing or "(other)" code)
            v for v in model.groupings[row].dropped if v < len(decoder.categories)
        ]
        if dropped:
            labels = [str(decoder.labels()[v]) for v in dropped[:3]]
            more = f" and {len(dropped) - 3} more" if len(dropped) > 3 else ""
            found.append(
                Change(
                    decoder.name,
                    "dropped",
                    f"{decoder.name}: {len(dropped)} value{'s' * (len(dropped) > 1)} too rare "
                    f"to measure at this budget never come out ({', '.join(labels)}{more})",
                    "a larger epsilon; nothing to declare",
                )
            )
    found += _combinations(model)
    found += [
        Change(
            ", ".join(rule.columns),
            "rules",
            f"{rule.words()}: kept in every row",
            "nothing: declared rules hold exactly",
        )
        for rule in model.rules
    ]
    found += [
        Change(words, "rules", f"{words}: NOT kept, because {why}", "include its columns")
        for words, why in dropped_rules
    ]
    order = list(KINDS)
    return tuple(sorted(found, key=lambda c: order.index(c.kind)))


def _collapsed(shares: np.ndarray) -> bool:
    return int(np.count_nonzero(shares > 0)) <= 1


def _binned(codec: BinnedCodec, shares: np.ndarray) -> list[Change]:
    bins = shares[: codec.bins]
    name = codec.name
    if codec.datetime:
        return []
    if _collapsed(bins):
        value = codec.labels()[int(np.argmax(bins))] if bins.sum() > 0 else "nothing"
        return [
            Change(
                name,
                "collapsed",
                f"{name}: every value comes out as {value}: no other value held enough rows "
                "to measure at this budget",
                "declare its bounds (and bins), or use a larger epsilon",
                {"name": name, "kind": "numeric"},
            )
        ]
    if not codec.rise and not codec.fall:
        return []
    edges = codec.edges
    low = edges[max(codec.rise) + 1] if codec.rise else edges[0]
    high = edges[min(codec.fall)] if codec.fall else edges[-1]
    below = float(sum(bins[b] for b in codec.rise))
    above = float(sum(bins[b] for b in codec.fall))
    step = 1.0 if codec.integer else 0.0  # whole numbers: a bin holds low .. high - 1
    high_value = high - step
    zero = any(edges[p] == 0.0 and bins[p] > 0 for p in codec.points) and not low <= 0.0 < high
    parts = [
        ("zero kept as a value of its own; the other values' " if zero else "")
        + f"bounds [{_number(low)}, {_number(high_value)}] estimated privately"
    ]
    if below >= TAIL_SHARE:
        start = edges[min(b for b in codec.rise if bins[b] > 0)]  # the outermost with rows
        toward = "zero" if any(edges[p + 1] == start for p in codec.points) else _number(start)
        parts.append(f"{below:.1%} of rows drawn below {_number(low)}, thinning toward {toward}")
    if above >= TAIL_SHARE:
        end = edges[max(b for b in codec.fall if bins[b] > 0) + 1] - step
        parts.append(
            f"{above:.1%} drawn above {_number(high_value)}, thinning toward {_number(end)}"
        )
    declare = {
        "name": name,
        "kind": "numeric",
        "lower": min(low, 0.0) if zero else low,
        "upper": max(high_value, 0.0) if zero else high_value,
    }
    return [
        Change(
            name,
            "range",
            f"{name}: " + "; ".join(parts),
            "declare its bounds if you know them (the editor holds the estimate)",
            declare,
        )
    ]


def _number(value: float) -> str:
    """A bound as an analyst reads it: whole numbers of five digits and more grouped by
    thousands (``2,097,151``, not ``2.09715e+06``), others as short as they are."""
    if abs(value) >= 1e4 and float(value).is_integer():
        return f"{value:,.0f}"
    return f"{value:g}"


def _categories(codec: CategoryCodec, shares: np.ndarray) -> list[Change]:
    if codec.other_code is None:
        return []
    share = float(shares[codec.other_code])
    if share <= 0:
        return []
    released = len(codec.categories)
    return [
        Change(
            codec.name,
            "merged",
            f"{codec.name}: {released} categor{'y' if released == 1 else 'ies'} released; "
            f"the rarer ones ({share:.1%} of rows) come out as {codec.other_label!r}",
            "declare its categories (the editor lists the released ones; add the rest)",
            {"name": codec.name, "kind": "categorical", "categories": list(codec.categories)},
        )
    ]


def _combinations(model: FittedData) -> list[Change]:
    """The measured marginals with cells targeted as empty (and kept empty in the rows)."""
    sigmas = model.defaults.empty_sigmas
    if sigmas is None:
        return []
    scales = model.noise_scales()
    independent = noise_pairs(model.marginals, scales, model.defaults.independence_threshold)
    targets = [t for t in model.marginals if len(t.attributes) > 1]
    _, masks = emptied_targets(targets, scales, sigmas, independent)
    out = []
    for attributes, mask in masks.items():
        pair = " x ".join(attributes)
        out.append(
            Change(
                pair,
                "combinations",
                f"{pair}: {int(mask.sum())} of {mask.size} combinations kept out of the rows: "
                "their measured counts are within noise of zero where the pair's other cells hold "
                "the rows",
                "declare a rule in the schema if a combination can never occur",
            )
        )
    return out


def released_exclusions(model: FittedData) -> list[tuple[str, str]]:
    """The columns a release left out, from its released schema (names only: the reason
    may quote counts read off the data, so a bundle does not carry it)."""
    return [
        (str(entry["name"]), "left out of the release")
        for entry in model.schema
        if entry.get("excluded")
    ]


def _left_out_fix(why: str) -> str:
    if "range" in why:
        return "declare its bounds, or use a larger epsilon"
    if "value" in why:
        return "declare its categories, or use a larger epsilon"
    return "include it in the schema"


def change_lines(found: Sequence[Change], *, most: int | None = None) -> list[str]:
    """The changes as lines of text under their headings, each kind's fix once (the CLI's
    summary); with ``most``, at most that many lines a kind, the rest counted."""
    lines: list[str] = []
    for kind, heading in KINDS.items():
        group = [c for c in found if c.kind == kind]
        if not group:
            continue
        lines.append(f"{heading} ({len(group)}); to avoid: {group[0].fix}")
        shown = group if most is None else group[:most]
        lines += [f"  {change.text}" for change in shown]
        if len(shown) < len(group):
            lines.append(f"  ... and {len(group) - len(shown)} more (the release report lists all)")
    return lines
