"""The write flow on the real facade over the demo's simulated world (stub engines on the demo rig):
new pod → confirm → written and shown; confirm gate rules; re-validation; read-only; boots."""

from __future__ import annotations

import re

import pytest
import yaml

from c3.modals.confirm import ConfirmModal
from c3.modals.new_pod import NewPodModal, name_problem, parse_gpus
from c3.screens.orchestration import OrchestrationScreen
from c3.services import WritePlan
from tests.cockpit.conftest import (
    gate_open,
    orchestration,
    real_app,
    screen_text,
    settle,
    wait_for,
)


async def _open_new_pod(pilot):
    await pilot.press("N")
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, NewPodModal), what="the new-pod modal")
    return pilot.app.screen


def estate_pods() -> dict[str, dict]:
    """The estate file as written (the world's environment is set by `demo_world` or `shared_world`)."""
    from backend import paths

    path = paths.estate_file()
    if not path.exists():
        return {}
    return {p["name"]: p for p in (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("estate", [])}


def running(world) -> set[str]:
    from backend.sim.runtime import SimRuntime

    return {name for name, w in SimRuntime().workloads().items() if w.running}


async def test_new_pod_create_confirm_created_and_shown_at_once(demo_world):
    app, _ = real_app(demo_world)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        modal = await _open_new_pod(pilot)
        await pilot.press(*"chat2")
        await pilot.press("tab", *"gpt-oss")
        await wait_for(pilot, lambda: modal.slug is not None and "gpt-oss" in modal.slug and "KV pool" in screen_text(app), what="the slug and its fit")
        slug, gpus, port = modal.slug, modal.query_one("#gpus").value, modal.query_one("#port").value
        assert gpus == "1"  # the one free GPU of the placed demo rig, sized to TP 1
        assert "✓ fits" in screen_text(app)  # verdict beside the slug and in the breakdown
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: gate_open(app), what="the confirm gate")
        text = screen_text(app)
        assert "Create pod chat2" in text and f"slug: {slug}" in text and "gpus: [1]" in text and f"port: {port}" in text
        await wait_for(pilot, lambda: getattr(app.screen.focused, "id", None) == "cancel", what="Cancel focused")  # Cancel is focused
        assert "chat2" not in estate_pods()  # nothing written before the confirm
        await pilot.press("y")
        await wait_for(pilot, lambda: app.last_result is not None, what="the result")
        assert isinstance(app.screen, OrchestrationScreen)
        assert app.last_result.ok and "created pod chat2" in app.last_result.message
        written = estate_pods()["chat2"]
        assert {k: written[k] for k in ("name", "slug", "gpus", "port")} == {"name": "chat2", "slug": slug, "gpus": [1], "port": int(port)}
        assert "✓ created pod chat2" in screen_text(app)
        await wait_for(pilot, lambda: "chat2" in [p.name for p in orchestration(app).pods], what="chat2 listed")  # the immediate poll


@pytest.mark.parametrize("demo_world", ["empty"], indirect=True)
async def test_new_pod_tp2_slug_prefills_two_free_gpus_and_port_is_editable(demo_world):
    app, _ = real_app(demo_world)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        modal = await _open_new_pod(pilot)
        await pilot.press(*"duo", "tab", *"tp2")
        await wait_for(pilot, lambda: modal.slug is not None and modal.query_one("#gpus").value != "", what="a TP2 slug and its GPUs")
        assert modal.slug.endswith("-tp2")
        assert len(modal.query_one("#gpus").value.split(",")) == 2
        port = modal.query_one("#port")
        port.value = ""
        port.focus()
        await pilot.press(*"9100")
        await settle(pilot)
        request = modal.collect()
        assert request.port == 9100 and len(request.gpus) == 2 and request.name == "duo"


async def test_name_is_validated_as_typed(shared_world):
    app, _ = real_app(shared_world)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        modal = await _open_new_pod(pilot)
        await pilot.press(*"Bad")
        await pilot.pause()
        assert "lower-case letters" in screen_text(app)
        modal.query_one("#name").value = ""
        await pilot.press(*"chat")
        await pilot.pause()
        assert "already" in screen_text(app)
        await pilot.press("escape")
        await settle(pilot)


