"""Nodes mode: the node registry with reachability; an empty state that says how to add one."""

from __future__ import annotations

from datetime import datetime

from textual.app import ComposeResult
from textual.binding import Binding
from textual.content import Content
from textual.widgets import DataTable, Static

from c3.screens.base import CockpitScreen, describe_error
from c3.screens.chrome import mode_bar
from c3.services import NodeRow
from widgets.key_bar import KeyBar
from widgets.source_badge import source_badge

NODES_PERIOD_S = 10.0

EMPTY = (
    "No nodes registered yet.\n\n"
    "A node is a machine c3 can reach: its OpenAI endpoint and its SSH target. Add one with\n\n"
    "  [b]c3 node add NAME --host URL --ssh USER@HOST[/]\n"
    "  [$text-muted]e.g. c3 node add spark-2 --host http://10.0.0.12:8000 --ssh ubuntu@10.0.0.12[/]\n\n"
    "Register this machine too (it is recognised and driven without SSH)."
)


class NodesScreen(CockpitScreen):
    """The registry as a table, polled every ten seconds while shown."""

    BINDINGS = [Binding("r", "refresh_now", "Refresh", id="nodes_refresh", tooltip="Read the registry and probe the nodes now")]

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.rows: list[NodeRow] | None = None
        self.taken_at: datetime | None = None
        self.error: str | None = None
        self.poller = self.add_poller(NODES_PERIOD_S, self._poll)

    def compose(self) -> ComposeResult:
        yield Static(id="modebar")
        yield Static(id="sources")
        yield Static("", id="nodes-empty", classes="empty")
        yield DataTable(id="nodes", cursor_type="row", zebra_stripes=True)
        yield KeyBar()

    def refresh_chrome(self) -> None:
        app = self.app
        label = app.services.label if app.services is not None else "connecting…"  # type: ignore[attr-defined]
        self.query_one("#modebar", Static).update(mode_bar("nodes", label, app.readonly))  # type: ignore[attr-defined]

    def on_mount(self) -> None:
        self.refresh_chrome()
        table = self.query_one("#nodes", DataTable)
        table.add_columns("name", "endpoint", "ssh", "where", "reachable", "detail")
        self.render_rows()
        self.set_interval(1.0, self.render_sources, name="as-of")
        super().on_mount()

    def _poll(self) -> None:
        self.call(self.services.nodes, done=self._landed, failed=self._failed, group="nodes")

    def _landed(self, rows: list[NodeRow]) -> None:
        self.poller.landed()
        self.rows, self.taken_at, self.error = rows, self.app.clock(), None  # type: ignore[attr-defined]
        self.render_rows()

    def _failed(self, error: BaseException) -> None:
        self.poller.landed()
        self.error = describe_error(error)
        self.render_rows()

    def action_refresh_now(self) -> None:
        self.poll_now()

    def refresh_badges(self) -> None:
        self.render_sources()

    def render_sources(self) -> None:
        badge = source_badge("Nodes", self.taken_at, self.app.clock(), stale_after_s=NODES_PERIOD_S * 3, error=self.error, paused=not self.is_active)  # type: ignore[attr-defined]
        self.query_one("#sources", Static).update(badge)

    def render_rows(self) -> None:
        self.render_sources()
        table = self.query_one("#nodes", DataTable)
        empty = self.query_one("#nodes-empty", Static)
        rows = self.rows or []
        empty.display = self.rows is not None and not rows
        table.display = bool(rows)
        empty.update(EMPTY)
        table.clear()
        for row in rows:
            if row.reachable is None:
                reach = Content.from_markup("[$text-muted]? not probed[/]")
            elif row.reachable:
                reach = Content.from_markup("[$success]● yes[/]")
            else:
                reach = Content.from_markup("[$error]✗ no[/]")
            table.add_row(row.name, row.host, row.ssh, "local" if row.local else "ssh", reach, row.detail, key=row.name)
