"""Text from users and the cluster on its way into a log line: one line, control characters shown escaped.

A pause reason, a user name, a datacenter or rack name, a stored row's text can hold a line break or an
escape sequence; written into a log as it is, it could start a line that reads as another log record (log
forging) or drive the terminal that shows the log. `log_safe` writes each such character as its Python escape
(`\\n`, `\\x1b`, `\\u2028`), so the text is kept, on the one line of its record.
"""

from __future__ import annotations

import unicodedata

__all__ = ["log_safe"]

# Line and paragraph separators end a line in some readers although they are not control characters.
_LINE_BREAKS = {"\u2028", "\u2029"}


def _escaped(ch: str) -> str:
    if ch in _LINE_BREAKS or unicodedata.category(ch) == "Cc":
        return ch.encode("unicode_escape").decode("ascii")
    return ch


def log_safe(value: object) -> str:
    """`value` as text for a log line: control characters and line breaks escaped, everything else as it is."""
    text = str(value)
    if text.isprintable():  # the common case: nothing to escape (also no line break)
        return text
    return "".join(_escaped(ch) for ch in text)