async def test_create_refused_is_shown_with_why(shared_world):
    app, _ = real_app(shared_world)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        modal = await _open_new_pod(pilot)
        await pilot.press(*"clash", "tab", *"vllm/qwen3-8b")
        await wait_for(pilot, lambda: modal.slug == "vllm/qwen3-8b", what="the slug")
        gpus = modal.query_one("#gpus")
        gpus.value = "0"  # claimed by chat
        await wait_for(pilot, lambda: "already claimed" in screen_text(app), what="the claimed-GPU warning")
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: gate_open(app), what="the confirm gate")
        assert app.screen.plan.problems and "chat" in app.screen.plan.problems[0] and "GPU 0" in app.screen.plan.problems[0]
        assert app.screen.query_one("#confirm").disabled
        await pilot.press("y")  # refused: nothing happens
        await pilot.pause()
        assert isinstance(app.screen, ConfirmModal)
        await pilot.press("escape")
        await settle(pilot)
        assert "clash" not in estate_pods()
        # The refused request is back in its form, to fix rather than retype; the form says why (no toast over it).
        assert isinstance(app.screen, NewPodModal) and app.screen.query_one("#name").value == "clash"
        assert not list(app._notifications)


async def test_escape_cancels_and_nothing_runs(shared_world):
    app, _ = real_app(shared_world)
    before = estate_pods()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("d")
        await wait_for(pilot, lambda: gate_open(app), what="the stop gate")
        await wait_for(pilot, lambda: getattr(app.screen.focused, "id", None) == "cancel", what="Cancel focused")
        await pilot.press("enter")  # Enter on the focused Cancel
        await settle(pilot)
        await pilot.press("x")
        await wait_for(pilot, lambda: gate_open(app), what="the remove gate")
        await pilot.press("escape")
        await settle(pilot)
        assert estate_pods() == before and running(shared_world) == {"chat", "coder"}
        assert [p.state for p in orchestration(app).pods] == ["serving", "serving"]


async def test_revalidated_just_before_execution(demo_world):
    from backend.sim.runtime import SimRuntime

    app, _ = real_app(demo_world)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("d")  # stop chat
        await wait_for(pilot, lambda: gate_open(app), what="the stop gate")
        assert not app.screen.plan.problems
        SimRuntime().stop("chat", timeout=5.0)  # someone else stopped it while the gate was open
        await pilot.press("y")
        await wait_for(pilot, lambda: app.last_result is not None, what="the result")
        assert not app.last_result.ok and "no workload to stop" in app.last_result.message
        assert "✗ refused" in screen_text(app)


async def test_stop_all_lists_what_will_stop_then_stops_it(demo_world):
    app, _ = real_app(demo_world)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("o")
        await wait_for(pilot, lambda: gate_open(app), what="the stop-all gate")
        text = screen_text(app)
        assert "pod chat (GPU 0, port 8020)" in text and "pod coder (GPU 2,3, port 8024)" in text
        await pilot.press("y")
        await wait_for(pilot, lambda: app.last_result is not None, timeout=30, what="the stop")
        assert app.last_result.ok and "stopped 2 pod(s)" in app.last_result.message, app.last_result
        assert running(demo_world) == set()
        await wait_for(pilot, lambda: [p.state for p in orchestration(app).pods] == ["down", "down"], what="both pods shown down")


async def test_down_then_rm(demo_world):
    app, _ = real_app(demo_world)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("d")
        await wait_for(pilot, lambda: gate_open(app), what="the stop gate")
        await pilot.press("y")
        await wait_for(pilot, lambda: app.last_result is not None, timeout=30, what="the stop")
        assert "stopped pod chat" in app.last_result.message and "chat" not in running(demo_world)
        await wait_for(pilot, lambda: orchestration(app).pods[0].state == "down", what="chat shown down")
        app.last_result = None
        await pilot.press("x")
        await wait_for(pilot, lambda: gate_open(app), what="the remove gate")
        await pilot.press("y")
        await wait_for(pilot, lambda: app.last_result is not None, what="the removal")
        assert "removed pod chat" in app.last_result.message and "chat" not in estate_pods()
        await wait_for(pilot, lambda: [p.name for p in orchestration(app).pods] == ["coder"], what="only coder listed")


