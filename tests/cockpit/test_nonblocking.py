"""The event loop is never blocked: every facade call runs off the loop, proven two ways.

The real facade over the demo's simulated world, slowed down (every method sleeps 0.1–0.2 s first),
drives a whole session — modes, new pod, fit, create,
boot, logs, details, help, history, GPU processes (by key and by `:procs`), stop-all — with asyncio debug on (`slow_callback_duration` 0.05 s):
1. no facade method ever runs on the event-loop thread (the proxy records the thread of every call:
   exact, and independent of machine load), and
2. asyncio's slow-callback log shows nothing near the cost of a chain of facade calls. Textual's own
   frames show up there too (debug mode slows them, and a loaded 2-core CI box triples them), so
   the bound is generous (2 s); the exact proof is (1).
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
import time

from c3.app import C3App
from tests.cockpit.conftest import orchestration, settle, wait_for
from tests.cockpit.scenes import converged

SLOW_S = 2.0
LOOP_SAFE = {"clock", "freshness"}
"""The facade's calls documented for the event loop (c3/services.py): the clock, and `freshness()`,
which returns what the hub's threads last recorded (an attribute read, no I/O)."""


class SlowServices:
    """Wraps a facade; every method sleeps 0.1–0.2 s first and records whether it ran on the loop thread."""

    def __init__(self, inner) -> None:
        self._inner = inner
        self.on_loop: list[str] = []
        self.names: set[str] = set()
        self.calls = 0
        self._n = 0
        self._lock = threading.Lock()

    def __getattr__(self, name):
        value = getattr(self._inner, name)
        if not callable(value) or name in LOOP_SAFE:
            return value

        def slow(*args, **kwargs):
            try:
                asyncio.get_running_loop()
                self.on_loop.append(name)
            except RuntimeError:
                pass
            with self._lock:
                self.names.add(name)
                self._n += 1
                self.calls += 1
                delay = 0.1 + 0.1 * (self._n % 2)
            time.sleep(delay)
            return value(*args, **kwargs)

        return slow


def slow_app(world) -> tuple[C3App, SlowServices]:
    """The cockpit over the real facade on `world`, every facade call slowed and checked for the loop thread."""
    real = world.services()
    converged(real)
    slow = SlowServices(real)
    return C3App(slow, clock=real.clock), slow


async def test_slow_backend_never_blocks_the_event_loop(caplog, demo_world):
    app, slow = slow_app(demo_world)
    async with app.run_test(size=(120, 40)) as pilot:
        loop = asyncio.get_running_loop()
        loop.set_debug(True)
        loop.slow_callback_duration = 0.05
        await settle(pilot, rounds=4)
        caplog.clear()
        caplog.set_level(logging.WARNING, logger="asyncio")
        for key in ("2", "3", "1"):
            await pilot.press(key)
            await settle(pilot)
        await pilot.press("N")
        await settle(pilot)
        await pilot.press(*"slowpod", "tab", *"gpt-oss")
        await wait_for(pilot, lambda: "KV pool" in str(app.screen.query_one("#fit").render()), what="the fit breakdown")
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "ConfirmModal", what="the confirm gate")
        await pilot.press("y")
        await wait_for(pilot, lambda: "slowpod" in [p.name for p in orchestration(app).pods], what="the new pod")
        pods = orchestration(app).query_one("#pods")
        pods.focus()
        pods.highlighted = [p.name for p in orchestration(app).pods].index("slowpod")
        await pilot.press("u")
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "ConfirmModal", what="the boot gate")
        await pilot.press("y")
        await wait_for(pilot, lambda: app.last_result is not None and "serving" in app.last_result.message, timeout=60, what="the boot")
        for key in ("l", "escape", "i", "escape", "question_mark", "escape", "h", "escape", "p", "escape", "colon", "p", "r", "o", "c", "s", "enter", "escape"):
            await pilot.press(key)
            await settle(pilot)
        await pilot.press("o")
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "ConfirmModal", what="the stop-all gate")
        await pilot.press("y")
        await wait_for(pilot, lambda: app.last_result is not None and "stopped" in app.last_result.message, timeout=60, what="stop all")
        await settle(pilot)
        loop.set_debug(False)
    assert slow.calls >= 15, "the session did not exercise the facade"
    assert {"history", "gpu_processes"} <= slow.names, f"the history and process views were not opened: {sorted(slow.names)}"
    assert slow.on_loop == [], f"facade methods ran on the event loop: {slow.on_loop}"
    slow_callbacks = []
    for record in caplog.records:
        found = re.search(r"took (\d+\.\d+) seconds", record.getMessage())
        if found and float(found.group(1)) >= SLOW_S:
            slow_callbacks.append(record.getMessage()[:300])
    assert slow_callbacks == [], "event loop blocked:\n" + "\n".join(slow_callbacks)


async def test_the_proxy_does_catch_a_call_on_the_loop():
    """The detector itself works: a facade call made on the loop thread is recorded."""
    class Facade:
        def nodes(self) -> list:
            return []

    slow = SlowServices(Facade())
    slow.nodes()
    assert slow.on_loop == ["nodes"]
