"""Orchestration mode: a panel per GPU on the left, the pod view on the right, boots and results below.

The facade's live hub pushes what changes (`gpus_pushed`, `pods_pushed`, from the app's typed
messages): nothing polls on a timer while it does, and a reading that changes nothing on screen is not
even sent. While the mode is hidden or a modal covers it, the latest pushed readings are kept and taken
when it is shown again, as the paused polls did: a repaint under a modal's translucent backdrop repaints
the whole terminal, and what a modal shows (details) must agree with the list behind it. GPUs and pods are also read once at once — first frame, after a write,
`r` — and, when the facade cannot push, every 1 s and 2 s. Every facade call runs in a thread worker;
handlers only render. The badges' "as of" stamps move with every change, and otherwise every
`STAMP_STEP_S` while readings keep arriving (each redraw of the stamp is a repaint: bench/tui.py).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.widgets import OptionList, Static

if TYPE_CHECKING:
    from backend.models import GpuSnapshot
    from backend.views.node_pods import NodePods
from c3.screens.base import CockpitScreen, describe_error, show_if_changed
from c3.screens.boot_panel import boot_text
from c3.screens.chrome import mode_bar, result_line
from c3.screens.node_pods import NODE_PODS_PERIOD_S, node_pods_content
from c3.screens.pod_view import PodList, free_line
from c3.services import GpuReading, History, PodsReading, PodState
from widgets.gpu_panel import GpuPanel
from widgets.key_bar import KeyBar
from widgets.list_query import FILTER_BINDINGS, Filterable, FilterBar, QueryLine
from widgets.source_badge import source_badge

GPU_PERIOD_S = 1.0
PODS_PERIOD_S = 2.0
STAMP_STEP_S = 5.0
"""How far the freshness stamps lag the hub's last reading when nothing else changed (staleness is
judged on the last reading itself, not on the stamp shown)."""


def _step(shown: datetime | None, seen: datetime | None) -> datetime | None:
    """The stamp to show: the last reading once it is STAMP_STEP_S newer than the stamp shown."""
    if seen is None or (shown is not None and (seen - shown).total_seconds() < STAMP_STEP_S):
        return shown
    return seen


STATE_ORDER = {"failed": 0, "booting": 1, "serving": 2, "unknown": 3, "down": 4}


def pod_text(pod: PodState) -> str:
    """What `/` matches in the pod list: name, slug, port, state, placement, GPUs."""
    gpus = " ".join(f"GPU{i}" for i in pod.gpus)
    return f"{pod.name} {pod.slug} :{pod.port} {pod.state} {pod.placement} {pod.placement_detail} {gpus}"


class OrchestrationScreen(Filterable, CockpitScreen):
    """GPUs, pods, per-pod actions."""

    LIVE = True
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (100, "-wide")]
    """Under 100 columns toasts go over the GPU panels, not the pod list (c3.tcss)."""

    WRITES = frozenset({"new_pod", "pod_up", "pod_down", "pod_rm", "stop_all"})
    BINDINGS = [
        Binding("n,N", "app.new_pod", "New pod", id="new_pod", tooltip="Create a pod: name, slug, GPUs, port, live fit"),
        Binding("u", "pod('up')", "Up", id="pod_up", tooltip="Boot the selected pod"),
        Binding("d", "pod('down')", "Down", id="pod_down", tooltip="Stop the selected pod (it stays in the estate)"),
        Binding("x", "pod('rm')", "Remove", id="pod_rm", tooltip="Remove the selected pod from the estate"),
        Binding("e", "pod('edit')", "Edit", show=False, id="pod_edit", tooltip="Edit the selected pod: GPUs, port, slug (a running pod restarts)"),
        Binding("l", "pod('logs')", "Logs", id="pod_logs", tooltip="Engine log of the selected pod (bounded, follows)"),
        Binding("i", "pod('details')", "Details", show=False, id="pod_details", tooltip="Everything about the selected pod (also Enter)"),
        Binding("t", "pod('try')", "Try", show=False, id="pod_try", tooltip="Send the selected pod a test prompt: its answer, TTFT, tokens/s"),
        Binding("E", "pod('shell')", "Shell", show=False, id="pod_shell", tooltip="A shell in the selected pod's container (back here on exit)"),
        Binding("o", "app.stop_all", "Stop all", id="stop_all", tooltip="Stop the whole estate, after listing what will stop"),
        Binding("h", "app.open_history", "History", id="history", tooltip="GPU and engine metrics over the last minutes, with a time axis"),
        Binding("p", "app.open_processes", "Procs", id="processes", tooltip="GPU processes: pid, pod, memory; foreign ones highlighted"),
        Binding("g", "app.open_gateway", "Gateway", show=False, id="gateway",
                tooltip="The running gateway: models, the pod loaded, last swap, held requests"),
        Binding("r", "refresh_now", "Refresh", show=False, id="refresh", tooltip="Poll GPUs and pods now"),
        *FILTER_BINDINGS,
        Binding("exclamation_mark", "problems", "Problems", show=False, id="problems",
                tooltip="Only pods in trouble: failed, misplaced, unhealthy, preempting, stale"),
    ]
    SORTS = (
        ("name", lambda p: p.name),
        ("state", lambda p: (STATE_ORDER.get(p.state, 9), p.name)),
        ("GPU", lambda p: (p.gpus or (99,), p.name)),
        ("port", lambda p: p.port),
    )

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.gpus: dict[int, GpuSnapshot] = {}
        self.gpu_taken_at: datetime | None = None
        self.gpu_error: str | None = None
        self.readings: list[PodState] = []
        """The last pod reading as the facade gave it."""
        self.pods: list[PodState] = []
        """The pods as shown: the readings with the boots in flight folded in (boot_panel.as_shown)."""
        self.pods_taken_at: datetime | None = None
        self.pods_error: str | None = None
        self._behind = False
        """Pushed readings arrived while the screen was not shown: draw them when it is."""
        self._pending_gpus: GpuReading | None = None
        self._pending_pods: PodsReading | None = None
        """The latest pushed readings while a modal covers the screen or its mode is hidden."""
        self._after_gpus: Callable[[], None] | None = None
        """What waits for the first GPU reading (`when_gpus_read`): at most one, the latest asked."""
        self._pods_pushes = 0
        """Pushed pod readings shown so far: a poll asked before the latest of them may hold an older reading."""
        self.history = History()
        self._seeded = False
        self._focused_pods = False
        self.select_next: str | None = None
        """A pod to highlight as soon as it is listed (the one just created)."""
        self.gpu_poller = self.add_poller(GPU_PERIOD_S, self._poll_gpus, pushed=True)
        self.pods_poller = self.add_poller(PODS_PERIOD_S, self._poll_pods, pushed=True)
        self.node_pods: list[NodePods] | None = None
        """The other registered nodes' pods (None before the first reading)."""
        self.node_pods_error: str | None = None
        self.node_pods_poller = self.add_poller(NODE_PODS_PERIOD_S, self._poll_node_pods)

    def compose(self) -> ComposeResult:
        yield Static(id="modebar")
        yield Static(id="sources")
        with Horizontal(id="orch"):
            yield VerticalScroll(id="gpus")
            with Vertical(id="pods-pane"):
                yield Static("[b]Pods[/]", id="pods-title")
                yield Static("", id="pods-empty")
                yield PodList(id="pods")
                yield QueryLine(id="query-line")
                yield FilterBar(placeholder="filter pods: text or regex · Enter keeps · Esc clears", id="filter-bar")
                yield Static("", id="free")
                yield Static("", id="node-pods")
        yield Static("", id="boot")
        yield Static("", id="result")
        yield KeyBar()

    def refresh_chrome(self) -> None:
        app = self.cockpit
        label = app.services.label if app.services is not None else "connecting…"
        show_if_changed(self.query_one("#modebar", Static), mode_bar("orchestration", label, app.readonly, app.trouble.summary()))

    def on_mount(self) -> None:
        self.refresh_chrome()
        self.query_one("#boot").display = False
        self.query_one("#node-pods").display = False
        self.render_pods()
        self.render_sources()
        self.show_result()
        self.add_ticker(1.0, self.render_sources, name="as-of")
        super().on_mount()

    # -- polling ---------------------------------------------------------------------------------
    def _poll_gpus(self) -> None:
        if not self._seeded:
            self._seeded = True
            self.call(self.services.gpu_history, done=self._seed_history, failed=lambda e: None, group="gpu-history")
        self.call(self.services.gpu_snapshots, done=self._gpus_landed, failed=self._gpus_failed, group="gpus")

    def _seed_history(self, seed: dict[int, list[tuple[float, float]]]) -> None:
        for index, samples in seed.items():
            self.history.util.setdefault(index, [])[:0] = [u for u, _ in samples]
            self.history.mem.setdefault(index, [])[:0] = [m for _, m in samples]
        self.render_gpus()

    def _gpus_landed(self, snapshots: list[GpuSnapshot]) -> None:
        self.gpu_poller.landed()
        taken = max((s.taken_at for s in snapshots), default=None)
        if taken is not None and self.gpu_taken_at is not None and taken < self.gpu_taken_at:
            return  # a push overtook this read: what is shown is newer
        self.gpus = {s.gpu.index: s for s in snapshots}
        self.gpu_taken_at = max((s.taken_at for s in snapshots), default=self.cockpit.clock())
        self.gpu_error = None
        self.history.add(snapshots)
        with self.app.batch_update():
            self.render_gpus()
            self.render_pods()
            self.render_sources()
        self._gpus_known()

    def _gpus_failed(self, error: BaseException) -> None:
        self.gpu_poller.landed()
        self.gpu_error = describe_error(error)
        self.render_sources()
        self._gpus_known()

    @property
    def gpus_read(self) -> bool:
        """Whether the GPUs have been read (or failed to be): until then `gpus` is empty because nothing
        is known yet, not because the rig has no GPU."""
        return self.gpu_taken_at is not None or self.gpu_error is not None

    def when_gpus_read(self, then: Callable[[], None]) -> None:
        """Run `then` once the first GPU reading (or its failure) lands; at once if it has. A form that
        places pods opened before it would show every GPU taken ("0 of 1 free")."""
        if self.gpus_read:
            then()
        else:
            self._after_gpus = then

    def _gpus_known(self) -> None:
        then, self._after_gpus = self._after_gpus, None
        if then is not None:
            then()

    def _poll_pods(self) -> None:
        asked = self._pods_pushes
        self.call(self.services.pod_states, done=lambda pods: self._pods_landed(pods, asked=asked), failed=self._pods_failed, group="pods")

    def _pods_landed(self, pods: list[PodState], *, landed: bool = True, asked: int | None = None) -> None:
        if landed:
            self.pods_poller.landed()
        if asked is not None and asked != self._pods_pushes:
            # A push was shown while this read was under way (a boot's end asks for a poll at once): the
            # push can be the newer word — `serving`, which ends the boot's `served` hold — and this
            # older `booting` put the row back to booting after the result said serving.
            return
        self.readings = pods
        if landed:  # one pod read afresh does not make the others' reading newer
            self.pods_taken_at = self.cockpit.clock()
            self.pods_error = None
        self.boots_changed()

    def boots_changed(self) -> None:
        """Show the readings with the boots folded in — the pod rows, GPU panels, trouble count and boot
        panel from the same two inputs in one frame."""
        self.pods = self.cockpit.as_shown(self.readings)
        self.cockpit.pods_read(self.pods)
        with self.app.batch_update():
            self.render_pods()
            self.render_gpus()
            self.render_sources()

    def pod_seen(self, pod: PodState) -> None:
        """A newer reading of one pod (the details modal's): the list, the GPU panels and the trouble
        count take it too, so no view behind the modal contradicts it."""
        if pod.name in {p.name for p in self.readings}:
            self._pods_landed([pod if p.name == pod.name else p for p in self.readings], landed=False)

    def _pods_failed(self, error: BaseException) -> None:
        self.pods_poller.landed()
        self.pods_error = describe_error(error)
        self.cockpit.pods_read(self.pods, stale=True)
        self.render_sources()

    def _poll_node_pods(self) -> None:
        self.call(self.services.node_pods, done=self._node_pods_landed, failed=self._node_pods_failed, group="node-pods")

    def _node_pods_landed(self, readings: list[NodePods]) -> None:
        self.node_pods_poller.landed()
        self.node_pods, self.node_pods_error = readings, None
        self.render_node_pods()

    def _node_pods_failed(self, error: BaseException) -> None:
        self.node_pods_poller.landed()
        self.node_pods_error = describe_error(error)
        self.render_node_pods()

    def render_node_pods(self) -> None:
        """The other nodes' pods under this host's, marked by node; hidden when no other node is registered."""
        part = self.query_one("#node-pods", Static)
        content = node_pods_content(self.node_pods, self.node_pods_error, self.query_one("#pods-pane").content_size.width)
        part.display = content is not None
        if content is not None:
            show_if_changed(part, content)

    def action_refresh_now(self) -> None:
        self.poll_now()

    # -- pushed by the live hub (through the app's messages) -----------------------------------------
    def gpus_pushed(self, reading: GpuReading) -> None:
        """The GPU panels' readings changed (values, processes, sparklines, or the source failing)."""
        if not self.is_active:
            self._pending_gpus = reading  # kept: drawn when the screen is shown again
            return
        pods_too = True
        if reading.snapshots:
            values = [tuple(v for k, v in snap if k != "taken_at") for snap in reading.snapshots]
            pods_too = values != [tuple(v for k, v in snap if k != "taken_at") for snap in self.gpus.values()]
            self.gpus = {s.gpu.index: s for s in reading.snapshots}
            self.history.util = {i: list(v) for i, v in reading.util.items()}
            self.history.mem = {i: list(v) for i, v in reading.mem.items()}
            self.gpu_taken_at = reading.taken_at
        self.gpu_error = reading.error
        self._redraw(pods=pods_too)  # the pod view shows GPU numbers, not their sparklines
        if self.gpus_read:
            self._gpus_known()

    def pods_pushed(self, reading: PodsReading) -> None:
        """The pod view's readings changed. While a modal covers the screen the reading waits, like the
        polls did: what the modal shows (details) and the list and trouble count behind it must agree."""
        if not self.is_active:
            self._pending_pods = reading
            return
        # The readings, folded with the boots in flight like a polled reading (boots_changed): shown raw,
        # a push that said `serving` a moment before c3's own boot probe answered put `● serving` in
        # the row beside `◐ booting` in the boot panel.
        self._pods_pushes += 1
        self.readings = list(reading.pods)
        self.pods = self.cockpit.as_shown(self.readings)
        self.pods_taken_at = reading.taken_at
        self.pods_error = reading.error
        self.cockpit.pods_read(self.pods, stale=reading.error is not None)
        self._redraw()

    def _redraw(self, *, pods: bool = True) -> None:
        if not self.is_active:
            self._behind = True
            return
        self._behind = False
        with self.app.batch_update():
            self.render_gpus()
            if pods:
                self.render_pods()
            self.render_sources()

    def resumed(self) -> None:
        if not self.cockpit.pushed:
            self.poll_now()
            return
        pods, gpus = self._pending_pods, self._pending_gpus
        self._pending_pods = self._pending_gpus = None
        if pods is not None:
            self.pods_pushed(pods)
        if gpus is not None:
            self.gpus_pushed(gpus)
        if self._behind:
            self._redraw()

    # -- rendering -------------------------------------------------------------------------------
    def holder_of(self, index: int) -> str:
        """Who holds a GPU: every running pod whose processes are on it (`⚠` marks one that does not
        claim it: a pod on the wrong GPU shows where it really is), a stranger, or the pod that claims it."""
        running = [pod for pod in self.pods if pod.state in {"serving", "booting"} and index in (pod.actual_gpus or pod.gpus)]
        if running:
            return "+".join(pod.name + ("" if index in pod.gpus else "⚠") for pod in running)
        claimed = [pod for pod in self.pods if index in pod.gpus]
        snap = self.gpus.get(index)
        if snap is not None and snap.processes:
            return f"pid {snap.processes[0].pid}" + (f" (claimed by {claimed[0].name})" if claimed else " (not a pod)")
        if claimed:
            pod = claimed[0]
            return f"{pod.name} (claimed, unused)" if pod.state in {"serving", "booting"} else f"{pod.name} (down)"
        return ""

    def render_gpus(self) -> None:
        container = self.query_one("#gpus", VerticalScroll)
        panels = {panel.index: panel for panel in container.query(GpuPanel)}
        missing = [i for i in sorted(self.gpus) if i not in panels]
        if missing:
            new = [GpuPanel(i, id=f"gpu-{i}") for i in missing]
            container.mount_all(new)
            panels.update({p.index: p for p in new})
        for index, snap in self.gpus.items():
            panels[index].show(snap, self.history.util.get(index, []), self.history.mem.get(index, []), self.holder_of(index))

    def list_widget(self) -> PodList:
        return self.query_one(PodList)

    def query_changed(self) -> None:
        self.render_pods()

    def action_problems(self) -> None:
        from dataclasses import replace

        self.set_query(replace(self.list_query, problems_only=not self.list_query.problems_only))

    def shown_pods(self) -> list[PodState]:
        """The pods the list shows: filtered (`/`, `!`) and sorted (`s`, `S`)."""
        pods = self.pods
        if self.list_query.problems_only:
            troubled = self.cockpit.trouble.pods()
            pods = [p for p in pods if p.name in troubled]
        return self.filtered(pods, pod_text)

    def render_pods(self) -> None:
        pod_list = self.query_one(PodList)
        empty = self.query_one("#pods-empty", Static)
        shown = self.shown_pods()
        if not shown:
            pod_list.display = False
            empty.display = True
            loading = self.pods_taken_at is None and self.pods_error is None
            if self.pods:
                what = "no pod in trouble" if self.list_query.problems_only and not self.list_query.pattern else "no pod matches"
                empty.update(Content.from_markup("[$text-muted]$w — Esc shows every pod[/]", w=what))
            else:
                empty.update("[$text-muted]reading the estate…[/]" if loading else "No pods yet — press [b]N[/] to create one\n[$text-muted](a pod is one model pinned to a GPU set and a port)[/]")
        else:
            empty.display = False
            pod_list.display = True
            pod_list.show(shown, self.gpus)
            names = [p.name for p in shown]
            if self.select_next in names:
                pod_list.highlighted = names.index(self.select_next)
                self.select_next = None
            if not self._focused_pods:
                self._focused_pods = True
                self.call_after_refresh(pod_list.focus)  # the pods are what keys act on (once shown)
        claimed = sum(len(p.gpus) for p in self.pods)
        show_if_changed(self.query_one("#pods-title", Static),
                        Content.from_markup("[b]Pods[/] [$text-muted]($n · $c/$t GPUs claimed)[/]", n=str(len(self.pods)), c=str(claimed), t=str(len(self.gpus))))
        show_if_changed(self.query_one("#free", Static), free_line(self.pods, self.gpus, {i: self.holder_of(i) for i in self.gpus}))
        self.render_boots()

    def refresh_badges(self) -> None:
        self.render_sources()

    def render_sources(self) -> None:
        now = self.cockpit.clock()
        gpus_at = pods_at = None
        if self.cockpit.pushed and self.cockpit.services is not None:
            # Readings that changed nothing were not pushed: the hub says when it last read each part.
            fresh = self.services.freshness()
            gpus_at, pods_at = fresh.gpus_at, fresh.pods_at
            self.gpu_taken_at = _step(self.gpu_taken_at, gpus_at)
            self.pods_taken_at = _step(self.pods_taken_at, pods_at)
        parts = [
            source_badge("GPUs", self.gpu_taken_at, now, stale_after_s=GPU_PERIOD_S * 5, error=self.gpu_error, paused=not self.is_active, seen_at=gpus_at),
            source_badge("Pods", self.pods_taken_at, now, stale_after_s=PODS_PERIOD_S * 5, error=self.pods_error, paused=not self.is_active, seen_at=pods_at),
        ]
        show_if_changed(self.query_one("#sources", Static), Content("  ·  ").join(parts))

    def render_boots(self) -> None:
        boots = self.cockpit.boots
        panel = self.query_one("#boot", Static)
        panel.display = bool(boots)
        if boots:
            panel.update(boot_text(list(boots.values())))

    def show_result(self) -> None:
        result = self.cockpit.last_result
        line = self.query_one("#result", Static)
        line.update(result_line(result, "the result of every write shows here · ⏎ details · ? all keys · ^p every action"))

    # -- per-pod actions -------------------------------------------------------------------------
    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        if event.option.id:
            self.cockpit.open_details(event.option.id)

    def enter_shell(self, name: str) -> None:
        """`e`: the facade says which command enters the pod's container (in a worker: it asks the
        runtime; on the simulated rig a shell in the pod's sandbox) and refuses a stopped pod with a
        toast; then the cockpit hands the terminal to that shell (`App.suspend`) until it exits."""
        if self.cockpit.readonly:
            self.app.notify(f"read-only cockpit: no shell in pod {name}", title="Refused", severity="error")
            return
        self.call(self.services.shell_command, name, done=self._run_shell)

    def _run_shell(self, argv: list[str]) -> None:
        import subprocess

        from textual.app import SuspendNotSupported

        try:
            with self.app.suspend():
                subprocess.run(argv, check=False)  # interactive: the terminal is the shell's until it exits
        except SuspendNotSupported:
            self.app.notify("this terminal cannot be handed to a shell — run: " + " ".join(argv[:4]), title="Refused", severity="error")
        self.poll_now()

    def action_pod(self, what: str) -> None:
        pod_list = self.query_one(PodList)
        name = pod_list.selected_pod if pod_list.display and pod_list.option_count else None
        if name is None:
            self.app.notify("No pod selected — press N to create one.", severity="warning")
            return
        if what == "logs":
            self.cockpit.open_logs(name)
        elif what == "details":
            self.cockpit.open_details(name)
        elif what == "try":
            self.cockpit.open_try(name)
        elif what == "edit":
            self.cockpit.open_edit(name)
        elif what == "shell":
            self.enter_shell(name)
        else:
            self.cockpit.request_write(what, pod=name)
