"""The cockpit as a monitor: history with a time axis kept under modals, the GPU process view, `/`
filter and sort in every list, the problems filter and `:` commands — on the real facade over the
simulated world (`tests.cockpit.world`)."""

from __future__ import annotations

import pytest

from tests.cockpit.conftest import real_app, screen_text, settle, wait_for
from tests.cockpit.world import ROOT


def gpu_points(app) -> int:
    """Readings of GPU0's utilisation the hub holds (read from the test, off the app's loop work)."""
    series = app.services.inner.real.live._hub.history.snapshot().get("gpu/0/util")
    return len(series.points) if series else 0


async def test_history_keeps_growing_while_a_modal_is_open(shared_world):
    app, _log = real_app(shared_world)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, rounds=4)
        await pilot.press("question_mark")  # Help: a modal over the Orchestration screen
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "HelpModal", what="the help modal")
        before = gpu_points(app)
        await wait_for(pilot, lambda: gpu_points(app) >= before + 3, timeout=30, what="three more GPU readings recorded under the modal")
        await pilot.press("escape")
        await pilot.press("h")
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "HistoryModal" and app.screen.reads > 0, what="the history view")
        await settle(pilot)
        text = screen_text(app)
        assert "-5m" in text and "now" in text, "no time axis"
        assert "GPU util" in text and "90 %" in text and " W" in text, text  # units and the busy GPU's reading
        assert "pod chat" in text and "KV cache" in text and "tok/s" in text
        await pilot.press("w")  # 5 m → 10 m
        assert "-10m" in screen_text(app)


@pytest.mark.parametrize("demo_world", ["mismatch"], indirect=True)
async def test_process_view_shows_the_misplaced_pod_on_the_gpu_it_uses_and_foreign_processes(demo_world):
    demo_world.add_stranger(3, 2048)
    app, _log = real_app(demo_world)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, rounds=4)
        await pilot.press("p")
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "ProcessesModal" and app.screen.rows is not None, what="the process view")
        rows = {(r.gpu_index, r.pod) for r in app.screen.rows}
        assert (0, "odd") in rows, "the misplaced pod is not listed on GPU 0, where it runs"
        assert (1, "odd") not in rows, "the misplaced pod is listed on the GPU it planned"
        assert (3, None) in rows, "the stranger on GPU 3 is missing"
        text = screen_text(app)
        assert "⚠ odd (plans GPU1)" in text and "⚠ foreign" in text and "sleep 3600" in text
        assert "1 foreign" in text and "1 misplaced" in text
        # `/` filters the list, Esc clears it; `s` sorts by memory (second column)
        await pilot.press("slash", *"foreign", "enter")
        await settle(pilot)
        assert [r.pod for r in app.screen.shown] == [None]
        await pilot.press("escape")
        assert len(app.screen.shown) == len(app.screen.rows)
        await pilot.press("s", "s")
        used = [r.used_mib or 0 for r in app.screen.shown]
        assert used == sorted(used, reverse=True)
        await pilot.press("escape", "escape")  # clear the sort, then close
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "OrchestrationScreen", what="the modal closed")


@pytest.mark.parametrize("shared_world", ["mismatch"], indirect=True)
async def test_pod_list_filter_sort_and_the_problems_filter(shared_world):
    app, _log = real_app(shared_world)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, rounds=4)
        orch = app.screen
        await wait_for(pilot, lambda: len(orch.pods) == 3 and "odd" in app.trouble.pods(), what="three pods, odd misplaced")
        pods = orch.query_one("#pods")
        shown = lambda: [pods.get_option_at_index(i).id for i in range(pods.option_count)] if pods.display else []  # noqa: E731
        await pilot.press("slash", *"^c")  # a regex: names starting with c
        assert shown() == ["chat", "coder"]
        assert "2 of 3" in screen_text(app)
        await pilot.press("enter")  # keeps the filter, back on the list
        assert app.focused is pods and shown() == ["chat", "coder"]
        await pilot.press("j", "d")  # the write key acts on the pod shown, not on the estate's n-th pod
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "ConfirmModal", what="the stop gate")
        assert app.screen.plan.pod == "coder"
        await pilot.press("escape")
        await settle(pilot)
        await pilot.press("escape")  # clears the filter
        assert shown() == ["chat", "coder", "odd"]
        await pilot.press("s", "s", "s")  # name → state → GPU
        assert "sort GPU ↑" in screen_text(app) and shown() == ["chat", "odd", "coder"]  # GPUs (0,), (1,), (2, 3)
        await pilot.press("S")
        assert shown() == ["coder", "odd", "chat"]
        await pilot.press("escape", "exclamation_mark")
        assert shown() == ["odd"] and "problems only" in screen_text(app)
        await pilot.press("exclamation_mark")
        assert shown() == ["chat", "coder", "odd"]
        await pilot.press("slash", *"[unclosed")  # not a valid regex: matched literally, no traceback
        assert shown() == [] and "no pod matches" in screen_text(app)


async def test_nodes_and_recipes_filter_and_the_highlighted_row_follows(shared_world):
    app, _log = real_app(shared_world)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, rounds=4)
        await pilot.press("3")
        await wait_for(pilot, lambda: getattr(app.screen, "rows", None), what="the recipes")
        recipes = app.screen
        total = len(recipes.rows)
        await pilot.press("slash", *"5090", "enter")
        assert 0 < len(recipes.shown) < total and all("5090" in (r.id + r.hardware + r.image + r.summary) for r in recipes.shown)
        assert recipes.highlighted() is recipes.shown[0]
        await pilot.press("escape")
        assert len(recipes.shown) == total
        await pilot.press("2")
        await wait_for(pilot, lambda: getattr(app.screen, "rows", None), what="the nodes")
        nodes = app.screen
        await pilot.press("slash", *"no-such-node")
        assert nodes.shown == [] and "no node matches" in screen_text(app)
        await pilot.press("escape")
        assert [r.name for r in nodes.shown] == [r.name for r in nodes.rows]


