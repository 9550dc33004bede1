"""Errors a caller can fix by changing their input, as opposed to bugs in the engine.

Front ends (the CLI, the dashboard) show an ``InputError``'s message as it is: it names the
column, value or parameter at fault and says what to do. Anything else is a bug.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from privsyn_core.privacy.ledger import Measurement, PrivacyLedger


class InputError(ValueError):
    """A parameter, table or domain the engine cannot work with; the message says why.

    ``spent`` lists measurements already made on the private table when the problem
    surfaced (for example, no category survived the private domain estimate): their budget
    is gone even though the run failed.
    """

    def __init__(self, message: str, *, spent: tuple[Measurement, ...] = ()) -> None:
        super().__init__(message)
        self.spent = spent


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


class FailedAfterSpending(InputError):
    """An input problem found only after part of the budget was spent. ``ledger`` holds that
    spend: front ends record it (the run registry), since the message itself was computed
    from DP measurements and the budget cannot be spent again for free."""

    def __init__(self, message: str, ledger: PrivacyLedger) -> None:
        super().__init__(message, spent=ledger.entries)
        self.ledger = ledger

    @classmethod
    def after(cls, error: InputError, ledger: PrivacyLedger) -> FailedAfterSpending:
        """``error``, found once ``ledger`` had spent: the message says how much."""
        return cls(f"{error} (rho {ledger.spent_rho:.4g} was spent before this was found)", ledger)
