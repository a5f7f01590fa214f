"""Recipes mode: the recipe catalogue (hardware, nodes, image, verified) and the highlighted one's
provenance and measured numbers; launch (`u`: node picker, then the dry-run in the confirm gate, then
progress) and stop of the active profile (`d`); empty states that say how to add one."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.content import Content
from textual.widgets import DataTable, Static

from c3.look import shown
from c3.screens.base import CockpitScreen, describe_error
from c3.screens.chrome import mode_bar, result_line
from c3.services import BootProgress, ProfileRow, RecipeLaunch, RecipeRow, WriteResult
from widgets.key_bar import KeyBar
from widgets.list_query import FILTER_BINDINGS, Filterable, FilterBar, QueryLine
from widgets.nav_table import NavTable
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


def recipe_text(row: RecipeRow) -> str:
    """What `/` matches: id, hardware, image, summary, verified or not."""
    return f"{row.id} {row.hardware} {row.image} {row.summary} {'verified' if row.verified else 'unverified'}"


class RecipesScreen(Filterable, CockpitScreen):
    """List on the left, details of the highlighted recipe on the right."""

    WRITES = frozenset({"recipe_launch", "recipe_stop", "profile_restart", "profile_switch"})
    BINDINGS = [
        Binding("u", "launch", "Launch", id="recipe_launch", tooltip="Launch the highlighted recipe: pick nodes, preview the dry-run, confirm"),
        Binding("d", "stop_profile", "Stop profile", id="recipe_stop", tooltip="Stop the active profile's containers on its nodes"),
        Binding("R", "restart_profile", "Restart profile", id="profile_restart",
                tooltip="Restart the active profile: remove and start its containers on the same nodes, then wait for rank 0"),
        Binding("P", "switch_profile", "Switch profile", id="profile_switch",
                tooltip="Make another launched profile the active one: pick it, see the plan (the active one stops first), confirm"),
        Binding("r", "refresh_now", "Refresh", id="recipes_refresh", tooltip="Read the recipe catalogue again"),
        *FILTER_BINDINGS,
    ]
    SORTS = (
        ("id", lambda r: r.id),
        ("nodes", lambda r: (r.nodes, r.id)),
        ("verified", lambda r: (not r.verified, r.id)),
        ("hardware", lambda r: (r.hardware, r.id)),
    )

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.rows: list[RecipeRow] | None = None
        self.missing_backend = False
        self.taken_at: datetime | None = None
        self.error: str | None = None
        self.profile: ProfileRow | None = None
        self.shown: list[RecipeRow] = []
        """The rows the table shows, in its order (filtered and sorted)."""
        self.poller = self.add_poller(60.0, self._poll)
        self.profile_poller = self.add_poller(10.0, self._poll_profile)

    def compose(self) -> ComposeResult:
        yield Static(id="modebar")
        yield Static(id="sources")
        yield Static("", id="recipes-result")
        yield Static("", id="profile-line")
        yield Static("", id="recipes-empty", classes="empty")
        with Horizontal(id="recipes-pane"):
            yield NavTable(id="recipes", cursor_type="row", zebra_stripes=True)
            yield Static("", id="recipe-detail")
        yield QueryLine(id="query-line")
        yield FilterBar(placeholder="filter recipes: text or regex · Enter keeps · Esc clears", id="filter-bar")
        yield Static("", id="launch-status")
        yield KeyBar()

    def refresh_chrome(self) -> None:
        app = self.cockpit
        label = app.services.label if app.services is not None else "connecting…"
        self.query_one("#modebar", Static).update(mode_bar("recipes", label, app.readonly, app.trouble.summary()))

    def on_mount(self) -> None:
        self.refresh_chrome()
        table = self.query_one("#recipes", DataTable)
        table.add_columns("id", "nodes")
        table.add_column("verified", width=12)  # a Content cell: auto width measures plain strings only
        table.add_column("hardware")
        self.show_result(self.cockpit.last_result)
        self.render_profile()
        progress = self.cockpit.launch_progress
        self.query_one("#launch-status").display = False
        if progress is not None:
            self.show_launch(progress)
        self.render_rows()
        super().on_mount()

    def _poll(self) -> None:
        self.call(self.services.recipes, done=self._landed, failed=self._failed, group="recipes")

    def _landed(self, rows: list[RecipeRow] | None) -> None:
        self.poller.landed()
        self.missing_backend = rows is None
        self.rows, self.taken_at, self.error = (rows or []), self.cockpit.clock(), None
        self.render_rows()

    def _failed(self, error: BaseException) -> None:
        self.poller.landed()
        self.error = describe_error(error)
        self.render_rows()

    def _poll_profile(self) -> None:
        self.call(self.services.active_profile, done=self._profile_landed, failed=self._profile_failed, group="profile")

    def _profile_landed(self, profile: ProfileRow | None) -> None:
        self.profile_poller.landed()
        self.profile = profile
        self.render_profile()

    def _profile_failed(self, error: BaseException) -> None:
        self.profile_poller.landed()
        self.query_one("#profile-line", Static).update(Content.from_markup("[$error]✗ profile: $e[/]", e=describe_error(error)))

    def render_profile(self) -> None:
        line = self.query_one("#profile-line", Static)
        p = self.profile
        if p is None:
            line.update(Content.from_markup("[$text-muted]No active profile — u launches the highlighted recipe on nodes you pick[/]"))
            return
        state = Content.from_markup("[$warning]stopped[/]") if p.stopped else Content.from_markup("[$success]active[/]")
        recipe = "" if p.recipe == p.name else f" · recipe {p.recipe}"
        line.update(Content.assemble(
            Content.from_markup("Profile [b]$n[/] ", n=shown(p.name)), state,
            # Nodes, recipe and endpoint are free text in the profile file (only its name is checked).
            Content.from_markup("$r · $o · $u", r=shown(recipe), o=shown(" → ".join(p.nodes)), u=shown(p.base_url)),
        ))

    def action_refresh_now(self) -> None:
        self.poll_now()

    # -- writes ----------------------------------------------------------------------------------
    def list_widget(self) -> DataTable[Any]:
        return self.query_one("#recipes", DataTable)

    def query_changed(self) -> None:
        self.render_rows()

    def highlighted(self) -> RecipeRow | None:
        rows = self.shown
        if not rows:
            return None
        table = self.query_one("#recipes", DataTable)
        return rows[min(max(table.cursor_row, 0), len(rows) - 1)]

    def action_launch(self) -> None:
        from c3.modals.launch import LaunchModal

        row = self.highlighted()
        if row is None:
            self.app.notify("No recipe to launch", timeout=3)
            return
        if not self.cockpit.refused_readonly("recipe_launch") and self.cockpit.ready():
            self.app.push_screen(LaunchModal(row), callback=self._launch_chosen)

    def _launch_chosen(self, request: RecipeLaunch | None) -> None:
        if request is not None:
            self.cockpit.request_write("recipe_launch", request=request)

    def action_stop_profile(self) -> None:
        if self.profile is None:
            self.app.notify("No active profile to stop", timeout=3)
            return
        self.cockpit.request_write("recipe_stop", pod=self.profile.name)

    def action_restart_profile(self) -> None:
        if self.profile is None:
            self.app.notify("No active profile to restart", timeout=3)
            return
        self.cockpit.request_write("profile_restart", pod=self.profile.name)

    def action_switch_profile(self) -> None:
        from c3.modals.switch_profile import SwitchProfileModal

        if not self.cockpit.refused_readonly("profile_switch") and self.cockpit.ready():
            self.app.push_screen(SwitchProfileModal(), callback=self._switch_chosen)

    def _switch_chosen(self, name: str | None) -> None:
        if name is not None:
            self.cockpit.request_write("profile_switch", pod=name)

    def show_result(self, result: WriteResult | None) -> None:
        idle = "u launches the highlighted recipe (dry-run shown first) · d stops the active profile · R restarts it · P switches"
        self.query_one("#recipes-result", Static).update(result_line(result, idle))

    def show_launch(self, progress: BootProgress) -> None:
        """A step of the running launch: what it does now, its last steps, and how it ended."""
        box = self.query_one("#launch-status", Static)
        box.display = True
        if progress.done:
            head = Content.from_markup("[$success]✓ launched $p[/]" if progress.ok else "[$error b]✗ launch of $p failed[/]", p=shown(progress.pod))
        else:
            head = Content.from_markup("[$warning]◐ launching $p[/] · $s · $t s", p=shown(progress.pod), s=shown(progress.phase), t=f"{progress.elapsed_s:.0f}")
        box.update(Content("\n").join([head, *(Content.from_markup("  [$text-muted]$l[/]", l=shown(line)) for line in progress.log_tail)]))
        if progress.done:
            self.poll_now()

    def render_rows(self) -> None:
        now = self.cockpit.clock()
        self.query_one("#sources", Static).update(source_badge("Recipes", self.taken_at, now, stale_after_s=600, error=self.error))
        table = self.query_one("#recipes", DataTable)
        empty = self.query_one("#recipes-empty", Static)
        rows = self.shown = self.filtered(self.rows or [], recipe_text)
        empty.display = self.rows is not None and not rows
        self.query_one("#recipes-pane").display = bool(rows)
        if self.rows:
            empty.update(Content.from_markup("[$text-muted]no recipe matches — Esc shows every recipe[/]"))
        else:
            empty.update(NO_BACKEND if self.missing_backend else EMPTY)
        # The cursor stays on its recipe (by row key) across refreshes: `u` acts on the highlighted row,
        # and a table rebuilt with its cursor back on the first row launched a recipe nobody picked.
        cursor = table.cursor_row
        before = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value if table.is_valid_row_index(cursor) else None
        table.clear()
        for row in rows:
            verified = Content.from_markup("[$success]✓ verified[/]") if row.verified else Content.from_markup("[$warning]? unverified[/]")
            table.add_row(row.id, str(row.nodes), verified, row.hardware, key=row.id)
        if rows:
            ids = [row.id for row in rows]
            index = ids.index(before) if before in ids else min(max(cursor, 0), len(rows) - 1)
            table.move_cursor(row=index, animate=False)
            self.show_detail(rows[index])

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        for row in self.rows or []:
            if row.id == event.row_key.value:
                self.show_detail(row)

    def show_detail(self, row: RecipeRow) -> None:
        lines = [
            Content.from_markup("[b]$i[/]", i=shown(row.id)),
            Content(shown(row.summary)),
            Content.from_markup("[$text-muted]hardware[/]  $v", v=shown(row.hardware)),
            Content.from_markup("[$text-muted]image[/]  $v", v=shown(row.image)),
            Content.from_markup("[$text-muted]nodes[/]  $v", v=str(row.nodes)),
            Content.from_markup("[$text-muted]provenance[/]  $v", v=shown(row.provenance or "—")),
        ]
        if row.measured:
            lines.append(Content.from_markup("[$text-muted]measured[/]"))
            lines += [Content(f"  {shown(m)}") for m in row.measured]
        self.query_one("#recipe-detail", Static).update(Content("\n").join(lines))
