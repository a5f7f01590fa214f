"""Fixtures shared by the real-engine tests that run c3 pods on the real dockerd: the engines' images
(built locally, once) and `pod_rig` (fake NVML with two GPUs, a catalog of real-engine slugs, and every
pod container a test started removed at teardown)."""

from __future__ import annotations

import pytest

from scripts.rig.fake_nvml import FakeGpu
from tests.runtime.helpers import write_catalog

OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1",
               "VLLM_CPU_KVCACHE_SPACE": "1", "OMP_NUM_THREADS": "1"}
"""A vLLM pod's environment: offline, 1 GiB of CPU KV cache, one OpenMP thread (the machine has 2 cores)."""


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


class PodRig:
    """The pods a test created (`append` the name: its container is removed at teardown) and the
    catalog it boots them from (`add_entry`: one more slug beside the two standard ones)."""

    def __init__(self, entries: list[dict]) -> None:
        self.names: list[str] = []
        self.entries = entries
        write_catalog(entries)

    def append(self, name: str) -> None:
        self.names.append(name)

    def add_entry(self, entry: dict) -> None:
        self.entries.append(entry)
        write_catalog(self.entries)


@pytest.fixture
def pod_rig(real_images, docker_client, fake_nvml, monkeypatch, tmp_path, request):
    """Two fake GPUs handed over in `env` mode, and the slugs `llamacpp/real-tiny` and `vllm/real-tiny`
    (only the engine the test's name mentions gets its real image built)."""
    fake_nvml.set_gpus([FakeGpu(), FakeGpu()])
    monkeypatch.setenv("C3_GPU_MODE", "env")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("C3_RUNTIME", raising=False)
    rig = PodRig([
        {"slug": "llamacpp/real-tiny", "engine": "llamacpp", "image": real_images("llamacpp") if "llama" in request.node.name else "unused", "model": "/models/tiny.gguf",
         "tp": 1, "max_model_len": 4096, "max_num_seqs": 2, "health_path": "/health",
         # -lv 4: the verbosity at which llama-server logs its buffers (how c3 learns the KV cache is on the CPU)
         "extra_args": ["-lv", "4", "-t", "1"]},
        {"slug": "vllm/real-tiny", "engine": "vllm", "image": real_images("vllm") if "vllm" in request.node.name else "unused", "model": "/models/dense", "tp": 1,
         "max_model_len": 2048, "max_num_seqs": 4, "max_num_batched_tokens": 2048, "env": OFFLINE_ENV,
         "extra_args": ["--enforce-eager"]},
    ])
    yield rig
    for name in rig.names:
        try:
            docker_client.containers.get(f"c3-{name}").remove(force=True)
        except Exception:  # noqa: BLE001 - already gone
            pass
