"""The gateway in the cockpit (`g`, `:gateway`): every running gateway's address, which models route to
which pod, the pod loaded now, the last swap and the requests held for one, read from the gateway's own
status file in a worker (issue 28)."""

from __future__ import annotations

import pytest

from tests.cockpit.conftest import screen_text, settle, wait_for
from tests.cockpit.test_nonblocking import slow_app
from tests.cockpit.world import GATEWAY_HELD_FOR


@pytest.mark.parametrize("demo_world", ["placed"], indirect=True)
async def test_the_gateway_view_shows_routes_the_loaded_pod_the_last_swap_and_held_requests(demo_world):
    path = demo_world.write_gateway_status()
    app, slow = slow_app(demo_world)
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(pilot, rounds=4)
        await pilot.press("g")
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "GatewayModal" and app.screen.rows is not None, what="the gateway view")
        await settle(pilot)
        text = screen_text(app)
        assert "Gateway 127.0.0.1:8012" in text and "API key required" in text and "swap wait 120s" in text, text
        assert "started chat, stopped summarizer (freed GPU 0), took 4.1s" in text
        assert "● running" in text and "○ stopped" in text and "2 held" in text
        assert "Qwen/Qwen3-8B" in text and "meta-llama/Llama-3.1-8B-Instruct" in text
        assert f"summarizer: 2 request(s) held for a swap: {GATEWAY_HELD_FOR}" in text
        path.unlink()
        app.screen.poll()
        await wait_for(pilot, lambda: "No gateway running" in screen_text(app), what="the gateway gone")
        assert "c3 gateway serve" in screen_text(app)
        await pilot.press("escape")
        await settle(pilot)
        await pilot.press("colon", *"gateway", "enter")
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "GatewayModal", what=":gateway")
        await settle(pilot)
    assert "gateways" in slow.names and slow.on_loop == [], slow.on_loop


def test_the_gateway_view_marks_a_sleeping_pod_and_its_transitions():
    from c3.modals.gateway import state_cell

    assert state_cell("sleeping").plain == "◑ sleeping"
    assert state_cell("falling-asleep").plain == "◐ falling-asleep" and state_cell("waking").plain == "◐ waking"
