"""Launch a recipe `[u]` in Recipes mode: pick its nodes from the registry, in rank order (the first
picked is rank 0 and serves the API), optionally override parameters (`key=value` entries, as
`c3 recipes launch --set` takes them, checked as typed by the backend's own parser and known-abort
rules) and allow an image not pinned by digest.

Returns a `RecipeLaunch`; the app then makes the plan — the dry-run, node by node, secrets by name
only — and shows it in the confirm gate. Nothing is launched from here.
"""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.widgets import Button, Checkbox, Input, SelectionList, Static

from c3.look import shown
from c3.screens.base import CockpitModal, describe_error
from c3.services import NodeRow, RecipeLaunch, RecipeRow

NO_NODES = (
    "[$warning]No nodes registered.[/] Add them in Nodes mode ([b]2[/], then [b]a[/]) — this machine too —\n"
    "or with [b]c3 node add NAME --host URL --ssh USER@HOST[/]."
)


def split_overrides(text: str) -> tuple[str, ...]:
    """The field's entries: `key=value` separated by spaces (values never hold one: numbers,
    booleans, image references)."""
    return tuple(text.split())


class LaunchModal(CockpitModal):
    """Collects a `RecipeLaunch`: the recipe, its nodes in the order picked, overrides, allow-unpinned."""

    DEFAULT_CSS = """
    #dialog.launch #launch-overrides { margin-top: 1; }
    #dialog.launch #launch-overrides-status { height: auto; max-height: 4; display: none; }
    """
    AUTO_FOCUS = "#launch-nodes"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel", id="launch_cancel"),
        Binding("ctrl+s", "preview", "Preview", id="launch_preview", priority=True),
    ]

    def __init__(self, recipe: RecipeRow) -> None:
        super().__init__()
        self.recipe = recipe
        self.nodes: list[NodeRow] | None = None
        self.order: list[str] = []
        self.override_problems: list[str] = []
        """The backend's verdict on the entries as last typed (empty: fine)."""
        self._checked: tuple[str, ...] = ()
        self.checked_for: tuple[str, ...] | None = None
        """The entries `override_problems` is the verdict on (None: nothing checked yet)."""

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="launch"):
            yield Static(Content.from_markup(
                "[b]Launch $r[/]  [$text-muted]Space picks, in rank order · ^s preview · Esc[/]", r=shown(self.recipe.id),
            ))
            yield Static(Content.from_markup(
                "$s — runs on [b]$n[/] node(s), measured on $h", s=shown(self.recipe.summary or self.recipe.id), n=str(self.recipe.nodes), h=shown(self.recipe.hardware),
            ))
            yield SelectionList[str](id="launch-nodes", compact=True)
            yield Static("", id="launch-order")
            yield Input(placeholder="overrides: key=value … (as --set), e.g. max_model_len=8192", id="launch-overrides", compact=True)
            yield Static("", id="launch-overrides-status")
            yield Checkbox("allow an image not pinned by digest (--allow-unpinned)", id="allow-unpinned", compact=True)
            with Horizontal(classes="buttons"):
                yield Button("Cancel  Esc", id="cancel", compact=True)
                yield Button("Preview  Ctrl+S", id="preview", variant="primary", compact=True)

    def on_mount(self) -> None:
        self.query_one("#launch-order", Static).update(Content.from_markup("[$text-muted]reading the node registry…[/]"))
        self.call(self.services.registered_nodes, done=self._nodes_landed, failed=self._nodes_failed, group="registry")

    def _nodes_landed(self, nodes: list[NodeRow]) -> None:
        self.nodes = nodes
        picker = self.query_one("#launch-nodes", SelectionList)
        picker.clear_options()
        # Preselect the first nodes the recipe needs, in registry order: often exactly right, always changeable.
        self.order = [n.name for n in nodes[: self.recipe.nodes]]
        for node in nodes:
            where = "this machine" if node.local else f"ssh {node.ssh}"
            picker.add_option((Content.from_markup("$n  [$text-muted]$w · $h[/]", n=node.name, w=where, h=shown(node.host)), node.name, node.name in self.order))
        picker.display = bool(nodes)
        self._render_order()

    def _nodes_failed(self, error: BaseException) -> None:
        self.query_one("#launch-order", Static).update(Content.from_markup("[$error]✗ $e[/]", e=describe_error(error)))

    def on_selection_list_selected_changed(self, event: SelectionList.SelectedChanged[str]) -> None:
        # SelectionList keeps its values in the order they were selected: that is the rank order.
        self.order = list(event.selection_list.selected)
        self._render_order()

    def _render_order(self) -> None:
        line = self.query_one("#launch-order", Static)
        if self.nodes is not None and not self.nodes:
            line.update(Content.from_markup(NO_NODES))
            return
        if not self.order:
            line.update(Content.from_markup("[$warning]pick $n node(s)[/]", n=str(self.recipe.nodes)))
            return
        ranks = Content(" → ").join(Content.from_markup("[b]$n[/] [$text-muted](rank $r$s)[/]", n=shown(n), r=str(i), s=", serves the API" if i == 0 else "") for i, n in enumerate(self.order))
        count = len(self.order)
        note = Content("") if count == self.recipe.nodes else Content.from_markup("  [$warning]✗ $c picked, the recipe needs $n[/]", c=str(count), n=str(self.recipe.nodes))
        line.update(Content.assemble(Content("rank order: "), ranks, note))

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        entries = split_overrides(event.value)
        self._checked = entries
        if not entries:
            self.override_problems = []
            self.checked_for = entries
            self._render_overrides()
            return
        self.call(self.services.override_problems, self.recipe.id, entries, done=lambda problems: self._overrides_checked(entries, problems), group="overrides", exclusive=True)

    def _overrides_checked(self, entries: tuple[str, ...], problems: list[str]) -> None:
        if entries != self._checked:
            return  # typed on since: a newer check is coming
        self.override_problems = list(problems)
        self.checked_for = entries
        self._render_overrides()

    def _render_overrides(self) -> None:
        status = self.query_one("#launch-overrides-status", Static)
        status.display = bool(self._checked)
        if not self._checked:
            status.update("")
        elif self.override_problems:
            status.update(Content("\n").join(Content.from_markup("[$error]✗ $p[/]", p=shown(p)) for p in self.override_problems))
        else:
            status.update(Content.from_markup(
                "[$warning]profile: recipe + local overrides[/] [$text-muted]($o) — the recipe's measured numbers no longer apply[/]", o=" ".join(self._checked),
            ))

    def collect(self) -> RecipeLaunch | None:
        if not self.order:
            return None
        overrides = split_overrides(self.query_one("#launch-overrides", Input).value)
        return RecipeLaunch(self.recipe.id, tuple(self.order), self.query_one("#allow-unpinned", Checkbox).value, overrides)

    def action_preview(self) -> None:
        request = self.collect()
        if request is None:
            self.app.bell()
            return
        self.dismiss(request)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.action_preview()

    def action_cancel(self) -> None:
        self.dismiss(None)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        (self.action_preview if event.button.id == "preview" else self.action_cancel)()
