"""Nodes and Recipes modes with Pilot over the fake facade: node health and GPUs, a running pool, add/rm
node and recipe launch/stop through the confirm gate (exact plan, Cancel focused, result shown,
refused read-only)."""

from __future__ import annotations

import re

from c3.modals.add_node import (
    NODE_NAME_PATTERN,
    SSH_PATTERN,
    AddNodeModal,
    node_field_problem,
)
from c3.modals.confirm import ConfirmModal
from c3.modals.launch import LaunchModal
from c3.screens.nodes import NodesScreen
from c3.screens.recipes import RecipesScreen
from tests.cockpit.conftest import make_app, screen_text, settle, wait_for


async def _mode(pilot, key: str):
    await pilot.press(key)
    await settle(pilot)
    return pilot.app.screen


async def test_nodes_show_reachability_endpoint_and_gpus():
    app, svc = make_app("placed")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        screen = await _mode(pilot, "2")
        assert isinstance(screen, NodesScreen)
        text = screen_text(app)
        assert "● local" in text and "✗ unreachable" in text
        assert "4 GPUs" in text  # box: this machine, the rig's four GPUs
        assert "node not reachable" in text  # spark-2 has no GPU list, and says why
        assert "GPUs" in text and "RTX 3090" in text  # the highlighted node's GPUs, one per line
        assert "c3 pool serve --nodes a,b --bind :8011" in text  # no pool: how to start one
        assert "pools" in svc.calls and "nodes" in svc.calls


async def test_a_running_pool_with_per_backend_health_and_counters():
    app, _ = make_app("cluster")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await _mode(pilot, "2")
        text = screen_text(app)
        assert "Pool 0.0.0.0:8011" in text and "sticky auto" in text and "hit 87%" in text and "2/3 routable" in text
        rows = [line for line in text.splitlines() if line.split("  ")[0] in {"spark-1", "box", "spark-2"} and ("up" in line or "down" in line)]
        assert len(rows) == 3
        spark1 = next(r for r in rows if "spark-1" in r)
        assert "● up" in spark1 and "18412" in spark1 and "41" in spark1 and "212" in spark1
        assert "draining" in next(r for r in rows if "box" in r)
        assert "✗ down" in next(r for r in rows if "spark-2" in r)
        assert "Pools ● as of" in text


async def test_add_node_validated_as_typed_then_confirmed_and_listed():
    app, svc = make_app("placed")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await _mode(pilot, "2")
        await pilot.press("a")
        await settle(pilot)
        modal = app.screen
        assert isinstance(modal, AddNodeModal)
        await pilot.press(*"Spark")
        await pilot.pause()
        assert "lower-case letters" in screen_text(app)
        await pilot.press("ctrl+s")  # refused: nothing leaves the modal
        await settle(pilot)
        assert app.screen is modal
        modal.query_one("#name").value = ""
        await pilot.press(*"spark-3", "tab", *"http://10.213.0.13:8000", "tab", *"ubuntu@10.213.0.13")
        await pilot.pause()
        assert "✗" not in str(modal.query_one("#name-check").render())
        await pilot.press("ctrl+s")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmModal)
        text = screen_text(app)
        assert "Add node spark-3" in text and "host     http://10.213.0.13:8000" in text and "ssh      ubuntu@10.213.0.13" in text
        assert app.screen.focused.id == "cancel"
        await pilot.press("y")
        await settle(pilot)
        assert isinstance(app.screen, NodesScreen)
        assert "execute:node_add" in svc.calls
        assert app.last_result.ok and "added node spark-3" in app.last_result.message
        await wait_for(pilot, lambda: "spark-3" in [r.name for r in app.screen.rows or []], what="the new node listed")
        assert "✓ added node spark-3" in screen_text(app)


