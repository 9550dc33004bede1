"""What one run may ask for, checked before anything is allocated for it.

A few bytes of declaration can describe a great deal of work: a schema's ``"bins": 1e9``, a
domain's ``"zip": 1000000000``, a list of a million categories, ``--iterations 1000000000``.
Each limit here is stated once and checked by every reader of the thing it limits: the
command line, the engine (so the dashboard and the Lab too) and the release-bundle reader
(:mod:`privsyn_core.release.bundle_limits`, which refuses a bundle that asks for more than a
run of this version would have written). Every refusal is one line: what was asked, the
limit, and what to do instead.

The limits are far above what PrivSyn can use: at 100,000 codes a column, a one-way marginal
of a table of a million rows has about 10 rows a cell, and any pair with such a column is
mostly noise; the paper's datasets have at most a few hundred values a column.
"""

from __future__ import annotations

from collections.abc import Iterable
from numbers import Integral

from privsyn_core.errors import InputError

#: the most GUM iterations a run may ask for (the default is 100; the paper's analysis assumes
#: 100 and the authors' code runs 50 to 200; GUM also stops early at its plateau)
MAX_ITERATIONS = 10_000
#: the most codes one column may have: categories, bins, or integer codes. Twice the US ZIP
#: codes (about 42,000); a million declared categories took 1 GB for a table of 600 rows,
#: and a domain of 10^9 codes 23 GB before it was killed
MAX_CODES = 100_000
#: the largest magnitude of a declared bound or bin edge: 2^62, the private range estimate's
#: own reach (its grid ends at 2^60 and its tails go two doublings beyond). Whole numbers are
#: written as 64-bit integers, which end at 2^63; a bound of 1e30 ended in an internal error
MAX_MAGNITUDE = 2.0**62
#: the most cells of one marginal (8 bytes each, several copies while sampling): 16.8
#: million, 128 MB a copy. PrivSyn measures every pair of columns, so no two columns'
#: codes may multiply to more
MAX_MARGINAL_CELLS = 1 << 24


def check_iterations(iterations: object, asked_by: str = "") -> int:
    """``iterations`` if it is a whole number from 0 to :data:`MAX_ITERATIONS`; else an
    :class:`InputError` line, which begins with ``asked_by`` if given ("its model")."""
    count = None
    if isinstance(iterations, Integral) and not isinstance(iterations, bool):
        count = int(iterations)
        if 0 <= count <= MAX_ITERATIONS:
            return count
    shown = repr(iterations) if count is None else f"{count:,}"
    asked = f"{asked_by} asks GUM for {shown} iterations" if asked_by else f"{shown} iterations"
    if count is None or count < 0:
        raise InputError(f"{asked}: give a whole number from 0 to {MAX_ITERATIONS:,}, such as 100")
    raise InputError(
        f"{asked}, more than the {MAX_ITERATIONS:,} this version runs (100 is the default, and "
        "GUM stops early once its error stops falling)"
    )


#: what to do about a column of too many codes, by what declared them
_FEWER = {
    "categories": "merge rare categories into one (such as 'other'), or leave the column's "
    "categories undeclared so that the ones frequent enough are found privately",
    "bins": f"use wider bins: at most {MAX_CODES:,}",
    "bin edges": f"use wider bins: at most {MAX_CODES:,}, so {MAX_CODES + 1:,} edges",
    "codes": "recode the column into fewer codes (merge rare values), or declare its "
    "categories instead",
}


def check_codes(column: str, count: int, what: str) -> None:
    """Refuse a column declared with more than :data:`MAX_CODES` codes. ``what``: how they
    were declared ("categories", "bins", "bin edges", "codes"); ``count``: how many of
    those."""
    codes = count - 1 if what == "bin edges" else count
    if codes > MAX_CODES:
        raise InputError(
            f"column {column!r} declares {count:,} {what}, more than a column may have "
            f"({MAX_CODES:,} codes); {_FEWER[what]}"
        )


def check_pairs(sizes: Iterable[tuple[str, int]]) -> None:
    """Refuse columns whose declared codes make a pair marginal of more than
    :data:`MAX_MARGINAL_CELLS` cells: PrivSyn counts every pair, and such a pair would take
    gigabytes before the first count. ``sizes``: (column, codes), only the declared ones."""
    largest = sorted(sizes, key=lambda item: item[1], reverse=True)[:2]
    if len(largest) < 2:
        return
    (a, m), (b, n) = largest
    if m * n > MAX_MARGINAL_CELLS:
        raise InputError(
            f"columns {a!r} ({m:,} codes) and {b!r} ({n:,} codes) make a pair marginal of "
            f"{m * n:,} cells, more than the {MAX_MARGINAL_CELLS:,} one marginal may hold "
            "(PrivSyn counts every pair); declare fewer categories or wider bins for one of them"
        )