async def test_boot_shows_progress_then_serving(demo_world, monkeypatch):
    monkeypatch.setenv("C3_STUB_STARTUP_DELAY", "3")  # the stub's boot lines stay up long enough to be seen on a loaded machine
    from backend.sim.runtime import SimRuntime

    SimRuntime().stop("chat", timeout=5.0)
    app, _ = real_app(demo_world)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("u")
        await wait_for(pilot, lambda: gate_open(app), what="the boot gate")
        assert not app.screen.plan.problems, app.screen.plan.problems
        await pilot.press("y")
        boot = orchestration(app).query_one("#boot")
        seen: list[str] = []

        def engine_lines_shown() -> bool:
            seen.append(str(boot.render()) if boot.display else "")
            return "◐ booting chat" in seen[-1] and "INFO" in seen[-1]

        try:
            await wait_for(pilot, engine_lines_shown, timeout=30, what="the boot panel to show the engine's lines")
        except AssertionError:
            raise AssertionError(f"boot panel never showed the engine's lines; it showed {sorted(set(seen))[-5:]}; result {app.last_result}") from None
        assert "│" in seen[-1]  # phase, elapsed, then the engine's own lines

        def finished() -> bool:
            seen.append(str(boot.render()) if boot.display else "")
            return app.last_result is not None and "serving" in app.last_result.message

        await wait_for(pilot, finished, timeout=60, what="the boot to finish")
        # Issue 14: the boot clock stuck at 00:00 — a boot reports its phase only when it changes, so the
        # clock moved only then. Frame by frame, the clock never goes back, and within one phase it runs.
        heads = [re.match(r"◐ booting chat\s+(.*?)\s+(\d\d:\d\d)$", line.splitlines()[0]) for line in seen if line.startswith("◐ booting chat")]
        frames = [(m.group(1), m.group(2)) for m in heads if m]
        assert frames and all(a[1] <= b[1] for a, b in zip(frames, frames[1:], strict=False)), frames
        assert any(len({c for p, c in frames if p == phase}) >= 2 for phase, _ in frames), sorted(set(frames))
        assert app.last_result.ok and "placement ok" in app.last_result.message
        await wait_for(pilot, lambda: orchestration(app).pods[0].state == "serving" and not boot.display, what="chat serving, boot panel gone")


@pytest.mark.parametrize("demo_world", ["empty"], indirect=True)
async def test_failed_boot_keeps_the_reason_visible(demo_world, monkeypatch):
    monkeypatch.setenv("C3_STUB_CRASH_DURING_BOOT", "1")  # the stub dies as vLLM does on CUDA OOM
    app, _ = real_app(demo_world)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        modal = await _open_new_pod(pilot)
        await pilot.press(*"oom", "tab", *"vllm/qwen3-8b")
        await wait_for(pilot, lambda: modal.slug == "vllm/qwen3-8b" and modal.query_one("#port").value != "", what="the slug")
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: gate_open(app), what="the create gate")
        await pilot.press("y")
        await wait_for(pilot, lambda: app.last_result is not None, what="the creation")
        app.last_result = None
        await wait_for(pilot, lambda: [p.name for p in orchestration(app).pods] == ["oom"], what="oom listed")
        await pilot.press("u")
        await wait_for(pilot, lambda: gate_open(app), what="the boot gate")
        await pilot.press("y")
        await wait_for(pilot, lambda: app.last_result is not None, timeout=60, what="the boot to fail")
        assert not app.last_result.ok and "failed to boot" in app.last_result.message
        await wait_for(pilot, lambda: "OutOfMemoryError" in screen_text(app), what="the engine's last lines")
        assert "✗ boot failed oom" in screen_text(app)
        # The list learns it from the live hub's next runtime reading, not from the boot: under a loaded CI
        # box (five suites beside it) that took over 30 s once; as long as the boot wait above.
        await wait_for(pilot, lambda: orchestration(app).pods[0].state == "failed", timeout=60, what="oom shown failed")


