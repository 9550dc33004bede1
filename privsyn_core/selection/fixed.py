"""Marginals fixed without looking at the data: all 2-way marginals, or the user's own.

Both are competitors of the paper's DenseMarg (section 3.2 reviews PriView, which covers all
pairs data-independently; section 6.3 compares with the NIST-challenge team's hand-picked
marginals). Neither needs InDif, so the budget DenseMarg spends on it goes to the marginals.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

from privsyn_core.errors import InputError


def all_pairs(attributes: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """Every 2-way marginal, in table order."""
    return tuple(combinations(attributes, 2))


def given_marginals(
    given: Sequence[Sequence[str]], attributes: Sequence[str]
) -> tuple[tuple[str, ...], ...]:
    """The user's marginals, checked against the table's columns and put in table order.

    Refuses (with the offending marginal in the message) an empty marginal, a name that is
    not a column, a name twice in one marginal and the same marginal twice.
    """
    position = {a: i for i, a in enumerate(attributes)}
    if not given:
        raise InputError("selection 'given' needs at least one marginal in config.marginals")
    out: list[tuple[str, ...]] = []
    for marginal in given:
        names = [str(a) for a in marginal]
        if not names:
            raise InputError("a given marginal must name at least one column")
        unknown = [a for a in names if a not in position]
        if unknown:
            raise InputError(
                f"given marginal {names} names {', '.join(map(repr, unknown))}, not a column of "
                f"the table (columns: {', '.join(attributes)})"
            )
        if len(set(names)) != len(names):
            raise InputError(f"given marginal {names} names a column twice")
        ordered = tuple(sorted(names, key=position.__getitem__))
        if ordered in out:
            raise InputError(f"given marginal {names} is listed twice")
        out.append(ordered)
    return tuple(out)
