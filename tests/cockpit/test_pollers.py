"""Pollers (over the real facade on the demo's simulated world): start at once, pause while their mode
is hidden or a modal covers it, mark stale sources."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.cockpit.conftest import (
    orchestration,
    real_app,
    screen_text,
    settle,
    wait_for,
)
from tests.cockpit.world import FIXED_NOW


async def test_pollers_pause_when_mode_hidden_and_resume_on_return(demo_world):
    app, svc = real_app(demo_world)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        orch = orchestration(app)
        await wait_for(pilot, lambda: orch.gpu_poller.ticks >= 2, what="a second GPU poll")
        await pilot.press("2")
        await settle(pilot)
        ticks = orch.gpu_poller.ticks
        calls = svc.calls.count("gpu_snapshots")
        assert all(p.timer._active.is_set() is False for p in orch.pollers)  # timers paused
        nodes = app.screen
        await wait_for(pilot, lambda: nodes.poller.ticks >= 1, what="the nodes poll")
        for _ in range(3):  # time passes on the Nodes mode
            await pilot.pause(0.5)
        assert orch.gpu_poller.ticks == ticks and svc.calls.count("gpu_snapshots") == calls
        assert "set_live:False" in svc.calls  # the facade's own live threads pause too
        await pilot.press("1")
        await wait_for(pilot, lambda: orch.gpu_poller.ticks > ticks, what="polling to resume")
        await wait_for(pilot, lambda: svc.calls.count("set_live:True") >= 1, what="the live sources to resume")


async def test_pollers_pause_under_a_modal(demo_world):
    app, svc = real_app(demo_world)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        orch = orchestration(app)
        await pilot.press("question_mark")
        await settle(pilot)
        calls = svc.calls.count("pod_states")
        for _ in range(5):
            await pilot.pause(0.5)
        orch.gpu_poller.tick()  # even a tick that fires is a no-op while covered
        assert svc.calls.count("pod_states") == calls
        assert not orch.gpu_poller.in_flight
        await pilot.press("escape")
        await wait_for(pilot, lambda: svc.calls.count("pod_states") > calls, what="polling after the modal closed")


@pytest.mark.parametrize("demo_world", ["stale"], indirect=True)
async def test_a_failing_source_keeps_last_good_values_marked_stale(demo_world):
    app, svc = real_app(demo_world)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        orch = orchestration(app)
        assert orch.gpus, "the first reading is kept"
        real = svc.inner.real
        real.ctx.probe.failing = True  # the GPU probe stops answering, as NVML does when the driver goes
        await wait_for(pilot, lambda: real.live._live().latest().source("gpus").stale, what="the live hub to mark the GPUs stale")
        orch.poll_now()
        await wait_for(pilot, lambda: orch.gpu_error is not None, what="the failing poll")
        orch.render_sources()
        text = screen_text(app)
        assert "GPUs ⚠ STALE as of 12:00:00" in text and "NVML did not answer" in text
        assert "Pods ● as of" in text
        assert "GPU0 RTX 3090" in text  # last-good panels still shown


async def test_an_old_reading_goes_stale_without_an_error(demo_world):
    app, svc = real_app(demo_world)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        app.clock = lambda: FIXED_NOW + timedelta(seconds=30)
        orch = orchestration(app)
        orch.render_sources()
        assert "⚠ STALE as of 12:00:00 (no reading for 30s)" in screen_text(app)


def test_a_pushed_change_during_a_poll_in_flight_is_polled_right_after_it_lands():
    """A live push (`request`) that meets a poll in flight is not dropped: the reading under way may
    predate the change, and the next timer tick can be a whole period away. Timer ticks stay dropped."""
    from types import SimpleNamespace

    from c3.screens.base import Poller

    started: list[int] = []
    screen = SimpleNamespace(is_active=True, app=SimpleNamespace(services=object()))
    poller = Poller(screen, 2.0, lambda: started.append(1))  # type: ignore[arg-type]
    poller.tick()
    poller.tick()  # a timer tick during the poll: dropped
    poller.landed()
    assert len(started) == 1
    poller.tick()
    poller.request()  # a push during the poll: polled once more, right after it lands
    poller.request()
    assert len(started) == 2
    poller.landed()
    assert len(started) == 3 and poller.in_flight
    poller.landed()
    assert len(started) == 3 and not poller.in_flight
