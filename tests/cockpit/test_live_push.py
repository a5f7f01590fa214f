"""Pod changes reach the cockpit pushed by the facade's live hub (typed `PodsRead` messages posted
from the hub's thread), not only on the next poll: with every poll timer off, a pod stopped behind the
cockpit's back is shown down; with the subscription off too, it is not."""

from __future__ import annotations

import asyncio

from c3.app import C3App
from tests.cockpit.conftest import orchestration, settle, wait_for
from tests.cockpit.scenes import converged


async def _stop_chat_behind_its_back(demo_world, *, live: bool) -> C3App:
    from backend.sim.runtime import SimRuntime

    svc = demo_world.services()
    converged(svc)
    app = C3App(svc, clock=svc.clock, autopoll=False, live=live)  # no timers: only a push can refresh
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        orch = orchestration(app)
        await wait_for(pilot, lambda: [p.state for p in orch.pods] == ["serving", "serving"], what="both pods serving")
        if live:
            await wait_for(pilot, lambda: app._unsubscribe is not None, what="the subscription")
        await asyncio.to_thread(SimRuntime().stop, "chat", 5.0)
        if live:
            await wait_for(pilot, lambda: orch.pods[0].state == "down", timeout=30, what="chat shown down, pushed")
        else:
            for _ in range(10):
                await pilot.pause(0.3)
            assert orch.pods[0].state == "serving"  # nothing polls and nothing pushes: the old state stays
    return app


async def test_a_pod_stopped_elsewhere_is_pushed_to_the_screen(demo_world):
    await _stop_chat_behind_its_back(demo_world, live=True)


async def test_without_the_subscription_nothing_refreshes(demo_world):
    await _stop_chat_behind_its_back(demo_world, live=False)
