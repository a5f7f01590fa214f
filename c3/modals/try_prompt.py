"""`t` on the Orchestration screen: the test prompt of `c3 pod try` for one pod — sent in a worker, then
its answer and numbers (TTFT, tokens, tokens/s), or why it got none."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.content import Content
from textual.widgets import Static

from backend.views.try_pod import DEFAULT_PROMPT as PROMPT
from c3.metrics_text import try_numbers
from c3.screens.base import CockpitModal, describe_error

if TYPE_CHECKING:
    from backend.views.try_pod import TryResult

MAX_TOKENS = 64
"""`c3 pod try`'s default --max-tokens."""


class TryModal(CockpitModal):
    """Sends `try_pod(name, PROMPT, MAX_TOKENS)` in a worker and shows the answer and its numbers."""

    BINDINGS = [Binding("escape,q,t", "close", "Close", id="try_close")]

    def __init__(self, pod: str) -> None:
        super().__init__()
        self.pod = pod
        self.result: TryResult | None = None

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="dialog", classes="try"):
            yield Static(Content.from_markup("[b]try pod[/] $p  [$text-muted]asking: $q …[/]", p=self.pod, q=PROMPT), id="try-head")
            yield Static("", id="try-answer")
            yield Static(Content.from_markup("[$text-muted]Esc closes[/]"), id="try-hint")

    def on_mount(self) -> None:
        self.call(self.services.try_pod, self.pod, PROMPT, MAX_TOKENS, done=self._landed, failed=self._failed, group="try")

    def _landed(self, result: TryResult) -> None:
        self.result = result
        self.query_one("#try-head", Static).update(Content.from_markup(
            "[b]try pod[/] $p  [$success]✓[/] $n  [$text-muted]($a, model $m)[/]", p=self.pod, n=try_numbers(result), a=result.api, m=result.model))
        self.query_one("#try-answer", Static).update(Content.from_markup("[$text-muted]$q[/]\n$t", q=PROMPT, t=result.answer.strip()))

    def _failed(self, error: BaseException) -> None:
        self.query_one("#try-head", Static).update(Content.from_markup("[b]try pod[/] $p", p=self.pod))
        self.query_one("#try-answer", Static).update(Content.from_markup("[$error]✗ $e[/]", e=describe_error(error)))

    def action_close(self) -> None:
        self.dismiss(None)
