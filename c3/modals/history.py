"""`h` history: the live hub's recorded GPU and engine-metrics series as block charts with a time axis.

The hub records whatever the cockpit shows (this modal, another, another mode), so opening this view
shows the minutes before it was opened. The modal re-reads the history every 2 s in a worker.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.content import Content
from textual.widgets import Static

from c3.screens.base import CockpitModal, describe_error
from widgets.time_chart import LABEL_W, chart, last_value, nice_top, short_number, time_axis

if TYPE_CHECKING:
    from backend.live.history import HistoryView, Series

WINDOWS_S = (300.0, 600.0, 60.0)
"""`w` cycles through these; 5 minutes first."""
PERIOD_S = 2.0
SIDE_W = 14
"""Right of each chart: the series' name, then its latest value."""
FLOORS = {"%": 100.0, "req": 1.0, "tok/s": 10.0, "W": 50.0}
"""Scales: percentages are always 0–100; the others round up from the window's peak, at least this."""


def window_label(seconds: float) -> str:
    return f"{seconds / 60:g}m"


def series_block(series: Series, *, now: float, window_s: float, width: int, height: int = 2) -> list[Content]:
    """One series: its chart, its name and latest value on the right."""
    plot_w = max(LABEL_W + 4, width - SIDE_W)
    values = [v for t, v in series.points if t >= now - window_s]
    top = 100.0 if series.unit == "%" else nice_top(values, FLOORS.get(series.unit, 1.0))
    rows = chart(series.points, now=now, window_s=window_s, width=plot_w, height=height, top=top)
    name = series.label.split(" ", 1)[-1]
    latest = last_value(series.points)
    side = [Content.assemble((" " + name[: SIDE_W - 1], "bold")),
            Content.assemble(" " + ("–" if latest is None else short_number(latest)) + " ", (series.unit, "$text-muted"))]
    return [Content.assemble(row, side[n] if n < len(side) else Content("")) for n, row in enumerate(rows)]


def history_lines(view: HistoryView, *, window_s: float, width: int) -> Content:
    """Every series grouped by GPU and by pod, one time axis under each group."""
    if not view.series:
        return Content.from_markup("[$text-muted]Nothing recorded yet: the live hub records GPU readings every second and a serving pod's /metrics every 2 s.[/]")
    axis = Content.from_markup("[$text-muted]$a[/]", a=" " * LABEL_W + time_axis(window_s, max(LABEL_W + 4, width - SIDE_W) - LABEL_W))
    groups: dict[str, list[Series]] = {}
    for s in view.series:
        kind, owner, _ = s.key.split("/", 2)
        groups.setdefault(f"GPU{owner}" if kind == "gpu" else f"pod {owner}", []).append(s)
    lines: list[Content] = []
    for title, members in groups.items():
        lines.append(Content.assemble((title, "bold $accent")))
        for s in members:
            lines += series_block(s, now=view.taken_at, window_s=window_s, width=width)
        lines += [axis, Content("")]
    return Content("\n").join(lines[:-1])


class HistoryModal(CockpitModal):
    """Charts of the last minutes; `w` changes the window."""

    DEFAULT_CSS = """
    #dialog.history { height: 90%; max-width: 140; }
    """
    BINDINGS = [
        Binding("escape,q,h", "close", "Close", id="history_close"),
        Binding("w", "window", "Window", id="history_window", tooltip="Show the last 5 min, 10 min or 1 min"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.window_s = WINDOWS_S[0]
        self.view: HistoryView | None = None
        self.error: str | None = None
        self.in_flight = False
        self.reads = 0

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="dialog", classes="history"):
            yield Static("", id="history-head")
            yield Static(Content.from_markup("[$text-muted]reading the history…[/]"), id="history-body")

    def on_mount(self) -> None:
        self.render_head()
        self.poll()
        if getattr(self.app, "autopoll", True):
            self.set_interval(PERIOD_S, self.poll, name="history")

    def _width(self) -> int:
        return max(40, self.query_one("#history-body", Static).size.width or self.app.size.width - 8)

    def poll(self) -> None:
        if self.in_flight:
            return
        self.in_flight = True
        services, window_s, width = self.services, self.window_s, self._width()

        def read() -> tuple[HistoryView, Content, float, int]:
            # Drawing 88 full series takes ~18 ms (bench/history.py): done here, off the event loop.
            view = services.history()
            return view, history_lines(view, window_s=window_s, width=width), window_s, width

        self.call(read, done=self._landed, failed=self._failed, group="history")

    def _landed(self, result: tuple[HistoryView, Content, float, int]) -> None:
        self.in_flight = False
        self.reads += 1
        view, lines, window_s, width = result
        self.view, self.error = view, None
        if (window_s, width) == (self.window_s, self._width()):
            self.query_one("#history-body", Static).update(lines)
        else:  # the window or the size changed while it was drawn
            self.render_body()

    def _failed(self, error: BaseException) -> None:
        self.in_flight = False
        self.error = describe_error(error)
        self.render_body()

    def render_head(self) -> None:
        choices = Content(" · ").join(
            Content.from_markup("[b reverse] $w [/]" if w == self.window_s else "[$text-muted]$w[/]", w=window_label(w)) for w in sorted(WINDOWS_S)
        )
        self.query_one("#history-head", Static).update(Content.assemble(
            Content.from_markup("[b]History[/]  window "), choices, Content.from_markup("  [$text-muted]w changes it · Esc closes · recorded under modals too[/]"),
        ))

    def render_body(self) -> None:
        body = self.query_one("#history-body", Static)
        if self.error is not None:
            body.update(Content.from_markup("[$error]✗ $e[/]", e=self.error))
        elif self.view is not None:
            body.update(history_lines(self.view, window_s=self.window_s, width=self._width()))

    def on_resize(self) -> None:
        self.render_body()

    def action_window(self) -> None:
        self.window_s = WINDOWS_S[(WINDOWS_S.index(self.window_s) + 1) % len(WINDOWS_S)]
        self.render_head()
        self.render_body()

    def action_close(self) -> None:
        self.dismiss(None)
