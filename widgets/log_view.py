"""A log pane that never cuts a line: horizontal scroll or wrap, optional timestamps, search matches
highlighted, a bounded number of lines kept.

`LogLines` is the model (no Textual): the kept lines, how a new tail joins them, and search.
`LogView` draws it line by line (a ScrollView, so only the visible rows are rendered), in one of two
layouts: one row per line with a horizontal scrollbar, or wrapped at the pane's width.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rich.cells import cell_len, get_character_cell_size
from rich.style import Style
from rich.text import Text
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from backend.errors import terminal_safe

MAX_LINES = 5000
"""Lines kept in memory; the oldest go first."""

STAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)) ")
"""The RFC 3339 prefix `docker logs -t` (and the facade's `timestamps=True`) puts before a line."""

@dataclass(frozen=True, slots=True)
class LogLine:
    """One line of output and, when the runtime recorded it, the time it was received."""

    stamp: str | None
    """Short form `MM-DD HH:MM:SS.mmm` (UTC) of the runtime's receive time; None when there is none."""
    text: str
    """The line as the engine wrote it, tabs expanded and control characters shown as escapes (`\\x1b`)."""

    @classmethod
    def parse(cls, raw: str) -> LogLine:
        match = STAMP.match(raw)
        text = raw[match.end():] if match else raw
        # Control characters (colour codes, carriage returns, titles) would drive the terminal: the one
        # output sanitizer shows them, and search, save and copy see what is shown.
        text = terminal_safe(text.expandtabs(), one_line=True)
        return cls(short_stamp(match.group(1)) if match else None, text)


def short_stamp(stamp: str) -> str:
    """`2026-12-01T13:51:15.123456789Z` → `12-01 13:51:15.123` (the date and time as written, UTC)."""
    date, _, clock = stamp.partition("T")
    clock = re.sub(r"(Z|[+-]\d\d:\d\d)$", "", clock)
    whole, _, fraction = clock.partition(".")
    return f"{date[5:]} {whole}" + (f".{fraction[:3].ljust(3, '0')}" if fraction else "")


class LogLines:
    """The kept lines of one log, at most `limit` of them."""

    def __init__(self, limit: int = MAX_LINES) -> None:
        self.limit = limit
        self.lines: list[LogLine] = []
        self._raw: list[str] = []
        """The raw text of the kept lines, for joining the next tail to them."""
        self.dropped = 0
        """Lines dropped from the front since the start (keeps match positions stable for the view)."""

    def take_tail(self, tail: list[str]) -> tuple[int, bool]:
        """Join the latest tail: append only what is new when the tail overlaps the kept end, else
        start over (the container was replaced). Returns (lines appended, started over)."""
        overlap = self._new_part(tail)
        reset = overlap is None
        new = tail if overlap is None else overlap
        if reset:
            self.dropped += len(self.lines)
            self.lines, self._raw = [], []
        self._raw.extend(new)
        self.lines.extend(LogLine.parse(raw) for raw in new)
        excess = len(self.lines) - self.limit
        if excess > 0:
            del self.lines[:excess], self._raw[:excess]
            self.dropped += excess
        return len(new), reset

    def _new_part(self, tail: list[str]) -> list[str] | None:
        """The lines of `tail` after its longest overlap with the kept end; None when none overlaps."""
        if not self._raw:
            return tail
        if not tail:
            return []
        last = self._raw[-1]
        for k in range(len(tail) - 1, -1, -1):
            if tail[k] == last and tail[: k + 1] == self._raw[-(k + 1):]:
                return tail[k + 1:]
        return None

    def matching(self, pattern: re.Pattern[str]) -> list[int]:
        """Absolute numbers of the kept lines whose text matches."""
        return [self.dropped + i for i, line in enumerate(self.lines) if pattern.search(line.text)]

    def find(self, pattern: re.Pattern[str], after: int | None, forward: bool = True) -> int | None:
        """The next (or previous) matching line from absolute line `after`, wrapping around like
        less and vim do; None when no kept line matches."""
        hits = self.matching(pattern)
        if not hits:
            return None
        if after is None:
            return hits[-1] if not forward else hits[0]
        if forward:
            return next((h for h in hits if h > after), hits[0])
        return next((h for h in reversed(hits) if h < after), hits[-1])

    @property
    def has_stamps(self) -> bool:
        return any(line.stamp is not None for line in self.lines)


def search_pattern(query: str) -> re.Pattern[str] | None:
    """Plain text, case-insensitive unless the query has a capital letter (vim's smartcase)."""
    if not query:
        return None
    return re.compile(re.escape(query), 0 if any(c.isupper() for c in query) else re.IGNORECASE)


def _chunks(text: str, width: int) -> list[tuple[int, int]]:
    """Character ranges of `text` that each fit in `width` cells (wide characters never split)."""
    if width <= 0 or not text:
        return [(0, len(text))]
    if text.isascii():
        return [(start, min(start + width, len(text))) for start in range(0, len(text), width)]
    out, start, used = [], 0, 0
    for index, char in enumerate(text):
        size = get_character_cell_size(char)
        if used + size > width and index > start:
            out.append((start, index))
            start, used = index, 0
        used += size
    out.append((start, len(text)))
    return out


class LogView(ScrollView, can_focus=True):
    """Draws a `LogLines`. `wrap`, `show_time`, `pattern` and `current` (the line of the current
    match, as an absolute number: kept index + `lines.dropped`) are set by the owner, then `relayout()`."""

    COMPONENT_CLASSES = {"log-view--stamp", "log-view--match", "log-view--current"}
    DEFAULT_CSS = """
    LogView { background: $surface; color: $text; overflow: auto auto; }
    LogView > .log-view--stamp { color: $text-muted; }
    LogView > .log-view--match { background: $warning 40%; }
    LogView > .log-view--current { background: $warning; color: $background; text-style: bold; }
    """

    def __init__(self, lines: LogLines, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.log_lines = lines
        self.wrap = False
        self.show_time = False
        self.pattern: re.Pattern[str] | None = None
        self.current: int | None = None
        self._rows: list[tuple[int, int, int]] = []
        """Visible rows: (kept line index, first char, end char) of the displayed string."""
        self._first_row: list[int] = []
        self._laid_width = -1

    def display_text(self, index: int) -> str:
        line = self.log_lines.lines[index]
        if self.show_time:
            return f"{line.stamp or ' ' * 18} {line.text}"
        return line.text

    def relayout(self) -> None:
        """Recompute the rows (after new lines, a toggle, or a new width) and the scrollable size."""
        width = max(1, self.scrollable_content_region.width)
        rows: list[tuple[int, int, int]] = []
        first: list[int] = []
        widest = 0
        for index in range(len(self.log_lines.lines)):
            text = self.display_text(index)
            first.append(len(rows))
            if self.wrap:
                rows.extend((index, start, end) for start, end in _chunks(text, width))
            else:
                rows.append((index, 0, len(text)))
                widest = max(widest, cell_len(text))
        self._rows, self._first_row, self._laid_width = rows, first, width
        self.virtual_size = Size(width if self.wrap else widest, len(rows))
        self.refresh()

    def on_resize(self) -> None:
        self._rewrap()

    def watch_show_vertical_scrollbar(self, shown: bool) -> None:
        # Wrapping can bring the vertical scrollbar (more rows than the pane is high) without resizing
        # the widget: rows laid out for the width before it lost 2 characters at every wrap point
        # under the scrollbar until another key re-laid the view out.
        self.call_after_refresh(self._rewrap)

    def _rewrap(self) -> None:
        """Lay the wrapped rows out again when the width they were laid out for is not the pane's now."""
        if self.wrap and self.scrollable_content_region.width != self._laid_width:
            self.relayout()

    def row_of(self, absolute: int) -> int | None:
        """First row of a line given by its absolute number; None once it has been dropped."""
        index = absolute - self.log_lines.dropped
        return self._first_row[index] if 0 <= index < len(self._first_row) else None

    def visible_lines(self) -> list[int]:
        """Kept indexes of the lines shown (wholly or in part) right now."""
        top = self.scroll_offset.y
        rows = self._rows[top: top + self.scrollable_content_region.height]
        return sorted({row[0] for row in rows})

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        width = self.scrollable_content_region.width
        base = self.rich_style
        row = scroll_y + y
        if row >= len(self._rows):
            return Strip.blank(width, base)
        index, start, end = self._rows[row]
        full = self.display_text(index)
        piece = Text(full[start:end], style=base, no_wrap=True, end="")
        stamp_end = 18 if self.show_time else 0
        if start < stamp_end:
            piece.stylize(self.get_component_rich_style("log-view--stamp"), 0, stamp_end - start)
        if self.pattern is not None:
            current = self.current is not None and index == self.current - self.log_lines.dropped
            style: Style = self.get_component_rich_style("log-view--current" if current else "log-view--match")
            for match in self.pattern.finditer(full, max(stamp_end + 1 if self.show_time else 0, 0)):
                if match.end() > start and match.start() < end:
                    piece.stylize(style, max(match.start(), start) - start, min(match.end(), end) - start)
        strip = Strip(piece.render(self.app.console), cell_len(piece.plain))
        if not self.wrap:
            strip = strip.crop_extend(scroll_x, scroll_x + width, base)
        else:
            strip = strip.extend_cell_length(width, base)
        return strip.apply_offsets(scroll_x, row)
