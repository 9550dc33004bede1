"""Errors a caller can fix by changing their input, as opposed to bugs in the engine.

Front ends (the CLI, the dashboard) show an ``InputError``'s message as it is: it names the
column, value or parameter at fault and says what to do. Anything else is a bug.
"""


class InputError(ValueError):
    """A parameter, table or domain the engine cannot work with; the message says why."""
