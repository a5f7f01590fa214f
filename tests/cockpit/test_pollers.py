"""Pollers (over the real facade on the demo's simulated world): start at once, pause while their mode
is hidden or a modal covers it, mark stale sources."""

from __future__ import annotations

import asyncio
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


async def test_pushed_sources_run_no_poll_timer_and_a_hidden_mode_catches_up_on_return(demo_world):
    """The live hub pushes GPUs and pods: the Orchestration screen has no poll timer and calls no
    facade read while nothing changes. A change while the mode is hidden is kept, not taken; coming
    back draws it without a poll. The Nodes mode, which the hub does not feed, still polls."""
    from backend.sim.runtime import SimRuntime

    app, svc = real_app(demo_world)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        orch = orchestration(app)
        await wait_for(pilot, lambda: app.pushed is True, what="the subscription")
        await wait_for(pilot, lambda: [p.state for p in orch.pods] == ["serving", "serving"], what="both pods serving")
        assert [p.timer for p in orch.pollers if p.pushed] == [None, None]
        assert orch.node_pods_poller.timer is not None  # the other nodes' pods: the hub does not feed them (issue 25)
        reads = svc.calls.count("gpu_snapshots") + svc.calls.count("pod_states")
        for _ in range(5):
            await pilot.pause(0.5)
        assert svc.calls.count("gpu_snapshots") + svc.calls.count("pod_states") == reads  # nothing polled
        await pilot.press("2")
        await settle(pilot)
        nodes = app.screen
        await wait_for(pilot, lambda: nodes.poller.ticks >= 1, what="the nodes poll")
        assert nodes.poller.timer is not None  # not pushed: polled on its timer
        assert "set_live:False" in svc.calls  # the facade's costly placement reads pause
        await asyncio.to_thread(SimRuntime().stop, "chat", 5.0)
        await wait_for(pilot, lambda: (r := orch._pending_pods) is not None and r.pods[0].state == "down", timeout=30, what="chat's stop pushed while hidden")
        assert "● serving" in _pod_list_text(orch) and orch.pods[0].state == "serving"  # kept, not taken under the other mode
        await pilot.press("1")
        await wait_for(pilot, lambda: "○ down" in _pod_list_text(orch), what="the kept reading drawn on return")
        await wait_for(pilot, lambda: svc.calls.count("set_live:True") >= 1, what="the live sources to resume")
        assert svc.calls.count("gpu_snapshots") + svc.calls.count("pod_states") == reads


def _pod_list_text(orch) -> str:
    from c3.screens.pod_view import PodList

    pods = orch.query_one(PodList)
    return "\n".join(pods.get_option_at_index(i).prompt.plain for i in range(pods.option_count))


async def test_a_facade_that_cannot_push_is_polled_on_timers(shared_world):
    app, svc = real_app(shared_world)
    svc.subscribe = lambda on_update: None  # no live hub: nothing will be pushed
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        orch = orchestration(app)
        await wait_for(pilot, lambda: app.pushed is False, what="the subscription's answer")
        assert all(p.timer is not None for p in orch.pollers)
        await wait_for(pilot, lambda: orch.gpu_poller.ticks >= 3, what="GPU polls on the timer")


async def test_nothing_is_read_or_drawn_under_a_modal(shared_world):
    app, svc = real_app(shared_world)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        orch = orchestration(app)
        await wait_for(pilot, lambda: app.pushed is True, what="the subscription")
        await pilot.press("question_mark")
        await settle(pilot)
        calls = svc.calls.count("pod_states")
        for _ in range(5):
            await pilot.pause(0.5)
        orch.gpu_poller.tick()  # even a tick that fires is a no-op while covered
        assert svc.calls.count("pod_states") == calls
        assert not orch.gpu_poller.in_flight
        await pilot.press("escape")
        await wait_for(pilot, lambda: "paused" not in str(orch.query_one("#sources").render()), what="the badges live again")


@pytest.mark.parametrize("shared_world", ["stale"], indirect=True)
async def test_a_failing_source_keeps_last_good_values_marked_stale(shared_world):
    app, svc = real_app(shared_world)
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
        assert "GPUs ⚠ STALE as of " in text and "NVML did not answer" in text  # pushed: stamped with the real reading's time
        assert "Pods ● as of" in text
        assert "GPU0 RTX 3090" in text  # last-good panels still shown


async def test_an_old_reading_goes_stale_without_an_error(shared_world):
    app, svc = real_app(shared_world)
    app.live = False  # polled readings, stamped with the scenes' fixed clock
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        app.clock = lambda: FIXED_NOW + timedelta(seconds=30)
        orch = orchestration(app)
        orch.render_sources()
        assert "⚠ STALE as of 12:00:00 (no reading for 30s)" in screen_text(app)


async def test_a_pushed_reading_that_stopped_goes_stale_and_its_stamp_lags_at_most_a_step(shared_world):
    """Readings that change nothing are not pushed: the badge ages from the hub's last reading
    (`freshness`), and its stamp moves only every STAMP_STEP_S — until the readings stop."""
    from datetime import UTC, datetime

    from c3.screens.orchestration import STAMP_STEP_S
    from c3.services import Freshness

    app, svc = real_app(shared_world)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await wait_for(pilot, lambda: app.pushed is True, what="the subscription")
        orch = orchestration(app)
        now = datetime(2026, 5, 1, 12, 0, 30, tzinfo=UTC)
        app.clock = lambda: now
        orch.gpu_taken_at = orch.pods_taken_at = datetime(2026, 5, 1, 12, 0, 27, tzinfo=UTC)
        svc.inner.freshness = lambda: Freshness(gpus_at=now, pods_at=now)  # read 3 s after the stamp shown
        orch.render_sources()
        badges = str(orch.query_one("#sources").render())
        assert badges.count("● as of 12:00:27") == 2 and STAMP_STEP_S > 3  # fresh; the stamp did not move
        later = datetime(2026, 5, 1, 12, 0, 36, tzinfo=UTC)
        app.clock = lambda: later
        svc.inner.freshness = lambda: Freshness(gpus_at=later, pods_at=later)
        orch.render_sources()
        assert str(orch.query_one("#sources").render()).count("● as of 12:00:36") == 2  # a step later: it moves
        app.clock = lambda: later + timedelta(seconds=12)  # and then no reading at all
        orch.render_sources()
        badges = str(orch.query_one("#sources").render())
        assert "GPUs ⚠ STALE as of 12:00:36 (no reading for 12s)" in badges and "Pods ⚠ STALE" in badges


def test_a_pushed_change_during_a_poll_in_flight_is_polled_right_after_it_lands():
    """A live push (`request`) that meets a poll in flight is not dropped: the reading under way may
    predate the change, and the next timer tick can be a whole period away. Timer ticks stay dropped."""
    from types import SimpleNamespace

    from c3.screens.base import Poller

    started: list[int] = []
    screen = SimpleNamespace(is_active=True, cockpit=SimpleNamespace(services=object()))  # screens reach the app as `cockpit`
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
