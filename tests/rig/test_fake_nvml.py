"""The fake libnvidia-ml.so.1 through the REAL pynvml binding (in-process and in a subprocess)."""

from __future__ import annotations

import json
import subprocess
import sys

import pynvml
import pytest

from scripts.rig.fake_nvml import FakeGpu
from tests.rig.test_stub_http import poll

pytestmark = pytest.mark.nvml

RTX3090 = FakeGpu(name="NVIDIA GeForce RTX 3090", total_mib=24576, sm="8.6", reserved_mib=300, used_mib=200)
RTX5090 = FakeGpu(name="NVIDIA GeForce RTX 5090", total_mib=32607, sm="12.0", limit_w=575, flags=("noecc",))


@pytest.fixture
def nvml(fake_nvml):
    pynvml.nvmlInit()
    yield fake_nvml
    pynvml.nvmlShutdown()


def handles() -> list:
    return [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]


def test_identity_and_capabilities(nvml):
    uuids = nvml.set_gpus([RTX3090, RTX5090])
    h0, h1 = handles()
    assert [pynvml.nvmlDeviceGetName(h) for h in (h0, h1)] == [RTX3090.name, RTX5090.name]
    assert [pynvml.nvmlDeviceGetUUID(h) for h in (h0, h1)] == uuids
    assert pynvml.nvmlDeviceGetCudaComputeCapability(h1) == (12, 0)
    assert pynvml.nvmlDeviceGetIndex(pynvml.nvmlDeviceGetHandleByUUID(uuids[1])) == 1
    assert pynvml.nvmlSystemGetDriverVersion() == "580.95.05"
    assert pynvml.nvmlDeviceGetEnforcedPowerLimit(h1) == 575_000
    assert pynvml.nvmlDeviceGetTemperatureV(h0, pynvml.NVML_TEMPERATURE_GPU) == 40
    assert pynvml.nvmlDeviceGetEccMode(h0) == [0, 0]
    with pytest.raises(pynvml.NVMLError_NotSupported):
        pynvml.nvmlDeviceGetEccMode(h1)
    with pytest.raises(pynvml.NVMLError_NotFound):
        pynvml.nvmlDeviceGetHandleByUUID("GPU-nope")


def test_memory_v1_counts_reserved_as_used_v2_separately(nvml):
    nvml.set_gpus([RTX3090])
    (h,) = handles()
    v1 = pynvml.nvmlDeviceGetMemoryInfo(h)
    assert (v1.total >> 20, v1.used >> 20, v1.free >> 20) == (24576, 500, 24076)
    v2 = pynvml.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2)
    assert (v2.reserved >> 20, v2.used >> 20, v2.free >> 20) == (300, 200, 24076)


def test_state_changes_are_seen_live(nvml):
    nvml.set_gpus([RTX3090, RTX5090])
    h0 = handles()[0]
    assert pynvml.nvmlDeviceGetUtilizationRates(h0).gpu == 0
    nvml.update_gpu(0, util=77, temp=81, power_w=301.5)
    assert pynvml.nvmlDeviceGetUtilizationRates(h0).gpu == 77
    assert pynvml.nvmlDeviceGetTemperature(h0, pynvml.NVML_TEMPERATURE_GPU) == 81
    assert pynvml.nvmlDeviceGetPowerUsage(h0) == 301_500
    nvml.set_gpus([RTX3090])
    assert pynvml.nvmlDeviceGetCount() == 1


def test_strangers_use_the_two_call_protocol(nvml):
    uuids = nvml.set_gpus([RTX3090, RTX5090])
    for pid in (4001, 4002, 4003):
        nvml.add_process(uuids[1], pid, used_mib=1000)
    nvml.add_process(0, 4100, used_mib=64)
    h0, h1 = handles()
    procs = pynvml.nvmlDeviceGetComputeRunningProcesses(h1)
    assert sorted((p.pid, p.usedGpuMemory >> 20) for p in procs) == [(4001, 1000), (4002, 1000), (4003, 1000)]
    assert [p.pid for p in pynvml.nvmlDeviceGetComputeRunningProcesses_v2(h0)] == [4100]
    assert pynvml.nvmlDeviceGetGraphicsRunningProcesses(h1) == []
    assert pynvml.nvmlDeviceGetMemoryInfo(h1).used >> 20 == 3000
    nvml.add_process(0, 4_190_001, name="trainer")  # no such pid here: the name comes from the state file
    assert pynvml.nvmlSystemGetProcessName(4_190_001) == "trainer"


