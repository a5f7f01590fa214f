"""Nodes and Recipes modes with Pilot over the real facade on the demo's simulated world: node health
and GPUs (this machine without SSH, an unreachable node), a real pool router, add/rm node, the recipe
launch's dry-run and the profile stop through the confirm gate (exact plan, Cancel focused, result
shown, refused read-only). A launch is never executed here: it would pull an engine image; the real
launch path runs against test hosts in tests/nodes."""

from __future__ import annotations

import pytest

from c3.modals.add_node import AddNodeModal, node_field_problem
from c3.modals.confirm import ConfirmModal
from c3.modals.launch import LaunchModal
from c3.screens.nodes import NodesScreen
from c3.screens.recipes import RecipesScreen
from tests.cockpit.conftest import gate_open, real_app, screen_text, settle, wait_for
from tests.cockpit.world import UNREACHABLE

CLUSTER = pytest.mark.parametrize("demo_world", ["cluster"], indirect=True)
"""A `cluster` world of the test's own (it writes)."""
SHARED_CLUSTER = pytest.mark.parametrize("shared_world", ["cluster"], indirect=True)
"""The shared `cluster` world (the test only looks, or is refused; checked unchanged after it)."""
SHARED_EMPTY = pytest.mark.parametrize("shared_world", ["empty"], indirect=True)
USER_RECIPE = "qwen3-32b-awq-2x5090"
SPARK_RECIPE = "spark2-vllm-qwen3-235b-a22b-gptq-int4"


def registered() -> list[str]:
    from backend.nodes.registry import load_registry

    return [n.name for n in load_registry().nodes]


async def _mode(pilot, key: str):
    await pilot.press(key)
    await settle(pilot)
    return pilot.app.screen


async def test_nodes_show_reachability_endpoint_and_gpus(demo_world):
    from backend.nodes.registry import add_node

    add_node("spark-2", f"http://{UNREACHABLE}:8000", f"ubuntu@{UNREACHABLE}")  # a node that is off
    app, svc = real_app(demo_world)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        screen = await _mode(pilot, "2")
        assert isinstance(screen, NodesScreen)
        await wait_for(pilot, lambda: screen.rows is not None and len(screen.rows) == 2, timeout=30, what="both nodes probed")
        await settle(pilot)
        text = screen_text(app)
        assert "● local" in text and "✗ unreachable" in text
        assert "4 GPUs" in text  # box: this machine, the rig's four GPUs
        assert "node not reachable" in text  # spark-2 has no GPU list, and says why
        assert "GPUs" in text and "RTX 3090" in text  # the highlighted node's GPUs, one per line
        assert "c3 pool serve --nodes a,b --bind :8011" in text  # no pool: how to start one
        assert "pools" in svc.calls and "nodes" in svc.calls


@SHARED_CLUSTER
async def test_a_running_pool_with_per_backend_health_and_counters(shared_world):
    app, _ = real_app(shared_world)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        screen = await _mode(pilot, "2")
        await wait_for(pilot, lambda: screen.pools, timeout=30, what="the running router")
        await settle(pilot)
        text = screen_text(app)
        assert "Pool 127.0.0.1:8011" in text and "sticky auto" in text and "1/2 routable" in text
        rows = [line for line in text.splitlines() if line.split("  ")[0] in {"box", "spark-2"} and (" up" in line or " down" in line)]
        assert len(rows) == 2, rows
        assert "● up" in next(r for r in rows if r.startswith("box"))
        assert "✗ down" in next(r for r in rows if r.startswith("spark-2"))
        assert "Pools ● as of" in text


async def test_add_node_validated_as_typed_then_confirmed_and_listed(demo_world):
    app, svc = real_app(demo_world)
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
        await wait_for(pilot, lambda: getattr(app.screen.focused, "id", None) == "cancel", what="Cancel focused")
        await pilot.press("y")
        await settle(pilot)
        assert isinstance(app.screen, NodesScreen)
        await wait_for(pilot, lambda: app.last_result is not None, what="the result")
        assert app.last_result.ok and "added node spark-3" in app.last_result.message
        assert registered() == ["box", "spark-3"]
        await wait_for(pilot, lambda: "spark-3" in [r.name for r in app.screen.rows or []], timeout=30, what="the new node listed")
        assert "✓ added node spark-3" in screen_text(app)


@SHARED_EMPTY
async def test_add_this_machine_and_cancel_changes_nothing(shared_world):
    app, svc = real_app(shared_world)
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
        assert "execute" not in svc.calls
        assert registered() == []


