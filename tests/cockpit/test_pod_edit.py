"""`e` on a pod: the pod form prefilled with its slug, GPUs and port, saved through the confirm gate,
whose plan says that a running pod restarts; Esc in the gate writes nothing (byte for byte), Confirm
writes the file and the pod serves again on its new port. The real facade over the demo's world."""

from __future__ import annotations

from contextlib import asynccontextmanager

import httpx

from tests.cockpit.conftest import gate_open, real_app, screen_text, settle, wait_for


def serves(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


async def edit_form(pilot, pod: str):
    """Highlight `pod` in the pod list, press `e`, and wait for its form to settle."""
    from c3.modals.new_pod import EditPodModal

    app = pilot.app
    orch = app._orchestration()
    pods = orch.query_one("#pods")
    pods.focus()
    pods.highlighted = [p.name for p in orch.pods].index(pod)
    await settle(pilot)
    await pilot.press("e")
    await wait_for(pilot, lambda: isinstance(app.screen, EditPodModal) and app.screen.settled, what="the edit form, settled")
    return app.screen


@asynccontextmanager
async def editing(world, pod: str):
    """The cockpit on `world` with `pod`'s edit form open: (pilot, form, the estate file, its bytes before)."""
    from backend import paths

    estate = paths.estate_file()
    before = estate.read_bytes()
    app, _log = real_app(world)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, rounds=4)
        yield pilot, await edit_form(pilot, pod), estate, before


async def test_edit_prefills_goes_through_the_gate_and_restarts_a_running_pod(demo_world):
    async with editing(demo_world, "chat") as (pilot, form, estate, before):
        app = pilot.app
        assert (form.query_one("#name").value, form.query_one("#name").disabled) == ("chat", True)
        assert (form.query_one("#gpus").value, form.query_one("#port").value, form.slug) == ("0", "8020", "vllm/qwen3-8b")
        assert "Edit pod chat" in screen_text(app) and "Save  Ctrl+S" in screen_text(app)
        form.query_one("#port").value = "8044"
        await settle(pilot)
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: gate_open(app), what="the confirm gate")
        text = screen_text(app)
        assert "Edit pod chat" in text and "port: 8020 → 8044" in text and "pod chat is running: it will RESTART" in text, text
        await pilot.press("escape")
        await settle(pilot)
        assert estate.read_bytes() == before, "cancelled, yet written"

        form = await edit_form(pilot, "chat")
        form.query_one("#port").value = "8044"
        await settle(pilot)
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: gate_open(app), what="the confirm gate")
        await pilot.press("y")
        await wait_for(pilot, lambda: app.last_result is not None and "edited pod chat" in app.last_result.message, timeout=90, what="the edit's result")
        assert app.last_result.ok and app.last_result.message.endswith("restarted"), app.last_result
        assert "port: 8044" in estate.read_text() and serves(8044) and not serves(8020)


async def test_a_refused_edit_goes_back_to_its_form_with_why_and_writes_nothing(shared_world):
    from c3.modals.new_pod import EditPodModal

    async with editing(shared_world, "chat") as (pilot, form, estate, before):
        app = pilot.app
        form.query_one("#gpus").value = "2"  # coder's GPU
        await wait_for(pilot, lambda: app.screen.settled, what="the form, refitted")
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: gate_open(app), what="the confirm gate")
        assert app.screen.query_one("#confirm").disabled and "cannot edit pod `chat` — E1: GPU 2" in screen_text(app)
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, EditPodModal), what="the edit form again")
        form = app.screen
        assert form.query_one("#gpus").value == "2" and form.query_one("#name").value == "chat"
        assert "E1: GPU 2" in screen_text(app)
    assert estate.read_bytes() == before