async def test_add_this_machine_and_cancel_changes_nothing():
    app, svc = make_app("empty")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await _mode(pilot, "2")
        assert "No nodes registered yet" in screen_text(app)
        await pilot.press("a")
        await settle(pilot)
        await pilot.press("ctrl+t")
        await pilot.pause()
        assert app.screen.query_one("#host").value == "http://127.0.0.1:8000"
        assert app.screen.query_one("#ssh").value.endswith("@127.0.0.1")
        await pilot.press("ctrl+s")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmModal)
        await pilot.press("escape")
        await settle(pilot)
        assert "execute:node_add" not in svc.calls
        assert svc.registered_nodes() == []


async def test_remove_node_through_the_gate():
    app, svc = make_app("placed")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        screen = await _mode(pilot, "2")
        table = screen.query_one("#nodes")
        table.focus()
        table.move_cursor(row=1)
        await settle(pilot)
        await pilot.press("x")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmModal)
        assert "Remove node spark-2" in screen_text(app) and "nothing on the node itself is touched" in screen_text(app)
        assert app.screen.focused.id == "cancel"
        await pilot.press("y")
        await settle(pilot)
        assert app.last_result.ok and "removed node spark-2" in app.last_result.message
        assert [n.name for n in svc.registered_nodes()] == ["box"]


async def test_node_writes_refused_read_only_and_shown():
    app, svc = make_app("placed", readonly=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await _mode(pilot, "2")
        await pilot.press("x")
        await settle(pilot)
        assert isinstance(app.screen, NodesScreen)  # no gate: refused at once
        assert not app.last_result.ok and "read-only" in app.last_result.message
        assert "✗ refused: read-only cockpit: refused to remove node box" in screen_text(app)
        assert not any(c.startswith("execute:") for c in svc.calls)


def test_node_field_rules_match_the_registry():
    from backend.nodes import registry

    assert NODE_NAME_PATTERN == registry.NODE_NAME_PATTERN
    for good in ("ubuntu@10.0.0.5", "me@spark-2:2222", "a@[fe80::1]:22"):
        assert re.fullmatch(SSH_PATTERN, good) and registry._validate_ssh(good) == good
    assert node_field_problem("ssh", "no-at-sign", set()) is not None
    assert node_field_problem("host", "ftp://x", set()) is not None
    assert node_field_problem("name", "box", {"box"}) == "node `box` is already registered"


async def test_launch_recipe_node_picker_dry_run_preview_then_progress_and_result():
    app, _ = make_app("cluster")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        screen = await _mode(pilot, "3")
        assert isinstance(screen, RecipesScreen)
        assert "Profile gpt-oss-120b-2xspark" in screen_text(app)
        table = screen.query_one("#recipes")
        table.focus()
        table.move_cursor(row=1)  # gpt-oss-120b-2xspark: two nodes
        await settle(pilot)
        await pilot.press("u")
        await settle(pilot)
        modal = app.screen
        assert isinstance(modal, LaunchModal)
        assert modal.order == ["box", "spark-1"]  # preselected, registry order
        picker = modal.query_one("#launch-nodes")
        picker.deselect("box")
        picker.select("box")  # picked last now: rank 1
        await pilot.pause()
        assert modal.order == ["spark-1", "box"]
        assert "spark-1 (rank 0, serves the API) → box (rank 1)" in screen_text(app)
        await pilot.press("ctrl+s")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmModal)
        text = screen_text(app)
        assert "Launch recipe gpt-oss-120b-2xspark" in text
        assert "node spark-1 (rank 0, ssh ubuntu@10.213.0.11):" in text and "node box (rank 1, local, no SSH):" in text
        assert "HF_TOKEN=<redacted>" in text
        assert app.screen.focused.id == "cancel"
        await pilot.press("y")
        await settle(pilot)
        assert isinstance(app.screen, RecipesScreen)
        assert app.last_result.ok and "profile gpt-oss-120b-2xspark is active" in app.last_result.message
        text = screen_text(app)
        assert "✓ launched gpt-oss-120b-2xspark" in text and "rank 0 answers" in text
        assert "spark-1 → box" in text  # the new active profile, rank order