async def test_remove_node_through_the_gate(demo_world):
    from backend.nodes.registry import add_node

    add_node("spark-2", f"http://{UNREACHABLE}:8000", f"ubuntu@{UNREACHABLE}")
    app, svc = real_app(demo_world)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        screen = await _mode(pilot, "2")
        await wait_for(pilot, lambda: screen.rows is not None and len(screen.rows) == 2, timeout=30, what="both nodes")
        table = screen.query_one("#nodes")
        table.focus()
        table.move_cursor(row=1)
        await settle(pilot)
        await pilot.press("x")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmModal)
        assert "Remove node spark-2" in screen_text(app) and "nothing on the node itself is touched" in screen_text(app)
        await wait_for(pilot, lambda: getattr(app.screen.focused, "id", None) == "cancel", what="Cancel focused")
        await pilot.press("y")
        await wait_for(pilot, lambda: app.last_result is not None, what="the result")
        assert app.last_result.ok and "removed node spark-2" in app.last_result.message
        assert registered() == ["box"]


async def test_node_writes_refused_read_only_and_shown(shared_world):
    app, svc = real_app(shared_world, readonly=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        screen = await _mode(pilot, "2")
        await wait_for(pilot, lambda: screen.rows, timeout=30, what="the nodes")
        await pilot.press("x")
        await settle(pilot)
        assert isinstance(app.screen, NodesScreen)  # no gate: refused at once
        assert not app.last_result.ok and "read-only" in app.last_result.message
        assert "✗ refused: read-only cockpit: refused to remove node box" in screen_text(app)
        await pilot.press("a")  # the add-node form is not even opened
        await settle(pilot)
        assert isinstance(app.screen, NodesScreen) and "refused to add a node" in app.last_result.message
        assert "execute" not in svc.calls and registered() == ["box"]


def test_the_add_node_form_accepts_exactly_what_node_add_accepts():
    """The form checks each field with the registry's own rules (one source, `backend.models.names`):
    every value here gets a form message exactly when `node add` would refuse it (the form's old copy
    let a URL with credentials or port 99999 through, and refused nothing `node add` refused for a
    bad IPv6 or port), and a refused URL's password is never echoed."""
    from backend.nodes.registry import new_node_errors

    for name in ("box", "gpu_1", "-x", "Box", "a" * 64, "a.b"):
        assert (node_field_problem("name", name, set()) is None) == (not new_node_errors(name, "http://h:1", "u@h")), name
    for host in ("http://10.0.0.5:8000", "https://[::1]:8443", "ftp://x", "http://u:pw@x:8000", "http://x:99999", "http://x/?q=1", "http://x:0", ""):
        form = node_field_problem("host", host, set())
        assert (form is None) == (not new_node_errors("n", host, "u@h")), host
        assert form is None or "pw" not in form
    for ssh in ("ubuntu@10.0.0.5", "me@spark-2:2222", "a@[fe80::1]:22", "no-at-sign", "a@b:70000", "a@[zz]", "a@1.2.3"):
        assert (node_field_problem("ssh", ssh, set()) is None) == (not new_node_errors("n", "http://h:1", ssh)), ssh
    assert node_field_problem("name", "box", {"box"}) == "node `box` is already registered"


@SHARED_CLUSTER
async def test_launch_recipe_node_picker_and_dry_run_preview_with_secrets_redacted(shared_world, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_pilot_secret_123")
    monkeypatch.setenv("C3_API_KEY", "sk-pilot-secret-456")
    app, svc = real_app(shared_world)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        screen = await _mode(pilot, "3")
        assert isinstance(screen, RecipesScreen)
        await wait_for(pilot, lambda: f"Profile {USER_RECIPE}" in screen_text(app), what="the active profile")
        table = screen.query_one("#recipes")
        table.focus()
        table.move_cursor(row=table.get_row_index(SPARK_RECIPE))  # the built-in two-Spark recipe: two nodes
        await settle(pilot)
        await pilot.press("u")
        await wait_for(pilot, lambda: isinstance(app.screen, LaunchModal) and app.screen.nodes is not None, what="the node picker")
        modal = app.screen
        assert modal.order == ["box", "spark-2"]  # preselected, registry order
        picker = modal.query_one("#launch-nodes")
        picker.deselect("box")
        picker.select("box")  # picked last now: rank 1
        await pilot.pause()
        assert modal.order == ["spark-2", "box"]
        assert "spark-2 (rank 0, serves the API) → box (rank 1)" in screen_text(app)
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: gate_open(app), what="the launch gate")
        text = screen_text(app)
        assert f"Launch recipe {SPARK_RECIPE}" in text
        assert f"node spark-2 (rank 0, ssh ubuntu@{UNREACHABLE}):" in text and "node box (rank 1, local, no SSH):" in text
        assert "hf_pilot_secret_123" not in text and "sk-pilot-secret-456" not in text
        assert "HF_TOKEN=<redacted>" in text
        assert "not pinned by digest" in text and app.screen.query_one("#confirm").disabled  # the built-in image is a tag
        await wait_for(pilot, lambda: getattr(app.screen.focused, "id", None) == "cancel", what="Cancel focused")
        await pilot.press("escape")
        await settle(pilot)
        assert "execute" not in svc.calls


@SHARED_CLUSTER
async def test_launch_with_the_wrong_node_count_is_refused_in_the_gate(shared_world):
    app, svc = real_app(shared_world)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        modal = await _launch_modal(pilot, USER_RECIPE)  # the user's recipe runs on one node
        modal.query_one("#launch-nodes").select("spark-2")
        await pilot.pause()
        assert "2 picked, the recipe needs 1" in screen_text(app)
        await pilot.press("ctrl+s")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmModal)
        assert f"recipe `{USER_RECIPE}` runs on 1 node(s); --nodes names 2" in screen_text(app), app.screen.plan.problems
        assert app.screen.query_one("#confirm").disabled
        await pilot.press("y")
        await settle(pilot)
        assert "execute" not in svc.calls


