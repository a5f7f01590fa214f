"""Cockpit test helpers: apps over the real facade on a simulated world (`demo_world`: a test's own;
`shared_world`: shared by the tests that only look, checked unchanged after each), `real_app`,
deterministic rendering (UTC, no blink, no animation)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Callable

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


@pytest.fixture(scope="session")
def _shared_worlds():
    """The process's shared-world keeper (`tests.cockpit.shared`); its world stopped at the end."""
    from tests.cockpit.shared import KEEPER

    yield KEEPER
    KEEPER.close()


@pytest.fixture
def shared_world(request, _shared_worlds):
    """A world of the scenario (`indirect` parametrisation, default `placed`) shared with the other tests
    that take it; for tests that only look. After the test the world is checked unchanged; a test that
    changed it errors at its teardown, by name, and the next test gets a fresh world."""
    from tests.cockpit.shared import WorldChanged

    try:
        with _shared_worlds.lent(_scenario(request)) as world:
            yield world
    except WorldChanged as changed:
        pytest.fail(f"{request.node.nodeid} {changed}", pytrace=False)


def _scenario(node) -> str:
    """The shared world's scenario a test item (or fixture request) asks for."""
    param = getattr(node, "param", None)
    if param is None and hasattr(node, "callspec"):
        param = node.callspec.params.get("shared_world")
    return param or "placed"


def _shares(item) -> bool:
    return "shared_world" in getattr(item, "fixturenames", ())


def pytest_collection_modifyitems(config, items):
    """The tests that share worlds run together, grouped by scenario (in the order the scenarios first
    appear), where the first of them was: each scenario's world is then built once, not again after
    every test with a world of its own in between. Every other test keeps its place."""
    sharing = [item for item in items if _shares(item)]
    if not sharing:
        return
    order = list(dict.fromkeys(_scenario(item) for item in sharing))
    grouped = sorted(sharing, key=lambda item: order.index(_scenario(item)))  # stable: file order within a scenario
    first = items.index(sharing[0])
    rest = [item for item in items if not _shares(item)]
    items[:] = rest[:first] + grouped + rest[first:]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """Once the last test of a run of same-scenario sharers is done, stop the shared world: its stub
    engines and the machine-wide world lock are not held through tests that do not use it."""
    yield
    if _shares(item) and not (nextitem is not None and _shares(nextitem) and _scenario(nextitem) == _scenario(item)):
        from tests.cockpit.shared import KEEPER

        KEEPER.close()


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


def catch_shell(monkeypatch, is_shell: Callable[[list[str]], bool]) -> tuple[list[list[str]], list[bool]]:
    """The shell key's hand-over caught: each interactive `subprocess.run` of a command `is_shell` picks is
    recorded instead of run (run inside the test's event loop, it would wait on the test's terminal), and
    each `App.suspend` too. Returns both lists; any other `subprocess.run` runs as usual."""
    ran: list[list[str]] = []
    suspended: list[bool] = []
    real_run = subprocess.run

    def caught(argv, *args, **kwargs):
        if isinstance(argv, list) and is_shell(argv):
            ran.append(list(argv))
            return subprocess.CompletedProcess(argv, 0)
        return real_run(argv, *args, **kwargs)

    @contextlib.contextmanager
    def suspend(self):
        suspended.append(True)
        yield

    monkeypatch.setattr(C3App, "suspend", suspend)
    monkeypatch.setattr(subprocess, "run", caught)
    return ran, suspended


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


def gate_open(app) -> bool:
    """The confirm gate is on top with every widget mounted. It is on the stack before its children are:
    under load a read right after the push saw only its title and problems (no plan, no buttons)."""
    from c3.modals.confirm import ConfirmModal

    screen = app.screen
    return isinstance(screen, ConfirmModal) and bool(screen.query("#confirm")) and bool(screen.query("#cancel"))


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
