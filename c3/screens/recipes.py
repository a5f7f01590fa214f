"""Recipes mode: the recipe catalogue (hardware, nodes, image, verified) and the highlighted one's
provenance and measured numbers; empty states that say how to add one."""

from __future__ import annotations

from datetime import datetime

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.content import Content
from textual.widgets import DataTable, Static

from c3.screens.base import CockpitScreen, describe_error
from c3.screens.chrome import mode_bar
from c3.services import RecipeRow
from widgets.key_bar import KeyBar
from widgets.source_badge import source_badge

NO_BACKEND = (
    "Recipes are not available in this build yet.\n\n"
    "A recipe is a configuration run and measured on named hardware (image pinned by digest,\n"
    "provenance, numbers). When the recipes backend is installed they appear here and in\n"
    "  [b]c3 recipes list[/]"
)
EMPTY = (
    "No recipes yet.\n\n"
    "Add your own as YAML in [b]$C3_HOME/recipes.d/NAME.yaml[/] (see `c3 recipes show ID` for the\n"
    "fields of a built-in one), then launch it with\n"
    "  [b]c3 recipes launch ID --nodes a,b --dry-run[/]\n"
    "after registering the nodes: [b]c3 node add NAME --host URL --ssh USER@HOST[/]"
)


class RecipesScreen(CockpitScreen):
    """List on the left, details of the highlighted recipe on the right."""

    BINDINGS = [Binding("r", "refresh_now", "Refresh", id="recipes_refresh", tooltip="Read the recipe catalogue again")]

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.rows: list[RecipeRow] | None = None
        self.missing_backend = False
        self.taken_at: datetime | None = None
        self.error: str | None = None
        self.poller = self.add_poller(60.0, self._poll)

    def compose(self) -> ComposeResult:
        yield Static(id="modebar")
        yield Static(id="sources")
        yield Static("", id="recipes-empty", classes="empty")
        with Horizontal(id="recipes-pane"):
            yield DataTable(id="recipes", cursor_type="row", zebra_stripes=True)
            yield Static("", id="recipe-detail")
        yield KeyBar()

    def refresh_chrome(self) -> None:
        app = self.app
        label = app.services.label if app.services is not None else "connecting…"  # type: ignore[attr-defined]
        self.query_one("#modebar", Static).update(mode_bar("recipes", label, app.readonly))  # type: ignore[attr-defined]

    def on_mount(self) -> None:
        self.refresh_chrome()
        self.query_one("#recipes", DataTable).add_columns("id", "nodes", "verified", "hardware")
        self.render_rows()
        super().on_mount()

    def _poll(self) -> None:
        self.call(self.services.recipes, done=self._landed, failed=self._failed, group="recipes")

    def _landed(self, rows: list[RecipeRow] | None) -> None:
        self.poller.landed()
        self.missing_backend = rows is None
        self.rows, self.taken_at, self.error = (rows or []), self.app.clock(), None  # type: ignore[attr-defined]
        self.render_rows()

    def _failed(self, error: BaseException) -> None:
        self.poller.landed()
        self.error = describe_error(error)
        self.render_rows()

    def action_refresh_now(self) -> None:
        self.poll_now()

    def render_rows(self) -> None:
        now = self.app.clock()  # type: ignore[attr-defined]
        self.query_one("#sources", Static).update(source_badge("Recipes", self.taken_at, now, stale_after_s=600, error=self.error))
        table = self.query_one("#recipes", DataTable)
        empty = self.query_one("#recipes-empty", Static)
        rows = self.rows or []
        empty.display = self.rows is not None and not rows
        self.query_one("#recipes-pane").display = bool(rows)
        empty.update(NO_BACKEND if self.missing_backend else EMPTY)
        table.clear()
        for row in rows:
            verified = Content.from_markup("[$success]✓ verified[/]") if row.verified else Content.from_markup("[$warning]? unverified[/]")
            table.add_row(row.id, str(row.nodes), verified, row.hardware, key=row.id)
        if rows:
            self.show_detail(rows[0])

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        for row in self.rows or []:
            if row.id == event.row_key.value:
                self.show_detail(row)

    def show_detail(self, row: RecipeRow) -> None:
        lines = [
            Content.from_markup("[b]$i[/]", i=row.id),
            Content(row.summary),
            Content.from_markup("[$text-muted]hardware[/]  $v", v=row.hardware),
            Content.from_markup("[$text-muted]image[/]  $v", v=row.image),
            Content.from_markup("[$text-muted]nodes[/]  $v", v=str(row.nodes)),
            Content.from_markup("[$text-muted]provenance[/]  $v", v=row.provenance or "—"),
        ]
        if row.measured:
            lines.append(Content.from_markup("[$text-muted]measured[/]"))
            lines += [Content(f"  {m}") for m in row.measured]
        self.query_one("#recipe-detail", Static).update(Content("\n").join(lines))
