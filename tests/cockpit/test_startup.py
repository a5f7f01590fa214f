"""The facade is built in a worker after the first frame; a failure there ends the app with the error."""

from __future__ import annotations

from datetime import UTC, datetime

from backend.errors import UsageError
from c3.app import C3App, GpusRead, PodsRead
from c3.screens.base import Reply
from c3.services import GpuReading, PodsReading
from c3.toasts import Toast
from tests.cockpit.conftest import orchestration, screen_text, wait_for


async def test_first_frame_before_the_facade_then_data(demo_world):
    """The factory is held until the first frame is on screen: the frame cannot have waited for it.
    Every wait is on a signal (the gate, the facade set, the first reading shown), not on a clock."""
    import threading

    gate = threading.Event()
    built = []

    def factory():  # as `c3 demo` does: the real facade, built in a worker
        gate.wait(60)
        built.append(1)
        return demo_world.services()

    app = C3App(factory=factory)
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: "connecting" in screen_text(app), what="the first frame")
            assert app.services is None and not built  # drawn while the facade is still held
            gate.set()
            await wait_for(pilot, lambda: app.services is not None, what="the facade")
            await wait_for(pilot, lambda: len(orchestration(app).pods) == 2, what="the first poll")
            assert "demo rig · simulated:demo · runtime sim" in screen_text(app)
    finally:
        gate.set()


class _DeliveredWhileExiting(C3App):
    """Delivers a live-hub push and a worker's reply exactly where the race put them: Textual empties
    every screen stack on exit before it drains the app's queue and unmounts it (which unsubscribes
    from the hub). `_close_all` is Textual's own step that empties the stacks."""

    late_callbacks = 0

    async def _close_all(self) -> None:
        pods = tuple(orchestration(self).pods)
        await super()._close_all()
        assert not self.screen_stack
        self.post_message(PodsRead(PodsReading(pods, datetime.now(UTC))))
        self.post_message(GpusRead(GpuReading((), {}, {}, None)))
        self.post_message(Reply(self._late))

    def _late(self, _value) -> None:  # as `_services_ready` does: it reads the screens
        type(self).late_callbacks += 1
        self.screen  # noqa: B018


async def test_a_push_or_reply_that_lands_while_the_app_exits_is_dropped(demo_world):
    """Under CPU load the live hub's pushes (and worker replies) queued during exit met the screens
    half taken apart — `App.screen` with no screen on the stack (ScreenStackError), the pod view
    without its widgets (NoMatches) — and the cockpit died with a traceback instead of exiting."""
    app = _DeliveredWhileExiting(demo_world.services())
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: len(orchestration(app).pods) == 2, what="the first reading")
    assert app.return_code in (None, 0)
    assert _DeliveredWhileExiting.late_callbacks == 0


def test_the_facade_and_its_factory_are_told_apart_by_keyword():
    """`services=` is the facade, `factory=` builds it — never guessed from the object's attributes
    (a facade wrapper without `pod_states` of its own would have been taken for a factory)."""
    import pytest

    def factory():
        raise AssertionError("not called before the app runs")

    app = C3App(factory=factory)
    assert app.services is None and app._factory is factory
    with pytest.raises(TypeError, match="exactly one"):
        C3App()
    with pytest.raises(TypeError, match="exactly one"):
        C3App(object(), factory=factory)


def test_a_push_before_the_first_screen_changes_nothing():
    """No screen yet (or none left): the handlers and the toast desk read the top screen as None."""
    app = C3App(factory=lambda: None)  # not running: no screen on any stack yet
    assert app.top_screen() is None
    app.on_pods_read(PodsRead(PodsReading((), datetime.now(UTC))))
    app.on_gpus_read(GpusRead(GpuReading((), {}, {}, None)))
    app.toasts.post(Toast("a trouble toast before the first screen"))
    assert [t.message for t in app.toasts.showing] == ["a trouble toast before the first screen"]


async def test_keys_before_the_facade_say_so(demo_world):
    import threading

    gate = threading.Event()

    def factory():
        gate.wait(10)
        return demo_world.services()

    app = C3App(factory=factory)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert "connecting" in screen_text(app)
        await pilot.press("N")
        await pilot.pause()
        assert app.screen is orchestration(app)
        assert any("connecting" in n.message for n in app._notifications)
        gate.set()
        await wait_for(pilot, lambda: app.services is not None, what="the facade")


async def test_a_failing_facade_ends_the_app_with_its_error():
    def factory():
        raise UsageError("rig file rig.yaml is not valid", hint="fix it")

    app = C3App(factory=factory)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.startup_error is not None, what="the startup error")
    assert isinstance(app.startup_error, UsageError)
    assert app.return_code == 2


def test_constructing_the_cockpit_imports_no_backend_model_it_does_not_use():
    """Before its first frame the cockpit reads one setting (ASCII or not) through
    `backend.views.preferences`; importing that view must not import every other view's models (the
    package's eager `__init__` did: the router's status, pods, nodes, profiles — ~170 ms of a ~450 ms
    first frame). Fresh interpreter, so nothing imported by other tests counts."""
    import subprocess
    import sys

    code = ("import sys; from c3.app import C3App; C3App(factory=lambda: None); "
            "print(sorted(m for m in sys.modules if m in ('backend.pool.status', 'backend.views.pods', 'backend.views.nodes', 'backend.views.profiles')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", out.stdout