@CLUSTER
async def test_stop_the_active_profile(demo_world):
    app, _ = real_app(demo_world)
    async with app.run_test(size=(120, 40)) as pilot:
        text = await _gate_on_the_active_profile(pilot, "d")
        assert f"Stop profile {USER_RECIPE}" in text and f"node box (rank 0, local): $ docker rm -f c3-profile_{USER_RECIPE}" in text
        await pilot.press("y")
        await wait_for(pilot, lambda: app.last_result is not None, timeout=60, what="the stop")
        assert app.last_result.ok and "stopped profile" in app.last_result.message, app.last_result
        from backend.profiles import is_stopped

        assert is_stopped(USER_RECIPE)
        await wait_for(pilot, lambda: "stopped" in screen_text(app) and app.screen.profile.stopped, what="profile shown stopped")


@SHARED_CLUSTER
async def test_recipe_writes_refused_read_only(shared_world):
    app, svc = real_app(shared_world, readonly=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await _mode(pilot, "3")
        await wait_for(pilot, lambda: f"Profile {USER_RECIPE}" in screen_text(app), what="the active profile")
        await pilot.press("d")
        await settle(pilot)
        assert isinstance(app.screen, RecipesScreen)
        assert not app.last_result.ok and "refused to stop profile" in app.last_result.message
        await pilot.press("u")  # the launch form is not even opened
        await settle(pilot)
        assert isinstance(app.screen, RecipesScreen) and "refused to launch a recipe" in app.last_result.message
        assert "execute" not in svc.calls


@CLUSTER
async def test_node_and_recipe_flows_never_call_the_facade_on_the_loop(demo_world):
    from tests.cockpit.test_nonblocking import slow_app

    app, slow = slow_app(demo_world)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, rounds=4)
        await _mode(pilot, "2")
        await wait_for(pilot, lambda: app.screen.rows is not None and app.screen.pools is not None, timeout=30, what="nodes and pools")
        await pilot.press("a")
        await settle(pilot)
        await pilot.press(*"n4", "tab", *"http://10.213.0.14:8000", "tab", *"u@10.213.0.14", "ctrl+s")
        await wait_for(pilot, lambda: gate_open(app), what="the add-node gate")
        await pilot.press("y")
        await wait_for(pilot, lambda: app.last_result is not None and "added node n4" in app.last_result.message, what="the node added")
        await _mode(pilot, "3")
        await pilot.press("d")
        await wait_for(pilot, lambda: gate_open(app), what="the stop gate")
        await pilot.press("y")
        await wait_for(pilot, lambda: app.last_result is not None and "stopped profile" in app.last_result.message, timeout=60, what="the stop")
        await pilot.press("u")
        await wait_for(pilot, lambda: isinstance(app.screen, LaunchModal) and app.screen.nodes is not None, what="the node picker")
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: gate_open(app), what="the launch gate (its dry-run)")
        await pilot.press("escape")
        await settle(pilot)
    assert slow.calls >= 10
    assert slow.on_loop == [], f"facade methods ran on the event loop: {slow.on_loop}"


