"""The pod writes, as both front ends drive them: plan → problems → run, on the demo rig."""

from __future__ import annotations

from backend.actions import NewPod, Problem
from backend.actions.base import ignore_progress
from backend.actions.boot_pods import BootPods
from backend.actions.create_pod import CreatePod
from backend.actions.remove_pod import RemovePod
from backend.actions.stop_all import StopPods
from backend.actions.stop_pod import StopPod
from backend.actions.workspace import boot_blockers
from backend.views.workloads import pod_log

from .conftest import Steps, free_port

SLUG = "vllm/qwen3-8b"


def _create(ws, name: str, gpu: int) -> None:
    action = CreatePod(ws, NewPod(name, SLUG, (gpu,), free_port()))
    assert [p for p in action.problems() if p.blocking] == []
    outcome = action.run(ignore_progress)
    assert outcome.ok and f"created pod {name}" in outcome.message


def test_create_plans_checks_and_writes(ws):
    request = NewPod("chat", SLUG, (0,), free_port())
    plan = CreatePod(ws, request).plan()
    assert plan.title == "Create pod chat" and plan.lines[0] == f"append to {ws.estate_path}:"
    assert any(line.startswith("fit on GPU 0: ") for line in plan.lines)
    assert not ws.estate_path.exists()  # planning writes nothing
    _create(ws, "chat", 0)
    assert [p.name for p in ws.pods()] == ["chat"]
    again = CreatePod(ws, NewPod("Chat", SLUG, (1,), free_port())).problems()
    assert again[0].blocking and "already exists" in again[0].message  # the same rule `pod create` applies
    bad = CreatePod(ws, NewPod("-x", SLUG, (1,), free_port())).problems()
    assert bad[0].blocking and "is not valid" in bad[0].message
    unknown = CreatePod(ws, NewPod("x", "nope/nope", (1,), None)).problems()
    assert unknown == [Problem("unknown slug `nope/nope`", hint="`c3 catalog` lists the slugs; your own go in $C3_HOME/catalog.d/")]
    assert [p.name for p in ws.pods()] == ["chat"]


def test_boot_stop_remove_round_trip(ws):
    _create(ws, "chat", 0)
    boot = BootPods(ws, ("chat",), follow_logs=True)
    assert boot.problems() == []
    assert any(line.startswith("pin GPU 0 (") for line in boot.plan().lines)
    steps = Steps()
    outcome = boot.run(steps)
    assert outcome.ok and outcome.message.startswith("pod chat is serving on http://127.0.0.1:"), outcome.message
    assert [o.pod for o in outcome.data] == ["chat"] and outcome.data[0].ok
    assert any(s.line for s in steps) and steps[-1].done and steps[-1].ok  # lines for a CLI, a final step for the panel
    # Booting again would change nothing: the gate has nothing to confirm, a CLI says "already running".
    assert BootPods(ws, ("chat",)).problems() == [Problem("pod `chat` is already running", "noop")]
    remove = RemovePod(ws, "chat").problems()
    assert remove[0].blocking and "is running" in remove[0].message
    stop = StopPod(ws, "chat", planned=True)
    assert stop.problems() == [] and stop.plan().destructive
    result = stop.run(ignore_progress)
    assert result.ok and result.data.stopped and result.data.origin == str(ws.estate_path.resolve())
    assert stop.problems() == [Problem("pod `chat` has no workload to stop", "noop")]
    log = pod_log(ws.ctx, "chat", 50)  # no workload: the last boot log, as `pod logs` and the cockpit show it
    assert log is not None and log.boot_log is not None and log.lines
    assert RemovePod(ws, "chat").problems() == []
    assert RemovePod(ws, "chat").run(ignore_progress).ok and ws.pods() == []


def test_unknown_pods_are_problems_not_tracebacks(ws):
    _create(ws, "chat", 0)
    for action in (BootPods(ws, ("ghost",)), StopPod(ws, "ghost", planned=True), RemovePod(ws, "ghost")):
        [problem] = action.problems()
        assert problem.blocking and problem.message == f"pod `ghost` not found in {ws.estate_path}" and problem.hint == "pods in the file: chat"
        assert action.plan().lines  # the plan says what is wrong instead of raising
    # Not planned: `c3 pod down NAME` stops any c3 pod, and a pod that does not run is a no-op.
    assert StopPod(ws, "ghost").problems() == [Problem("pod `ghost` has no workload to stop", "noop")]


def test_stop_all_stops_exactly_what_ran_when_planned(ws):
    _create(ws, "a", 0)
    _create(ws, "b", 1)
    assert StopPods(ws).problems() == [Problem("nothing in the estate is running", "noop")]
    assert BootPods(ws, ("a",)).run(ignore_progress).ok
    action = StopPods(ws)
    assert action.pods == ("a",) and len(action.plan().lines) == 2
    assert BootPods(ws, ("b",)).run(ignore_progress).ok  # started after the plan: not stopped
    outcome = action.run(ignore_progress)
    assert outcome.message == "stopped 1 pod(s): a" and action.affects == ("a",)
    assert ws.running_pods() == ["b"]


def test_boot_blockers_concern_only_the_pods_booted(ws):
    _create(ws, "a", 0)
    _create(ws, "b", 1)
    text = ws.estate_path.read_text()
    ws.estate_path.write_text(text.replace("gpus: [1]", "gpus: [7]"))  # b now names a GPU the rig lacks
    assert text != ws.estate_path.read_text()
    assert boot_blockers(ws, ["a"], force=False) == []
    [blocker] = boot_blockers(ws, ["b"], force=False)
    assert "7" in blocker.message and blocker.blocking
    assert BootPods(ws, ("b",)).problems() == [blocker]
