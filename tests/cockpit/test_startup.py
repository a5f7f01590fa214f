"""The facade is built in a worker after the first frame; a failure there ends the app with the error."""

from __future__ import annotations

from backend.errors import UsageError
from c3.app import C3App
from tests.cockpit.conftest import orchestration, screen_text, wait_for


async def test_first_frame_before_the_facade_then_data(demo_world):
    built = []

    def factory():  # as `c3 demo` does: the real facade, built in a worker
        built.append(1)
        return demo_world.services()

    app = C3App(factory)
    async with app.run_test(size=(120, 40)) as pilot:
        assert app.services is None or built  # the first frame does not wait for the facade
        await wait_for(pilot, lambda: app.services is not None, what="the facade")
        await wait_for(pilot, lambda: len(orchestration(app).pods) == 2, what="the first poll")
        assert "demo rig · simulated:demo · runtime sim" in screen_text(app)


async def test_keys_before_the_facade_say_so(demo_world):
    import threading

    gate = threading.Event()

    def factory():
        gate.wait(10)
        return demo_world.services()

    app = C3App(factory)
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

    app = C3App(factory)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.startup_error is not None, what="the startup error")
    assert isinstance(app.startup_error, UsageError)
    assert app.return_code == 2