@SHARED_CLUSTER
async def test_palette_entries_reach_the_node_and_recipe_actions(shared_world):
    app, _ = real_app(shared_world)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        titles = [c.title for c in app.get_system_commands(app.screen)]
        for title in ("Add node", "Remove node", "Launch recipe", "Stop the active profile", "Restart the active profile"):
            assert title in titles
        command = next(c for c in app.get_system_commands(app.screen) if c.title == "Add node")
        command.callback()
        await wait_for(pilot, lambda: isinstance(app.screen, AddNodeModal), what="the add-node modal from the palette")
        await pilot.press("escape")
        await settle(pilot)
        command = next(c for c in app.get_system_commands(app.screen) if c.title == "Launch recipe")
        command.callback()
        await wait_for(pilot, lambda: isinstance(app.screen, LaunchModal), what="the launch modal from the palette")


async def _gate_on_the_active_profile(pilot, key: str) -> str:
    """Recipes mode, the active profile shown, `key` pressed: the confirm gate's text."""
    app = pilot.app
    await settle(pilot)
    await _mode(pilot, "3")
    await wait_for(pilot, lambda: f"Profile {USER_RECIPE}" in screen_text(app), what="the active profile")
    await pilot.press(key)
    await wait_for(pilot, lambda: gate_open(app), what=f"the gate of `{key}`")
    return screen_text(app)


async def _launch_modal(pilot, recipe: str) -> LaunchModal:
    screen = await _mode(pilot, "3")
    table = screen.query_one("#recipes")
    table.focus()
    table.move_cursor(row=table.get_row_index(recipe))
    await settle(pilot)
    await pilot.press("u")
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, LaunchModal) and pilot.app.screen.nodes is not None, what="the node picker")
    return pilot.app.screen


async def _type_overrides(pilot, modal: LaunchModal, text: str) -> None:
    field = modal.query_one("#launch-overrides")
    field.focus()
    await pilot.press(*text)
    await wait_for(pilot, lambda: modal.checked_for == tuple(text.split()), what="the overrides checked")


@SHARED_CLUSTER
async def test_launch_overrides_show_in_the_dry_run_and_demote_the_profile(shared_world):
    app, svc = real_app(shared_world)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        modal = await _launch_modal(pilot, USER_RECIPE)  # the user's recipe, one node: box preselected
        await _type_overrides(pilot, modal, "max_model_len=8192 gpu_memory_utilization=0.85")
        await wait_for(pilot, lambda: "profile: recipe + local overrides" in screen_text(app), what="the demotion shown as typed")
        assert modal.override_problems == [] and "override_problems" in svc.calls
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: gate_open(app), what="the launch gate")
        text = screen_text(app)
        assert "recipe + local overrides: no verified numbers" in text
        assert "--max-model-len 8192" in text and "--gpu-memory-utilization 0.85" in text
        assert "--max-model-len 16384" not in text  # the recipe's default is gone from the command line
        assert f"c3-profile_{USER_RECIPE}" in text
        assert not app.screen.query_one("#confirm").disabled
        assert app.screen.plan.request.overrides == ("max_model_len=8192", "gpu_memory_utilization=0.85")


@SHARED_CLUSTER
async def test_bad_override_entries_are_shown_as_typed(shared_world):
    app, svc = real_app(shared_world)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        modal = await _launch_modal(pilot, USER_RECIPE)
        await _type_overrides(pilot, modal, "max_model_len=lots nosuch=1 tensor_parallel_size")
        await wait_for(pilot, lambda: len(modal.override_problems) == 3, what="three problems")
        text = screen_text(app)
        assert "--set max_model_len: `lots` is not an integer" in text
        assert "has no parameter `nosuch`" in text
        assert "--set `tensor_parallel_size` is not key=value" in text
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: gate_open(app), what="the launch gate")
        assert app.screen.query_one("#confirm").disabled
        await pilot.press("y")
        await settle(pilot)
        assert "execute" not in svc.calls


@SHARED_CLUSTER
async def test_an_override_known_to_abort_is_refused_in_the_gate_before_any_node_is_touched(shared_world):
    app, svc = real_app(shared_world)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        modal = await _launch_modal(pilot, USER_RECIPE)
        await _type_overrides(pilot, modal, "max_model_len=65536")
        await wait_for(pilot, lambda: modal.override_problems != [], what="the abort shown as typed")
        assert "max_model_len=65536 is known to abort on 2x-rtx5090" in screen_text(app)
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: gate_open(app), what="the launch gate")
        gate = app.screen
        assert any("max_model_len=65536 is known to abort on 2x-rtx5090" in p for p in gate.plan.problems)
        assert "known to abort" in screen_text(app)
        assert gate.query_one("#confirm").disabled
        await pilot.press("y")
        await settle(pilot)
        assert "execute" not in svc.calls
        assert app.last_result is None or "is active" not in app.last_result.message


