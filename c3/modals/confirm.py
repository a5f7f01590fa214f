"""The confirm gate every write passes through: the exact plan, Cancel focused, Esc cancels.

The plan's problems (computed when the plan was made) are shown and keep Confirm disabled; its
warnings are shown in amber, each with its hint, and leave Confirm enabled. The app
re-validates again right before executing, because the world may change while this modal is open.
"""

from __future__ import annotations

from math import floor

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.css.scalar import Scalar
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from c3.look import shown
from c3.services import WritePlan


class ConfirmModal(ModalScreen[bool]):
    """Returns True only when the user pressed Confirm (or `y`) on a plan without problems."""

    AUTO_FOCUS = "#cancel"
    PLAN_ROWS = 20
    """The plan's height when the terminal has room (c3.tcss `#confirm-scroll`); it scrolls beyond."""
    PLAN_ROWS_MIN = 3
    BINDINGS = [
        Binding("escape", "cancel", "Cancel", id="confirm_cancel"),
        Binding("y", "confirm", "Confirm", id="confirm_yes"),
        Binding("left,right", "app.focus_next", "Move", show=False),
    ]

    def __init__(self, plan: WritePlan, *, readonly: bool = False) -> None:
        super().__init__()
        self.plan = plan
        self.readonly = readonly

    @property
    def blocked(self) -> str | None:
        """Why Confirm is disabled, if it is."""
        if self.readonly:
            return "read-only cockpit: this write is refused"
        if self.plan.problems:
            return "cannot run now"
        return None

    def compose(self) -> ComposeResult:
        # A recipe launch's plan is its dry-run (long docker run lines): a wider dialog that scrolls.
        with Vertical(id="dialog", classes="confirm wide" if self.plan.wide else "confirm"):
            yield Static(Content.from_markup("[b]$t[/]", t=shown(self.plan.title)), id="confirm-title")
            with VerticalScroll(id="confirm-scroll"):
                yield Static(Content("\n").join(Content(shown(line)) for line in self.plan.lines), id="confirm-plan")
            if self.plan.problems:
                text = Content("\n").join(Content.from_markup("[$error]✗ $p[/]", p=shown(p)) for p in self.plan.problems)
                yield Static(text, id="confirm-problems")
            if self.plan.warnings:
                # Warnings do not block: amber, each with its hint, above the still-enabled Confirm.
                text = Content("\n").join(Content.from_markup("[$warning]⚠ $w[/]", w=shown(w)) for w in self.plan.warnings)
                yield Static(text, id="confirm-warnings")
            if self.readonly:
                yield Static(Content.from_markup("[$warning b]READ-ONLY[/] — restart c3 without --readonly to write"), id="confirm-readonly")
            with Horizontal(classes="buttons"):
                yield Button("Cancel  Esc", id="cancel", variant="default")
                label = "Confirm  y" if self.plan.confirm is None else f"{self.plan.confirm[1]}  {self.plan.confirm[0]}"
                yield Button(label, id="confirm", variant="error" if self.plan.destructive else "primary", disabled=self.blocked is not None)

    def on_mount(self) -> None:
        self.call_after_refresh(self.fit_plan)

    def on_resize(self, event: events.Resize) -> None:
        self.call_after_refresh(self.fit_plan)

    def fit_plan(self) -> None:
        """Give the plan only the rows the dialog has left once its title, problems, warnings and
        buttons are counted: at 80×24 a long dry-run pushed them off the screen (a hidden Cancel
        focused, the problems unseen). Those rows depend on the width only; the plan scrolls."""
        dialog = self.query_one("#dialog", Vertical)
        plan = self.query_one("#confirm-scroll", VerticalScroll)
        limit = dialog.styles.max_height
        if limit is None or not dialog.size.width:
            return
        room = floor(limit.resolve(self.size, self.size)) - dialog.styles.gutter.height
        used = max((child.virtual_region_with_margin.bottom for child in dialog.children if child.display), default=0)
        others = used - plan.outer_size.height
        rows = max(self.PLAN_ROWS_MIN, min(self.PLAN_ROWS, room - others))
        if plan.styles.max_height != Scalar.from_number(rows):
            plan.styles.max_height = rows

    def on_key(self, event: events.Key) -> None:
        """The plan's own confirm key (`Plan.confirm`): the only key that confirms such a plan."""
        if self.plan.confirm is not None and event.key == self.plan.confirm[0]:
            event.stop()
            self._confirm()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "confirm":
            self._confirm()  # the button is the plan's own choice, whatever its key
        else:
            self.action_cancel()

    def action_confirm(self) -> None:
        """`y`: confirms unless the plan asks for its own distinct key (a foreign process)."""
        if self.plan.confirm is not None:
            self.app.bell()
            self.notify(f"press {self.plan.confirm[0]} to {self.plan.confirm[1].lower()}, Esc to cancel", timeout=3)
            return
        self._confirm()

    def _confirm(self) -> None:
        if self.blocked is None:
            self.dismiss(True)
        else:
            self.app.bell()

    def action_cancel(self) -> None:
        self.dismiss(False)
