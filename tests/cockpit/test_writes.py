"""The write flow: new pod → confirm → result shown; confirm gate rules; re-validation; read-only; boots."""

from __future__ import annotations

from c3.modals.confirm import ConfirmModal
from c3.modals.new_pod import NewPodModal, name_problem, parse_gpus
from c3.screens.orchestration import OrchestrationScreen
from c3.services import WritePlan
from tests.cockpit.conftest import (
    make_app,
    orchestration,
    screen_text,
    settle,
    wait_for,
)


async def _open_new_pod(pilot):
    await pilot.press("N")
    await settle(pilot)
    assert isinstance(pilot.app.screen, NewPodModal)
    return pilot.app.screen


async def test_new_pod_create_confirm_created_and_shown_at_once():
    app, svc = make_app("placed")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        modal = await _open_new_pod(pilot)
        await pilot.press(*"chat2")
        await pilot.press("tab", *"gpt-oss")
        await settle(pilot)
        assert modal.slug == "vllm/gpt-oss-20b"
        assert modal.query_one("#gpus").value == "3"  # the one free GPU, sized to TP 1
        assert modal.query_one("#port").value == "8050"  # proposed
        assert "✓ fits" in screen_text(app)  # verdict beside the slug and in the breakdown
        assert "KV pool" in screen_text(app)
        await pilot.press("ctrl+s")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmModal)
        text = screen_text(app)
        assert "Create pod chat2" in text and "slug  vllm/gpt-oss-20b" in text and "GPUs  3" in text and "port  8050" in text
        assert app.screen.focused.id == "cancel"  # Cancel is focused
        await pilot.press("y")
        await settle(pilot)
        assert isinstance(app.screen, OrchestrationScreen)
        assert "execute:create" in svc.calls
        assert app.last_result.ok and "created pod chat2" in app.last_result.message
        text = screen_text(app)
        assert "✓ created pod chat2" in text
        assert "chat2" in [p.name for p in orchestration(app).pods]  # appears at once (immediate poll)


async def test_new_pod_tp2_slug_prefills_two_free_gpus_and_port_is_editable():
    app, _ = make_app("empty")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        modal = await _open_new_pod(pilot)
        await pilot.press(*"duo", "tab", *"tp2")
        await settle(pilot)
        assert modal.slug == "vllm/qwen3-32b-awq-tp2"
        assert modal.query_one("#gpus").value == "0,1"
        port = modal.query_one("#port")
        port.value = ""
        port.focus()
        await pilot.press(*"9100")
        await settle(pilot)
        request = modal.collect()
        assert request.port == 9100 and request.gpus == (0, 1) and request.name == "duo"


async def test_name_is_validated_as_typed():
    app, _ = make_app("placed")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        modal = await _open_new_pod(pilot)
        await pilot.press(*"Bad")
        await pilot.pause()
        assert "lower-case letters" in screen_text(app)
        modal.query_one("#name").value = ""
        await pilot.press(*"chat")
        await pilot.pause()
        assert "already exists" in screen_text(app)
        await pilot.press("2")
        await pilot.pause()
        assert "✓ name is free" in screen_text(app)
        await pilot.press("ctrl+s")  # no slug problem here, but the gate is the modal's own check
        await settle(pilot)


async def test_create_refused_is_shown_with_why():
    app, svc = make_app("placed")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        modal = await _open_new_pod(pilot)
        await pilot.press(*"clash", "tab", *"qwen3-8b")
        await settle(pilot)
        gpus = modal.query_one("#gpus")
        gpus.value = "0"  # claimed by chat
        await wait_for(pilot, lambda: "already claimed" in screen_text(app), what="the claimed-GPU warning")
        await pilot.press("ctrl+s")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmModal)
        assert "GPU 0 is claimed by pod `chat`" in screen_text(app)
        assert app.screen.query_one("#confirm").disabled
        await pilot.press("y")  # refused: nothing happens
        await pilot.pause()
        assert isinstance(app.screen, ConfirmModal)
        await pilot.press("escape")
        await settle(pilot)
        assert "execute:create" not in svc.calls
        assert "cancelled" in " ".join(n.message for n in app._notifications)


async def test_escape_cancels_and_nothing_runs():
    app, svc = make_app("placed")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("d")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmModal) and app.screen.focused.id == "cancel"
        await pilot.press("enter")  # Enter on the focused Cancel
        await settle(pilot)
        await pilot.press("x")
        await settle(pilot)
        await pilot.press("escape")
        await settle(pilot)
        assert not any(c.startswith("execute") for c in svc.calls)
        assert [p.state for p in orchestration(app).pods] == ["serving", "serving"]


