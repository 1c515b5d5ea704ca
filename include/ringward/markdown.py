"""Text from users and the cluster inside Markdown: shown as it is, never read as Markdown or HTML.

Names (keyspaces, datacenters, run ids, paths) reach the approval body and the rendered summaries, which
Airflow renders as Markdown; a name like ``dc`<img src=x onerror=…>``` must stay text. `markdown_escape`
is for running text, `markdown_code` for a code span (backslashes do not escape inside one, so the span's
fence is made longer than any run of backticks in the text instead).
"""

from __future__ import annotations

import re

__all__ = ["markdown_code", "markdown_escape"]

# HTML first (as entities, which every Markdown renderer honours), then what opens Markdown inline syntax
# anywhere in a line: emphasis, code, links and images, tables, strikethrough, headings, escapes.
_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
_SYNTAX = re.compile(r"([\\`*_\[\]|~#!])")
_BACKTICKS = re.compile(r"`+")


def markdown_escape(text: object) -> str:
    """`text` as literal Markdown text, on one line (line breaks become spaces: no new block can start)."""
    plain = " ".join(str(text).splitlines())
    plain = "".join(_ENTITIES.get(ch, ch) for ch in plain)
    return _SYNTAX.sub(r"\\\1", plain)


def markdown_code(text: object) -> str:
    """`text` as a Markdown code span shown verbatim, on one line."""
    plain = " ".join(str(text).splitlines())
    fence = "`" * (max((len(run) for run in _BACKTICKS.findall(plain)), default=0) + 1)
    # A space each side when the text starts or ends with a backtick (CommonMark strips exactly one each).
    pad = " " if plain[:1] == "`" or plain[-1:] == "`" else ""
    return f"{fence}{pad}{plain}{pad}{fence}"
