"""A one-line key bar: the shown bindings of the screen, as `key Description` pairs.

Textual's Footer builds one widget per key (a dozen widgets, each styled at start-up); a key bar
that never changes while a screen is up is a single Static — a third of the cockpit's first frame.
"""

from __future__ import annotations

from textual.content import Content
from textual.widgets import Static

KEY_NAMES = {"question_mark": "?", "slash": "/", "exclamation_mark": "!", "colon": ":", "escape": "Esc", "enter": "⏎", "ctrl+p": "^p", "ctrl+s": "^s"}


KEEP = frozenset({"help", "quit"})
"""Binding ids kept when the bar is too narrow for every key: `?` lists the rest."""


class KeyBar(Static):
    """Renders the screen's active, shown bindings (plus the palette key) on mount and on resume; when
    they do not fit the width, the last ones give way (never `?` Help, which lists them all, nor `q` Quit)."""

    DEFAULT_CSS = """
    KeyBar { dock: bottom; height: 1; background: $panel; color: $text-muted; padding: 0 1; }
    """

    def on_mount(self) -> None:
        self.call_after_refresh(self.refresh_keys)

    def refresh_keys(self) -> None:
        parts: list[tuple[bool, Content]] = []
        seen: set[str] = set()
        for key, active in self.screen.active_bindings.items():
            binding = active.binding
            if not binding.show or not binding.description or binding.action in seen:
                continue
            seen.add(binding.action)
            label = KEY_NAMES.get(key, key)
            dims = getattr(self.screen, "dims_binding", None)  # e.g. a write key under --readonly
            style = "b $accent" if active.enabled and not (dims and dims(binding)) else "$text-disabled"
            parts.append((binding.id in KEEP, Content.from_markup(f"[{style}]$k[/] $d", k=label, d=binding.description)))
        parts.append((True, Content.from_markup("[b $accent]^p[/] palette")))
        room = self.content_size.width or self.app.size.width - 2
        while sum(len(c.plain) + 2 for _, c in parts) - 2 > room and any(not keep for keep, _ in parts):
            drop = max(i for i, (keep, _) in enumerate(parts) if not keep)
            del parts[drop]
        self.update(Content("  ").join(c for _, c in parts))

    def on_resize(self) -> None:
        self.refresh_keys()
