"""`?` help: every key of the screen it was opened from, generated from the bindings themselves."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Static

CTRL_C_NOTE = (
    "Ctrl+C quits (like htop and k9s), except inside a text field where it copies; Ctrl+Q always quits. "
    "Quitting never stops a pod: pods are containers and keep serving."
)


def key_label(key: str) -> str:
    """`ctrl+p` → `Ctrl+P`, `question_mark` → `?`, `n,N` → `n N`."""
    names = {"question_mark": "?", "slash": "/", "exclamation_mark": "!", "colon": ":", "escape": "Esc", "enter": "Enter", "space": "Space",
             "tab": "Tab", "left": "←", "right": "→", "up": "↑", "down": "↓"}
    out = []
    for part in key.split(","):
        part = names.get(part, part)
        if part.startswith("ctrl+"):
            part = "Ctrl+" + part[5:].upper()
        out.append(part)
    return " ".join(out)


def help_rows(sections: list[tuple[str, list[Binding]]]) -> Content:
    """The help text: one section per binding owner, key column then description and tooltip."""
    lines: list[Content] = []
    for title, bindings in sections:
        seen = set()
        rows = []
        for binding in bindings:
            if not binding.description or binding.system or binding.action in seen:
                continue
            seen.add(binding.action)
            rows.append((key_label(binding.key), binding.description, binding.tooltip or ""))
        if not rows:
            continue
        lines.append(Content.from_markup("[b $accent]$t[/]", t=title))
        for key, desc, tip in rows:
            lines.append(Content.from_markup("  [b]$k[/] $d [$text-muted]$tip[/]", k=f"{key:<9}", d=f"{desc:<14}", tip=tip))
        lines.append(Content(""))
    lines.append(Content.from_markup("[$text-muted]$n[/]", n=CTRL_C_NOTE))
    return Content("\n").join(lines)


class HelpModal(ModalScreen[None]):
    """Keys, grouped: the mode's own, then the global ones."""

    BINDINGS = [Binding("escape,q,question_mark", "dismiss_help", "Close", id="help_close")]

    def __init__(self, sections: list[tuple[str, list[Binding]]]) -> None:
        super().__init__()
        self.sections = sections

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="dialog", classes="help"):
            yield Static("[b]Keys[/]  [$text-muted](Esc closes · Ctrl+P finds any action by name)[/]")
            yield Static(help_rows(self.sections), id="help-keys")

    def action_dismiss_help(self) -> None:
        self.dismiss(None)
