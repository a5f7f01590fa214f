"""Text meters drawn with block characters (no braille: many fonts render it as boxes).

Pure functions returning Textual content markup, so one `Static` holds a whole panel and a refresh
is a single update. Colour is never the only signal: every bar has a number beside it.
"""

from __future__ import annotations

from collections.abc import Sequence

SPARK_CHARS = "▁▂▃▄▅▆▇█"


def level_style(pct: float, warn: float = 80.0, crit: float = 95.0) -> str:
    """Theme variable for a percentage: success below `warn`, warning below `crit`, else error."""
    if pct >= crit:
        return "$error"
    if pct >= warn:
        return "$warning"
    return "$success"


def bar(pct: float, width: int, *, warn: float = 80.0, crit: float = 95.0) -> str:
    """A `█…░…` bar `width` cells wide, coloured by level."""
    pct = max(0.0, min(100.0, pct))
    filled = round(pct / 100.0 * width)
    style = level_style(pct, warn, crit)
    return f"[{style}]{'█' * filled}[/][$text-muted]{'░' * (width - filled)}[/]"


def sparkline(values: Sequence[float], width: int, *, top: float = 100.0) -> str:
    """The last `width` values as `▁…█`, left-padded with blanks when history is short."""
    recent = list(values)[-width:]
    cells = []
    for value in recent:
        frac = max(0.0, min(1.0, value / top)) if top else 0.0
        cells.append(SPARK_CHARS[min(len(SPARK_CHARS) - 1, int(frac * (len(SPARK_CHARS) - 1) + 0.5))])
    return " " * (width - len(cells)) + "".join(cells)


def gib(mib: int | None) -> str:
    """MiB as `23.6` GiB text (`?` when unknown)."""
    return "?" if mib is None else f"{mib / 1024:.1f}"
