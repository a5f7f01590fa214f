"""Swap by fit: on-demand pods share GPUs; the gateway stops one to start another, never a pod with
requests in flight, never one not on demand, never one inside its minimum residency (issue 28)."""

from __future__ import annotations

import http.client
import json
import logging
import time
from concurrent.futures import ThreadPoolExecutor

import yaml

from backend.actions.base import ignore_progress
from backend.actions.boot_pods import BootPods
from backend.gateway.config import GatewayPod
from backend.gateway.swap import Holder, plan_swap
from tests.estate.cli import run_inproc
from tests.support import free_port, wait_until

from .conftest import SLUG, create
from .test_auth_and_cli import c3


def test_c3_up_refuses_two_on_demand_pods_that_collide(ws):
    create(ws, "chat", 0, on_demand=True)
    create(ws, "coder", 0, on_demand=True)
    create(ws, "other", 1)
    r = run_inproc("up", "--file", str(ws.estate_path))
    assert r.code == 1, (r.out, r.err)
    assert "pods chat and coder share GPU 0" in r.err and "gateway" in r.err
    assert not any(ws.ctx.runtime.workload(n).running for n in ("chat", "coder", "other"))  # refused before anything starts
    # One of them boots; then `up` of both refuses again (coder would collide with the running chat).
    assert run_inproc("up", "--only", "chat,other", "--file", str(ws.estate_path)).code == 0
    again = run_inproc("up", "--file", str(ws.estate_path))
    assert again.code == 1 and "pods chat and coder share GPU 0" in again.err and "--only coder" not in again.err
    assert not ws.ctx.runtime.workload("coder").running
    assert BootPods(ws, ("chat", "coder")).problems()[0].message.startswith("pods chat and coder share GPU 0")


def _gpu0_pair(ws):
    return create(ws, "chat", 0, on_demand=True), create(ws, "coder", 0, on_demand=True)


def _error(body: bytes) -> dict:
    return json.loads(body)["error"]


def test_a_request_for_the_stopped_pod_swaps_the_other_out_and_status_shows_it(ws, gateway, caplog):
    from backend.gateway.status import gateway_dir, read_gateways

    caplog.set_level(logging.INFO, logger="c3.gateway")
    _gpu0_pair(ws)
    gw = gateway(min_residency_s=0, state_dir=gateway_dir())
    assert gw.chat("chat")[0] == 200
    status, headers, _ = gw.chat("coder")
    assert status == 200 and headers["x-c3-pod"] == "coder"
    runtime = ws.ctx.runtime
    assert runtime.workload("coder").running and not runtime.workload("chat").running
    assert gw.control.starts == ["chat", "coder"] and gw.control.stops == ["chat"]
    swap = gw.gw.slots.slots["coder"].last_swap
    assert swap is not None and swap.stopped == ["chat"] and swap.gpus == [0] and swap.ok and swap.took_s is not None
    assert "stop chat (idle, resident" in swap.why and "free GPU 0 for pod coder" in swap.why
    logged = [r.getMessage() for r in caplog.records if r.name == "c3.gateway"]
    assert f"swap: {swap.why}" in logged and "stopping pod chat: swapped out for pod coder" in logged
    assert any(line.startswith("swap for pod coder done after ") for line in logged)
    [g] = wait_until(lambda: [g for g in read_gateways(gateway_dir()) if g.last_swap is not None and g.last_swap.ok], 10, "the swap in the status file")
    assert g.last_swap.pod == "coder" and g.min_residency_s == 0
    assert {m.pod: (m.state, m.on_demand, m.gpus) for m in g.models} == {"chat": ("stopped", True, [0]), "coder": ("running", True, [0])}
    text = c3("gateway", "status")
    assert text.returncode == 0, text.stderr
    assert "last swap:" in text.stdout and "started coder, stopped chat (freed GPU 0), took " in text.stdout


