"""Every binding of the cockpit, driven with keys through Pilot over the real facade on the demo's simulated world."""


from __future__ import annotations

import pytest

from c3.modals.confirm import ConfirmModal
from c3.modals.details import DetailsModal
from c3.modals.help import HelpModal
from c3.modals.logs import LogsModal
from c3.modals.new_pod import NewPodModal
from c3.screens.nodes import NodesScreen
from c3.screens.orchestration import OrchestrationScreen
from c3.screens.recipes import RecipesScreen
from tests.cockpit.conftest import orchestration, real_app, screen_text, settle, wait_for


async def test_mode_keys_switch_modes_and_back(shared_world):
    app, _ = real_app(shared_world)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, OrchestrationScreen)
        await pilot.press("2")
        await settle(pilot)
        assert isinstance(app.screen, NodesScreen)
        await wait_for(pilot, lambda: "box" in screen_text(app), what="the registered node")
        await pilot.press("3")
        await settle(pilot)
        assert isinstance(app.screen, RecipesScreen)
        await wait_for(pilot, lambda: "qwen3-32b-awq-2x5090" in screen_text(app), what="the user's recipe")
        await pilot.press("1")
        await settle(pilot)
        assert isinstance(app.screen, OrchestrationScreen)


async def test_orchestration_shows_every_gpu_and_pods_with_badges(shared_world):
    app, _ = real_app(shared_world)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        text = screen_text(app)
        for index in range(4):
            assert f"GPU{index} " in text
        assert "chat" in text and "vllm/qwen3-8b:8020" in text and "✓ placed" in text
        assert "coder" in text and "vllm/qwen3-32b-awq-tp2:8024" in text
        assert "free: GPU1" in text
        assert "GPUs ● as of 12:00:00" in text


@pytest.mark.parametrize("shared_world", ["mismatch"], indirect=True)
async def test_mismatch_is_explained(shared_world):
    app, _ = real_app(shared_world)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        text = screen_text(app)
        assert "⚠ PLACEMENT MISMATCH" in text
        assert "not on requested GPU 1; also on GPU 0 it did not ask for" in text
        assert "GPU1 RTX 3090 odd (claimed, unused)" in text
        # The pod on the wrong GPU shows on the GPU it really uses: in GPU0's panel and under the pod.
        assert "GPU0 RTX 3090 chat+odd⚠" in text
        pods = app._orchestration().query_one("#pods")
        odd = next(pods.get_option_at_index(i).prompt.plain for i in range(pods.option_count) if pods.get_option_at_index(i).id == "odd")
        assert "GPU1 RTX 3090" in odd and "(claimed, unused)" in odd
        assert "└─ GPU0 RTX 3090" in odd and "⚠ runs here" in odd


@pytest.mark.parametrize("shared_world", ["mismatch"], indirect=True)
async def test_gpu_lines_fit_the_pod_list_at_80_columns(shared_world):
    """At 80 columns a GPU line that wrapped made each pod taller than it looked, and its GPUs fell out
    of view as the list scrolled: every GPU line fits the list's width."""
    app, _ = real_app(shared_world)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        pods = app._orchestration().query_one("#pods")
        width = pods.scrollable_content_region.width
        gpu_lines = [line for i in range(pods.option_count) for line in pods.get_option_at_index(i).prompt.plain.split("\n") if "─ GPU" in line]
        assert len(gpu_lines) >= 5
        assert all(len(line) <= width for line in gpu_lines), (width, gpu_lines)


async def test_help_lists_the_keys_of_the_current_mode(shared_world):
    app, _ = real_app(shared_world)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        await settle(pilot)
        assert isinstance(app.screen, HelpModal)
        text = screen_text(app)
        for words in ("New pod", "Up", "Down", "Remove", "Logs", "Details", "Stop all", "Refresh", "Orchestration", "Quit", "Ctrl+C quits"):
            assert words in text, words
        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, OrchestrationScreen)
        await pilot.press("2", "question_mark")
        await settle(pilot)
        assert "Nodes" in screen_text(app) and "New pod" not in screen_text(app)


async def test_q_quits(shared_world):
    app, _ = real_app(shared_world)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code == 0
    assert not app.is_running


async def test_ctrl_c_quits_outside_text_fields(shared_world):
    app, _ = real_app(shared_world)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("ctrl+c")
        await pilot.pause()
    assert not app.is_running