@SHARED_CLUSTER
async def test_nodes_table_fits_80x24_without_sideways_scrolling_and_widens_again(shared_world):
    app, _ = real_app(shared_world)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        screen = await _mode(pilot, "2")
        await wait_for(pilot, lambda: screen.rows is not None, timeout=30, what="the nodes")
        table = screen.query_one("#nodes")
        assert screen.compact and [str(c.label) for c in table.columns.values()] == ["name", "reach", "endpoint", "GPUs"]
        await settle(pilot)
        assert table.max_scroll_x == 0, f"the table scrolls sideways by {table.max_scroll_x}"
        text = screen_text(app)
        assert f"{UNREACHABLE}:8000" in text and "✗ down" in text  # the endpoint column, in view
        assert f"ubuntu@{UNREACHABLE}" not in text  # the SSH targets moved to the side pane (the highlighted node's)…
        assert "this machine" in text  # …which still says where the highlighted node is
        await pilot.resize_terminal(120, 40)
        await wait_for(pilot, lambda: screen.compact is False, what="the wide columns")
        await settle(pilot)
        assert f"ubuntu@{UNREACHABLE}" in screen_text(app) and f"http://{UNREACHABLE}:8000" in screen_text(app)


@CLUSTER
async def test_restart_the_active_profile_through_the_gate(demo_world, monkeypatch):
    """`R` on the Recipes screen: the RestartProfile action's plan in the confirm gate (node by node), then
    the relaunch and its result on screen."""
    import backend.cluster.control as control

    removed: list[list[str]] = []
    remove = control.remove_containers

    async def recording(plan, *args, **kwargs):
        removed.append([rp.container for rp in plan.ranks])
        return await remove(plan, *args, **kwargs)

    monkeypatch.setattr(control, "remove_containers", recording)
    app, _ = real_app(demo_world)
    async with app.run_test(size=(120, 40)) as pilot:
        text = await _gate_on_the_active_profile(pilot, "R")
        assert f"Restart profile {USER_RECIPE}" in text and f"docker rm -f c3-profile_{USER_RECIPE}, then start it again" in text, text
        await pilot.press("y")
        await wait_for(pilot, lambda: app.last_result is not None, timeout=90, what="the restart")
        # It really ran: this world's node does not hold the recipe's pinned image, so the restart is
        # refused by the launch's preflight — said as the write's result — before anything was removed.
        result = app.last_result
        assert not result.ok and "image `vllm/vllm-openai@sha256:" in result.message and "is not on the node" in result.message, result
        assert "docker load" in (result.hint or ""), result
        await wait_for(pilot, lambda: "✗ refused" in screen_text(app) and "is not on the node" in screen_text(app), what="the result shown")
        assert removed == [], f"a restart that could not start again removed the running group: {removed}"


def _backend(screen, node: str):
    return next(b for pool in screen.pools or [] for b in pool.backends if b.node == node)


@CLUSTER
async def test_drain_and_undrain_the_highlighted_node_in_the_running_pool(demo_world):
    """`D` on the Nodes screen: the real router's drain through the confirm gate (its exact admin request,
    Cancel focused), the pool's row then says draining; `D` again undoes it. A node in no pool is said so."""
    from backend.nodes.registry import add_node

    add_node("spark-3", "http://10.213.0.13:8000", "ubuntu@10.213.0.13")  # registered, but not in the pool
    app, svc = real_app(demo_world)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        screen = await _mode(pilot, "2")
        await wait_for(pilot, lambda: screen.rows is not None and len(screen.rows) == 3 and screen.pools, timeout=30, what="nodes and the pool")
        assert screen.highlighted().name == "box" and not _backend(screen, "box").draining
        for verb, draining in (("drain", True), ("undrain", False)):
            app.last_result = None
            await pilot.press("D")
            await wait_for(pilot, lambda: gate_open(app), what=f"the {verb} gate")
            text = screen_text(app)
            assert f"{verb.title()} box" in text and f"/c3/{verb}?node=box (pool 127.0.0.1:8011)" in text, text
            await wait_for(pilot, lambda: getattr(app.screen.focused, "id", None) == "cancel", what="Cancel focused")
            await pilot.press("y")
            await wait_for(pilot, lambda: app.last_result is not None, what=f"the {verb} result")
            assert app.last_result.ok and app.last_result.message == f"{verb} box in pool 127.0.0.1:8011", app.last_result
            await wait_for(pilot, lambda want=draining: _backend(screen, "box").draining is want, timeout=30, what=f"the pool row after {verb}")
            await settle(pilot)
            row = next(line for line in screen_text(app).splitlines() if line.startswith("box ") and ("up" in line or "draining" in line))
            assert ("draining" in row) is draining, row
        calls = len(svc.calls)
        told: list[str] = []
        notify = app.notify
        app.notify = lambda message, **kw: (told.append(str(message)), notify(message, **kw))[1]
        table = screen.query_one("#nodes")
        table.focus()
        table.move_cursor(row=[r.name for r in screen.shown].index("spark-3"))
        await settle(pilot)
        await pilot.press("D")
        await settle(pilot)
        assert isinstance(app.screen, NodesScreen)  # no gate: nothing to plan
        assert told and told[-1].startswith("spark-3 is in no running pool"), told
        assert "make_plan" not in svc.calls[calls:]