def test_a_pod_with_a_request_in_flight_is_not_stopped(ws, gateway):
    chat_port, _ = _gpu0_pair(ws)
    gw = gateway(min_residency_s=0, swap_wait_s=0)  # not held (test_swap_hold.py): told to come back
    assert gw.chat("chat")[0] == 200
    with ThreadPoolExecutor(1) as pool:
        held = pool.submit(gw.chat, "chat", headers={"X-Stub-Hold": "h"})
        wait_until(lambda: gw.gw.slots.slots["chat"].in_flight == 1, 20, "chat's request in flight")
        status, headers, body = gw.chat("coder")
        assert status == 429 and headers["retry-after"] == "2", body
        assert _error(body)["message"] == "c3 gateway: pod coder needs GPU 0, held by pod chat with 1 request(s) in flight"
        assert ws.ctx.runtime.workload("chat").running and gw.control.stops == []
        release = http.client.HTTPConnection("127.0.0.1", chat_port, timeout=10)
        release.request("POST", "/debug/release/h")
        assert release.getresponse().status == 200
        assert held.result(30)[0] == 200  # its request completed
    assert gw.chat("coder")[0] == 200 and gw.control.stops == ["chat"]  # once it ended, the swap happens


def test_a_pod_not_on_demand_is_never_stopped(ws, gateway):
    create(ws, "fixed", 0)
    assert BootPods(ws, ("fixed",)).run(ignore_progress).ok
    # A hand-edited file: an on-demand pod on the GPU of a pod that is not (`pod create` refuses this).
    doc = yaml.safe_load(ws.estate_path.read_text())
    doc["estate"].append({"name": "extra", "slug": SLUG, "gpus": [0], "port": free_port(), "on_demand": True})
    ws.estate_path.write_text(yaml.safe_dump(doc))
    gw = gateway(min_residency_s=0)
    status, _, body = gw.chat("extra")
    assert status == 503
    assert _error(body)["message"] == "c3 gateway: GPU 0 of pod extra is held by pod fixed, which is not on demand: the gateway never stops it"
    assert ws.ctx.runtime.workload("fixed").running and gw.control.stops == [] and gw.control.starts == []  # no boot attempt either


def test_minimum_residency_prevents_thrash(ws, gateway):
    _gpu0_pair(ws)
    gw = gateway(min_residency_s=4, swap_wait_s=0)  # not held (test_swap_hold.py): told to come back
    assert gw.chat("chat")[0] == 200
    for _ in range(2):  # alternating requests inside the window: chat keeps the GPU, coder is told when to retry
        status, headers, body = gw.chat("coder")
        assert status == 429 and 1 <= int(headers["retry-after"]) <= 4, body
        assert "held by pod chat, which started" in _error(body)["message"] and "minimum residency 4s" in _error(body)["message"]
        assert gw.chat("chat")[0] == 200
    assert gw.control.stops == [] and gw.control.starts == ["chat"]
    since = gw.gw.slots.slots["chat"].running_since
    time.sleep(max(0.0, 4.2 - (time.monotonic() - since)))
    assert gw.chat("coder")[0] == 200 and gw.control.stops == ["chat"]
    status, _, body = gw.chat("chat")  # and now coder holds it for its residency
    assert status == 429 and "held by pod coder" in _error(body)["message"]
    assert gw.control.starts == ["chat", "coder"]


def test_a_pod_the_fit_says_can_never_run_stops_nothing():
    target = GatewayPod("big", 1, "vllm/x", gpus=(0,), on_demand=True, fit_verdict="wont-fit", fit_reasons=("weights 30.1 GiB > budget 21.6 GiB",))
    other = GatewayPod("small", 2, "vllm/y", gpus=(0,), on_demand=True)
    plan = plan_swap(target, [Holder(other, "running", resident_s=100)], 0)
    assert not plan.ok and plan.stop == () and plan.retry_after_s is None
    assert plan.why == "pod big can never run on GPU 0: fit wont-fit — weights 30.1 GiB > budget 21.6 GiB"
    fine = plan_swap(target.__class__("big", 1, "vllm/x", gpus=(0, 1), on_demand=True), [Holder(other, "running", resident_s=100)], 30)
    assert fine.ok and fine.stop == ("small",) and fine.freed == (0,)
