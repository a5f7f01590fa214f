"""What every cockpit screen shares: calling the facade off the event loop, and pausable pollers.

`call(fn, *args, done=…)` runs a (blocking) facade method in a thread worker and hands the result
back on the event loop through a `Reply` message. A poller reads one source: at once when the screen
appears, after a write, on `r` — and, for a source the live hub does not push, on a timer. A tick only
*starts* a worker, never does I/O itself, never overlaps the previous poll of the same source, and
does nothing unless the screen is the active one (its mode shown, no modal above it). Timers are
also paused while the screen is suspended so an idle hidden mode costs no wake-ups. A poller marked
`pushed` (GPUs, pods) gets its timer only when the facade cannot push (`C3App.pushed` is False).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from rich.cells import cell_len
from textual import events
from textual.dom import DOMNode
from textual.message import Message
from textual.screen import ModalScreen, Screen
from textual.timer import Timer

from backend.errors import C3Error
from c3.cockpit import Cockpit
from c3.look import shown
from c3.services import Services
from widgets.key_bar import KeyBar


@dataclass
class Reply(Message):
    """A facade call finished (in a worker); run its continuation on the event loop."""

    callback: Callable[[Any], None] | None
    value: Any = None
    error: BaseException | None = None
    on_error: Callable[[BaseException], None] | None = None


def describe_error(error: BaseException) -> str:
    """One line for a failure: the C3Error message and hint, else the exception's own text."""
    if isinstance(error, C3Error):
        from c3.hints import cockpit_hint

        text = error.message + (f" — hint: {cockpit_hint(error.hint)}" if error.hint else "")
    else:
        text = f"{type(error).__name__}: {error}"
    return shown(text)  # one line, whatever the message quotes


def built_facade(cockpit: Cockpit) -> Services:
    """The app's facade, for screens and modals: they call it only once it is built (pollers wait for
    it, keys ask `cockpit.ready()`), so its absence here is a bug, said plainly."""
    services = cockpit.services
    if services is None:
        raise RuntimeError("the facade is not built yet")
    return services


class ServiceCalls:
    """Mixin for screens, modals and the app: run facade calls in thread workers, continue on the loop."""

    @property
    def as_node(self) -> DOMNode:
        """This mixin's own self as what it always is: a Textual screen, modal or app."""
        return cast(DOMNode, self)

    @property
    def cockpit(self) -> Cockpit:
        """The app, typed as what screens and modals may ask of it (c3/cockpit.py)."""
        return cast(Cockpit, self.as_node.app)

    def call(
        self,
        fn: Callable[..., Any],
        *args: Any,
        done: Callable[[Any], None] | None = None,
        failed: Callable[[BaseException], None] | None = None,
        group: str = "calls",
        exclusive: bool = False,
    ) -> None:
        """Run `fn(*args)` in a thread worker; `done(value)` or `failed(error)` run on the loop."""

        def work() -> None:
            try:
                value = fn(*args)
            except BaseException as error:  # noqa: BLE001 - every failure is shown, none crashes the app
                self.as_node.post_message(Reply(done, error=error, on_error=failed))
                return
            self.as_node.post_message(Reply(done, value=value))

        self.as_node.run_worker(work, thread=True, group=group, exclusive=exclusive, exit_on_error=False, description=getattr(fn, "__name__", "call"))

    def on_reply(self, message: Reply) -> None:
        message.stop()
        if not self.as_node.app.is_running:
            # The app is exiting: its screens are being taken apart (widgets gone, stack emptied) while
            # their queues still drain — a result landing now has nowhere to show, and querying for it
            # raised NoMatches / ScreenStackError on a loaded machine.
            return
        if message.error is not None:
            if message.on_error is not None:
                message.on_error(message.error)
            else:
                self.as_node.app.notify(describe_error(message.error), title="Failed", severity="error")
            return
        if message.callback is not None:
            message.callback(message.value)


def show_if_changed(static: Any, content: Any) -> None:
    """`static.update(content)` unless it already shows exactly this (same words, same styles):
    `Static.update` re-lays out the whole screen, and an idle cockpit redid it several times a second
    for lines that had not changed (bench/tui.py: idle CPU, bytes written to the terminal)."""
    key = (content.plain, tuple(content.spans)) if hasattr(content, "spans") else content
    before = getattr(static, "_c3_shown", None)
    if before == key:
        return
    static._c3_shown = key
    # A one-line text that fits before and after (an "as of 12:00:01" stamp ticking) cannot change the
    # widget's size: repaint it without re-laying out the screen.
    fits = [isinstance(k, tuple) and "\n" not in k[0] and cell_len(k[0]) <= static.size.width for k in (before, key)]
    static.update(content, layout=not all(fits))


class Poller:
    """One periodic source: a timer that starts `start()` unless a poll is in flight or the screen is hidden."""

    def __init__(self, screen: CockpitScreen, period: float, start: Callable[[], None], *, pushed: bool = False) -> None:
        self.screen = screen
        self.period = period
        self.pushed = pushed
        """The live hub pushes this source's changes: no timer unless the facade cannot push."""
        self._start = start
        self.in_flight = False
        self.timer: Timer | None = None
        self.ticks = 0
        self._again = False

    def tick(self) -> None:
        if self.in_flight or not self.screen.is_active or self.screen.cockpit.services is None:
            return
        self.in_flight = True
        self.ticks += 1
        self._start()

    def request(self) -> None:
        """Poll now, or right after the poll in flight lands: a change pushed while a poll is under way
        may not be in its reading, and the next timer tick can be a whole period away (a killed engine
        must be announced within 2 s). Timer ticks that meet a poll in flight are simply dropped."""
        if self.in_flight:
            self._again = True
        else:
            self.tick()

    def landed(self) -> None:
        """The poll finished (successfully or not)."""
        self.in_flight = False
        if self._again:
            self._again = False
            self.tick()


