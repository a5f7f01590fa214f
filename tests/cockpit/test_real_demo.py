"""The cockpit on the real backend as `c3 demo` runs it: the built-in simulated rig, the simulated
runtime (stub engines as local processes), ESTATE's estate file, FIT's catalog and fit-check.

Drives the app with keys: create a pod, boot it, see it placed; create the demo's misplaced pod, boot
it, see the mismatch explained; stop everything. Cleans up every stub process it started.
"""

from __future__ import annotations

import socket

import pytest

from c3.app import C3App
from c3.modals.new_pod import NewPodModal
from tests.cockpit.conftest import gate_open, orchestration, screen_text, settle, wait_for


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def demo_services(monkeypatch):
    for key in ("C3_HOME", "C3_STATE", "C3_RIG", "C3_RUNTIME", "C3_DEMO", "C3_STUB_STARTUP_DELAY"):
        monkeypatch.setenv(key, __import__("os").environ.get(key, ""))
    monkeypatch.delenv("C3_DEMO")
    monkeypatch.setenv("C3_STUB_STARTUP_DELAY", "0.5")
    from c3.services_real import build_services

    services = build_services(demo=True)
    try:
        yield services
    finally:
        from backend.sim.demo import stop_demo_pods

        stop_demo_pods()


async def _create(pilot, name: str, slug_filter: str, gpus: str, port: int) -> None:
    app = pilot.app
    await pilot.press("N")
    await wait_for(pilot, lambda: isinstance(app.screen, NewPodModal), what="the new-pod modal")
    modal = app.screen
    await pilot.press(*name, "tab", *slug_filter)
    await wait_for(pilot, lambda: modal.slug is not None and slug_filter in modal.slug, what=f"a slug matching {slug_filter}")
    modal.query_one("#gpus").value = gpus
    modal.query_one("#port").value = str(port)
    await settle(pilot)
    await pilot.press("ctrl+s")
    await wait_for(pilot, lambda: gate_open(app), what="the confirm gate")
    assert not app.screen.plan.problems, app.screen.plan.problems
    await pilot.press("y")
    await wait_for(pilot, lambda: app.last_result is not None and name in app.last_result.message, what=f"pod {name} created")
    assert app.last_result.ok, app.last_result


async def _boot(pilot, name: str) -> None:
    app = pilot.app
    orch = orchestration(app)
    await wait_for(pilot, lambda: name in [p.name for p in orch.pods], what=f"pod {name} listed")
    pods = orch.query_one("#pods")
    pods.focus()
    pods.highlighted = [p.name for p in orch.pods].index(name)
    await pilot.press("u")
    await wait_for(pilot, lambda: gate_open(app), what="the boot gate")
    assert not app.screen.plan.problems, app.screen.plan.problems
    await pilot.press("y")
    await wait_for(pilot, lambda: app.last_result is not None and f"pod {name}" in app.last_result.message
                   and ("serv" in app.last_result.message or "fail" in app.last_result.message), timeout=60, what=f"pod {name} to boot")


async def test_demo_create_boot_placed_mismatch_stop(demo_services):
    app = C3App(demo_services)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        orch = orchestration(app)
        await wait_for(pilot, lambda: len(orch.gpus) == 4, what="the demo rig's GPUs")
        assert "No pods yet" in screen_text(app)

        await _create(pilot, "chat", "vllm/llama-3.1-8b", "1", free_port())
        await _boot(pilot, "chat")
        assert app.last_result.ok and "placement ok" in app.last_result.message
        await wait_for(pilot, lambda: any(p.name == "chat" and p.placement == "ok" and p.state == "serving" for p in orch.pods), what="chat placed")
        assert "✓ placed" in screen_text(app)

        await _create(pilot, "odd", "demo-misplaced", "2", free_port())
        await _boot(pilot, "odd")
        assert not app.last_result.ok and "not on exactly its GPUs" in app.last_result.message
        await wait_for(pilot, lambda: any(p.name == "odd" and p.placement == "mismatch" for p in orch.pods), what="odd mismatched")
        text = screen_text(app)
        assert "⚠ PLACEMENT MISMATCH" in text and "not on requested GPU 2" in text and "GPU 0" in text

        await pilot.press("o")
        await wait_for(pilot, lambda: gate_open(app), what="the stop-all gate")
        plan = app.screen.plan
        assert set(plan.pods) == {"chat", "odd"}
        await pilot.press("y")
        await wait_for(pilot, lambda: app.last_result is not None and "stopped 2 pod(s)" in app.last_result.message, timeout=60, what="stop all")
        await wait_for(pilot, lambda: all(p.state == "down" for p in orch.pods), what="every pod down")


async def test_demo_nodes_this_machine_added_shows_the_rig_gpus_and_recipes_listed(demo_services):
    """`c3 demo` registers no node; adding this machine (Ctrl+T) through the gate lists it, probed
    without SSH, with the simulated rig's GPUs; the built-in recipes are listed."""
    from c3.modals.add_node import AddNodeModal
    from c3.screens.nodes import NodesScreen

    app = C3App(demo_services)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("2")
        await wait_for(pilot, lambda: isinstance(app.screen, NodesScreen) and app.screen.rows == [], what="an empty registry")
        assert "No nodes registered yet" in screen_text(app)
        await pilot.press("a")
        await wait_for(pilot, lambda: isinstance(app.screen, AddNodeModal), what="the add-node modal")
        await pilot.press("ctrl+t", "ctrl+s")
        await wait_for(pilot, lambda: gate_open(app), what="the add-node gate")
        assert not app.screen.plan.problems, app.screen.plan.problems
        assert "nodes.json" in screen_text(app)
        await pilot.press("y")
        await wait_for(pilot, lambda: app.last_result is not None and "added node" in app.last_result.message, what="the node added")
        assert app.last_result.ok and "this machine (no SSH)" in app.last_result.message
        nodes = app.screen
        await wait_for(pilot, lambda: bool(nodes.rows) and nodes.rows[0].reachable is not None, timeout=30, what="the node probed")
        [row] = nodes.rows
        assert row.local and row.reachable and len(row.gpus) == 4
        assert "4 GPUs" in screen_text(app) and "● local" in screen_text(app)
        await pilot.press("3")
        await wait_for(pilot, lambda: bool(getattr(app.screen, "rows", None)), what="the recipes")
        assert "spark2-vllm-qwen3-235b-a22b-gptq-int4" in screen_text(app)
        # The launch modal over the real facade checks overrides with the backend's own parser.
        from c3.modals.launch import LaunchModal

        await pilot.press("u")
        await wait_for(pilot, lambda: isinstance(app.screen, LaunchModal) and app.screen.nodes is not None, what="the launch modal")
        modal = app.screen
        modal.query_one("#launch-overrides").focus()
        await pilot.press(*"max_model_len=lots")
        await wait_for(pilot, lambda: modal.checked_for == ("max_model_len=lots",), what="the overrides checked")
        assert modal.override_problems == ["--set max_model_len: `lots` is not an integer"]
        assert "`lots` is not an integer" in screen_text(app)