async def test_ctrl_c_inside_a_text_field_does_not_quit(shared_world):
    app, _ = real_app(shared_world)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("n")
        await settle(pilot)
        assert isinstance(app.screen, NewPodModal)
        await pilot.press("a", "ctrl+c")
        await pilot.pause()
        assert app.is_running and isinstance(app.screen, NewPodModal)


async def test_n_opens_new_pod_and_escape_closes_it(shared_world):
    app, _ = real_app(shared_world)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("N")
        await settle(pilot)
        assert isinstance(app.screen, NewPodModal)
        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, OrchestrationScreen)


async def test_logs_modal_is_bounded_and_follow_toggles(shared_world):
    app, svc = real_app(shared_world)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("l")
        await settle(pilot)
        assert isinstance(app.screen, LogsModal)
        assert app.screen.pod == "chat"
        await wait_for(pilot, lambda: "Application startup complete" in screen_text(app), what="the engine's log")
        assert "following" in screen_text(app)
        await pilot.press("f")
        await pilot.pause()
        assert app.screen.follow is False and "paused" in screen_text(app)
        assert app.screen.lines.limit is not None
        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, OrchestrationScreen)
        assert "pod_logs" in svc.calls


@pytest.mark.parametrize("shared_world", ["mismatch"], indirect=True)
async def test_details_by_i_and_by_enter(shared_world):
    app, _ = real_app(shared_world)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("down", "down")  # odd
        await pilot.press("i")
        await wait_for(pilot, lambda: isinstance(app.screen, DetailsModal) and "workload" in screen_text(app), what="the details")
        text = screen_text(app)
        assert "pod odd" in text and "custom/demo-misplaced" in text and "⚠ PLACEMENT MISMATCH" in text
        assert "requested GPU 1 · running on GPU 0" in text
        assert "fit" in text
        await pilot.press("escape")
        await settle(pilot)
        orchestration(app).query_one("#pods").focus()
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, DetailsModal)


async def test_j_k_move_between_pods(shared_world):
    app, _ = real_app(shared_world)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        pods = orchestration(app).query_one("#pods")
        pods.focus()
        assert pods.selected_pod == "chat"
        await pilot.press("j")
        assert pods.selected_pod == "coder"
        await pilot.press("k")
        assert pods.selected_pod == "chat"


async def test_r_refreshes_now(shared_world):
    app, svc = real_app(shared_world)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        before = svc.calls.count("pod_states")
        await pilot.press("r")
        await settle(pilot)
        assert svc.calls.count("pod_states") > before


async def test_u_d_x_o_open_the_confirm_gate_with_the_plan(shared_world):
    app, _ = real_app(shared_world)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        for key, words in (("d", "Stop pod chat"), ("x", "Remove pod chat"), ("o", "Stop the whole estate")):
            await pilot.press(key)
            await settle(pilot)
            assert isinstance(app.screen, ConfirmModal), key
            assert words in screen_text(app)
            await pilot.press("escape")
            await settle(pilot)
            assert isinstance(app.screen, OrchestrationScreen)
        await pilot.press("u")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmModal)
        assert "pod `chat` is already running" in screen_text(app)  # chat serves: the gate says why it cannot boot
        assert app.screen.query_one("#confirm").disabled


@pytest.mark.parametrize("shared_world", ["empty"], indirect=True)
async def test_actions_without_a_pod_say_so(shared_world):
    app, svc = real_app(shared_world)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert "No pods yet — press N to create one" in screen_text(app)
        await pilot.press("u")
        await settle(pilot)
        assert isinstance(app.screen, OrchestrationScreen)
        assert not any(c.startswith("make_plan") for c in svc.calls)


async def test_palette_has_an_entry_for_every_action(shared_world):
    app, _ = real_app(shared_world)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        titles = [c.title for c in app.get_system_commands(app.screen)]
        for title in ("Mode: Orchestration", "Mode: Nodes", "Mode: Recipes", "New pod", "Stop the whole estate", "Refresh", "Help", "Quit",
                      "Boot pod chat", "Stop pod coder", "Remove pod chat", "Logs of pod chat", "Details of pod coder"):
            assert title in titles, title
        await pilot.press("ctrl+p")
        await settle(pilot)
        await pilot.press(*"Mode: Nodes")
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, NodesScreen)