@SHARED_CLUSTER
async def test_drain_is_refused_read_only_before_the_gate(shared_world):
    app, svc = real_app(shared_world, readonly=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        screen = await _mode(pilot, "2")
        await wait_for(pilot, lambda: screen.rows and screen.pools, timeout=30, what="nodes and the pool")
        await pilot.press("D")
        await settle(pilot)
        assert isinstance(app.screen, NodesScreen)
        assert not app.last_result.ok and "read-only cockpit: refused to drain box" in app.last_result.message
        assert "make_plan" not in svc.calls and not _backend(screen, "box").draining


async def _switch_modal(pilot):
    """Recipes mode, the active profile shown, `P` pressed: the switch modal once it has the profiles."""
    from c3.modals.switch_profile import SwitchProfileModal

    app = pilot.app
    await settle(pilot)
    await _mode(pilot, "3")
    await wait_for(pilot, lambda: f"Profile {USER_RECIPE}" in screen_text(app), what="the active profile")
    await pilot.press("P")
    await wait_for(pilot, lambda: isinstance(app.screen, SwitchProfileModal) and app.screen.profiles is not None, what="the launched profiles")
    return app.screen


@CLUSTER
async def test_switch_profile_picks_from_the_launched_profiles_and_a_profile_that_cannot_start_changes_nothing(demo_world):
    """`P` on the Recipes screen: every launched profile listed (the active one not pickable), the picked
    one's plan in the confirm gate (the active one stops first), then the real switch. This world's node
    holds no engine image, so the picked profile's preflight refuses — said as the result — and the
    active profile was not stopped for nothing."""
    from backend.profiles import Profile, active_name, is_stopped, load_profile, save_profile

    active = load_profile(USER_RECIPE)
    save_profile(Profile(**{**active.model_dump(), "name": "alt", "launched_at": "2026-05-02T09:00:00Z"}))
    app, _ = real_app(demo_world)
    async with app.run_test(size=(120, 40)) as pilot:
        modal = await _switch_modal(pilot)
        assert [p.name for p in modal.profiles] == ["alt", USER_RECIPE]
        picker = modal.query_one("#switch-profiles")
        assert picker.get_option(USER_RECIPE).disabled and picker.highlighted == 0 and "(active)" in screen_text(app)
        await pilot.press("enter")
        await wait_for(pilot, lambda: gate_open(app), what="the switch gate")
        text = screen_text(app)
        assert "Switch to profile alt" in text and f"first: stop the active profile {USER_RECIPE}" in text, text
        await wait_for(pilot, lambda: getattr(app.screen.focused, "id", None) == "cancel", what="Cancel focused")
        await pilot.press("y")
        await wait_for(pilot, lambda: app.last_result is not None, timeout=90, what="the switch")
        result = app.last_result
        assert not result.ok and "image `vllm/vllm-openai@sha256:" in result.message and "is not on the node" in result.message, result
        await wait_for(pilot, lambda: "✗ refused" in screen_text(app) and "is not on the node" in screen_text(app), what="the result shown")
        assert active_name() == USER_RECIPE and not is_stopped(USER_RECIPE), "a switch that could not start stopped the active profile"


@SHARED_CLUSTER
async def test_switch_profile_with_no_other_profile_says_how_to_get_one(shared_world):
    from c3.modals.switch_profile import SwitchProfileModal

    app, svc = real_app(shared_world)
    async with app.run_test(size=(120, 40)) as pilot:
        await _switch_modal(pilot)
        assert "No other launched profile" in screen_text(app) and "press u on a recipe" in screen_text(app)
        await pilot.press("enter")  # the active profile is not pickable: nothing is planned
        await settle(pilot)
        assert isinstance(app.screen, SwitchProfileModal) and "make_plan" not in svc.calls
        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, RecipesScreen)


