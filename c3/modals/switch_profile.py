"""Switch profile `[P]` in Recipes mode: pick another launched profile to make active. Each recipe
launch leaves a profile (its recipe, nodes and overrides); switching stops the active one and starts
the picked one on its own nodes — after that one's preflight, so a profile that could not start
changes nothing.

Returns the picked profile's name; the app then plans `profile_switch` and shows it in the confirm
gate. Nothing is stopped or started from here.
"""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.widgets import Button, OptionList, Static
from textual.widgets.option_list import Option

from c3.look import shown
from c3.screens.base import CockpitModal, describe_error
from c3.services import ProfileRow

NONE_TO_SWITCH = (
    "[$warning]No other launched profile.[/] Each recipe launch leaves one: press [b]u[/] on a recipe to launch it\n"
    "(the active profile is stopped first), or from a shell [b]c3 recipes launch RECIPE --nodes a,b[/]."
)


def profile_option(row: ProfileRow) -> Option:
    """One profile: name, recipe when it differs, nodes in rank order, its label; the active one is not pickable."""
    recipe = "" if row.recipe == row.name else f" · recipe {row.recipe}"
    state = "active" if row.active else ("stopped" if row.stopped else "")
    return Option(Content.from_markup("[b]$n[/]  [$text-muted]$r · $o · $l[/]$s", n=shown(row.name), r=shown(recipe), o=shown(" → ".join(row.nodes)),
                                      l=shown(row.status or "profile"), s=f"  ({state})" if state else ""),
                  id=row.name, disabled=row.active)


class SwitchProfileModal(CockpitModal):
    """Lists every launched profile; Enter picks one (not the active one)."""

    AUTO_FOCUS = "#switch-profiles"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel", id="switch_cancel"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.profiles: list[ProfileRow] | None = None

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="switch"):
            yield Static(Content.from_markup("[b]Switch profile[/]  [$text-muted]↑↓ pick · Enter plans the switch · Esc[/]"))
            yield Static(Content.from_markup("[$text-muted]reading the launched profiles…[/]"), id="switch-status")
            yield OptionList(id="switch-profiles", compact=True)
            with Horizontal(classes="buttons"):
                yield Button("Cancel  Esc", id="cancel", compact=True)

    def on_mount(self) -> None:
        self.query_one("#switch-profiles").display = False
        self.call(self.services.profiles, done=self._landed, failed=self._failed, group="profiles")

    def _landed(self, rows: list[ProfileRow]) -> None:
        self.profiles = rows
        picker = self.query_one("#switch-profiles", OptionList)
        picker.clear_options()
        picker.add_options([profile_option(row) for row in rows])
        others = [row for row in rows if not row.active]
        picker.display = bool(rows)
        status = self.query_one("#switch-status", Static)
        if not others:
            status.update(Content.from_markup(NONE_TO_SWITCH))
            return
        status.update(Content.from_markup("[$text-muted]the active profile is stopped, then the picked one starts on its own nodes[/]"))
        picker.highlighted = rows.index(others[0])
        picker.focus()

    def _failed(self, error: BaseException) -> None:
        self.query_one("#switch-status", Static).update(Content.from_markup("[$error]✗ $e[/]", e=describe_error(error)))

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if event.option.id is not None:
            self.dismiss(event.option.id)

    def action_cancel(self) -> None:
        self.dismiss(None)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.action_cancel()
