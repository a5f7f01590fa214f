"""Showing user data in a message without ever building an unbounded `repr()`."""

from __future__ import annotations

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