def test_consumer_and_spark_error_paths(nvml):
    nvml.set_gpus([FakeGpu(name="NVIDIA GB10", sm="12.1", total_mib=122880, flags=("nomem", "nopower")),
                   FakeGpu(flags=("lost",))])
    spark, lost = handles()
    with pytest.raises(pynvml.NVMLError_NotSupported):
        pynvml.nvmlDeviceGetMemoryInfo(spark)
    with pytest.raises(pynvml.NVMLError_NotSupported):
        pynvml.nvmlDeviceGetPowerUsage(spark)
    assert pynvml.nvmlDeviceGetName(spark) == "NVIDIA GB10"
    with pytest.raises(pynvml.NVMLError_GpuIsLost):
        pynvml.nvmlDeviceGetUtilizationRates(lost)


def test_init_fails_like_a_missing_driver(fake_nvml, monkeypatch):
    fake_nvml.update(init_error=pynvml.NVML_ERROR_DRIVER_NOT_LOADED)
    with pytest.raises(pynvml.NVMLError_DriverNotLoaded):
        pynvml.nvmlInit()
    fake_nvml.update(init_error=0)
    monkeypatch.setenv("C3_FAKE_NVML_STATE", str(fake_nvml.state_path) + ".missing")
    with pytest.raises(pynvml.NVMLError_DriverNotLoaded):
        pynvml.nvmlInit()


def test_subprocess_loads_it_from_ld_library_path(fake_nvml):
    uuids = fake_nvml.set_gpus([RTX3090, RTX5090])
    code = ("import json, pynvml as n; n.nvmlInit(); "
            "print(json.dumps([n.nvmlDeviceGetUUID(n.nvmlDeviceGetHandleByIndex(i)) "
            "for i in range(n.nvmlDeviceGetCount())]))")
    out = subprocess.run([sys.executable, "-c", code], env=fake_nvml.env(), capture_output=True, text=True,
                         timeout=60, check=True)
    assert json.loads(out.stdout) == uuids


def test_stub_engine_registration_shows_up_as_a_compute_process(nvml, stub_process):
    uuids = nvml.set_gpus([RTX3090, RTX5090])
    stub = stub_process("--gpu-memory-utilization", "0.5",
                        env={**nvml.env(), "NVIDIA_VISIBLE_DEVICES": uuids[1]})
    h0, h1 = handles()

    def procs(handle):
        return [(p.pid, p.usedGpuMemory >> 20) for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle)]

    assert poll(lambda: procs(h1)) == [(stub.pid, 16304)]  # ceil(32607 × 0.5)
    assert procs(h0) == []
    assert pynvml.nvmlDeviceGetMemoryInfo(h1).used >> 20 == 16304
    stub.stop(9)  # killed without cleanup: the stale file must not count
    assert procs(h1) == [] and pynvml.nvmlDeviceGetMemoryInfo(h1).used == 0


def test_ignored_mask_lands_on_every_gpu(nvml, stub_process):
    nvml.set_gpus([RTX3090, RTX5090])
    stub = stub_process(env={**nvml.env(), "NVIDIA_VISIBLE_DEVICES": "0", "C3_STUB_GPUS": "all",
                             "C3_STUB_MEM_MIB": "2048"})
    for handle in handles():
        assert poll(lambda handle=handle: pynvml.nvmlDeviceGetComputeRunningProcesses(handle))[0].pid == stub.pid


def test_a_rewritten_registration_is_seen_again_after_its_process_died(nvml, stub_process):
    import os

    nvml.set_gpus([RTX3090])
    stub = stub_process(env={**nvml.env(), "C3_STUB_MEM_MIB": "100"})
    (h,) = handles()
    assert poll(lambda: pynvml.nvmlDeviceGetComputeRunningProcesses(h))[0].pid == stub.pid
    stub.stop(9)
    assert pynvml.nvmlDeviceGetComputeRunningProcesses(h) == []  # remembered as dead
    (path,) = nvml.registry.glob("*.gpu")
    text = path.read_text().replace(f"pid {stub.pid}\n", f"pid {os.getpid()}\n")
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)  # what a restarted engine does: same name, new file
    assert [p.pid for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h)] == [os.getpid()]