@SHARED_CLUSTER
async def test_the_recipes_cursor_stays_on_its_recipe_across_refreshes(shared_world):
    """Issue 25: every refresh (the 60 s poll, `r`) rebuilt the table and put the cursor on its first row,
    so `u` then opened Launch for a recipe the user had not picked. The cursor follows the row key."""
    app, svc = real_app(shared_world)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        screen = await _mode(pilot, "3")
        await wait_for(pilot, lambda: bool(screen.shown), what="the recipes")
        ids = [r.id for r in screen.shown]
        assert ids.index(SPARK_RECIPE) > 0, ids  # not the first row: a jump to the top would show
        table = screen.query_one("#recipes")
        table.focus()
        table.move_cursor(row=table.get_row_index(SPARK_RECIPE))
        await settle(pilot)
        assert screen.highlighted().id == SPARK_RECIPE
        for _ in range(2):
            reads = svc.calls.count("recipes")
            await pilot.press("r")
            await wait_for(pilot, lambda reads=reads: svc.calls.count("recipes") > reads and not screen.poller.in_flight, what="the refresh")
            await settle(pilot)
            assert screen.highlighted().id == SPARK_RECIPE, ids
            assert SPARK_RECIPE in screen.query_one("#recipe-detail").render().plain  # the details too
        await pilot.press("u")
        await wait_for(pilot, lambda: isinstance(app.screen, LaunchModal), what="the node picker")
        assert app.screen.recipe.id == SPARK_RECIPE
        await pilot.press("escape")
        await settle(pilot)



def _wholly_shown(app, widget) -> bool:
    """The widget's whole region is inside its dialog and inside the terminal (not clipped away)."""
    region = widget.region
    dialog = app.screen.query_one("#dialog").region
    return region.height > 0 and dialog.contains_region(region) and app.screen.region.contains_region(region)


def _gate_fits(app) -> None:
    """The confirm gate on screen: title, problems, warnings and both buttons wholly shown, the plan
    shown and scrolling the rest, Cancel focused."""
    gate = app.screen
    for widget in gate.query("#confirm-title, #confirm-problems, #confirm-warnings, #cancel, #confirm"):
        assert _wholly_shown(app, widget), (widget.id, widget.region, gate.query_one("#dialog").region)
    plan = gate.query_one("#confirm-scroll")
    assert _wholly_shown(app, plan) and plan.max_scroll_y > 0, (plan.region, plan.max_scroll_y)  # the rest scrolls
    assert getattr(gate.focused, "id", None) == "cancel"


@SHARED_CLUSTER
async def test_the_launch_preview_at_80x24_scrolls_its_plan_and_keeps_buttons_and_problems_in_sight(shared_world):
    """Issue 25: at 80×24 the dry-run ran the dialog off the screen — buttons and problems out of
    sight, focus on a hidden Cancel. The plan scrolls; everything under it stays on screen."""
    app, svc = real_app(shared_world)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await _launch_modal(pilot, SPARK_RECIPE)  # two nodes: the longest dry-run; its image is a tag
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: gate_open(app), what="the launch gate")
        await settle(pilot)
        assert "not pinned by digest" in app.screen.query_one("#confirm-problems").render().plain
        _gate_fits(app)
        await pilot.resize_terminal(120, 40)  # and it grows back when the terminal does
        await settle(pilot)
        assert app.screen.query_one("#confirm-scroll").size.height == 20
        await pilot.press("escape")
        await settle(pilot)
        assert "execute" not in svc.calls


async def test_a_long_plan_with_problems_and_warnings_fits_the_gate_at_80x24(tmp_path):
    """The same for any write: a plan longer than the screen with problems and warnings (a launch in
    this world has no warnings), read-only too — every line under the plan stays on screen."""
    from textual.app import App

    from backend.actions.stop_pod import StopPod
    from backend.actions.workspace import Workspace
    from c3.services import WritePlan

    action = StopPod(Workspace(tmp_path / "estate.yml"), "a")
    lines = tuple(f"node box (rank 0): $ docker run --name c3-profile_x -e VAR{i}=value{i} image:tag serve --flag {i}" for i in range(40))
    plan = WritePlan(action, "Launch recipe x", lines, problems=("a problem that blocks",) * 2, warnings=("a warning with its hint " * 4,) * 3, wide=True)

    class Host(App[None]):
        CSS_PATH = "../../c3/c3.tcss"

    app = Host()
    async with app.run_test(size=(80, 24)) as pilot:
        app.push_screen(ConfirmModal(plan, readonly=True))
        await settle(pilot)
        assert app.screen.query_one("#confirm-readonly") and _wholly_shown(app, app.screen.query_one("#confirm-readonly"))
        _gate_fits(app)


