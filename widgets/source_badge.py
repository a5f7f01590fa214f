"""A freshness badge for one data source: `GPUs ● as of 12:00:01` or `GPUs ⚠ STALE as of …`."""

from __future__ import annotations

from datetime import datetime

from textual.content import Content


def source_badge(name: str, taken_at: datetime | None, now: datetime, *, stale_after_s: float, error: str | None = None, paused: bool = False,
                 seen_at: datetime | None = None) -> Content:
    """Badge text for a source last read at `taken_at` (None: never read yet).

    Stale when the last read failed or is older than `stale_after_s`; the glyph and the word say so
    (colour is never the only signal). `paused`: the caller stopped polling on purpose (hidden mode,
    a modal on top) — an old reading is then not a failure. `seen_at`: a later reading that changed
    nothing (the stamp shown may lag it): the age is judged on it.
    """
    if taken_at is None:
        if error:
            return Content.from_markup("$n [$error]✗ no data[/] [$text-muted]($e)[/]", n=name, e=error)
        return Content.from_markup("$n [$text-muted]… loading[/]", n=name)
    stamp = taken_at.astimezone().strftime("%H:%M:%S")
    age = (now - max(taken_at, seen_at or taken_at)).total_seconds()
    if paused and not error:
        return Content.from_markup("$n [$text-muted]⏸ paused[/] as of $s", n=name, s=stamp)
    if error or age > stale_after_s:
        why = error or f"no reading for {age:.0f}s"
        return Content.from_markup("$n [$warning b]⚠ STALE[/] as of $s [$text-muted]($w)[/]", n=name, s=stamp, w=why)
    return Content.from_markup("$n [$success]●[/] as of $s", n=name, s=stamp)
