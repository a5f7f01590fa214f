"""Sleep instead of stop (issue 28): a vLLM pod launched with sleep mode is put to sleep (level 1) and woken by the
gateway instead of stopped and booted, where the fit says its sleeping footprint leaves room."""

from __future__ import annotations

import logging

from backend.gateway import sleepctl
from backend.gateway.config import GatewayPod
from backend.gateway.swap import Holder, plan_swap
from tests.support import wait_until

from .conftest import create
from .test_auth_and_cli import c3


def pod(name: str, need: float = 21.6, asleep: float | None = 1.2, total: float = 24.0, gpus: tuple[int, ...] = (0,)) -> GatewayPod:
    return GatewayPod(name, 1, "vllm/x", gpus=gpus, on_demand=True, sleep_mode=asleep is not None, total_gib=(total,) * len(gpus),
                      need_gib=(need,) * len(gpus), sleeping_gib=(asleep,) * len(gpus) if asleep is not None else ())


def test_plan_sleeps_a_holder_whose_footprint_leaves_room_and_stops_one_whose_does_not():
    target = pod("coder", asleep=None)
    plan = plan_swap(target, [Holder(pod("chat"), "running", resident_s=40)], 0)
    assert plan.ok and plan.sleep == ("chat",) and plan.stop == () and plan.freed == (0,)
    assert plan.why == ("sleep chat (idle, resident 40s; 1.2 GiB asleep on GPU 0; with pod coder awake: GPU 0 22.8/24.0 GiB) "
                        "to free GPU 0 for pod coder")
    # Two sleep-mode holders: the first one's footprint fits beside coder, the second one's does not (23.2 + 1.2 > 24.0).
    plan = plan_swap(pod("coder", need=22.0, asleep=None), [Holder(pod("chat"), "running", resident_s=40), Holder(pod("chat2"), "running", resident_s=40)], 0)
    assert plan.sleep == ("chat",) and plan.stop == ("chat2",)
    # A big footprint, or a pod without sleep mode, or a target the fit did not price: stopped as before.
    assert plan_swap(target, [Holder(pod("chat", asleep=2.5), "running", resident_s=40)], 0).stop == ("chat",)
    assert plan_swap(target, [Holder(pod("chat", asleep=None), "running", resident_s=40)], 0).stop == ("chat",)
    unpriced = GatewayPod("coder", 1, "vllm/x", gpus=(0,), on_demand=True)
    assert plan_swap(unpriced, [Holder(pod("chat"), "running", resident_s=40)], 0).stop == ("chat",)


def test_plan_wakes_a_sleeping_pod_and_a_sleeper_is_not_held_by_residency():
    # chat sleeps; waking it means stopping coder (no sleep mode), which has run long enough.
    plan = plan_swap(pod("chat"), [Holder(pod("coder", asleep=None), "running", resident_s=40)], 30, waking=True)
    assert plan.ok and plan.stop == ("coder",) and plan.why == "stop coder (idle, resident 40s) to free GPU 0 for wake pod chat"
    # A pod asleep for 1s is no reason to wait: it stays asleep when its footprint leaves room, else it is stopped.
    plan = plan_swap(pod("coder", asleep=None), [Holder(pod("chat"), "sleeping", resident_s=1)], 30)
    assert plan.ok and plan.asleep == ("chat",) and plan.sleep == () and plan.stop == () and "keep chat asleep" in plan.why
    plan = plan_swap(pod("coder", need=23.0, asleep=None), [Holder(pod("chat"), "sleeping", resident_s=1)], 30)
    assert plan.ok and plan.stop == ("chat",) and "stop chat (asleep)" in plan.why
    busy = plan_swap(pod("coder", asleep=None), [Holder(pod("chat"), "falling-asleep", resident_s=40)], 0)
    assert not busy.ok and busy.retry_after_s is not None


