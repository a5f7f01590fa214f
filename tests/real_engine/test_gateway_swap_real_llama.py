"""The gateway swapping two real llama-server pods that share GPU 0 (issue 28), on the real dockerd:
both pods on demand, booted and stopped by `pod up` / `pod down`'s own actions in the gateway's
threads. A request for the stopped pod stops the other and is answered by the new one; a request
arriving while the loaded pod answers a long one is held (not 429) and forwarded once that one ended
and the swap is done. The gateway runs in this process (tests/gateway/conftest.py's `Running`)."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.runtime.helpers import c3, free_port

pytestmark = [pytest.mark.real_engine, pytest.mark.docker, pytest.mark.nvml]


def _running(docker_client, name: str) -> bool:
    try:
        return docker_client.containers.get(f"c3-{name}").status == "running"
    except Exception:  # noqa: BLE001 - no such container: not running
        return False


@pytest.mark.timeout(900)
def test_the_gateway_swaps_two_real_llama_pods_on_one_gpu_and_holds_a_request_through_it(pod_rig, docker_client, tmp_path):
    from backend.actions.workspace import Workspace
    from backend.gateway.config import GatewayConfig
    from backend.views.estate_file import estate_path
    from backend.wiring import open_context
    from tests.gateway.conftest import Counting, Running

    for name in ("left", "right"):
        created = c3("pod", "create", name, "--gpus", "0", "--slug", "llamacpp/real-tiny", "--port", str(free_port()), "--on-demand", "--force")
        assert created.returncode == 0, created.stdout + created.stderr
        pod_rig.append(name)
    ws = Workspace(estate_path(None), open_context())
    config = GatewayConfig(host="127.0.0.1", port=0, min_residency_s=0, swap_wait_s=300, boot_timeout_s=300, state_dir=tmp_path / "gateway")
    gw = Running(config, Counting(ws))
    try:
        began = time.monotonic()
        status, headers, body = gw.chat("left", max_tokens=3)
        cold_s = time.monotonic() - began
        assert status == 200 and headers["x-c3-pod"] == "left", body
        assert json.loads(body)["usage"]["completion_tokens"] == 3
        began = time.monotonic()
        status, headers, body = gw.chat("right", max_tokens=3)
        swap_s = time.monotonic() - began
        assert status == 200 and headers["x-c3-pod"] == "right", body
        assert gw.control.starts == ["left", "right"] and gw.control.stops == ["left"]
        assert _running(docker_client, "right") and not _running(docker_client, "left")
        swap = gw.gw.slots.slots["right"].last_swap
        assert swap is not None and swap.ok and swap.stopped == ["left"] and swap.gpus == [0]
        # A long answer from right in flight: a request for left is held, not refused, and served by left after it.
        left = gw.gw.slots.slots["left"]
        held_seen = False
        ended: dict[str, float] = {}
        with ThreadPoolExecutor(2) as pool:
            # ignore_eos (llama-server's own field): the tiny model's random weights would otherwise stop at any length.
            long = pool.submit(gw.chat, "right", max_tokens=2000, ignore_eos=True, timeout=300)
            long.add_done_callback(lambda _: ended.setdefault("long", time.monotonic()))
            while gw.gw.slots.slots["right"].in_flight == 0 and not long.done():
                time.sleep(0.01)
            waited = pool.submit(gw.chat, "left", max_tokens=3, timeout=300)
            waited.add_done_callback(lambda _: ended.setdefault("left", time.monotonic()))
            while not waited.done():
                held_seen = held_seen or (left.held_for is not None and not long.done())
                time.sleep(0.01)
            long_status, _, long_body = long.result(300)
            status, headers, body = waited.result(300)
        assert long_status == 200 and status == 200 and headers["x-c3-pod"] == "left", body
        assert held_seen and ended["left"] >= ended["long"]  # held (not 429) until right's answer ended, then swapped
        assert gw.control.stops == ["left", "right"] and gw.control.starts == ["left", "right", "left"]
        assert _running(docker_client, "left") and not _running(docker_client, "right")
        tokens = json.loads(long_body)["usage"]["completion_tokens"]
        assert tokens == 2000
        back = gw.gw.slots.slots["left"].last_swap
        assert back is not None and back.ok and back.took_s is not None
        print(f"\nreal llama-server swap: cold start {cold_s:.1f}s; swap right in (stop left + boot right) {swap_s:.1f}s "
              f"(took_s {swap.took_s:.1f}); request for left held through right's {tokens}-token answer, "
              f"swap back {back.took_s:.1f}s, answered {ended['left'] - ended['long']:.1f}s after that answer ended")
    finally:
        gw.close()
