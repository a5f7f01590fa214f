"""The stub engine inside the locally built test image, on the real dockerd, seen through the fake NVML."""

from __future__ import annotations

from pathlib import Path

import httpx
import pynvml
import pytest

from backend.stub_registry import read_registrations
from scripts.rig.fake_nvml import FakeGpu
from tests.rig.test_stub_http import poll

pytestmark = [pytest.mark.docker, pytest.mark.nvml]


def test_image_carries_the_current_stub(docker_client, stub_image):
    from scripts.rig.image import HASH_LABEL, stub_digest

    assert docker_client.images.get(stub_image).labels[HASH_LABEL] == stub_digest()


def test_vllm_argv_serves_and_stops_cleanly(stub_container):
    stub = stub_container("vllm", "serve", "org/model", "--served-model-name", "m", "--port", "8000",
                          "--enforce-eager", env={"C3_STUB_NAME": "ctr"})
    with httpx.Client(base_url=stub.url, timeout=10) as client:
        assert client.get("/v1/models").json()["data"][0]["id"] == "m"
        reply = client.post("/v1/chat/completions", json={"model": "m", "messages": []})
        assert reply.headers["x-stub-backend"] == "ctr"
    assert "Maximum concurrency for 4,096 tokens per request" in stub.logs()
    stub.container.stop(timeout=10)
    stub.container.reload()
    assert stub.container.attrs["State"]["ExitCode"] == 0


def test_crash_during_boot_exits_nonzero(stub_container):
    stub = stub_container("m", env={"C3_STUB_CRASH_DURING_BOOT": "1"}, wait=False)
    assert stub.container.wait(timeout=60)["StatusCode"] == 1
    assert "EngineCore failed to start" in stub.logs()


def test_container_registration_resolves_to_the_host_pid(fake_nvml, stub_container):
    uuids = fake_nvml.set_gpus([FakeGpu(), FakeGpu(name="NVIDIA GeForce RTX 5090", total_mib=32607, sm="12.0")])
    stub = stub_container("m", "--gpu-memory-utilization", "0.9", registry=fake_nvml.registry,
                          env={"NVIDIA_VISIBLE_DEVICES": uuids[1]})
    reg = poll(lambda: read_registrations(fake_nvml.registry))[0]
    assert reg.container == stub.id and reg.pid == 1
    host_pid = stub.host_pid()
    assert reg.host_pid() == host_pid
    assert stub.id in Path(f"/proc/{host_pid}/cgroup").read_text()  # what placement follows back
    pynvml.nvmlInit()
    try:
        h0, h1 = (pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(2))
        procs = pynvml.nvmlDeviceGetComputeRunningProcesses(h1)
        assert [(p.pid, p.usedGpuMemory >> 20) for p in procs] == [(host_pid, 29347)]  # ceil(32607 × 0.9)
        assert pynvml.nvmlDeviceGetComputeRunningProcesses(h0) == []
        stub.container.kill()  # SIGKILL: the file stays, but the process is gone
        stub.container.wait(timeout=60)
        assert pynvml.nvmlDeviceGetComputeRunningProcesses(h1) == []
    finally:
        pynvml.nvmlShutdown()


def test_ship_image_pipes_save_into_load(docker_client, stub_image):
    import os

    from scripts.rig.image import ship_image

    host = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    ship_image(stub_image, to_host=host, from_host=host)
    assert docker_client.images.get(stub_image)


def test_docker_stop_during_boot_is_a_clean_exit(stub_container):
    stub = stub_container("m", env={"C3_STUB_STARTUP_DELAY": "120"}, wait=False)
    poll(lambda: "Automatically detected platform" in stub.logs())
    stub.container.stop(timeout=20)  # SIGTERM to pid 1; a SIGKILL after the timeout would give 137
    assert stub.container.wait(timeout=60)["StatusCode"] == 0
