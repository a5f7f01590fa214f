"""Trouble calls for attention: failed, misplaced, unhealthy, preempting and stale pods are counted in
the mode bar and announced once per change (toast; bell when asked for) — the rules on plain pod
states, then the real thing: a stub engine killed with SIGKILL in the simulated world, announced
within 2 s by the live hub's push with every poll timer off."""

from __future__ import annotations

import asyncio
import os
import signal
from datetime import UTC, datetime

from backend.live.engine_metrics import EngineMetrics
from c3.app import C3App
from c3.services import PodState
from c3.trouble import TroubleWatch
from tests.cockpit.conftest import orchestration, settle, wait_for
from tests.cockpit.scenes import converged


def pod(name="chat", state="serving", placement="ok", new_preemptions=0, detail="", restarts=0):
    metrics = EngineMetrics(engine="vllm", taken_at=datetime(2026, 1, 1, tzinfo=UTC), new_preemptions=new_preemptions) if state == "serving" else None
    return PodState(name, "vllm/x", 8000, (0,), state=state, placement=placement, placement_detail=detail, metrics=metrics, restarts=restarts)


def test_each_kind_of_trouble_is_new_once_and_clears_once():
    watch = TroubleWatch()
    assert watch.update([pod()]) == ([], []) and watch.summary() == ""
    new, cleared = watch.update([pod(state="failed", placement="unknown"), pod("odd", placement="mismatch", detail="on GPU 0")])
    assert [(t.pod, t.kind) for t in new] == [("chat", "failed"), ("odd", "misplaced")] and cleared == []
    assert watch.summary() == "1 failed · 1 misplaced"
    # The same reading again announces nothing.
    assert watch.update([pod(state="failed", placement="unknown"), pod("odd", placement="mismatch")]) == ([], [])
    new, cleared = watch.update([pod(), pod("odd")])
    assert new == [] and {(t.pod, t.kind) for t in cleared} == {("chat", "failed"), ("odd", "misplaced")}
    assert watch.summary() == "" and watch.pods() == set()


def test_unhealthy_means_it_served_and_stopped_answering_not_still_booting():
    watch = TroubleWatch()
    watch.update([pod("a", state="booting"), pod("b")])
    new, _ = watch.update([pod("a", state="booting"), pod("b", state="booting")])
    assert [(t.pod, t.kind) for t in new] == [("b", "unhealthy")]
    watch.update([pod("b", state="down")])  # stopped: a later boot is a fresh one
    assert watch.update([pod("b", state="booting")]) == ([], [])


def test_restarted_is_announced_once_per_restart_and_counted_until_the_pod_goes_down():
    watch = TroubleWatch()
    watch.update([pod()])
    new, _ = watch.update([pod(restarts=1)])
    assert [t.title for t in new] == ["restarted (1×)"] and watch.summary() == "1 restarted"
    assert watch.update([pod(restarts=1)]) == ([], [])  # the same restart is not news again
    new, cleared = watch.update([pod(restarts=2)])
    assert [t.title for t in new] == ["restarted (2×)"] and cleared == []
    _, cleared = watch.update([pod(state="down", restarts=2)])
    assert [t.kind for t in cleared] == ["restarted"] and watch.summary() == ""


def test_preempting_and_stale():
    watch = TroubleWatch()
    new, _ = watch.update([pod(new_preemptions=3), pod("off", state="down")], stale=True)
    assert {(t.pod, t.kind) for t in new} == {("chat", "preempting"), ("chat", "stale")}  # a down pod is not stale trouble
    assert watch.counts() == {"preempting": 1, "stale": 1}


async def test_a_killed_engine_is_announced_within_two_seconds_once_with_the_bell(demo_world):
    from backend.sim.runtime import SimRuntime

    svc = demo_world.services()
    converged(svc)
    app = C3App(svc, clock=svc.clock, autopoll=False, live=True, bell=True)  # no timers: only the push
    toasts: list[tuple[float, str]] = []
    bells: list[float] = []
    loop = asyncio.get_running_loop()
    async with app.run_test(size=(120, 40)) as pilot:
        notify = app.notify

        def spy(message, **kwargs):
            toasts.append((loop.time(), message))
            return notify(message, **kwargs)

        app.notify = spy  # type: ignore[method-assign]
        app.bell = lambda: bells.append(loop.time())  # type: ignore[method-assign]
        await settle(pilot)
        orch = orchestration(app)
        await wait_for(pilot, lambda: [p.state for p in orch.pods] == ["serving", "serving"], what="both pods serving")
        await wait_for(pilot, lambda: app._unsubscribe is not None, what="the subscription")
        assert toasts == [] and bells == [] and "⚠" not in str(app.screen.query_one("#modebar").render())
        pid = (await asyncio.to_thread(SimRuntime().workload, "chat")).pids[0]
        killed = loop.time()
        os.kill(pid, signal.SIGKILL)
        await wait_for(pilot, lambda: any(m.startswith("chat: failed") for _, m in toasts), timeout=30, what="the failure toast")
        announced = next(t for t, m in toasts if m.startswith("chat: failed"))
        assert announced - killed <= 2.0, f"announced after {announced - killed:.2f} s"
        await settle(pilot)
        assert "⚠ 1 failed" in str(app.screen.query_one("#modebar").render())
        assert len(bells) == 1 and bells[0] >= killed
        for _ in range(3):  # later readings of the same failure announce nothing again
            orch.pods_poller.tick()
            await settle(pilot)
        assert sum(m.startswith("chat: failed") for _, m in toasts) == 1 and len(bells) == 1
