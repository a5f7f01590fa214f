"""A request whose pod needs GPUs that another on-demand pod holds is held through the swap (issue 28):
it waits, bounded by `--swap-wait` and the pod's queue, until the holder may be stopped, and is then
forwarded to the swapped-in pod; past either bound it is one 503 with Retry-After. A client that leaves
while held gives its place back (and, alone, starts nothing)."""

from __future__ import annotations

import http.client
import json
import socket
import time
from concurrent.futures import ThreadPoolExecutor

from tests.support import wait_until

from .conftest import create
from .test_auth_and_cli import c3


def _pair(ws):
    return create(ws, "chat", 0, on_demand=True), create(ws, "coder", 0, on_demand=True)


def _release(port: int, name: str) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("POST", f"/debug/release/{name}")
        assert conn.getresponse().status == 200
    finally:
        conn.close()


def _error(body: bytes) -> dict:
    return json.loads(body)["error"]


def test_requests_for_a_busy_gpu_are_held_through_the_swap_and_answered_by_the_new_pod(ws, gateway):
    from backend.gateway.status import gateway_dir, read_gateways

    chat_port, _ = _pair(ws)
    gw = gateway(min_residency_s=0, swap_wait_s=60, state_dir=gateway_dir())
    assert gw.chat("chat")[0] == 200
    coder = gw.gw.slots.slots["coder"]
    with ThreadPoolExecutor(3) as pool:
        busy = pool.submit(gw.chat, "chat", headers={"X-Stub-Hold": "h"})
        wait_until(lambda: gw.gw.slots.slots["chat"].in_flight == 1, 20, "chat's request in flight")
        held = [pool.submit(gw.chat, "coder") for _ in range(2)]  # the trigger and one more meanwhile
        wait_until(lambda: coder.waiting == 2, 20, "two requests held for coder")
        time.sleep(0.5)
        assert not any(f.done() for f in held)  # held, not answered 429
        assert coder.held_for == "pod coder needs GPU 0, held by pod chat with 1 request(s) in flight"
        assert ws.ctx.runtime.workload("chat").running and gw.control.stops == []
        why = "pod coder needs GPU 0, held by pod chat with 1 request(s) in flight"
        [g] = wait_until(lambda: [g for g in read_gateways(gateway_dir()) if any(m.held_for for m in g.models)], 10, "held in the status file")
        assert [(m.pod, m.queue_depth, m.held_for) for m in g.models] == [("chat", 0, None), ("coder", 2, why)] and g.swap_wait_s == 60
        text = c3("gateway", "status")
        assert f"    held: 2 request(s) wait for a swap: {why}" in text.stdout and "swap wait 60s" in text.stdout, text
        _release(chat_port, "h")
        assert busy.result(30)[0] == 200  # the holder's request ends first
        answers = [f.result(60) for f in held]
    assert [(s, h["x-c3-pod"]) for s, h, _ in answers] == [(200, "coder"), (200, "coder")], answers
    assert gw.control.starts == ["chat", "coder"] and gw.control.stops == ["chat"]  # one swap for both
    assert coder.waiting == 0 and coder.held_for is None


def test_a_held_request_waits_out_the_minimum_residency(ws, gateway):
    _pair(ws)
    gw = gateway(min_residency_s=3, swap_wait_s=30)
    assert gw.chat("chat")[0] == 200
    since = gw.gw.slots.slots["chat"].running_since
    status, headers, _ = gw.chat("coder")
    assert status == 200 and headers["x-c3-pod"] == "coder"
    assert gw.gw.slots.slots["coder"].last_swap.at - time.time() + time.monotonic() >= since + 3 - 0.1  # not before residency ended
    assert gw.control.stops == ["chat"]


def test_past_the_swap_wait_a_held_request_is_503_with_retry_after(ws, gateway):
    chat_port, _ = _pair(ws)
    gw = gateway(min_residency_s=0, swap_wait_s=1)
    assert gw.chat("chat")[0] == 200
    with ThreadPoolExecutor(1) as pool:
        busy = pool.submit(gw.chat, "chat", headers={"X-Stub-Hold": "h"})
        wait_until(lambda: gw.gw.slots.slots["chat"].in_flight == 1, 20, "chat's request in flight")
        began = time.monotonic()
        status, headers, body = gw.chat("coder")
        waited = time.monotonic() - began
        _release(chat_port, "h")
        assert busy.result(30)[0] == 200
    assert status == 503 and int(headers["retry-after"]) >= 1, body
    assert 0.9 <= waited < 5, waited
    error = _error(body)
    assert error["type"] == "c3_swap_timeout"
    assert error["message"] == ("c3 gateway: held 1s (--swap-wait) for pod coder, and it still cannot start: "
                                "pod coder needs GPU 0, held by pod chat with 1 request(s) in flight")
    assert gw.control.stops == [] and gw.control.starts == ["chat"]
    assert gw.gw.slots.slots["coder"].waiting == 0


def test_past_the_queue_a_request_for_a_held_pod_is_503_with_retry_after(ws, gateway):
    chat_port, _ = _pair(ws)
    gw = gateway(min_residency_s=0, swap_wait_s=60, queue_limit=1)
    assert gw.chat("chat")[0] == 200
    with ThreadPoolExecutor(2) as pool:
        busy = pool.submit(gw.chat, "chat", headers={"X-Stub-Hold": "h"})
        wait_until(lambda: gw.gw.slots.slots["chat"].in_flight == 1, 20, "chat's request in flight")
        first = pool.submit(gw.chat, "coder")
        wait_until(lambda: gw.gw.slots.slots["coder"].waiting == 1, 20, "one request held for coder")
        status, headers, body = gw.chat("coder")
        assert status == 503 and headers["retry-after"] == "5", body
        assert _error(body) == {"message": "c3 gateway: pod coder waits for its GPUs and 1 request(s) are already held for it (--queue 1)",
                                "type": "c3_queue_full", "code": 503}
        _release(chat_port, "h")
        assert busy.result(30)[0] == 200 and first.result(60)[0] == 200
    assert gw.control.starts == ["chat", "coder"]


def test_a_client_that_leaves_while_held_frees_its_place_and_starts_nothing(ws, gateway):
    chat_port, _ = _pair(ws)
    gw = gateway(min_residency_s=0, swap_wait_s=60, queue_limit=1)
    assert gw.chat("chat")[0] == 200
    coder = gw.gw.slots.slots["coder"]
    with ThreadPoolExecutor(1) as pool:
        busy = pool.submit(gw.chat, "chat", headers={"X-Stub-Hold": "h"})
        wait_until(lambda: gw.gw.slots.slots["chat"].in_flight == 1, 20, "chat's request in flight")
        body = json.dumps({"model": "coder", "messages": [{"role": "user", "content": "hi"}]}).encode()
        sock = socket.create_connection(("127.0.0.1", gw.port), timeout=10)
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        wait_until(lambda: coder.waiting == 1, 20, "the request held for coder")
        sock.close()
        wait_until(lambda: coder.waiting == 0, 5, "the place of the client that left")
        _release(chat_port, "h")
        assert busy.result(30)[0] == 200
    time.sleep(0.5)  # nobody waits for coder any more: no swap happens
    assert gw.control.stops == [] and gw.control.starts == ["chat"] and ws.ctx.runtime.workload("chat").running