@CLUSTER
async def test_the_launch_panel_clears_when_a_restart_or_a_switch_ends(demo_world, monkeypatch):
    """Issue 25: `R` and `P` report their steps in the "◐ launching …" panel but never said they ended,
    so it read "launching" for good. When the write ends the panel says how: ✓ after the restart, ✗
    after a switch that failed. The relaunch itself is stood in for (the world's node has no engine
    image): two steps said, then the relaunched profile — or a refusal."""
    import backend.cluster.control as control
    from backend.errors import Refused
    from backend.profiles import Profile, load_profile, save_profile

    async def relaunch(profile, *, say, **_kwargs):
        say(f"removing {profile.name}'s containers")
        say(f"starting {profile.name} rank 0")
        if profile.name == "alt":
            raise Refused("rank 0 did not answer")
        return profile

    monkeypatch.setattr(control, "relaunch", relaunch)
    active = load_profile(USER_RECIPE)
    save_profile(Profile(**{**active.model_dump(), "name": "alt", "launched_at": "2026-05-02T09:00:00Z"}))
    app, _ = real_app(demo_world)

    def panel() -> str:
        box = app.screen.query_one("#launch-status")
        return box.render().plain if box.display else ""

    async with app.run_test(size=(120, 40)) as pilot:
        await _gate_on_the_active_profile(pilot, "R")
        await pilot.press("y")
        await wait_for(pilot, lambda: app.last_result is not None, timeout=60, what="the restart")
        assert app.last_result.ok, app.last_result
        await settle(pilot)
        assert isinstance(app.screen, RecipesScreen)
        assert "starting qwen3-32b-awq-2x5090 rank 0" in panel()  # the steps were shown
        assert "◐ launching" not in panel() and "✓" in panel(), panel()
        app.last_result = None
        await pilot.press("P")
        await wait_for(pilot, lambda: getattr(app.screen, "profiles", None) is not None, what="the launched profiles")
        await pilot.press("enter")
        await wait_for(pilot, lambda: gate_open(app), what="the switch gate")
        await pilot.press("y")
        await wait_for(pilot, lambda: app.last_result is not None, timeout=60, what="the switch")
        assert not app.last_result.ok and "rank 0 did not answer" in app.last_result.message, app.last_result
        await settle(pilot)
        assert "◐ launching" not in panel() and "✗" in panel() and "alt" in panel(), panel()


@CLUSTER
async def test_draining_the_last_backend_that_takes_new_requests_warns_and_the_header_counts_it(demo_world):
    """Issue 25: in this world spark-2 is down, so draining box leaves the pool no backend for new
    sessions and unkeyed requests (the router answers 503) — the gate said nothing, and the pool's
    header still read "1/2 routable". The gate warns (Confirm stays enabled) and the header counts
    only the backends that take new requests; undraining needs no warning."""
    app, _ = real_app(demo_world)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        screen = await _mode(pilot, "2")
        await wait_for(pilot, lambda: screen.rows and screen.pools, timeout=30, what="nodes and the pool")
        assert "1/2 routable" in screen_text(app)
        await pilot.press("D")
        await wait_for(pilot, lambda: gate_open(app), what="the drain gate")
        warnings = app.screen.plan.warnings
        assert any("no backend that takes new requests" in w and "503" in w for w in warnings), warnings
        assert "no backend that takes new requests" in screen_text(app) and not app.screen.query_one("#confirm").disabled
        await pilot.press("y")
        await wait_for(pilot, lambda: app.last_result is not None, what="the drain")
        assert app.last_result.ok, app.last_result
        await wait_for(pilot, lambda: _backend(screen, "box").draining, timeout=30, what="box draining")
        await settle(pilot)
        text = screen_text(app)
        assert "0/2 routable" in text and "1 draining" in text and "1/2 routable" not in text, text
        await pilot.press("D")
        await wait_for(pilot, lambda: gate_open(app), what="the undrain gate")
        assert app.screen.plan.warnings == (), app.screen.plan.warnings
        await pilot.press("escape")
        await settle(pilot)
