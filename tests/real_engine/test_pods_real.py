"""`c3 pod up/status/logs/down` of pods whose images hold the real engines, on the real dockerd.

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
from scripts.rig.fake_nvml import FakeGpu
from tests.runtime.helpers import c3, c3_json, free_port, write_catalog

pytestmark = [pytest.mark.real_engine, pytest.mark.docker, pytest.mark.nvml]


@pytest.fixture(scope="session")
def real_images(real_engines, docker_client):
    """engine → its image tag, built (once) on first use."""
    from scripts.rig.real_images import ensure_llama_image, ensure_vllm_image

    built: dict[str, str] = {}
    makers = {"llamacpp": ensure_llama_image, "vllm": ensure_vllm_image}

    def image(engine: str) -> str:
        if engine not in built:
            built[engine] = makers[engine](docker_client)
        return built[engine]

    return image


@pytest.fixture
def pod_rig(real_images, docker_client, fake_nvml, monkeypatch, tmp_path, request):
    fake_nvml.set_gpus([FakeGpu(), FakeGpu()])
    monkeypatch.setenv("C3_GPU_MODE", "env")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("C3_RUNTIME", raising=False)
    offline = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1",
               "VLLM_CPU_KVCACHE_SPACE": "1", "OMP_NUM_THREADS": "1"}
    write_catalog([
        {"slug": "llamacpp/real-tiny", "engine": "llamacpp", "image": real_images("llamacpp") if "llama" in request.node.name else "unused", "model": "/models/tiny.gguf",
         "tp": 1, "max_model_len": 4096, "max_num_seqs": 2, "health_path": "/health",
         # -lv 4: the verbosity at which llama-server logs its buffers (how c3 learns the KV cache is on the CPU)
         "extra_args": ["-lv", "4", "-t", "1"]},
        {"slug": "vllm/real-tiny", "engine": "vllm", "image": real_images("vllm") if "vllm" in request.node.name else "unused", "model": "/models/dense", "tp": 1,
         "max_model_len": 2048, "max_num_seqs": 4, "max_num_batched_tokens": 2048, "env": offline,
         "extra_args": ["--enforce-eager"]},
    ])
    names: list[str] = []
    yield names
    for name in names:
        try:
            docker_client.containers.get(f"c3-{name}").remove(force=True)
        except Exception:  # noqa: BLE001 - already gone
            pass


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
    logs = c3("pod", "logs", name, "--tail", "400")
    assert logs.returncode == 0 and log_line in logs.stdout
    down = c3("pod", "down", name)
    assert down.returncode == 0 and "stopped" in down.stdout
    assert c3_json("pod", "status")["pods"][0]["placement"]["verdict"] == "unknown"