def test_a_swap_sleeps_the_sleep_mode_pod_and_the_next_request_wakes_it(ws, gateway, caplog):
    from backend.gateway.status import gateway_dir, read_gateways

    caplog.set_level(logging.INFO, logger="c3.gateway")
    chat_port = create(ws, "chat", 0, on_demand=True, sleep_mode=True)
    create(ws, "coder", 0, on_demand=True)
    gw = gateway(min_residency_s=0, state_dir=gateway_dir())
    priced = {p.name: p for p in gw.control.pods()}
    assert priced["chat"].sleep_mode and priced["chat"].sleeping_gib and not priced["coder"].sleeping_gib
    assert gw.chat("chat")[0] == 200
    status, headers, _ = gw.chat("coder")
    assert status == 200 and headers["x-c3-pod"] == "coder"
    runtime = ws.ctx.runtime
    assert runtime.workload("chat").running and runtime.workload("coder").running  # chat's engine runs, asleep
    assert sleepctl.is_sleeping("127.0.0.1", chat_port) is True
    assert gw.control.sleeps == ["chat"] and gw.control.stops == [] and gw.control.asleep == [(), ("chat",)]
    swap = gw.gw.slots.slots["coder"].last_swap
    assert swap is not None and swap.slept == ["chat"] and swap.stopped == [] and swap.ok and swap.why.startswith("sleep chat (idle, resident")
    assert "putting pod chat to sleep: swapped out for pod coder" in [r.getMessage() for r in caplog.records if r.name == "c3.gateway"]
    [g] = wait_until(lambda: [g for g in read_gateways(gateway_dir()) if g.last_swap is not None and g.last_swap.ok], 10, "the swap in the status file")
    assert {m.pod: m.state for m in g.models} == {"chat": "sleeping", "coder": "running"}
    text = c3("gateway", "status")
    assert text.returncode == 0, text.stderr
    assert "sleeping" in text.stdout and "started coder, put chat to sleep (freed GPU 0)" in text.stdout
    # The next request for chat wakes it (coder, without sleep mode, is stopped for it), and is answered.
    status, headers, _ = gw.chat("chat")
    assert status == 200 and headers["x-c3-pod"] == "chat"
    assert gw.control.wakes == ["chat"] and gw.control.starts == ["chat", "coder"] and gw.control.stops == ["coder"]
    assert sleepctl.is_sleeping("127.0.0.1", chat_port) is False and not runtime.workload("coder").running
    swap = gw.gw.slots.slots["chat"].last_swap
    assert swap is not None and swap.woke and swap.stopped == ["coder"] and swap.ok
    [g] = wait_until(lambda: [g for g in read_gateways(gateway_dir()) if g.last_swap is not None and g.last_swap.pod == "chat" and g.last_swap.ok], 10,
                     "the wake")
    assert {m.pod: m.state for m in g.models} == {"chat": "running", "coder": "stopped"}
    assert "woke chat, stopped coder (freed GPU 0)" in c3("gateway", "status").stdout


def test_a_gateway_started_while_a_pod_sleeps_sees_it_asleep_and_wakes_it_for_a_request(ws, gateway):
    from backend.actions.base import ignore_progress
    from backend.actions.boot_pods import BootPods

    chat_port = create(ws, "chat", 0, on_demand=True, sleep_mode=True)
    assert BootPods(ws, ("chat",)).run(ignore_progress).ok
    sleepctl.sleep("127.0.0.1", chat_port)  # left asleep (by a gateway that has since stopped)
    gw = gateway(min_residency_s=0)
    assert gw.gw.slots.slots["chat"].state == "sleeping"  # a request is not forwarded into an engine that would hold it
    status, headers, _ = gw.chat("chat")
    assert status == 200 and headers["x-c3-pod"] == "chat"
    assert gw.control.wakes == ["chat"] and gw.control.starts == [] and sleepctl.is_sleeping("127.0.0.1", chat_port) is False


def test_a_failed_wake_is_503_and_the_pod_stays_asleep_not_running(ws, gateway):
    from backend.actions.base import ignore_progress
    from backend.actions.boot_pods import BootPods
    from backend.gateway.config import StartResult

    chat_port = create(ws, "chat", 0, on_demand=True, sleep_mode=True)
    assert BootPods(ws, ("chat",)).run(ignore_progress).ok
    sleepctl.sleep("127.0.0.1", chat_port)
    gw = gateway(min_residency_s=0, failure_hold_s=0)
    gw.control.wake = lambda name: StartResult(ok=False, started=False, detail=f"pod {name} still sleeps after /wake_up")
    status, _, body = gw.chat("chat")
    assert status == 503 and b"pod chat did not become ready: pod chat still sleeps after /wake_up" in body
    # Still asleep as far as the gateway knows (it runs): never forwarded into an engine that would hold the request.
    assert gw.gw.slots.slots["chat"].state == "sleeping"
    wait_until(lambda: gw.chat("chat", timeout=10)[0] == 503, 10, "the next request tries to wake it again")
    assert gw.gw.slots.slots["chat"].state == "sleeping"


def test_a_pod_it_put_to_sleep_is_stopped_after_the_idle_ttl(ws, gateway):
    create(ws, "chat", 0, on_demand=True, sleep_mode=True)
    create(ws, "coder", 0, on_demand=True)
    gw = gateway(min_residency_s=0, idle_ttl_s=1.5)
    assert gw.chat("chat")[0] == 200 and gw.chat("coder")[0] == 200
    assert gw.control.sleeps == ["chat"]
    wait_until(lambda: "chat" in gw.control.stops, 15, "the sleeping pod stopped after the idle ttl")
    wait_until(lambda: gw.gw.slots.slots["chat"].state == "stopped", 15, "chat stopped")
    assert not ws.ctx.runtime.workload("chat").running
