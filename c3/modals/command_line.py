"""`:` command entry, k9s-style: `:pods`, `:nodes`, `:recipes`, `:procs`, `:history`, `:gateway`, `:problems`,
`:help`, `:q`. Tab completes (a unique match or the common prefix; on a complete word it cycles); the ghost text
shows the first match; Enter runs; Esc leaves. An unknown command is one line, never a traceback.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.suggester import SuggestFromList
from textual.widgets import Input, Static

COMMANDS: dict[str, str] = {
    "pods": "Orchestration: GPUs and pods",
    "nodes": "the node registry and pools",
    "recipes": "the recipe catalogue",
    "procs": "GPU processes: pid, pod, memory, foreign ones",
    "history": "GPU and engine metrics over the last minutes",
    "gateway": "the running gateway: models, loaded pod, last swap, held requests",
    "problems": "only the pods in trouble (again: all pods)",
    "help": "every key of this screen",
    "quit": "leave the cockpit (pods keep running)",
}
ALIASES = {"q": "quit", "q!": "quit", "orchestration": "pods", "pod": "pods", "node": "nodes", "recipe": "recipes", "processes": "procs",
           "ps": "procs", "hist": "history", "problem": "problems", "trouble": "problems", "?": "help", "1": "pods", "2": "nodes", "3": "recipes"}


def resolve(text: str) -> str | None:
    """The command a typed line names (`:pods`, `pods`, an alias, or an unambiguous prefix); None: unknown."""
    word = text.strip().lstrip(":").strip().lower()
    if not word:
        return None
    if word in COMMANDS:
        return word
    if word in ALIASES:
        return ALIASES[word]
    matches = [c for c in COMMANDS if c.startswith(word)]
    return matches[0] if len(matches) == 1 else None


def completions(text: str) -> list[str]:
    """Commands starting with what is typed."""
    word = text.strip().lstrip(":").lower()
    return [c for c in COMMANDS if c.startswith(word)]


class CommandLine(ModalScreen[str | None]):
    """A one-line prompt at the bottom; dismisses with the resolved command (None: cancelled or unknown)."""

    DEFAULT_CSS = """
    CommandLine { align: left bottom; background: $background 30%; }
    CommandLine #command-box { height: auto; width: 100%; background: $panel; padding: 0 1; margin-bottom: 1; }
    CommandLine Input { border: none; height: 1; padding: 0; background: $panel; }
    CommandLine #command-hint { color: $text-muted; height: auto; }
    """
    BINDINGS = [
        Binding("escape", "cancel", "Close", id="command_close"),
        Binding("tab", "complete", "Complete", id="command_complete", priority=True),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.tabbed: str | None = None
        """The text a Tab left unchanged (ambiguous): a second Tab on it takes the first match."""

    def compose(self) -> ComposeResult:
        with Vertical(id="command-box"):
            yield Static(self._hint(""), id="command-hint")
            yield Input(placeholder="pods · nodes · recipes · procs · history · problems · help · q", id="command-input",
                        suggester=SuggestFromList(list(COMMANDS), case_sensitive=False))

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    @staticmethod
    def _hint(text: str) -> Content:
        found = completions(text) or list(COMMANDS)
        return Content.from_markup("[b]:[/]") + Content("  ").join(
            Content.from_markup("[b]$c[/] [$text-muted]$d[/]" if len(found) <= 2 else "[b]$c[/]", c=c, d=COMMANDS[c]) for c in found
        )

    def on_input_changed(self, event: Input.Changed) -> None:
        self.query_one("#command-hint", Static).update(self._hint(event.value))

    def action_complete(self) -> None:
        """Tab: complete a unique match or the common prefix; when that adds nothing, the hint lists
        the candidates and a second Tab takes the first; on a complete word, Tab cycles."""
        field = self.query_one(Input)
        matches = completions(field.value)
        if not matches:
            return
        prefix = _common_prefix(matches)
        if field.value in matches and len(matches) > 1:
            following = matches[(matches.index(field.value) + 1) % len(matches)]
        elif len(matches) == 1:
            following = matches[0]
        elif len(prefix) > len(field.value):
            following = prefix
        elif self.tabbed == field.value:
            following = matches[0]
        else:
            self.tabbed = field.value
            return
        field.value = following
        field.cursor_position = len(following)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        text = event.value.strip()
        if not text:
            self.dismiss(None)
            return
        command = resolve(text)
        if command is None:
            self.app.notify(f"unknown command :{text[:40]} — try :{' :'.join(COMMANDS)}", title="Command", severity="error", timeout=6, markup=False)
        self.dismiss(command)

    def action_cancel(self) -> None:
        self.dismiss(None)


def _common_prefix(words: list[str]) -> str:
    prefix = words[0]
    for word in words[1:]:
        while not word.startswith(prefix):
            prefix = prefix[:-1]
    return prefix
