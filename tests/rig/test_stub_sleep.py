"""The stub engine's vLLM sleep routes (`VLLM_SERVER_DEV_MODE=1`), driven by c3's own sleep client.

What the real vLLM CPU build does (MULTINODE-ENGINE-NOTES "Sleep and swapping"): the routes exist only in
dev mode; `/is_sleeping` says the state; a request sent while asleep waits and is answered after
`/wake_up`; `/metrics` has `vllm:engine_sleep_state`.
"""

from __future__ import annotations

import concurrent.futures
import time

import httpx
import pytest

from backend.gateway import sleepctl

CHAT = {"model": "stub", "messages": [{"role": "user", "content": "hello"}]}


def sleep_state(url: str) -> dict[str, float]:
    text = httpx.get(url + "/metrics", timeout=10).text
    return {line.split('sleep_state="')[1].split('"')[0]: float(line.rsplit(" ", 1)[1])
            for line in text.splitlines() if line.startswith("vllm:engine_sleep_state{")}


def test_sleep_routes_exist_only_in_dev_mode(stub_process):
    stub = stub_process("--served-model-name", "stub", "--enable-sleep-mode")
    assert httpx.post(stub.url + "/sleep?level=1", timeout=10).status_code == 404
    with pytest.raises(sleepctl.SleepError, match="no sleep routes") as caught:
        sleepctl.sleep("127.0.0.1", stub.port)
    assert "VLLM_SERVER_DEV_MODE=1" in (caught.value.hint or "")


def test_sleep_holds_requests_until_wake(stub_process):
    stub = stub_process("--served-model-name", "stub", "--enable-sleep-mode", env={"VLLM_SERVER_DEV_MODE": "1"})
    assert sleepctl.is_sleeping("127.0.0.1", stub.port) is False
    assert sleep_state(stub.url) == {"awake": 1.0, "weights_offloaded": 0.0, "discard_all": 0.0}
    sleepctl.sleep("127.0.0.1", stub.port, level=1)
    assert sleepctl.is_sleeping("127.0.0.1", stub.port) is True
    assert sleep_state(stub.url) == {"awake": 0.0, "weights_offloaded": 1.0, "discard_all": 0.0}
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pending = pool.submit(httpx.post, stub.url + "/v1/chat/completions", json=CHAT, timeout=30)
        time.sleep(0.5)
        assert not pending.done(), "a request sent while asleep is held, not answered"
        sleepctl.wake("127.0.0.1", stub.port)
        answer = pending.result(10)
    assert answer.status_code == 200 and answer.json()["choices"][0]["message"]["content"]
    assert sleepctl.is_sleeping("127.0.0.1", stub.port) is False
    assert sleep_state(stub.url)["awake"] == 1.0