async def test_launch_with_the_wrong_node_count_is_refused_in_the_gate():
    app, svc = make_app("cluster")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await _mode(pilot, "3")
        await pilot.press("u")  # qwen3-32b-2x3090 runs on one node
        await settle(pilot)
        app.screen.query_one("#launch-nodes").select("spark-1")
        await pilot.pause()
        assert "2 picked, the recipe needs 1" in screen_text(app)
        await pilot.press("ctrl+s")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmModal)
        assert "runs on 1 node(s); 2 chosen" in screen_text(app)
        assert app.screen.query_one("#confirm").disabled
        await pilot.press("y")
        await settle(pilot)
        assert "execute:recipe_launch" not in svc.calls


async def test_stop_the_active_profile():
    app, _ = make_app("cluster")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await _mode(pilot, "3")
        await pilot.press("d")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmModal)
        text = screen_text(app)
        assert "Stop profile gpt-oss-120b-2xspark" in text and "node spark-1 (rank 0): $ docker rm -f c3-profile_gpt-oss-120b-2xspark" in text
        await pilot.press("y")
        await settle(pilot)
        assert app.last_result.ok and "stopped profile" in app.last_result.message
        await wait_for(pilot, lambda: "stopped" in screen_text(app) and app.screen.profile.stopped, what="profile shown stopped")


async def test_recipe_writes_refused_read_only():
    app, svc = make_app("cluster", readonly=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await _mode(pilot, "3")
        await pilot.press("d")
        await settle(pilot)
        assert isinstance(app.screen, RecipesScreen)
        assert not app.last_result.ok and "refused to stop profile" in app.last_result.message
        assert not any(c.startswith("execute:") for c in svc.calls)


async def test_node_and_recipe_flows_never_call_the_facade_on_the_loop():
    from tests.cockpit.fakes import FakeServices
    from tests.cockpit.test_nonblocking import SlowServices

    slow = SlowServices(FakeServices("cluster"))
    app, _ = make_app(services=slow)
    app.clock = slow._inner.clock
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, rounds=4)
        await _mode(pilot, "2")
        await wait_for(pilot, lambda: app.screen.rows is not None and app.screen.pools is not None, what="nodes and pools")
        await pilot.press("a")
        await settle(pilot)
        await pilot.press(*"n4", "tab", *"http://10.213.0.14:8000", "tab", *"u@10.213.0.14", "ctrl+s")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmModal), what="the add-node gate")
        await pilot.press("y")
        await wait_for(pilot, lambda: app.last_result is not None and "added node n4" in app.last_result.message, what="the node added")
        await _mode(pilot, "3")
        await pilot.press("u")
        await wait_for(pilot, lambda: isinstance(app.screen, LaunchModal) and app.screen.nodes is not None, what="the node picker")
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmModal), what="the launch gate")
        await pilot.press("y")
        await wait_for(pilot, lambda: app.last_result is not None and "is active" in app.last_result.message, what="the launch")
    assert slow.calls >= 10
    assert slow.on_loop == [], f"facade methods ran on the event loop: {slow.on_loop}"


async def test_palette_entries_reach_the_node_and_recipe_actions():
    app, _ = make_app("cluster")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        titles = [c.title for c in app.get_system_commands(app.screen)]
        for title in ("Add node", "Remove node", "Launch recipe", "Stop the active profile"):
            assert title in titles
        command = next(c for c in app.get_system_commands(app.screen) if c.title == "Add node")
        command.callback()
        await wait_for(pilot, lambda: isinstance(app.screen, AddNodeModal), what="the add-node modal from the palette")
        await pilot.press("escape")
        await settle(pilot)
        command = next(c for c in app.get_system_commands(app.screen) if c.title == "Launch recipe")
        command.callback()
        await wait_for(pilot, lambda: isinstance(app.screen, LaunchModal), what="the launch modal from the palette")


async def _launch_modal(pilot, row: int) -> LaunchModal:
    screen = await _mode(pilot, "3")
    table = screen.query_one("#recipes")
    table.focus()
    table.move_cursor(row=row)
    await settle(pilot)
    await pilot.press("u")
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, LaunchModal) and pilot.app.screen.nodes is not None, what="the node picker")
    return pilot.app.screen


