"""c3's sleep client against the real vLLM CPU build (issue 28, sleep instead of stop): the control path only.

vLLM's CPU build refuses `--enable-sleep-mode` ("Sleep mode is not supported on current platform"), so the engine
runs without it; with `VLLM_SERVER_DEV_MODE=1` its `/sleep`, `/wake_up` and `/is_sleeping` routes still work as a
state machine, and a request sent while asleep waits until it is woken. The CPU worker frees nothing on sleep:
this test claims no memory release (that can only be shown on a GPU).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from backend.gateway import sleepctl
from scripts.rig.engine_procs import start_vllm

pytestmark = pytest.mark.real_engine


def sleep_state(url: str) -> dict[str, float]:
    text = httpx.get(url + "/metrics", timeout=30).text
    return {line.split('sleep_state="')[1].split('"')[0]: float(line.rsplit(" ", 1)[1])
            for line in text.splitlines() if line.startswith("vllm:engine_sleep_state{")}


def test_c3_puts_a_real_vllm_to_sleep_and_a_request_sent_meanwhile_is_answered_after_it_wakes(real_engines, tmp_path_factory):
    # A short scratch path: vLLM's ZMQ ipc sockets live under its TMPDIR, and a Unix socket path is at most 107 bytes
    # (this test's own tmp_path under an xdist worker was longer: the cold CI's engine exited at the bind).
    proc = start_vllm(real_engines.model("dense"), tmp_path_factory.mktemp("sleep"), in_process=True, env={"VLLM_SERVER_DEV_MODE": "1"})
    try:
        proc.wait_healthy(300)
        assert sleepctl.is_sleeping("127.0.0.1", proc.port) is False
        sleepctl.sleep("127.0.0.1", proc.port, level=1)
        assert sleepctl.is_sleeping("127.0.0.1", proc.port) is True
        assert sleep_state(proc.url)["weights_offloaded"] == 1.0 and sleep_state(proc.url)["awake"] == 0.0
        body = {"model": "tiny", "prompt": "hello", "max_tokens": 4}
        with ThreadPoolExecutor(1) as pool:
            pending = pool.submit(httpx.post, proc.url + "/v1/completions", json=body, timeout=120)
            time.sleep(3)
            assert not pending.done(), "a request sent while the engine sleeps is held by it, not answered"
            began = time.monotonic()
            sleepctl.wake("127.0.0.1", proc.port)
            answer = pending.result(120)
            after_wake_s = time.monotonic() - began
        assert answer.status_code == 200, answer.text
        assert answer.json()["choices"][0]["text"] is not None and answer.json()["usage"]["completion_tokens"] >= 1
        assert sleepctl.is_sleeping("127.0.0.1", proc.port) is False
        assert sleep_state(proc.url)["awake"] == 1.0
        print(f"held request answered {after_wake_s:.2f}s after c3's wake_up")
    finally:
        proc.stop()
