"""A block chart over time: one column per time bucket, eighth-block bars several rows high, the scale
on the left and a time axis (`-5m … now`) beneath. Pure functions returning Content: no I/O.

Block characters, not braille: many terminal fonts draw braille as boxes (see widgets/meters.py).
A bucket with no reading stays blank (a gap is shown as a gap); a reading of zero is a `·`. The value of a
bucket is its highest reading, so a one-second spike is not averaged away at a ten-minute window.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence

from textual.content import Content

EIGHTHS = " ▁▂▃▄▅▆▇█"
LABEL_W = 7
"""Width of the scale column (`100%`, `1.2k`, `350W`) plus its separator."""


def short_number(value: float) -> str:
    """`0`, `7.5`, `42`, `1.2k`, `35k`: at most four characters."""
    if value >= 10_000:
        return f"{value / 1000:.0f}k"
    if value >= 1000:
        return f"{value / 1000:.1f}k"
    if value >= 10 or value == int(value):
        return f"{value:.0f}"
    return f"{value:.1f}"


def nice_top(values: Sequence[float], floor: float = 1.0) -> float:
    """A round upper bound for the scale (1, 2, 5 × 10ⁿ) at or above the largest value."""
    peak = max([floor, *values])
    magnitude = 10 ** math.floor(math.log10(peak))
    for step in (1, 2, 5, 10):
        if peak <= step * magnitude:
            return float(step * magnitude)
    return peak


def buckets(points: Sequence[tuple[float, float]], now: float, window_s: float, width: int, *, hold_s: float = 3.0) -> list[float | None]:
    """The highest reading in each of `width` equal time slices ending at `now` (None: no reading).

    A slice narrower than the sources' cadence has no reading of its own between two that do; it
    holds the last reading for up to `hold_s` (the slowest source reads every 2 s), so a steady
    series is drawn steady and only a real gap — a source that stopped — stays blank."""
    out: list[float | None] = [None] * width
    if width <= 0 or window_s <= 0:
        return out
    start = now - window_s
    slice_s = window_s / width
    latest: list[float | None] = [None] * width
    first = bisect.bisect_left(points, (start, -math.inf))  # points are in time order: skip what is older
    for when, value in points[first:]:
        if when > now + 1e-6:
            break
        if when < start:  # out of order (the bisect assumes time order): still never drawn
            continue
        column = min(width - 1, int((when - start) / slice_s))
        current = out[column]
        out[column] = value if current is None else max(current, value)
        latest[column] = when
    last: tuple[float, float] | None = None
    for column in range(width):
        if out[column] is not None:
            last = (latest[column], out[column])  # type: ignore[assignment]
        elif last is not None and start + column * slice_s - last[0] <= hold_s:
            out[column] = last[1]
    return out


def duration_label(seconds: float) -> str:
    """`-30s`, `-5m`, `-1h`."""
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"-{seconds / 3600:.0f}h"
    if seconds >= 60:
        return f"-{seconds / 60:g}m"
    return f"-{seconds:.0f}s"


def time_axis(window_s: float, width: int) -> str:
    """`-5m      -4m  …   now` under a chart `width` columns wide, ticks at round steps."""
    line = [" "] * width
    step = next((s for s in (10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600) if window_s / s <= max(1, width // 10)), window_s)
    tick = window_s
    while tick > 0:
        label = duration_label(tick)
        column = int((1 - tick / window_s) * width)
        if column + len(label) <= width - 4 and all(c == " " for c in line[max(0, column - 1): column + len(label) + 1]):
            line[column: column + len(label)] = label
        tick -= step
    line[width - 3:] = "now"
    return "".join(line)


def chart(
    points: Sequence[tuple[float, float]],
    *,
    now: float,
    window_s: float,
    width: int,
    height: int = 2,
    top: float | None = None,
    style: str = "$accent",
) -> list[Content]:
    """`height` rows of bars, the scale on the first (top) and last (zero) rows."""
    plot_w = max(4, width - LABEL_W)
    cells = buckets(points, now, window_s, plot_w)
    scale = top if top else nice_top([v for v in cells if v is not None])
    rows: list[list[str]] = [[" "] * plot_w for _ in range(height)]
    for column, value in enumerate(cells):
        if value is None:
            continue
        eighths = round(max(0.0, min(1.0, value / scale)) * height * 8) if scale else 0
        if eighths == 0 and value > 0:
            eighths = 1  # something, however small, is not nothing
        for level in range(height):
            fill = max(0, min(8, eighths - (height - 1 - level) * 8))
            rows[level][column] = EIGHTHS[fill] if fill else ("·" if level == height - 1 and value == 0 else " ")
    lines = []
    for n, row in enumerate(rows):
        label = short_number(scale) if n == 0 else ("0" if n == height - 1 else "")
        # (text, style) spans, not markup: parsing markup was half the cost of drawing 88 series
        lines.append(Content.assemble((f"{label:>{LABEL_W - 2}} ▕", "$text-muted"), ("".join(row), style)))
    return lines


def last_value(points: Sequence[tuple[float, float]]) -> float | None:
    """The newest reading (None when there is none)."""
    return points[-1][1] if points else None
