"""Everything about one pod: where it runs, what it asked for, how it fits."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.content import Content
from textual.widgets import Static

from c3.look import shown
from c3.screens.base import CockpitModal, describe_error
from c3.screens.pod_view import STATE_GLYPH, badge
from c3.services import PodDetails
from widgets.fit_breakdown import fit_lines


class DetailsModal(CockpitModal):
    """Loads `pod_details(name)` in a worker and shows it."""

    BINDINGS = [Binding("escape,q,i", "close", "Close", id="details_close")]

    def __init__(self, pod: str) -> None:
        super().__init__()
        self.pod = pod
        self.details: PodDetails | None = None

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="dialog", classes="details"):
            yield Static(Content.from_markup("[b]pod[/] $p  [$text-muted]loading…[/]", p=self.pod), id="details-body")
            yield Static("", id="details-fit")

    def on_mount(self) -> None:
        self.call(self.services.pod_details, self.pod, done=self._landed, failed=self._failed, group="details")

    def _landed(self, details: PodDetails) -> None:
        self.details = details
        self.cockpit.pod_seen(details.pod)  # the list behind this modal shows the same reading
        self.boots_changed()

    def boots_changed(self) -> None:
        """Shown as the list behind shows it, a boot in flight included (boot_panel.as_shown); again
        whenever a boot moves on."""
        if self.details is None:
            return
        details = self.details
        [pod] = self.cockpit.as_shown([details.pod])
        glyph, style = STATE_GLYPH.get(pod.state, ("?", "$text-muted"))
        lines = [Content.from_markup(f"[b]pod[/] $p  [$text-muted]$s:$port[/]  [{style}]{glyph} $st[/]  {badge(pod)}", p=pod.name, s=shown(pod.slug), port=str(pod.port), st=pod.state)]
        if pod.placement_detail:
            lines.append(Content.from_markup("  [$text-muted]$d[/]", d=shown(pod.placement_detail)))
        if pod.actual_gpus is not None:
            lines.append(Content(f"  requested GPU {', '.join(map(str, pod.gpus))} · running on GPU {', '.join(map(str, pod.actual_gpus))}"))
        width = max((len(k) for k, _ in details.facts), default=0)
        lines += [Content.from_markup("  [$text-muted]$k[/]  $v", k=k.ljust(width), v=shown(v)) for k, v in details.facts]
        self.query_one("#details-body", Static).update(Content("\n").join(lines))
        self.query_one("#details-fit", Static).update(fit_lines(details.fit))

    def _failed(self, error: BaseException) -> None:
        self.query_one("#details-body", Static).update(Content.from_markup("[$error]✗ $e[/]", e=describe_error(error)))

    def action_close(self) -> None:
        self.dismiss(None)
