"""Errors a caller can fix by changing their input, as opposed to bugs in the engine.

Front ends (the CLI, the dashboard) show an ``InputError``'s message as it is: it names the
column, value or parameter at fault and says what to do. Anything else is a bug.
"""

from __future__ import annotations


class InputError(ValueError):
    """A parameter, table or domain the engine cannot work with; the message says why.

    Raised as it is, it says that nothing was spent: a problem found after part of the
    budget was spent is a :class:`~privsyn_core.privacy.ledger.FailedAfterSpending`, the one
    error that carries a spend.
    """


class UsageError(InputError):
    """A combination of command-line options that cannot work together; reported as one line."""


class TableError(InputError):
    """The table does not fit its declared domain; the message says what to change."""


class TooBigToLoad(InputError):
    """A table that would not fit in the free memory if loaded, found from what its file says
    of its size (Parquet footer, CSV size) before a row is read. The numbers are kept so each
    front end can name its own way out (the CLI's DuckDB engine, the dashboard's table on
    disk); the message is the CLI's."""

    def __init__(
        self, message: str, *, rows: int, columns: int, needed: float, usable: float, free: int
    ) -> None:
        super().__init__(message)
        self.rows, self.columns = rows, columns
        self.needed, self.usable, self.free = needed, usable, free
