"""Text from the user's files (column names, values, file names) made safe to print to a
terminal.

A column name can hold control characters: ``ESC [ 2 J`` clears the screen, ``ESC ] 8``
makes a hyperlink, ``ESC ] 0`` retitles the window, a carriage return or backspace overwrites
what the line said before (a warning can be hidden so), and Unicode's bidirectional controls
reorder what is shown. Printed raw, a table's header is a program for the user's terminal. So
every line the CLI prints that carries such text goes through :func:`printable`, which writes
each of these characters as the escape Python's ``repr`` uses (``\\x1b``, ``\\r``, ``\\u202e``).
Printable text, including non-ASCII letters, is unchanged, and so is a backslash (paths on
Windows hold them): ``repr`` output passes through unchanged, so applying it twice is
harmless.
"""

from __future__ import annotations

import unicodedata

#: Unicode's bidirectional formatting controls (category Cf, not Cc): they reorder the text
#: shown after them ("Trojan Source")
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def _unsafe(character: str) -> bool:
    """C0 controls (with tab and line breaks), DEL, C1 controls, the line and paragraph
    separators, and the bidirectional controls."""
    return unicodedata.category(character) in ("Cc", "Zl", "Zp") or character in _BIDI


def printable(text: str) -> str:
    """``text`` with every control character written as a visible escape (``\\x1b``,
    ``\\n``, ``\\u202e``): safe on one line of a terminal, and still legible."""
    if text.isprintable():  # the usual case, at C speed (tab and line breaks are not)
        return text
    return "".join(repr(c)[1:-1] if _unsafe(c) else c for c in text)
