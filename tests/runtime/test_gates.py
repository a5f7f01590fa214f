"""Gates before up: VRAM (with retry), port, GPUs held; --force turns refusals into warnings."""

from __future__ import annotations

import socket

import pytest

from backend.errors import Refused
from backend.models import CatalogEntry, ComputeProcess, Gpu
from backend.runtime.gates import enforce, gpus_gate, port_gate, port_in_use, vram_gate
from backend.runtime.models import Workload

GPUS = [Gpu(index=i, uuid=f"GPU-{i}", name="NVIDIA GeForce RTX 3090", total_mib=24576) for i in range(3)]
ENTRY = CatalogEntry(slug="vllm/qwen3-8b", engine="vllm", image="x", model="Qwen/Qwen3-8B", gpu_memory_utilization=0.9)


def reserve(entry, gpu):
    return 22118


def test_vram_gate_refuses_naming_gpu_and_shortfall():
    sleeps = []
    result = vram_gate(slug=ENTRY.slug, gpus=GPUS[:2], entry=ENTRY, read_free=lambda: {"GPU-0": 24000, "GPU-1": 3000}, reservation=reserve, attempts=3, sleep=sleeps.append)
    assert not result.ok
    assert "GPU 1 (NVIDIA GeForce RTX 3090) has 2.9 GiB free but vllm/qwen3-8b reserves 21.6 GiB there" in result.message
    assert "short by 18.7 GiB, 19118 MiB" in result.message
    assert "GPU 0" not in result.message
    assert len(sleeps) == 2  # retried: memory lags a container that just stopped


def test_vram_gate_passes_once_memory_is_released():
    reads = iter([{"GPU-0": 1000}, {"GPU-0": 23000}])
    result = vram_gate(slug="s", gpus=GPUS[:1], entry=ENTRY, read_free=lambda: next(reads), reservation=reserve, attempts=5, sleep=lambda s: None)
    assert result.ok


def test_vram_gate_skips_what_it_cannot_judge():
    result = vram_gate(slug="s", gpus=GPUS[:1], entry=ENTRY, read_free=lambda: {"GPU-0": None}, reservation=lambda e, g: None, attempts=1)
    assert result.ok


def test_port_gate_sees_a_real_listener_and_a_running_pod():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        assert port_in_use(port, "127.0.0.1")
        result = port_gate(port=port, workloads=[], in_use=lambda p: port_in_use(p, "127.0.0.1"))
        assert not result.ok and f"port {port} is already in use" in result.message
    assert not port_in_use(port, "127.0.0.1")
    held = port_gate(port=8080, workloads=[Workload(pod="coder", status="running", host_port=8080)], in_use=lambda p: False)
    assert not held.ok and "held by running pod coder" in held.message
    assert port_gate(port=8080, workloads=[Workload(pod="coder", status="exited", host_port=8080)], in_use=lambda p: False).ok


def test_gpus_gate_names_other_pod_and_stranger():
    workloads = [Workload(pod="coder", status="running", gpu_uuids=("GPU-1",)), Workload(pod="old", status="exited", gpu_uuids=("GPU-0",))]
    procs = [ComputeProcess(pid=4242, gpu_uuid="GPU-0", used_mib=812), ComputeProcess(pid=1, gpu_uuid="GPU-2")]
    result = gpus_gate(pod="chat", gpus=GPUS[:2], workloads=workloads, processes=procs, owners={})
    assert not result.ok
    assert "GPU 1 claimed by running pod coder" in result.message
    assert "GPU 0 held by pid 4242 (a process c3 did not start, 812 MiB)" in result.message
    assert "GPU 2" not in result.message
    assert gpus_gate(pod="chat", gpus=GPUS[2:], workloads=workloads, processes=[], owners={}).ok


def test_enforce_refuses_in_one_line_or_warns_with_force():
    bad = [port_gate(port=1, workloads=[Workload(pod="a", status="running", host_port=1)], in_use=lambda p: False)]
    with pytest.raises(Refused) as error:
        enforce("chat", bad, force=False)
    assert error.value.message.startswith("pod chat cannot start: port 1 is held by running pod a")
    assert "\n" not in error.value.message
    warnings = enforce("chat", bad, force=True)
    assert len(warnings) == 1 and warnings[0].forced
    assert enforce("chat", [port_gate(port=1, workloads=[], in_use=lambda p: False)], force=False) == []