async def test_command_entry_completes_runs_and_refuses_unknown_commands(shared_world):
    app, _log = real_app(shared_world)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot, rounds=4)
        await pilot.press("colon", *"no", "tab", "enter")  # Tab completes `no` to `nodes`
        await wait_for(pilot, lambda: app.current_mode == "nodes", what=":nodes")
        await pilot.press("colon", *"pro", "tab")
        assert app.screen.query_one("Input").value == "pro"  # procs and problems share `pro`: no guess
        await pilot.press("c", "tab", "enter")
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "ProcessesModal", what=":procs")
        await pilot.press("escape")
        await pilot.press("colon", *"frobnicate", "enter")
        await settle(pilot)
        assert app.screen.__class__.__name__ != "CommandLine"
        notes = [n.message for n in app._notifications]
        assert any(m.startswith("unknown command :frobnicate — try :pods") and "\n" not in m for m in notes), notes
        await pilot.press("colon", *"problems", "enter")
        await wait_for(pilot, lambda: app.current_mode == "orchestration" and app.screen.list_query.problems_only, what=":problems")
        await pilot.press("colon", "q", "enter")
        await wait_for(pilot, lambda: not app.is_running, what=":q")


@pytest.mark.parametrize("demo_world", ["mismatch"], indirect=True)
def test_cli_gpus_processes(demo_world):
    """`c3 gpus --processes [--json]`, run as users run it, on the world the cockpit tests use."""
    import json
    import os
    import subprocess
    import sys

    stranger = demo_world.add_stranger(3, 2048)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-m", "c3", "gpus", "--processes", "--json"], env=env, capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)["processes"]
    by_pod = {(r["gpu_index"], r["pod"]): r for r in rows}
    assert by_pod[(0, "odd")]["misplaced"] is True and by_pod[(0, "odd")]["planned_gpus"] == [1]
    assert by_pod[(3, None)]["foreign"] is True and by_pod[(3, None)]["pid"] == stranger and by_pod[(3, None)]["command"] == "sleep 3600"
    assert by_pod[(0, "chat")]["foreign"] is False and by_pod[(0, "chat")]["misplaced"] is False
    table = subprocess.run([sys.executable, "-m", "c3", "gpus", "--processes"], env=env, capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert table.returncode == 0 and "odd (MISPLACED: plans GPU 1)" in table.stdout and "(foreign: no c3 pod)" in table.stdout, table.stdout


@pytest.mark.parametrize("shared_world", ["mismatch"], indirect=True)
async def test_the_process_view_follows_the_hub_without_a_timer(shared_world, monkeypatch):
    """Pushed, the process view has no poll timer: a process that appears on a GPU reaches it through the
    hub's GPU push, and a push that changes only utilisation reads nothing again."""
    import asyncio
    import subprocess

    from backend.gpu.registry import default_registry_dir
    from backend.stub_registry import own_pidns
    from c3.modals.processes import ProcessesModal
    from c3.services import GpuReading

    timers: list[str | None] = []  # every interval the view sets (Textual's public set_interval, spied on)
    set_interval = ProcessesModal.set_interval

    def spied(self, *args, **kwargs):
        timers.append(kwargs.get("name"))
        return set_interval(self, *args, **kwargs)

    monkeypatch.setattr(ProcessesModal, "set_interval", spied)
    app, _log = real_app(shared_world)
    newcomer = subprocess.Popen(["sleep", "600"], start_new_session=True)
    alias = shared_world.pids[newcomer.pid] = 4444  # the scenes' facade shows pids by alias
    with shared_world.active():
        registration = default_registry_dir() / f"newcomer-{newcomer.pid}.gpu"
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot, rounds=4)
            await wait_for(pilot, lambda: app.pushed is True, what="the live hub's pushes")
            await pilot.press("p")
            await wait_for(pilot, lambda: app.screen.__class__.__name__ == "ProcessesModal" and app.screen.rows is not None, what="the process view")
            modal = app.screen
            assert "processes" not in timers, "pushed, yet polling"
            assert alias not in {r.pid for r in modal.rows}
            registration.write_text(f"pid {newcomer.pid}\nname newcomer\npidns {own_pidns()}\ngpu 2 1024 0\n", encoding="utf-8")
            await wait_for(pilot, lambda: alias in {r.pid for r in modal.rows or ()}, timeout=30, what="the new process, pushed")
            await settle(pilot)
            reads = modal.reads
            now = await asyncio.to_thread(app.services.gpu_snapshots)  # the processes the last push carried
            assert any(p.pid == alias for g in now for p in g.processes)
            busier = tuple(g.model_copy(update={"util_pct": (g.util_pct or 0) + 7}) for g in now)
            modal.live_changed(gpus=GpuReading(snapshots=busier, util={}, mem={}, taken_at=None))
            await settle(pilot)
            assert modal.reads == reads, "a push that changed only utilisation read the processes again"
            modal.live_changed(pods=object())  # any pod change may rename a holder: read again
            await wait_for(pilot, lambda: modal.reads == reads + 1, what="the read after a pod change")
    finally:
        registration.unlink(missing_ok=True)
        shared_world.pids.pop(newcomer.pid, None)
        newcomer.kill()
        newcomer.wait(10)
