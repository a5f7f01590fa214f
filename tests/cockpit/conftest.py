"""Cockpit test helpers: apps over the real facade on a simulated world (`demo_world`, `real_app`),
deterministic rendering (UTC, no blink, no animation)."""

from __future__ import annotations

import os
import time

import pytest
from textual.widgets import Input

from c3.app import C3App


@pytest.fixture(autouse=True)
def _deterministic(monkeypatch):
    """Same pixels on every machine: UTC clock display, no cursor blink, no animations."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    monkeypatch.setenv("TEXTUAL_ANIMATIONS", "none")
    monkeypatch.setattr(Input, "_toggle_cursor", lambda self: None, raising=False)
    yield
    time.tzset()


@pytest.fixture
def demo_world(request):
    """A simulated world (`tests.cockpit.world`; scenario from `indirect` parametrisation, default
    `placed`), its environment set for the whole test; every stub process stopped afterwards."""
    from tests.cockpit.world import World

    world = World.build(getattr(request, "param", "placed"))
    try:
        with world.active():
            yield world
    finally:
        world.stop()


class CallLog:
    """Passes every call through to the facade it wraps and records the method's name (`set_live`
    with its argument), so a test can say which calls a key caused — the facade itself is real."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.calls: list[str] = []

    def __getattr__(self, name: str):
        value = getattr(self.inner, name)
        if not callable(value) or name.startswith("_"):
            return value

        def recorded(*args, **kwargs):
            self.calls.append(f"set_live:{args[0]}" if name == "set_live" else name)
            return value(*args, **kwargs)

        return recorded


def real_app(world, *, readonly: bool = False) -> tuple[C3App, CallLog]:
    """The cockpit over the real facade on `world` (calls recorded), once its live view has caught up."""
    from tests.cockpit.scenes import converged

    svc = world.services(readonly=readonly)
    converged(svc)
    log = CallLog(svc)
    return C3App(log, readonly=readonly, clock=svc.clock), log


async def settle(pilot, rounds: int = 3) -> None:
    """Let workers finish and their replies render (bounded: a few rounds, never a fixed sleep as an assertion)."""
    for _ in range(rounds):
        await pilot.pause()
        await pilot.app.workers.wait_for_complete()
    await pilot.pause()


def screen_text(app, screen=None) -> str:
    """What a screen shows, as plain text: statics, GPU panels, list options, tables, logs, buttons."""
    from textual.content import Content
    from textual.widgets import Button, DataTable, Log, OptionList, Static

    from widgets.gpu_panel import GpuPanel
    from widgets.log_view import LogView

    def plain(value) -> str:
        return value.plain if isinstance(value, Content) else str(value)

    parts = []
    for widget in (screen or app.screen).query("*"):
        if not widget.display:
            continue
        if isinstance(widget, Button):
            parts.append(plain(widget.label))
        elif isinstance(widget, (Static, GpuPanel)):
            parts.append(plain(widget.render()))
        elif isinstance(widget, OptionList):
            parts += [plain(widget.get_option_at_index(i).prompt) for i in range(widget.option_count)]
        elif isinstance(widget, DataTable):
            for row in range(widget.row_count):
                parts.append("  ".join(plain(c) for c in widget.get_row_at(row)))
        elif isinstance(widget, Log):
            parts += list(widget.lines)
        elif isinstance(widget, LogView):
            parts += [line.text for line in widget.log_lines.lines]
    return "\n".join(parts)


def orchestration(app):
    """The Orchestration screen (wherever the stack is)."""
    return app._orchestration()


SIZES = [(120, 40), (80, 24)]
os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")


async def wait_for(pilot, predicate, timeout: float = 30.0, what: str = "condition") -> None:
    """Poll `predicate()` between frames until it holds or `timeout` passes (then fail saying what).
    `timeout` is only a ceiling for a hung wait, sized for a busy 2-core CI box (a cold cockpit under
    load took over 10 s to show its first reading); a quiet machine returns as soon as it holds."""
    import asyncio

    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause(0.05)