class CockpitScreen(ServiceCalls, Screen[Any]):
    """A mode screen with pollers that stop while it is hidden or covered by a modal."""

    LIVE = False
    """Reads the facade's live hub: pause the hub's own threads while this screen is not shown."""
    WRITES: frozenset[str] = frozenset()
    """Ids of the bindings that write: dimmed in the key bar under --readonly (pressing one still says why)."""

    def dims_binding(self, binding: Any) -> bool:
        """The key bar asks: show this key dimmed?"""
        return bool(getattr(self.app, "readonly", False)) and binding.id in self.WRITES

    @property
    def services(self) -> Services:
        return built_facade(self.cockpit)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.pollers: list[Poller] = []
        self.tickers: list[Timer] = []
        """Display-only timers (the as-of clock): paused with the pollers while the screen is hidden."""

    def add_ticker(self, period: float, callback: Callable[[], None], name: str) -> Timer:
        """A timer that only redraws this screen. Under a modal it must stop: the modal's translucent
        backdrop shows this screen, so any repaint here repaints the whole terminal (measured with
        bench/modal_bytes.py: a full 21 KB frame at 120×40 per tick)."""
        timer = self.set_interval(period, callback, name=name)
        self.tickers.append(timer)
        return timer

    def add_poller(self, period: float, start: Callable[[], None], *, pushed: bool = False) -> Poller:
        poller = Poller(self, period, start, pushed=pushed)
        self.pollers.append(poller)
        return poller

    def on_mount(self) -> None:
        # `autopoll=False` (snapshots, screenshots): one poll at mount and after writes, no timers.
        # Pushed sources get no timer while a push may come (the app says if it cannot: start_poll_timers).
        self._start_timers(pushed_too=not getattr(self.app, "live", False) or getattr(self.app, "pushed", None) is False)
        self.call_after_refresh(self.poll_now)

    def _start_timers(self, *, pushed_too: bool) -> None:
        if not getattr(self.app, "autopoll", True):
            return
        for poller in self.pollers:
            if poller.timer is None and (pushed_too or not poller.pushed):
                poller.timer = self.set_interval(poller.period, poller.tick, name=f"poll-{poller.period}")
                if not self.is_active:
                    poller.timer.pause()

    def start_poll_timers(self) -> None:
        """The facade cannot push (no live hub): the pushed sources are polled on their timers too."""
        self._start_timers(pushed_too=True)

    def services_ready(self) -> None:
        """The app's facade was just built (see C3App): refresh the chrome and poll at once."""
        self.refresh_chrome()
        for bar in self.query(KeyBar):  # the facade may have turned read-only on: dim the write keys
            bar.refresh_keys()
        self.poll_now()

    def _set_live(self, active: bool) -> None:
        services = self.cockpit.services
        if self.LIVE and services is not None:  # a facade without live sources makes `set_live` a no-op
            self.call(services.set_live, active, group="live", failed=lambda _e: None)

    def refresh_chrome(self) -> None:
        """Redraw what depends on the facade's label / read-only flag (screens override)."""

    def refresh_badges(self) -> None:
        """Redraw the sources' freshness badges (screens override)."""

    def poll_now(self) -> None:
        """Start every poller at once (first frame, coming back to this mode, after a write)."""
        for poller in self.pollers:
            poller.tick()

    def on_screen_suspend(self, event: events.ScreenSuspend) -> None:
        for ticker in self.tickers:
            ticker.pause()
        for poller in self.pollers:
            if poller.timer is not None:
                poller.timer.pause()
        self.refresh_badges()  # "paused", at once rather than on the next as-of tick
        self._set_live(False)
        hold = getattr(self.app, "hold_trouble_toasts", None)
        if hold is not None:
            hold()  # a modal is coming up: no trouble toast over its fields

    def on_screen_resume(self, event: events.ScreenResume) -> None:
        for bar in self.query(KeyBar):
            bar.refresh_keys()
        for ticker in self.tickers:
            ticker.resume()
        for poller in self.pollers:
            if poller.timer is not None:
                poller.timer.resume()
        self._set_live(True)
        release = getattr(self.app, "release_trouble_toasts", None)
        if release is not None:
            release()
        if self.is_mounted:
            self.call_after_refresh(self.resumed)
            self.call_after_refresh(self.refresh_badges)

    def resumed(self) -> None:
        """Shown again (a modal closed, its mode came back): catch up — by default, poll every source."""
        self.poll_now()


class CockpitModal(ServiceCalls, ModalScreen[Any]):
    """A modal that can call the facade."""

    @property
    def services(self) -> Services:
        return built_facade(self.cockpit)


class LiveModal(CockpitModal):
    """A modal that follows the live hub: while it is on top, the app hands it what the hub pushed
    (`live_changed`), and it polls on a timer only when nothing is pushed (`polls`)."""

    def live_changed(self, *, gpus: Any = None, pods: Any = None) -> None:
        """The hub pushed a change: `gpus` a `GpuReading`, `pods` a `PodsReading` (either may be None)."""

    @property
    def polls(self) -> bool:
        """Poll on a timer: timers are on (not a snapshot) and the app is not (yet) pushed to."""
        return bool(getattr(self.app, "autopoll", True)) and getattr(self.app, "pushed", None) is not True
