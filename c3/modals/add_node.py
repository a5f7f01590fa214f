"""Add node `[a]` in Nodes mode: name, endpoint URL, SSH target and optional key, validated as typed.

Returns a `NewNode` (the app then shows the confirm gate, which re-checks against the registry) or
None. `Ctrl+T` fills in this machine (a node whose host is this machine is driven without SSH).
"""

from __future__ import annotations

import getpass
import re
import socket
from collections.abc import Callable

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.widgets import Button, Input, Static

from c3.screens.base import CockpitModal
from c3.services import NewNode

FIELDS = ("name", "host", "ssh", "key")


def node_field_problem(field: str, value: str, taken: set[str]) -> str | None:
    """Why one field is not acceptable (None when it is): the registry's own rules
    (`backend.models.names`), so what the form accepts is what `node add` accepts."""
    from backend.models.names import check_endpoint_url, check_ssh_target, node_name_problem

    value = value.strip()
    if field == "name":
        if not value:
            return "give the node a name"
        if problem := node_name_problem(value):
            return problem
        if value.lower() in taken:
            return f"node `{value}` is already registered"
    elif field in ("host", "ssh"):
        check: Callable[[str], str]
        if field == "host":
            check, shape = check_endpoint_url, "the node's OpenAI endpoint, e.g. http://10.0.0.5:8000"
        else:
            check, shape = check_ssh_target, "USER@HOST[:PORT], e.g. ubuntu@10.0.0.5"
        try:
            check(value)
        except ValueError as error:
            # The registry's reason without the value it quotes (the field shows it): the shape with an
            # example when the value is not that kind of thing at all, else what is wrong with it.
            reason = re.sub(r"^`.*?` (?:is |has )?", "", str(error))
            return shape if not value or reason.startswith("not ") else reason
    elif field == "key" and value:
        # Caught as typed, not when ssh first fails with it: a missing or unreadable key file.
        import os
        from pathlib import Path

        path = Path(value).expanduser()
        if path.is_dir():
            return f"{path} is a folder, not a key file"
        if not path.is_file():
            return f"no key file at {path}"
        if not os.access(path, os.R_OK):
            return f"{path} cannot be read by this user"
    return None


def this_machine() -> NewNode:
    """This machine as a node: driven without SSH because its host is local."""
    name = re.sub(r"[^a-z0-9_-]", "-", socket.gethostname().split(".")[0].lower()).strip("-_") or "local"
    user = re.sub(r"[^A-Za-z0-9._-]", "", getpass.getuser()) or "root"
    from backend.models.names import node_name_problem

    return NewNode(name if node_name_problem(name) is None else "local", "http://127.0.0.1:8000", f"{user}@127.0.0.1")


class AddNodeModal(CockpitModal):
    """Collects a `NewNode`; does not write anything itself."""

    AUTO_FOCUS = "#name"
    BINDINGS = [
        Binding("escape", "cancel", "Cancel", id="add_node_cancel"),
        Binding("ctrl+s", "add", "Add", id="add_node_add", priority=True),
        Binding("ctrl+t", "this_machine", "This machine", id="add_node_local", priority=True),
    ]

    def __init__(self, taken: set[str]) -> None:
        super().__init__()
        self.taken = {t.lower() for t in taken}

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="add-node"):
            yield Static("[b]Add node[/]  [$text-muted]Tab moves · Ctrl+T this machine · Ctrl+S add · Esc cancel[/]")
            yield Static(
                "[$text-muted]host: where the node answers OpenAI requests · ssh: how this machine drives it[/]",
                id="add-node-help",
            )
            for field, label, hint in (
                ("name", "Name", "e.g. spark-2"),
                ("host", "Host URL", "http://10.0.0.12:8000"),
                ("ssh", "SSH", "ubuntu@10.0.0.12"),
                ("key", "SSH key", "optional: ~/.ssh/id_ed25519"),
            ):
                with Horizontal(classes="row"):
                    yield Static(label, classes="label")
                    yield Input(placeholder=hint, id=field, compact=True)
                    yield Static("", id=f"{field}-check", classes="check")
            with Horizontal(classes="buttons"):
                yield Button("Cancel  Esc", id="cancel", compact=True)
                yield Button("This machine  ^t", id="local", compact=True)
                yield Button("Add  Ctrl+S", id="add", variant="primary", compact=True)

    def on_mount(self) -> None:
        for field in FIELDS:
            self._check(field)

    def value(self, field: str) -> str:
        return self.query_one(f"#{field}", Input).value.strip()

    def _check(self, field: str) -> str | None:
        problem = node_field_problem(field, self.value(field), self.taken)
        check = self.query_one(f"#{field}-check", Static)
        if problem is None:
            check.update(Content.from_markup("[$success]✓[/]") if self.value(field) else Content(""))
        elif not self.value(field) and field != "name":
            check.update(Content.from_markup("[$text-muted]$p[/]", p=problem))
        else:
            check.update(Content.from_markup("[$error]✗ $p[/]", p=problem))
        return problem

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id in FIELDS:
            self._check(event.input.id)

    def collect(self) -> NewNode | None:
        """The request, or None (the first bad field is focused)."""
        for field in FIELDS:
            if self._check(field) is not None:
                self.query_one(f"#{field}", Input).focus()
                return None
        return NewNode(self.value("name"), self.value("host").rstrip("/"), self.value("ssh"), self.value("key") or None)

    def action_this_machine(self) -> None:
        node = this_machine()
        for field, value in (("name", node.name), ("host", node.host), ("ssh", node.ssh)):
            self.query_one(f"#{field}", Input).value = value
        self.query_one("#name", Input).focus()

    def action_add(self) -> None:
        request = self.collect()
        if request is None:
            self.app.bell()
            return
        self.dismiss(request)

    def action_cancel(self) -> None:
        self.dismiss(None)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        {"add": self.action_add, "local": self.action_this_machine}.get(event.button.id or "", self.action_cancel)()
