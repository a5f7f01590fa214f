"""A pod's engine log: the last lines, bounded, following while `f` is on."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.widgets import Footer, Log, Static

from c3.screens.base import CockpitModal, describe_error

TAIL_LINES = 300
MAX_LINES = 2000
FOLLOW_PERIOD_S = 1.0


class LogsModal(CockpitModal):
    """Shows `pod_logs(name, TAIL_LINES)`; re-reads every second while following."""

    BINDINGS = [
        Binding("escape,q", "close", "Close", id="logs_close"),
        Binding("f", "toggle_follow", "Follow on/off", id="logs_follow"),
    ]

    def __init__(self, pod: str) -> None:
        super().__init__()
        self.pod = pod
        self.follow = True
        self._last: list[str] = []
        self._in_flight = False

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="logs"):
            yield Static(id="logs-title")
            yield Log(max_lines=MAX_LINES, id="log", auto_scroll=True)
        yield Footer()

    def on_mount(self) -> None:
        self._title()
        self.fetch()
        self._timer = self.set_interval(FOLLOW_PERIOD_S, self._tick)

    def _title(self, note: str = "") -> None:
        state = "[$success]following[/]" if self.follow else "[$text-muted]paused[/]"
        self.query_one("#logs-title", Static).update(
            Content.from_markup(f"[b]logs[/] $p  {state}  [$text-muted]last {TAIL_LINES} lines · f follow · Esc close $n[/]", p=self.pod, n=note)
        )

    def _tick(self) -> None:
        if self.follow and self.is_active:
            self.fetch()

    def fetch(self) -> None:
        if self._in_flight:
            return
        self._in_flight = True
        self.call(self.services.pod_logs, self.pod, TAIL_LINES, done=self._landed, failed=self._failed, group="logs")

    def _landed(self, lines: list[str]) -> None:
        self._in_flight = False
        if lines == self._last:
            return
        log = self.query_one(Log)
        # Append only what is new when the old tail is a prefix; otherwise redraw (rotated log).
        overlap = 0
        for size in range(min(len(self._last), len(lines)), 0, -1):
            if self._last[-size:] == lines[:size]:
                overlap = size
                break
        if overlap == 0:
            log.clear()
            log.write_lines(lines)
        else:
            log.write_lines(lines[overlap:])
        self._last = lines

    def _failed(self, error: BaseException) -> None:
        self._in_flight = False
        self._title(f"· ✗ {describe_error(error)}")

    def action_toggle_follow(self) -> None:
        self.follow = not self.follow
        self._title()
        if self.follow:
            self.fetch()

    def action_close(self) -> None:
        self.dismiss(None)