async def test_revalidated_just_before_execution():
    app, svc = make_app("placed")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("x")  # remove chat
        await settle(pilot)
        assert isinstance(app.screen, ConfirmModal)
        with svc._lock:
            del svc._pods["chat"]  # someone else removed it while the modal was open
        await pilot.press("y")
        await settle(pilot)
        assert "check" in svc.calls and "execute:rm" not in svc.calls
        assert not app.last_result.ok and "not in the estate any more" in app.last_result.message
        assert "✗ refused" in screen_text(app)


async def test_stop_all_lists_what_will_stop_then_stops_it():
    app, svc = make_app("placed")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("o")
        await settle(pilot)
        text = screen_text(app)
        assert "stop c3-chat (GPU 0, port 8000)" in text and "stop c3-coder (GPU 1, 2, port 8010)" in text
        await pilot.press("y")
        await settle(pilot)
        assert app.last_result.ok and "stopped 2 pod(s)" in app.last_result.message
        assert [p.state for p in orchestration(app).pods] == ["down", "down"]


async def test_down_then_rm():
    app, svc = make_app("placed")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("d")
        await settle(pilot)
        await pilot.press("y")
        await settle(pilot)
        assert "stopped pod chat" in app.last_result.message
        await pilot.press("x")
        await settle(pilot)
        await pilot.press("y")
        await settle(pilot)
        assert "removed pod chat" in app.last_result.message
        assert [p.name for p in orchestration(app).pods] == ["coder"]


async def test_boot_shows_progress_then_serving():
    app, svc = make_app("placed", boot_step_s=0.8)  # each phase stays up long enough to be seen on a loaded machine
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("d")
        await settle(pilot)
        await pilot.press("y")
        await settle(pilot)
        await pilot.press("u")
        await settle(pilot)
        await pilot.press("y")
        boot = orchestration(app).query_one("#boot")
        await wait_for(pilot, lambda: boot.display and "loading weights" in str(boot.render()), what="the boot panel to show a phase")
        text = str(boot.render())
        assert "◐ booting chat" in text and "│" in text and "Starting vLLM API server" in text  # phase, elapsed, engine lines
        await wait_for(pilot, lambda: app.last_result is not None and "serving" in app.last_result.message, what="the boot to finish")
        await settle(pilot)
        assert app.last_result.ok
        assert orchestration(app).pods[0].state == "serving"
        assert not boot.display  # gone once it serves


async def test_failed_boot_keeps_the_reason_visible():
    app, svc = make_app("empty", fail_boot=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        modal = await _open_new_pod(pilot)
        await pilot.press(*"oom", "tab", *"qwen3-8b")
        await settle(pilot)
        await pilot.press("ctrl+s")
        await settle(pilot)
        await pilot.press("y")
        await settle(pilot)
        await pilot.press("u")
        await settle(pilot)
        await pilot.press("y")
        await settle(pilot, rounds=6)
        assert not app.last_result.ok and "CUDA out of memory" in app.last_result.message
        text = screen_text(app)
        assert "✗ boot failed oom" in text and "OutOfMemoryError" in text
        assert orchestration(app).pods[0].state == "failed"


async def test_readonly_refuses_every_write_and_says_so():
    app, svc = make_app("placed", readonly=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert "READ-ONLY" in screen_text(app)
        for key in ("u", "d", "x", "o"):
            await pilot.press(key)
            await settle(pilot)
            assert isinstance(app.screen, OrchestrationScreen), key
            assert not app.last_result.ok and "read-only cockpit: refused" in app.last_result.message
        modal = await _open_new_pod(pilot)  # reading the fit is allowed in read-only…
        await pilot.press(*"ro", "tab", *"gpt-oss")
        await settle(pilot)
        await pilot.press("ctrl+s")
        await settle(pilot)
        assert "refused to create a pod" in app.last_result.message  # …creating is not
        assert not any(c.startswith(("execute", "make_plan")) for c in svc.calls)


def test_confirm_blocked_reasons():
    plan = WritePlan("down", "Stop pod a", ("stop",), "a")
    assert ConfirmModal(plan).blocked is None
    assert ConfirmModal(plan, readonly=True).blocked
    assert ConfirmModal(WritePlan("down", "t", (), "a", problems=("gone",))).blocked


def test_parse_gpus_and_names():
    assert parse_gpus("0,1") == (0, 1) and parse_gpus(" 2 3 ") == (2, 3)
    assert isinstance(parse_gpus("0,0"), str) and isinstance(parse_gpus("a"), str) and isinstance(parse_gpus(""), str)
    assert name_problem("chat", set()) is None
    assert name_problem("Chat", set()) and name_problem("-x", set()) and name_problem("a", {"a"})


def test_modal_name_rule_is_the_estate_rule():
    from backend.models.estate import POD_NAME_PATTERN as ESTATE_RULE
    from c3.modals.new_pod import POD_NAME_PATTERN

    assert POD_NAME_PATTERN == ESTATE_RULE
