"""`c3 pod up/status/try/logs/down` of pods whose images hold the real engines, on the real dockerd.

Images are built locally from what the rig built (scripts/rig/real_images.py: the rig's Debian base +
llama-server or the vLLM CPU venv + the tiny models; no pulls). GPUs come from the fake NVML, handed over
in `env` mode; the engines run on the CPU, so no GPU process ever appears, and c3 must say so: placement
`unknown` because the engine's own boot log puts its KV cache on the CPU — not `ok`, not a mismatch.
"""

from __future__ import annotations

import re

import httpx
import pytest

from backend.runtime.placement import CPU_ENGINE
from tests.runtime.helpers import c3, c3_json, free_port

pytestmark = [pytest.mark.real_engine, pytest.mark.docker, pytest.mark.nvml]


@pytest.mark.timeout(1500)  # the first use builds the vLLM image (~2.5 GB context)
@pytest.mark.parametrize("name, slug, served, log_line", [
    ("llama", "llamacpp/real-tiny", "/models/tiny.gguf", "CPU KV buffer size"),
    ("vllm", "vllm/real-tiny", "/models/dense", "CPU KV cache size"),
])
def test_pod_lifecycle_with_a_real_engine(pod_rig, name, slug, served, log_line):
    port = free_port()
    created = c3("pod", "create", name, "--gpus", "0", "--slug", slug, "--port", str(port), "--force")
    assert created.returncode == 0, created.stdout + created.stderr
    pod_rig.append(name)
    up = c3("pod", "up", name, "--force", timeout=600)
    assert up.returncode == 0, up.stdout + up.stderr
    assert f"serving on http://127.0.0.1:{port}" in up.stdout
    assert re.search(rf"^\[{name}\] (starting|loading|ready) … \d+ s$", up.stdout, re.M), up.stdout  # boot progress
    assert f"placement unknown: {CPU_ENGINE}" in up.stdout
    (row,) = c3_json("pod", "status")["pods"]
    assert row["running"] and row["serving"]
    assert row["placement"]["verdict"] == "unknown" and row["placement"]["reason"] == CPU_ENGINE
    reply = httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", timeout=120,
                       json={"model": served, "max_tokens": 3, "messages": [{"role": "user", "content": "hi"}]})
    assert reply.status_code == 200 and reply.json()["usage"]["completion_tokens"] == 3
    tried = c3_json("pod", "try", name, "Say hello.", "--max-tokens", "4", "--timeout", "120")  # `c3 pod try`: a real streamed answer
    assert tried["model"] == served and tried["api"] == "chat" and tried["answer"] and 1 <= tried["tokens"] <= 4
    assert tried["ttft_ms"] > 0 and tried["tokens_per_s"] > 0 and tried["finish_reason"] in ("length", "stop")
    logs = c3("pod", "logs", name, "--tail", "400")
    assert logs.returncode == 0 and log_line in logs.stdout
    down = c3("pod", "down", name)
    assert down.returncode == 0 and "stopped" in down.stdout
    assert c3_json("pod", "status")["pods"][0]["placement"]["verdict"] == "unknown"
