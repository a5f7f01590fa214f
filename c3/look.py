"""How the cockpit looks on terminals that cannot show everything: 16 colours, NO_COLOR, no Unicode.

16 colours. Textual's default theme downgrades badly: its accent and warning (#ffa62b) and its error
(#ba3c5b) are all nearest to bright red in the 16-colour palette, so every dialog border looked like an
error. `ANSI_THEME` uses the terminal's own 16 colours by name instead — blue, cyan, yellow, green, and
red for errors only — chosen when the colour depth is 16 (`--color 16`, or a terminal whose TERM says
so) and under NO_COLOR (where Textual then strips colour entirely instead of painting in greys).

ASCII. `--ascii`, `C3_ASCII=1`, or a locale that is not UTF-8 (as tmux decides it): every character
drawn is mapped to ASCII by a line filter — box borders to `+ - |`, ✓ ✗ ● ▶ to `v x * >`, bars and
braille to `# = . :` — so nothing depends on the font or the terminal's Unicode tables. `C3_ASCII=0`
keeps Unicode whatever the locale says.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from functools import lru_cache

from rich.cells import get_character_cell_size
from rich.segment import Segment
from textual.color import Color
from textual.filter import LineFilter
from textual.theme import BUILTIN_THEMES

from backend.errors import UNSAFE_LINE as _UNSAFE
from backend.errors import terminal_safe

ANSI_THEME = dataclasses.replace(BUILTIN_THEMES["ansi-dark"], name="c3-ansi", accent="ansi_cyan")
"""Textual's ANSI theme with a cyan accent (its own accent is green, which reads as "ok")."""


def wants_ansi_theme(color_system: str | None, detected: str | None, no_color: bool) -> bool:
    """16 colours asked for (`--color 16` sets "standard"), detected on a real terminal, or NO_COLOR."""
    return no_color or color_system in ("standard", "windows") or (color_system == "auto" and detected in ("standard", "windows"))


def no_color() -> bool:
    """The NO_COLOR convention (no-color.org): a property of the user's terminal, not c3's configuration."""
    return "NO_COLOR" in os.environ


def wants_ascii(environ: Mapping[str, str] | None = None, forced: bool | None = None) -> bool:
    """`C3_ASCII=1` / `C3_ASCII=0` decide (the settings; `forced`); else ASCII unless the locale
    (LC_ALL, LC_CTYPE, LANG, in that order, as the C library reads them) names UTF-8."""
    if environ is None:
        from backend.views.preferences import display_settings

        environ = os.environ  # the terminal's locale: the C library's convention, not c3's configuration
        forced = display_settings().ascii if forced is None else forced
    elif forced is None and environ.get("C3_ASCII", "").strip() in ("1", "0"):
        forced = environ["C3_ASCII"].strip() == "1"
    if forced is not None:
        return forced
    if _coerced(environ):
        return True
    locale = next((environ[name] for name in ("LC_ALL", "LC_CTYPE", "LANG") if environ.get(name)), "")
    return "utf-8" not in locale.lower() and "utf8" not in locale.lower()


def _coerced(environ: Mapping[str, str]) -> bool:
    """Python itself sets LC_CTYPE=C.UTF-8 when it starts under the C locale (PEP 538), which hides
    what the terminal's locale was: LC_CTYPE=C.UTF-8 with no LC_ALL and LANG unset or C is that."""
    return not environ.get("LC_ALL") and environ.get("LC_CTYPE") == "C.UTF-8" and environ.get("LANG", "C") in ("C", "POSIX", "")


_HORIZONTAL = "─━═┄┅┈┉╌╍╴╶╸╺╼╾▔▁"
_VERTICAL = "│┃║┆┇┊┋╎╏╵╷╹╻╽╿▏▕▎▍▐▌"
_TABLE = {
    **{c: "-" for c in _HORIZONTAL},
    **{c: "|" for c in _VERTICAL},
    "✓": "v", "✔": "v", "✗": "x", "✘": "x", "×": "x", "●": "*", "•": "*", "○": "o", "◐": "~", "◑": "~", "◌": "o",
    "▶": ">", "▸": ">", "►": ">", "◀": "<", "◂": "<", "▲": "^", "▼": "v", "⚠": "!", "⏸": "=", "⏎": "<",
    "·": ".", "…": ".", "—": "-", "–": "-", "−": "-", "→": ">", "←": "<", "↑": "^", "↓": "v", "↔": "-",
    "≤": "<", "≥": ">", "≈": "~", "°": "o", "µ": "u", "‘": "'", "’": "'", "“": '"', "”": '"', "\u00a0": " ",
    "█": "#", "▉": "#", "▊": "#", "▋": "#", "▓": "#", "▒": ":", "░": ".",
    "▂": ".", "▃": ":", "▄": "=", "▅": "=", "▆": "#", "▇": "#", "▀": "-",
}


@lru_cache(maxsize=4096)
def ascii_char(char: str) -> str:
    """One character as ASCII of the same width in cells."""
    if char.isascii():
        return char
    if char in _TABLE:
        return _TABLE[char]
    code = ord(char)
    if 0x2500 <= code <= 0x257F:  # box drawing not listed above: corners and junctions
        return "+"
    if 0x2800 <= code <= 0x28FF:  # braille graphs: by how many dots are set
        dots = bin(code - 0x2800).count("1")
        return " " if dots == 0 else "." if dots <= 2 else ":" if dots <= 4 else "|"
    return "?" * max(1, get_character_cell_size(char))


@lru_cache(maxsize=4096)
def to_ascii(text: str) -> str:
    if text.isascii():
        return text
    return "".join(ascii_char(char) for char in text)


class AsciiFilter(LineFilter):
    """Every segment drawn goes through `to_ascii` (styles kept)."""

    def apply(self, segments: list[Segment], background: Color) -> list[Segment]:
        return [segment if segment.text.isascii() else Segment(to_ascii(segment.text), segment.style, segment.control) for segment in segments]


def shown(text: str) -> str:
    """A name, value or message from a file, a user or a remote system, as one line for the cockpit:
    control characters, CR, LF and BEL shown as escapes (`backend.errors.terminal_safe`). Textual
    drops CR and BEL and breaks lines at LF before the line filter below sees them; values shown
    in a cell, a list entry, a plan line or a toast go through this first."""
    return terminal_safe(text, one_line=True)


class SafeTextFilter(LineFilter):
    """The cockpit's half of the one output sanitizer (`backend.errors.terminal_safe`, the CLI's
    too): every segment drawn has its control characters shown as escapes (`\\x1b`) before Textual
    writes it, so a name or value from a file, a user or a remote system can neither set the
    window title nor clear the screen, whichever widget shows it. Textual itself passes ESC and C1
    through (Rich strips only BEL, BS, VT, FF and CR). A shown escape is wider than the
    zero cells the layout gave the raw character, so the line is cut back to its width: what
    follows on that line may be cut, the layout never moves."""

    def apply(self, segments: list[Segment], background: Color) -> list[Segment]:
        if not any(not segment.control and _UNSAFE.search(segment.text) for segment in segments):
            return segments
        width = Segment.get_line_length(segments)
        shown = [segment if segment.control else Segment(terminal_safe(segment.text, one_line=True), segment.style) for segment in segments]
        return list(Segment.adjust_line_length(shown, width))
