"""A pod's engine log: follow, search, wrap, timestamps, save to a file, copy (OSC 52).

Lines are never cut: one row per line with horizontal scrolling, or wrapped (`w`). The timestamps
(`t`) are the runtime's own receive times (Docker's, as `docker logs -t`); a runtime that records
none says so. At most `MAX_LINES` lines are kept; while following, the last `TAIL_LINES` are re-read
every second and only what is new is appended.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.widgets import Footer, Input, Label, Static

from c3.screens.base import CockpitModal, describe_error
from widgets.log_view import MAX_LINES, LogLines, LogView, search_pattern

TAIL_LINES = 500
FOLLOW_PERIOD_S = 1.0
COPY_CAP_BYTES = 64 * 1024
"""OSC 52 goes through the terminal (and tmux, and SSH); many cap it near 100 KB of base64."""


def save_text(path: Path, text: str, overwrite: bool) -> Path:
    """Write `text` to `path` whole or not at all: a temporary file beside it, then a link (which
    fails if the path exists) or, when `overwrite`, a rename over it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        if overwrite:
            os.replace(tmp, path)
        else:
            os.link(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


class LogsModal(CockpitModal):
    """Reads `pod_logs(name, TAIL_LINES, timestamps=True)`; re-reads every second while following."""

    BINDINGS = [
        Binding("escape", "escape", "Close", id="logs_close"),
        Binding("q", "close", "Close", show=False, id="logs_close_q"),
        Binding("f", "toggle_follow", "Follow", id="logs_follow", tooltip="Re-read the log every second"),
        Binding("slash", "search", "Search", id="logs_search", tooltip="Find text; n / N for the next and previous match"),
        Binding("n", "next_match", "Next", id="logs_next", show=False),
        Binding("N", "previous_match", "Previous", id="logs_previous", show=False),
        Binding("w", "toggle_wrap", "Wrap", id="logs_wrap", tooltip="Wrap long lines (else scroll sideways)"),
        Binding("t", "toggle_time", "Time", id="logs_time", tooltip="The runtime's receive time of each line"),
        Binding("s", "save", "Save", id="logs_save", tooltip="Write the kept lines to a file"),
        Binding("y", "copy", "Copy", id="logs_copy", tooltip="Copy the visible lines to the clipboard (OSC 52)"),
        Binding("g", "top", "Top", show=False),
        Binding("G", "bottom", "End", show=False),
    ]

    def __init__(self, pod: str) -> None:
        super().__init__()
        self.pod = pod
        self.follow = True
        self.lines = LogLines(MAX_LINES)
        self.query_text = ""
        self.note = ""
        self._in_flight = False
        self._prompt: str | None = None
        """'search' or 'save' while the prompt line is open."""
        self._confirm_path: Path | None = None
        """A path that exists and that one more Enter will overwrite."""

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="logs"):
            yield Static(id="logs-title")
            yield LogView(self.lines, id="log")
            with Horizontal(id="logs-prompt"):
                yield Label("", id="logs-prompt-label")
                yield Input(id="logs-input")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#logs-prompt").display = False
        self.view.focus()
        self._title()
        self.fetch()
        self._timer = self.set_interval(FOLLOW_PERIOD_S, self._tick)

    @property
    def view(self) -> LogView:
        return self.query_one(LogView)

    # -- the title line: what is on, what the last action did --------------------------------------

    def _title(self) -> None:
        view = self.view
        state = "[$success]following[/]" if self.follow else "[$text-muted]paused[/]"
        flags = f"wrap {'on' if view.wrap else 'off'} · time {'on' if view.show_time else 'off'}"
        search = ""
        if view.pattern is not None:
            hits = self.lines.matching(view.pattern)
            at = f"{hits.index(view.current) + 1}/{len(hits)}" if view.current in hits else f"{len(hits)}"
            search = f" · /{self.query_text} {at}" if hits else f" · /{self.query_text} no match"
        kept = len(self.lines.lines)
        self.query_one("#logs-title", Static).update(Content.from_markup(
            f"[b]logs[/] $p  {state}  [$text-muted]{kept} lines (≤{MAX_LINES}) · {flags}$s[/]  $n",
            p=self.pod, s=search, n=self.note))

    def _say(self, note: str) -> None:
        self.note = note
        self._title()

    # -- reading ------------------------------------------------------------------------------------

    def _tick(self) -> None:
        if self.follow and self.is_active:
            self.fetch()

    def fetch(self) -> None:
        if self._in_flight:
            return
        self._in_flight = True
        self.call(self.services.pod_logs, self.pod, TAIL_LINES, True, done=self._landed, failed=self._failed, group="logs")

    def _landed(self, tail: list[str]) -> None:
        self._in_flight = False
        view = self.view
        at_end = view.scroll_offset.y >= view.max_scroll_y
        added, _reset = self.lines.take_tail(tail)
        if not added and not _reset:
            return
        view.relayout()
        if self.follow and at_end:
            # After the next layout: the new virtual size is what lets it scroll that far.
            view.call_after_refresh(view.scroll_end, animate=False, immediate=True, x_axis=False)
        self._title()

    def _failed(self, error: BaseException) -> None:
        self._in_flight = False
        self._say(f"✗ {describe_error(error)}")

    # -- toggles ------------------------------------------------------------------------------------

    def action_toggle_follow(self) -> None:
        self.follow = not self.follow
        self._title()
        if self.follow:
            self.fetch()

    def action_toggle_wrap(self) -> None:
        self._relayout_keeping_place(wrap=not self.view.wrap)

    def action_toggle_time(self) -> None:
        if not self.lines.has_stamps:
            self._say("this runtime records no time per line")
            return
        self._relayout_keeping_place(show_time=not self.view.show_time)

    def _relayout_keeping_place(self, **change: bool) -> None:
        """Change the layout and keep the top line where it was."""
        view = self.view
        top = view._rows[view.scroll_offset.y][0] + self.lines.dropped if view._rows else None
        for key, value in change.items():
            setattr(view, key, value)
        view.relayout()
        if top is not None and (row := view.row_of(top)) is not None:
            view.scroll_to(0 if view.wrap else None, row, animate=False, immediate=True)
        self._say("")

    def action_top(self) -> None:
        self.view.scroll_home(animate=False, immediate=True)

    def action_bottom(self) -> None:
        self.view.scroll_end(animate=False, immediate=True)

    # -- search -------------------------------------------------------------------------------------

    def action_search(self) -> None:
        self._open_prompt("search", "/", self.query_text)

    def action_next_match(self) -> None:
        self._jump(forward=True)

    def action_previous_match(self) -> None:
        self._jump(forward=False)

    def _jump(self, *, forward: bool) -> None:
        view = self.view
        if view.pattern is None:
            self._say("press / to search first")
            return
        found = self.lines.find(view.pattern, view.current, forward)
        view.current = found
        if found is not None and (row := view.row_of(found)) is not None:
            # Reading a match means staying there: stop following so the next tail does not scroll away.
            self.follow = False
            view.scroll_to(None, max(0, row - view.scrollable_content_region.height // 2), animate=False, immediate=True)
        view.refresh()
        self._say("")

    # -- save and copy ------------------------------------------------------------------------------

    def default_path(self) -> Path:
        from backend.views.preferences import saved_log_path

        return saved_log_path(self.pod, self.cockpit.clock().strftime("%Y%m%d-%H%M%S"))

    def action_save(self) -> None:
        self._confirm_path = None
        self._open_prompt("save", "save to", str(self.default_path()))

    def _export(self, indexes: list[int] | None = None) -> str:
        view = self.view
        chosen = range(len(self.lines.lines)) if indexes is None else indexes
        return "".join(view.display_text(i) + "\n" for i in chosen)

    def _save(self, raw: str) -> None:
        path = Path(raw).expanduser()
        if not path.is_absolute():
            path = Path.cwd() / path
        if path.is_dir():
            self._say(f"✗ {path} is a folder — give a file name")
            return
        overwrite = self._confirm_path == path
        if path.exists() and not overwrite:
            self._confirm_path = path
            self.query_one("#logs-prompt-label", Label).update("exists — Enter overwrites, Esc keeps it:")
            return
        self._close_prompt()
        text = self._export()
        count = len(self.lines.lines)
        self.call(save_text, path, text, overwrite, done=lambda p: self._say(f"✓ saved {count} lines to {p}"),
                  failed=lambda e: self._say(f"✗ not saved: {e.strerror if isinstance(e, OSError) and e.strerror else e} ({path})"), group="logs-save")

    def action_copy(self) -> None:
        indexes = self.view.visible_lines()
        if not indexes:
            self._say("nothing to copy")
            return
        text = self._export(indexes)
        data = text.encode("utf-8")
        cut = len(data) > COPY_CAP_BYTES
        if cut:
            text = data[-COPY_CAP_BYTES:].decode("utf-8", errors="ignore")
        self.app.copy_to_clipboard(text)
        self._say(f"✓ copied {len(indexes)} visible lines" + (f" (the last {COPY_CAP_BYTES // 1024} KiB)" if cut else "") + " via OSC 52")

    # -- the prompt line (search text, save path) ---------------------------------------------------

    def _open_prompt(self, kind: str, label: str, value: str) -> None:
        self._prompt = kind
        self.query_one("#logs-prompt-label", Label).update(label)
        self.query_one("#logs-prompt").display = True
        field = self.query_one("#logs-input", Input)
        field.value = value
        field.cursor_position = len(value)
        field.focus()

    def _close_prompt(self) -> None:
        self._prompt = None
        self._confirm_path = None
        self.query_one("#logs-prompt").display = False
        self.view.focus()

    @on(Input.Submitted, "#logs-input")
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if self._prompt == "search":
            self._close_prompt()
            self.query_text = event.value
            self.view.pattern = search_pattern(event.value)
            self.view.current = None
            if self.view.pattern is None:
                self.view.refresh()
                self._say("")
            else:
                self._jump(forward=False)  # the newest match first, as a log is read from its end
        elif self._prompt == "save":
            if not event.value.strip():
                self._say("✗ no file name given")
                return
            self._save(event.value.strip())

    @on(Input.Changed, "#logs-input")
    def _changed(self, event: Input.Changed) -> None:
        if self._prompt == "save" and self._confirm_path is not None:
            self._confirm_path = None
            self.query_one("#logs-prompt-label", Label).update("save to")

    def action_escape(self) -> None:
        if self._prompt is not None:
            self._close_prompt()
            self._say("")
            return
        self.dismiss(None)

    def action_close(self) -> None:
        self.dismiss(None)
