"""`g` / `:gateway`: every running `c3 gateway serve` on this machine — its address and settings, the last
swap, and per pod its state (the one loaded now is `● running`), the model names that route to it, the
requests in flight and those held (for a start, or for a swap that must wait: why, in the planner's words).

Read from the gateway's own status file (`c3 gateway status`'s source) in a worker, every PERIOD_S while
open; the gateway rewrites it on every change, so what is shown is at most a couple of seconds old.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.widgets import Static

from c3.look import shown
from c3.screens.base import CockpitModal, describe_error
from widgets.nav_table import NavTable

if TYPE_CHECKING:
    from backend.views.gateway import GatewayStatus, ModelStatus

PERIOD_S = 2.0
NONE_RUNNING = (
    "[b]No gateway running on this machine.[/] One OpenAI endpoint for every pod, routed by model name, a stopped\n"
    "pod started on demand and on-demand pods sharing GPUs swapped by fit:\n\n"
    "  [b]c3 gateway serve[/] [$text-muted][--bind 127.0.0.1:8012] [--idle-ttl S] [--swap-wait S][/]\n"
    "  [$text-muted]or as a service: c3 gateway install-service · for LiteLLM: c3 gateway litellm-config[/]"
)


def state_cell(state: str) -> Content:
    """The pod's state as the gateway sees it, marked like the pod list's."""
    if state == "running":
        return Content.from_markup("[$success]● running[/]")
    if state in ("starting", "stopping", "falling-asleep", "waking"):
        return Content.from_markup("[$warning]◐ $s[/]", s=state)
    if state == "sleeping":  # its engine runs, asleep (vLLM sleep mode): a request wakes it
        return Content.from_markup("[$accent]◑ sleeping[/]")
    if state == "failed":
        return Content.from_markup("[$error]✗ failed[/]")
    return Content.from_markup("[$text-muted]○ $s[/]", s=state)


def gateway_head(g: GatewayStatus) -> Content:
    from backend.views.gateway import swap_line

    ttl = f"{g.idle_ttl_s:g}s" if g.idle_ttl_s else "off"
    head = Content.from_markup("[b]Gateway $b[/]  [$text-muted]pid $p · $a · idle ttl $t · min residency $r · swap wait $w[/]",
                               b=shown(g.bind), p=str(g.pid), a="API key required" if g.auth else "no API key", t=ttl,
                               r=f"{g.min_residency_s:g}s", w=f"{g.swap_wait_s:g}s")
    if g.last_swap is None:
        return Content("\n").join([head, Content.from_markup("  [$text-muted]no swap yet[/]")])
    return Content("\n").join([head, Content.from_markup("  [$text-muted]last swap[/] $s", s=shown(swap_line(g.last_swap)))])


def notes(g: GatewayStatus) -> list[Content]:
    """Under the table: the requests held for a swap and why, and each pod's last error."""
    out = []
    for m in g.models:
        if m.held_for:
            out.append(Content.from_markup("[$warning]◐ $p: $n request(s) held for a swap:[/] $w", p=shown(m.pod), n=str(m.queue_depth), w=shown(m.held_for)))
        if m.last_error:
            out.append(Content.from_markup("[$error]✗ $p:[/] $e", p=shown(m.pod), e=shown(m.last_error)))
    return out


def _queue(m: ModelStatus) -> str:
    return str(m.queue_depth) + (" held" if m.held_for else "") if m.queue_depth else "—"


class GatewayModal(CockpitModal):
    """The gateways' heads, one table of their pods, and the held requests; re-read every 2 s in a worker."""

    DEFAULT_CSS = """
    #dialog.gateway { height: auto; max-height: 90%; max-width: 150; }
    #dialog.gateway NavTable { height: auto; max-height: 24; }
    """
    BINDINGS: ClassVar[list[Binding | tuple[str, str] | tuple[str, str, str]]] = [
        Binding("escape,q,g", "close", "Close", id="gateway_close"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[GatewayStatus] | None = None
        self.error: str | None = None
        self.in_flight = False

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="gateway"):
            yield Static("", id="gateway-head")
            yield NavTable(id="gateway-pods", cursor_type="row", zebra_stripes=True)
            yield Static("", id="gateway-notes")
            yield Static("", id="gateway-hint")

    def on_mount(self) -> None:
        table = self.query_one("#gateway-pods", NavTable)
        for name, width in (("pod", 16), ("state", 11), ("queue", 7), ("in flight", 9), ("GPUs", 6), ("by gw", 5)):
            table.add_column(name, width=width)
        table.add_column("model names")
        self.render_rows()
        self.poll()
        if getattr(self.app, "autopoll", True):
            self.set_interval(PERIOD_S, self.poll, name="gateway")
        table.focus()

    def poll(self) -> None:
        if self.in_flight:
            return
        self.in_flight = True
        self.call(self.services.gateways, done=self._landed, failed=self._failed, group="gateway")

    def _landed(self, rows: list[GatewayStatus]) -> None:
        self.in_flight = False
        self.rows, self.error = rows, None
        self.render_rows()

    def _failed(self, error: BaseException) -> None:
        self.in_flight = False
        self.error = describe_error(error)
        self.render_rows()

    def render_rows(self) -> None:
        head = self.query_one("#gateway-head", Static)
        table = self.query_one("#gateway-pods", NavTable)
        gateways = self.rows or []
        table.display = bool(gateways)
        table.clear()
        if self.error:
            head.update(Content.from_markup("[b]Gateway[/]  [$error]✗ $e[/]", e=self.error))
        elif self.rows is None:
            head.update(Content.from_markup("[b]Gateway[/]  [$text-muted]reading…[/]"))
        elif not gateways:
            head.update(Content.from_markup(NONE_RUNNING))
        else:
            head.update(Content("\n").join(gateway_head(g) for g in gateways))
        several = len(gateways) > 1
        for g in gateways:
            for m in g.models:
                name = f"{m.pod} (:{g.bind.rsplit(':', 1)[-1]})" if several else m.pod
                names = ", ".join(n for n in m.models if n != m.pod) or "—"
                table.add_row(name, state_cell(m.state), _queue(m), str(m.in_flight), ",".join(map(str, m.gpus)) or "—",
                              "yes" if m.started_by_gateway else "no", names, key=f"{g.bind}/{m.pod}")
        found = [line for g in gateways for line in notes(g)]
        notes_widget = self.query_one("#gateway-notes", Static)
        notes_widget.display = bool(found)
        notes_widget.update(Content("\n").join(found))
        self.query_one("#gateway-hint", Static).update(Content.from_markup("[$text-muted]from the gateway's status file · every 2 s · Esc closes[/]"))

    def action_close(self) -> None:
        self.dismiss(None)
