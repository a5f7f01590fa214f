"""A request for a stopped pod starts it through `pod up`'s action, held in a bounded queue; idle stops."""

from __future__ import annotations

import json
import os
import time
from concurrent.futures import ThreadPoolExecutor

from backend.actions.base import ignore_progress
from backend.actions.boot_pods import BootPods
from backend.actions.serve_gateway import EstateControl
from backend.gateway.status import read_gateways
from tests.support import wait_until

from .conftest import crashing_slug, create


def test_five_concurrent_requests_start_a_stopped_pod_once(ws, gateway, tmp_path):
    create(ws, "chat", 0)
    gw = gateway()
    assert not ws.ctx.runtime.workload("chat").running
    with ThreadPoolExecutor(5) as pool:
        answers = list(pool.map(lambda _: gw.chat("chat"), range(5)))
    assert [a[0] for a in answers] == [200] * 5, answers
    assert gw.control.starts == ["chat"]  # one start for all five
    assert ws.ctx.runtime.workload("chat").running
    slot = gw.gw.slots.slots["chat"]
    assert slot.started_by_gateway and slot.starts == 1 and slot.last_start_s is not None and slot.waiting == 0
    # The status file `c3 gateway status` reads.
    [status] = wait_until(lambda: [s for s in read_gateways(tmp_path / "gateway") if s.models and s.models[0].state == "running" and s.models[0].queue_depth == 0], 10, "status")
    [row] = status.models
    assert status.pid == os.getpid() and row.pod == "chat" and row.started_by_gateway and row.starts == 1 and row.last_start_s is not None
    assert row.queue_depth == 0 and row.last_start_at is not None and "Qwen/Qwen3-8B" in row.models


def test_queue_overflow_is_429_with_retry_after(ws, gateway):
    create(ws, "chat", 0)
    gw = gateway(queue_limit=2)
    gw.control.hold.clear()  # the start waits: the two held requests stay in the queue
    with ThreadPoolExecutor(2) as pool:
        held = [pool.submit(gw.chat, "chat") for _ in range(2)]
        wait_until(lambda: gw.gw.slots.slots["chat"].waiting == 2, 20, "two held requests")
        status, headers, body = gw.chat("chat")
        assert status == 429 and headers["retry-after"] == "5" and json.loads(body)["error"]["type"] == "rate_limit_error"
        gw.control.hold.set()
        assert [f.result(60)[0] for f in held] == [200, 200]
    assert gw.control.starts == ["chat"]


def test_a_pod_that_fails_to_boot_is_503_with_its_last_log_lines(ws, gateway, monkeypatch):
    slug = crashing_slug(_home())
    ws._catalog = None  # noqa: SLF001 - the catalog was loaded before the test's entry was written
    ws.ctx.catalog = None
    create(ws, "crashy", 0, slug=slug)
    gw = gateway()
    status, headers, body = gw.chat("crashy")
    error = json.loads(body)["error"]
    assert status == 503 and headers["retry-after"] == "10" and error["type"] == "c3_not_ready"
    assert error["message"].startswith("c3 gateway: pod crashy did not become ready: the engine stopped during boot"), error
    assert "CUDA out of memory" in error["message"]  # the engine's own last lines
    # Within the hold after a failure the same answer comes without another boot.
    again = gw.chat("crashy")
    assert again[0] == 503 and gw.control.starts == ["crashy"]
    assert gw.gw.slots.slots["crashy"].state == "failed"


def test_log_lines_a_client_sees_never_hold_a_secret(ws):
    control = EstateControl(ws, ("s3cret-gateway-key",))
    line = control.redact("boot with s3cret-gateway-key and hf_abcdefghijklmnop, Authorization: Bearer abcdefghijkl")
    assert "s3cret" not in line and "hf_abc" not in line and "abcdefghijkl" not in line and line.count("***") == 3


def test_idle_ttl_stops_only_the_pods_the_gateway_started(ws, gateway):
    create(ws, "mine", 0)
    create(ws, "theirs", 1)
    assert BootPods(ws, ("theirs",)).run(ignore_progress).ok
    gw = gateway(idle_ttl_s=1.0)
    assert gw.chat("mine")[0] == 200 and gw.chat("theirs")[0] == 200
    assert gw.control.starts == ["mine"]
    wait_until(lambda: not ws.ctx.runtime.workload("mine").running, 20, "the idle stop of mine")
    assert gw.control.stops == ["mine"]
    time.sleep(1.5)  # past the TTL again: theirs is never stopped
    assert ws.ctx.runtime.workload("theirs").running and gw.control.stops == ["mine"]
    slot = gw.gw.slots.slots["mine"]
    assert slot.state == "stopped" and not slot.started_by_gateway
    # A request after the stop starts it again.
    assert gw.chat("mine")[0] == 200 and gw.control.starts == ["mine", "mine"]


def _home():
    from pathlib import Path

    return Path(os.environ["C3_HOME"])


def test_a_pod_stopped_behind_the_gateways_back_is_booted_again_not_502(ws, gateway):
    """`c3 pod down` from a shell (or a crash) right after the gateway saw the pod running: the connection is
    refused before a byte is sent, so the gateway asks the runtime again, boots the pod and sends once more."""
    create(ws, "chat", 0)
    gw = gateway()
    assert gw.chat("chat")[0] == 200  # the gateway started it and saw it running
    ws.ctx.runtime.stop("chat", timeout=5.0)  # within the second the gateway trusts that answer
    status, _, body = gw.chat("chat")
    assert status == 200, body
    assert gw.control.starts == ["chat", "chat"]
    assert ws.ctx.runtime.workload("chat").running