async def test_readonly_refuses_every_write_and_says_so(shared_world):
    app, _ = real_app(shared_world, readonly=True)
    before = estate_pods()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert "READ-ONLY" in screen_text(app)
        for key in ("u", "d", "x", "o"):
            await pilot.press(key)
            await settle(pilot)
            assert isinstance(app.screen, OrchestrationScreen), key
            assert not app.last_result.ok and "read-only cockpit: refused" in app.last_result.message
        await pilot.press("N")  # refused before the form opens: nothing to fill in for nothing
        await settle(pilot)
        assert isinstance(app.screen, OrchestrationScreen)
        assert "refused to create a pod" in app.last_result.message
        assert estate_pods() == before and running(shared_world) == {"chat", "coder"}


def test_confirm_blocked_reasons(tmp_path):
    from backend.actions.stop_pod import StopPod
    from backend.actions.workspace import Workspace

    action = StopPod(Workspace(tmp_path / "estate.yml"), "a")
    plan = WritePlan(action, "Stop pod a", ("stop",))
    assert ConfirmModal(plan).blocked is None
    assert ConfirmModal(plan, readonly=True).blocked
    assert ConfirmModal(WritePlan(action, "t", (), problems=("gone",))).blocked


def test_parse_gpus_and_names():
    assert parse_gpus("0,1") == (0, 1) and parse_gpus(" 2 3 ") == (2, 3)
    assert isinstance(parse_gpus("0,0"), str) and isinstance(parse_gpus("a"), str) and isinstance(parse_gpus(""), str)
    assert name_problem("chat", set()) is None
    assert name_problem("Chat", set()) and name_problem("-x", set()) and name_problem("a", {"a"})


async def test_confirm_gate_shows_warnings_with_their_hints(shared_world):
    """A plan that may go ahead but carries a warning (here: the chosen port is bound on this host right
    now) shows it in the gate, amber, and Confirm stays enabled."""
    import socket

    app, _ = real_app(shared_world)
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot)
            modal = await _open_new_pod(pilot)
            await pilot.press(*"chat2", "tab", *"gpt-oss")
            await wait_for(pilot, lambda: modal.slug is not None and "gpt-oss" in modal.slug and "KV pool" in screen_text(app), what="the slug and its fit")
            field = modal.query_one("#port")
            field.value = str(port)
            await settle(pilot)
            await pilot.press("ctrl+s")
            await wait_for(pilot, lambda: gate_open(app), what="the confirm gate")
            gate = app.screen
            assert gate.plan.warnings and not gate.plan.problems
            shown = str(gate.query_one("#confirm-warnings").render())
            assert f"⚠ port {port} is in use on this host right now" in shown
            assert f"port {port} is in use" in screen_text(app)
            assert not gate.query_one("#confirm").disabled  # a warning does not block
            await pilot.press("escape")
            await settle(pilot)
    assert "chat2" not in estate_pods()


async def test_toasts_at_80x24_keep_off_the_pod_list(shared_world):
    """Issue 25: at 80×24 the toast after each action (6 s for a result, 10 s for a refusal) sat over
    the pod list, bottom right. At narrow widths toasts go over the GPU panels, no wider than they are."""
    from c3.services import WriteResult

    app, _ = real_app(shared_world)
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, OrchestrationScreen)
        app.show_result(WriteResult(True, "started pod chat: serving on GPU 0 (placed) after 12 s"))
        app.show_result(WriteResult(False, "refused to stop pod coder: it is not running", "select pod coder and press u"))
        await settle(pilot)
        toasts = list(screen.query("Toast"))
        assert len(toasts) == 2
        pods = screen.query_one("#pods-pane").region
        for toast in toasts:
            assert toast.region.height > 0 and not toast.region.overlaps(pods), (toast.region, pods)
            assert screen.region.contains_region(toast.region)
        await pilot.resize_terminal(120, 40)  # wide enough: Textual's own place again, bottom right
        await settle(pilot)
        assert all(toast.region.right > screen.query_one("#gpus").region.right for toast in screen.query("Toast"))
