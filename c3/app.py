"""The c3 cockpit: modes Orchestration / Nodes / Recipes, gated writes, help and command palette.

The app owns the write flow (plan → confirm → re-validate → execute → show the result) so that the
same path serves keys, the palette and every mode. All facade calls happen in thread workers.

Ctrl+C, decided: it quits (operators raised on htop and k9s press it), except inside a text field
where Textual's copy binding takes it first. Quitting is harmless: pods are containers and keep
serving after the cockpit exits. Ctrl+Q also quits.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.message import Message
from textual.screen import ModalScreen, Screen

from backend.errors import terminal_safe
from c3.cockpit import Cockpit
from c3.look import ANSI_THEME, AsciiFilter, SafeTextFilter, no_color, shown, wants_ansi_theme, wants_ascii
from c3.screens.base import CockpitScreen, LiveModal, ServiceCalls
from c3.screens.orchestration import OrchestrationScreen
from c3.services import (
    BootProgress,
    GpuReading,
    LiveUpdate,
    NewPod,
    PodEdit,
    PodsReading,
    PodState,
    Services,
    WritePlan,
    WriteResult,
)
from c3.toasts import Toast, ToastDesk
from c3.trouble import Trouble, TroubleWatch
from c3.write_flow import WriteFlow

# Only what the first frame needs is imported up front; the other modes and the modals (DataTable,
# Input, Log…) load when first opened, and the facade (pydantic, SDK adapters) is built in a worker.


def _nodes_screen() -> Screen[Any]:
    from c3.screens.nodes import NodesScreen

    return NodesScreen()


def _recipes_screen() -> Screen[Any]:
    from c3.screens.recipes import RecipesScreen

    return RecipesScreen()


@dataclass
class GpusRead(Message):
    """What the GPU panels show changed (posted from the facade's live-hub thread; `post_message` is thread-safe)."""

    reading: GpuReading


@dataclass
class PodsRead(Message):
    """What the pod view shows changed (posted from the facade's live-hub thread)."""

    reading: PodsReading


BELL_GAP_S = 5.0
"""The terminal bell rings at most once in this many seconds: one incident often arrives as several
readings (a killed engine reads unhealthy, then failed, tens of milliseconds apart); each still gets its
toast and its count."""

NAVIGATION = [
    Binding("up,k", "nav_up", "Previous", tooltip="Previous pod / row"),
    Binding("down,j", "nav_down", "Next", tooltip="Next pod / row"),
    Binding("enter", "nav_enter", "Open", tooltip="Details of the highlighted pod"),
    Binding("tab", "nav_tab", "Next field", tooltip="Move between panes and fields"),
    Binding("ctrl+p", "nav_palette", "Palette", tooltip="Every action by name, per pod too"),
]


def _warm_imports() -> None:
    """Import the modes and modals in a thread after the first frame, so opening one later does not
    pay its imports on the event loop."""
    import importlib

    for name in ("c3.modals.new_pod", "c3.modals.confirm", "c3.modals.logs", "c3.modals.details", "c3.modals.help", "c3.modals.history", "c3.modals.processes", "c3.modals.command_line",
                 "c3.modals.gateway",
                 "c3.screens.nodes", "c3.screens.recipes"):
        importlib.import_module(name)


def _utc_now() -> datetime:
    return datetime.now(UTC)


class C3App(WriteFlow, ServiceCalls, App[None]):
    """The cockpit. `services` is the facade; `clock` is read on the event loop for "as of" stamps."""

    CSS_PATH = Path(__file__).with_name("c3.tcss")
    TITLE = "c3"
    MODES = {"orchestration": OrchestrationScreen, "nodes": _nodes_screen, "recipes": _recipes_screen}
    DEFAULT_MODE = "orchestration"
    BINDINGS = [
        Binding("1", "switch_mode('orchestration')", "Orchestration", id="mode_orchestration", tooltip="GPUs and pods", show=False),
        Binding("2", "switch_mode('nodes')", "Nodes", id="mode_nodes", tooltip="The node registry", show=False),
        Binding("3", "switch_mode('recipes')", "Recipes", id="mode_recipes", tooltip="The recipe catalogue", show=False),
        Binding("colon", "command_line", "Command", id="command", show=False,
                tooltip=":pods :nodes :recipes :procs :history :gateway :problems :help :q (Tab completes)"),
        Binding("question_mark", "help", "Help", id="help", tooltip="Every key of this screen"),
        Binding("q", "quit", "Quit", id="quit", tooltip="Leave the cockpit (pods keep running)"),
        Binding("ctrl+c", "quit", "Quit", show=False, id="quit_ctrl_c"),
        Binding("ctrl+q", "quit", "Quit", show=False, priority=True, id="quit_ctrl_q"),
    ]

    def __init__(self, services: Services | None = None, *, factory: Callable[[], Services] | None = None, readonly: bool = False,
                 clock: Callable[[], datetime] | None = None, autopoll: bool = True, live: bool | None = None, bell: bool = False, ascii: bool | None = None,
                 **kwargs: Any) -> None:
        """Exactly one of `services` (the facade) and `factory` (builds it in a worker after the first frame).
        `autopoll`: poll timers; `live` (default: as `autopoll`): subscribe to the facade's pod changes;
        `bell`: ring the terminal bell when a pod gets into trouble; `ascii`: draw ASCII only (default:
        `C3_ASCII`, else by the locale — c3/look.py)."""
        # NO_COLOR: native ANSI colours, which Textual then strips (its fallback paints in greys).
        super().__init__(ansi_color=True if no_color() else None, **kwargs)
        self.register_theme(ANSI_THEME)
        self.ascii = wants_ascii() if ascii is None else ascii
        self._ascii_filter = AsciiFilter()
        self._safe_filter = SafeTextFilter()
        """Every line drawn passes the one output sanitizer (c3/look.py)."""
        self.trouble = TroubleWatch()
        self.toasts = ToastDesk(self, covered=lambda: isinstance(self.top_screen(), ModalScreen))
        """Every toast c3 posts; none lands on a modal (c3/toasts.py)."""
        self.bell_on_trouble = bell
        self._rung_at = float("-inf")
        self.autopoll = autopoll
        self.live = autopoll if live is None else live
        self.pushed: bool | None = None
        """The facade's live hub pushes GPU and pod changes (the screens run no poll timer for them);
        None until the subscription answered, False when the facade cannot push."""
        self._unsubscribe: Callable[[], None] | None = None
        if (services is None) == (factory is None):
            raise TypeError("C3App takes exactly one of services= and factory=")
        self._factory = factory
        self.services: Services | None = services
        self.startup_error: BaseException | None = None
        self.readonly = readonly or (services is not None and services.readonly)
        self.clock = clock or _utc_now
        self.boots: dict[str, BootProgress] = {}
        self.served: dict[str, float] = {}
        """Pods whose boot reported serving, with when (monotonic): see boot_panel.as_shown."""
        self.last_result: WriteResult | None = None
        self.results: list[WriteResult] = []
        self.launch_progress: BootProgress | None = None
        """The last step of the running (or last) recipe launch."""

    def get_line_filters(self) -> list[Any]:
        filters = [*super().get_line_filters(), self._safe_filter]
        return [*filters, self._ascii_filter] if self.ascii else filters

    def notify(self, message: str, *, title: str = "", severity: Any = "information", timeout: float | None = None, markup: bool = True) -> None:
        """Every toast through the one output sanitizer: its lines are c3's, what they quote may not be
        (a name from a file, an engine's error); BEL and CR, which Textual would drop, are shown."""
        super().notify(terminal_safe(message), title=shown(title), severity=severity, timeout=timeout, markup=markup)

    def on_mount(self) -> None:
        from textual import constants

        # A real terminal's own colour depth counts; a headless test run's does not (it has none).
        detected = None if self.is_headless else self.console.color_system
        if wants_ansi_theme(constants.COLOR_SYSTEM, detected, self.no_color):
            self.theme = ANSI_THEME.name
        # Background work starts after the first frame: threads importing pydantic would otherwise
        # hold the GIL while the first frame renders.
        self.call_after_refresh(self._start_background)
        # The terminal went away (SSH dropped, window closed): exit cleanly instead of spinning.
        if not self.is_headless:
            try:
                asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, self.exit)
            except (NotImplementedError, RuntimeError, ValueError):
                pass

    def _start_background(self) -> None:
        if self._factory is not None:
            self.call(self._factory, done=self._services_ready, failed=self._services_failed, group="startup")
        elif self.services is not None:
            self._subscribe(self.services)
        self.run_worker(_warm_imports, thread=True, group="warm-up", exit_on_error=False)

    def _subscribe(self, services: Services) -> None:
        """What the facade's live hub pushes — only changes of what the GPU panels and the pod view show
        — becomes typed messages (`GpusRead`, `PodsRead`), posted from the hub's thread. Subscribing
        runs in a worker (it may start the hub); a facade that cannot push (its `subscribe` answers None)
        leaves the screens polling."""
        if not self.live:
            return

        def pushed(update: LiveUpdate) -> None:  # a live-hub thread: post only
            if update.gpus is not None:
                self.post_message(GpusRead(update.gpus))
            if update.pods is not None:
                self.post_message(PodsRead(update.pods))

        def subscribe() -> Callable[[], None] | None:
            return services.subscribe(pushed)

        self.call(subscribe, done=self._subscribed, failed=lambda _error: self._subscribed(None), group="live")

    def _subscribed(self, unsubscribe: Callable[[], None] | None) -> None:
        self._unsubscribe = unsubscribe
        self.pushed = unsubscribe is not None
        if not self.pushed:  # nothing will be pushed: the screens poll on their timers instead
            for screen in self._mode_screens():
                if isinstance(screen, CockpitScreen) and screen.is_mounted:
                    screen.start_poll_timers()

    def on_gpus_read(self, message: GpusRead) -> None:
        if not self.is_running:  # exiting: the screens are being taken apart (see top_screen)
            return
        orch = self._orchestration()
        if orch is not None and orch.is_mounted:
            orch.gpus_pushed(message.reading)
        top = self.top_screen()
        if isinstance(top, LiveModal):
            top.live_changed(gpus=message.reading)

    def on_pods_read(self, message: PodsRead) -> None:
        if not self.is_running:  # exiting: the screens are being taken apart (see top_screen)
            return
        orch = self._orchestration()
        if orch is not None and orch.is_mounted:
            orch.pods_pushed(message.reading)
        top = self.top_screen()
        if isinstance(top, LiveModal):
            top.live_changed(pods=message.reading)

    def top_screen(self) -> Screen[Any] | None:
        """The screen on top, or None when the stack is empty. Pushes from the live hub's thread and
        workers' replies are queued messages, and they can be handled when there is no screen: on exit
        Textual empties every screen stack first and only then stops the app's queue and unmounts it
        (which unsubscribes), so a push queued meanwhile landed on `App.screen`'s ScreenStackError
        (seen under CPU load; tests/cockpit/test_startup.py)."""
        try:
            stack = self.screen_stack
        except KeyError:  # no such mode yet
            return None
        return stack[-1] if stack else None

    def pods_read(self, pods: list[PodState], *, stale: bool = False) -> None:
        """Every pod reading passes here: trouble is counted in the mode bar and announced once per
        change (a toast per pod and kind; the bell, when asked for, when a reading adds any — at most once in BELL_GAP_S)."""
        new, cleared = self.trouble.update(pods, stale=stale)
        if not new and not cleared:
            return
        self._announce(new, cleared)
        if new and self.bell_on_trouble and time.monotonic() - self._rung_at >= BELL_GAP_S:
            self._rung_at = time.monotonic()
            self.bell()
        for screen in self._mode_screens():
            if isinstance(screen, CockpitScreen) and screen.is_mounted:
                screen.refresh_chrome()

    def pod_seen(self, pod: PodState) -> None:
        """A view read one pod afresh (details): the pod view takes that reading too."""
        orch = self._orchestration()
        if orch is not None and orch.is_mounted:
            orch.pod_seen(pod)

    def _announce(self, new: list[Trouble], cleared: list[Trouble]) -> None:
        """Toast trouble (under a modal the desk holds it; the mode bar keeps counting). A trouble's
        toast is keyed by it, its all-clear by `("cleared", key)`: each comes back after a modal only
        while it is still true."""
        for t in new:
            self.toasts.post(Toast(f"{t.pod}: {t.title} — {t.detail}", "Attention", "warning" if t.kind in ("stale", "preempting") else "error", 10, key=t.key))
        for t in cleared:
            self.toasts.post(Toast(f"{t.pod}: no longer {t.kind}", timeout=4, key=("cleared", t.key)))

    def _still_true(self, key: Hashable) -> bool:
        if isinstance(key, tuple) and key and key[0] == "cleared":
            return key[1] not in self.trouble.current
        return key in self.trouble.current

    def push_screen(self, screen: Any, *args: Any, **kwargs: Any) -> Any:
        """A modal coming up takes every toast off first — while the screen below is still current, so
        its toasts go too instead of showing through the backdrop."""
        if isinstance(screen, ModalScreen) and kwargs.get("mode") in (None, self.current_mode):
            self.toasts.cover()
        return super().push_screen(screen, *args, **kwargs)

    def hold_trouble_toasts(self) -> None:
        """A screen was suspended (c3/screens/base.py): if a modal came up some other way than
        `push_screen`, take the toasts off now."""
        if isinstance(self.top_screen(), ModalScreen):
            self.toasts.cover()

    def release_trouble_toasts(self) -> None:
        """A mode screen is on top again: what was held and is still true is said now."""
        self.toasts.uncover(self._still_true)

    def _services_ready(self, services: Services) -> None:
        self.services = services
        self._subscribe(services)
        self.readonly = self.readonly or services.readonly
        if services.startup_notice:
            self.notify(services.startup_notice, timeout=10)
        for screen in self._mode_screens():
            if isinstance(screen, CockpitScreen) and screen.is_mounted:
                screen.services_ready()

    def _services_failed(self, error: BaseException) -> None:
        # Startup failed (bad rig file, unreadable estate…): leave, and let the CLI print it.
        self.startup_error = error
        self.exit(return_code=getattr(error, "exit_code", 1))

    def ready(self) -> Services | None:
        """The facade once it exists; otherwise None, and says so."""
        if self.services is None:
            self.notify("Still connecting to the rig…", timeout=3)
        return self.services

    def on_unmount(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
        if not self.is_headless:
            try:
                asyncio.get_running_loop().remove_signal_handler(signal.SIGHUP)
            except (NotImplementedError, RuntimeError, ValueError):
                pass

    # -- modes and help --------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "switch_mode" and parameters and parameters[0] == self.current_mode:
            return None  # shown dimmed: you are here
        return True

    def action_help(self) -> None:
        screen = self.screen
        own = [b for b in getattr(type(screen), "BINDINGS", []) if isinstance(b, Binding)]
        title = {"orchestration": "Orchestration", "nodes": "Nodes", "recipes": "Recipes"}.get(self.current_mode, "This screen")
        sections = [(title, own), ("Lists", NAVIGATION), ("Everywhere", [b for b in self.BINDINGS if isinstance(b, Binding)])]
        from c3.modals.help import HelpModal

        self.push_screen(HelpModal(sections))

    # -- `:` commands ------------------------------------------------------------------------------
    def action_command_line(self) -> None:
        from c3.modals.command_line import CommandLine

        self.push_screen(CommandLine(), callback=self.run_command)

    def run_command(self, command: str | None) -> None:
        """Run a resolved `:` command (see c3.modals.command_line.COMMANDS)."""
        if command is None:
            return
        if command in ("pods", "nodes", "recipes"):
            mode = {"pods": "orchestration"}.get(command, command)
            if self.current_mode != mode:
                self.switch_mode(mode)
        elif command == "procs":
            self.open_processes()
        elif command == "history":
            self.open_history()
        elif command == "gateway":
            self.open_gateway()
        elif command == "problems":
            if self.current_mode != "orchestration":
                self.switch_mode("orchestration")
            orch = self._orchestration()
            if orch is not None:
                self.call_after_refresh(orch.action_problems)
        elif command == "help":
            self.action_help()
        elif command == "quit":
            self.exit()

    # -- palette ---------------------------------------------------------------------------------
    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        yield SystemCommand("Mode: Orchestration", "GPUs and pods (1)", lambda: self.switch_mode("orchestration"))
        yield SystemCommand("Mode: Nodes", "The node registry (2)", lambda: self.switch_mode("nodes"))
        yield SystemCommand("Mode: Recipes", "The recipe catalogue (3)", lambda: self.switch_mode("recipes"))
        yield SystemCommand("New pod", "Name, slug, GPUs, port, live fit (N)", self.action_new_pod)
        yield SystemCommand("Stop the whole estate", "List what will stop, then confirm (o)", self.action_stop_all)
        yield SystemCommand("Add node", "Register a node: name, endpoint, SSH target, key (Nodes mode: a)", lambda: self._in_mode("nodes", "action_add_node"))
        yield SystemCommand("Remove node", "Unregister the highlighted node (Nodes mode: x)", lambda: self._in_mode("nodes", "action_remove_node"))
        yield SystemCommand("Drain or undrain a node in the pool", "The highlighted node leaves (or rejoins) the running pool's new sessions (Nodes mode: D)",
                            lambda: self._in_mode("nodes", "action_drain_node"))
        yield SystemCommand("Launch recipe", "Pick nodes, preview the dry-run, confirm (Recipes mode: u)", lambda: self._in_mode("recipes", "action_launch"))
        yield SystemCommand("Stop the active profile", "Its containers on every node (Recipes mode: d)", lambda: self._in_mode("recipes", "action_stop_profile"))
        yield SystemCommand("Switch profile", "Make another launched profile the active one (Recipes mode: P)", lambda: self._in_mode("recipes", "action_switch_profile"))
        yield SystemCommand("Restart the active profile", "Remove and start its containers on the same nodes (Recipes mode: R)",
                            lambda: self._in_mode("recipes", "action_restart_profile"))
        yield SystemCommand("History", "GPU and engine metrics over the last minutes, with a time axis (h, :history)", self.open_history)
        yield SystemCommand("GPU processes", "Who holds each GPU: pid, pod, memory, foreign processes (p, :procs)", self.open_processes)
        yield SystemCommand("Gateway", "The running gateway: models, the pod loaded, the last swap, held requests (g, :gateway)", self.open_gateway)
        yield SystemCommand("Refresh", "Poll every source of this mode now (r)", self._refresh_current)
        yield SystemCommand("Help", "Every key of this screen (?)", self.action_help)
        orchestration = self._orchestration()
        for pod in orchestration.pods if orchestration else []:
            for kind, verb in (("up", "Boot"), ("down", "Stop"), ("rm", "Remove")):
                yield SystemCommand(f"{verb} pod {pod.name}", f"{pod.slug} on GPU {','.join(map(str, pod.gpus))}", lambda k=kind, n=pod.name: self.request_write(k, pod=n))
            yield SystemCommand(f"Logs of pod {pod.name}", "Engine log, follows (l)", lambda n=pod.name: self.open_logs(n))
            yield SystemCommand(f"Details of pod {pod.name}", "Placement, GPUs, fit (Enter)", lambda n=pod.name: self.open_details(n))
            yield SystemCommand(f"Try a prompt on pod {pod.name}", "One streamed test prompt: answer, TTFT, tokens/s (t)", lambda n=pod.name: self.open_try(n))
        yield SystemCommand("Quit", "Leave the cockpit; pods keep running (q)", self.action_quit)

    def _in_mode(self, mode: str, action: str) -> None:
        """Switch to `mode` (if not there) and run one of its screen's actions once it is shown."""
        if self.current_mode != mode:
            self.switch_mode(mode)
        tries = [0]

        def attempt() -> None:
            # A mode opened just now has not read its rows yet: wait for them (bounded), then act.
            screen = self.top_screen()  # a timer: it may fire while the app exits
            tries[0] += 1
            if getattr(screen, "rows", None) is None and tries[0] < 50:
                self.set_timer(0.1, attempt)
                return
            getattr(screen, action, lambda: None)()

        self.call_after_refresh(attempt)

    def _refresh_current(self) -> None:
        poll = getattr(self.top_screen(), "poll_now", None)
        if poll:
            poll()

    def _mode_screens(self, *modes: str) -> list[Screen[Any]]:
        """The screens of these modes (every mode when none is named), through Textual's public API;
        a mode not opened yet has none."""
        screens: list[Screen[Any]] = []
        for mode in modes or tuple(self.MODES):
            try:
                screens += self.get_screen_stack(mode)
            except KeyError:
                pass
        return screens

    def _orchestration(self) -> OrchestrationScreen | None:
        for screen in self._mode_screens("orchestration"):
            if isinstance(screen, OrchestrationScreen):
                return screen
        return None

    # -- modals ----------------------------------------------------------------------------------
    def open_logs(self, pod: str) -> None:
        from c3.modals.logs import LogsModal

        if self.ready():
            self.push_screen(LogsModal(pod))

    def open_history(self) -> None:
        from c3.modals.history import HistoryModal

        if self.ready():
            self.push_screen(HistoryModal())

    def open_processes(self) -> None:
        from c3.modals.processes import ProcessesModal

        if self.ready():
            self.push_screen(ProcessesModal())

    def open_gateway(self) -> None:
        from c3.modals.gateway import GatewayModal

        if self.ready():
            self.push_screen(GatewayModal())

    action_open_history = open_history
    action_open_processes = open_processes
    action_open_gateway = open_gateway

    def open_try(self, pod: str) -> None:
        from c3.modals.try_prompt import TryModal

        if self.ready():
            self.push_screen(TryModal(pod))

    def open_details(self, pod: str) -> None:
        from c3.modals.details import DetailsModal

        if self.ready():
            self.push_screen(DetailsModal(pod))

    def action_new_pod(self, initial: NewPod | None = None, problem: str | None = None) -> None:
        """The new-pod form; `initial`/`problem`: a refused request comes back to be fixed, not retyped."""
        from c3.modals.new_pod import NewPodModal

        if self.refused_readonly("create") or not self.ready():
            return
        orch = self._orchestration()
        if self._gpus_unread(orch, lambda: self.action_new_pod(initial, problem)):
            return
        gpus = sorted(orch.gpus) if orch else []
        pods = orch.pods if orch else []
        self.push_screen(NewPodModal(gpus, pods, initial, problem), callback=self._new_pod_chosen)

    def _gpus_unread(self, orch: OrchestrationScreen | None, reopen: Callable[[], None]) -> bool:
        """A form that places pods needs the GPUs read (else it shows every GPU taken): True when they are
        not yet, after saying so and leaving `reopen` to run once they are."""
        if orch is None or orch.gpus_read:
            return False
        self.notify("Reading the GPUs… the form opens once they are in", timeout=3)
        orch.when_gpus_read(reopen)
        return True

    def open_edit(self, pod: str, initial: NewPod | None = None, problem: str | None = None) -> None:
        """The pod form, prefilled with `pod`'s slug, GPUs and port (`e`) — or, refused, with what was
        typed and why (`initial`, `problem`); saving goes through the confirm gate."""
        from c3.modals.new_pod import EditPodModal

        if self.refused_readonly("edit", pod) or not self.ready():
            return
        orch = self._orchestration()
        if self._gpus_unread(orch, lambda: self.open_edit(pod, initial, problem)):
            return
        gpus = sorted(orch.gpus) if orch else []
        pods = orch.pods if orch else []
        self.push_screen(EditPodModal(gpus, pods, pod, initial, problem), callback=lambda request: self._edit_chosen(pod, request))

    def _edit_chosen(self, pod: str, request: NewPod | None) -> None:
        if request is not None:
            self.request_write("edit", pod=pod, request=PodEdit(pod, gpus=request.gpus, port=request.port, slug=request.slug))

    def _new_pod_chosen(self, request: NewPod | None) -> None:
        if request is not None:
            self.request_write("create", request=request)

    def _form_refused(self, plan_or_request: WritePlan | NewPod | PodEdit | None, problem: str) -> None:
        """A create or an edit that was refused (by the plan, the gate or the last check): back to its form."""
        request = plan_or_request.request if isinstance(plan_or_request, WritePlan) else plan_or_request
        if isinstance(request, NewPod):
            self.action_new_pod(request, problem)
        elif isinstance(request, PodEdit) and request.slug is not None and request.gpus is not None and request.port is not None:
            typed = NewPod(name=request.name, slug=request.slug, gpus=request.gpus, port=request.port)
            self.open_edit(request.name, typed, problem)

    def refused_readonly(self, key: str, pod: str | None = None) -> bool:
        """Under --readonly a write is refused before anything is asked for — a form is not even opened.
        `key` names a write of `backend.actions.registry`, which says what it does."""
        if not self.readonly:
            return False
        from backend.actions.registry import load_all

        doing = load_all()[key].doing.format(target=pod or "")
        self.show_result(WriteResult(False, f"read-only cockpit: refused to {doing}", "restart c3 without --readonly"))
        return True

    def action_stop_all(self) -> None:
        self.request_write("stop_all")


def _is_a_cockpit(app: C3App) -> Cockpit:
    """mypy checks here that the app is what screens and modals take it for (c3/cockpit.py)."""
    return app
