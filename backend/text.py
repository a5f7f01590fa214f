"""Showing user data in a message without ever building an unbounded `repr()`."""

from __future__ import annotations

import re
import reprlib
from typing import Any

_repr = reprlib.Repr()
_repr.maxlevel = 2
_repr.maxlist = _repr.maxtuple = _repr.maxset = _repr.maxdict = 4
_repr.maxstring = _repr.maxother = _repr.maxlong = 40


def show(value: Any, limit: int = 40) -> str:
    """`value` as text of at most `limit` characters: strings as they are, anything else through a
    bounded repr (a 5,001-digit integer or a nested structure costs no more than a short one)."""
    if isinstance(value, str):
        text = value
    elif isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
        text = f"<an integer of about {int(value.bit_length() * 0.30103)} digits>"
    else:
        try:
            text = _repr.repr(value)
        except Exception:  # noqa: BLE001 - a hostile __repr__ must not turn an error message into a crash
            text = f"<{type(value).__name__}>"
    # Control characters and lone surrogates are escaped: one line, and nothing a terminal acts on.
    text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text[: 4 * limit + 4])
    return text if len(text) <= limit else text[: max(1, limit - 3)] + "..."


# What a terminal acts on instead of showing: C0 controls (ESC starts every escape sequence, BEL ends
# OSC titles, CR overwrites a line), DEL, C1 controls (U+009B is a one-byte CSI), the bidirectional
# and zero-width format characters that reorder or hide text, and lone surrogates (undecodable bytes).
# Tab and newline stay: output is lines of text; `one_line` escapes newline too.
_UNSAFE = "\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ud800-\udfff"
_UNSAFE_TEXT = re.compile(f"[{_UNSAFE}]")
_UNSAFE_LINE = re.compile(f"[\t\n{_UNSAFE}]")


def _visible(match: re.Match[str]) -> str:
    return repr(match.group())[1:-1]  # "\x1b" → `\x1b`, "\n" → `\n`, "\u202e" → `\u202e`


def terminal_safe(text: str, *, one_line: bool = False) -> str:
    """`text` with every control character and escape shown as its Python escape (`\\x1b`), so a
    name or value from a file, a user or a remote system can neither drive the terminal (titles,
    clearing, cursor moves) nor, with `one_line`, split a one-line message."""
    pattern = _UNSAFE_LINE if one_line else _UNSAFE_TEXT
    return pattern.sub(_visible, text) if pattern.search(text) else text