async def _type_overrides(pilot, modal: LaunchModal, text: str) -> None:
    field = modal.query_one("#launch-overrides")
    field.focus()
    await pilot.press(*text)
    await wait_for(pilot, lambda: modal.checked_for == tuple(text.split()), what="the overrides checked")


async def test_launch_overrides_show_in_the_dry_run_and_demote_the_profile():
    app, svc = make_app("cluster")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        modal = await _launch_modal(pilot, 0)  # qwen3-32b-2x3090, one node: box preselected
        await _type_overrides(pilot, modal, "max_model_len=8192 gpu_memory_utilization=0.85")
        await wait_for(pilot, lambda: "profile: recipe + local overrides" in screen_text(app), what="the demotion shown as typed")
        assert modal.override_problems == [] and "override_problems" in svc.calls
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmModal), what="the launch gate")
        text = screen_text(app)
        assert "recipe + local overrides: no verified numbers" in text
        assert "--max-model-len 8192" in text and "--gpu-memory-utilization 0.85" in text
        assert "--max-model-len 16384" not in text  # the recipe's default is gone from the command line
        assert "c3-profile_qwen3-32b-2x3090" in text
        assert not app.screen.query_one("#confirm").disabled
        assert app.screen.plan.request.overrides == ("max_model_len=8192", "gpu_memory_utilization=0.85")


async def test_bad_override_entries_are_shown_as_typed():
    app, svc = make_app("cluster")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        modal = await _launch_modal(pilot, 0)
        await _type_overrides(pilot, modal, "max_model_len=lots nosuch=1 tensor_parallel_size")
        await wait_for(pilot, lambda: len(modal.override_problems) == 3, what="three problems")
        text = screen_text(app)
        assert "--set max_model_len: `lots` is not an integer" in text
        assert "has no parameter `nosuch`" in text
        assert "--set `tensor_parallel_size` is not key=value" in text
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmModal), what="the launch gate")
        assert app.screen.query_one("#confirm").disabled
        await pilot.press("y")
        await settle(pilot)
        assert "execute:recipe_launch" not in svc.calls


async def test_an_override_known_to_abort_is_refused_in_the_gate_before_any_node_is_touched():
    app, svc = make_app("cluster")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        modal = await _launch_modal(pilot, 0)
        await _type_overrides(pilot, modal, "max_model_len=65536")
        await wait_for(pilot, lambda: modal.override_problems != [], what="the abort shown as typed")
        assert "max_model_len=65536 is known to abort on 2x-rtx3090" in screen_text(app)
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmModal), what="the launch gate")
        gate = app.screen
        assert any("max_model_len=65536 is known to abort on 2x-rtx3090" in p for p in gate.plan.problems)
        assert "known to abort" in screen_text(app)
        assert gate.query_one("#confirm").disabled
        await pilot.press("y")
        await settle(pilot)
        assert "execute:recipe_launch" not in svc.calls
        assert app.last_result is None or "is active" not in app.last_result.message


async def test_nodes_table_fits_80x24_without_sideways_scrolling_and_widens_again():
    app, _ = make_app("cluster")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        screen = await _mode(pilot, "2")
        await wait_for(pilot, lambda: screen.rows is not None, what="the nodes")
        table = screen.query_one("#nodes")
        assert screen.compact and [str(c.label) for c in table.columns.values()] == ["name", "reach", "endpoint", "GPUs"]
        await settle(pilot)
        assert table.max_scroll_x == 0, f"the table scrolls sideways by {table.max_scroll_x}"
        text = screen_text(app)
        assert "10.213.0.11:8000" in text and "✗ down" in text  # the endpoint column, in view
        assert "ubuntu@10.213.0.11" not in text  # the SSH targets moved to the side pane (the highlighted node's)…
        assert "this machine" in text  # …which still says where the highlighted node is
        await pilot.resize_terminal(120, 40)
        await wait_for(pilot, lambda: screen.compact is False, what="the wide columns")
        await settle(pilot)
        assert "ubuntu@10.213.0.11" in screen_text(app) and "http://10.213.0.11:8000" in screen_text(app)
