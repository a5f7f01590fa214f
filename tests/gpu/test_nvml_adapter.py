"""The NVML adapter against a fake pynvml at the seam: field mapping and every error path."""

from __future__ import annotations

import pytest

from backend.errors import EnvironmentProblem
from backend.gpu.nvml import NvmlProbe
from tests.gpu.fake_pynvml import NVML_ERROR_GPU_IS_LOST, NVML_ERROR_LIBRARY_NOT_FOUND, NVML_ERROR_NOT_SUPPORTED, FakeNvml, device

NOT_AVAILABLE = (1 << 64) - 1


def test_fields_are_mapped():
    nvml = FakeNvml([device(uuid="GPU-a", procs=[(4242, 2 * 1024**3), (7, NOT_AVAILABLE)]), device(name="NVIDIA GeForce RTX 5090", uuid="GPU-b", total=32607, reserved=487, cc=(12, 0), ecc=[1, 1])])
    probe = NvmlProbe(nvml)
    g0, g1 = probe.gpus()
    assert (g0.index, g0.uuid, g0.name, g0.total_mib, g0.reserved_mib, g0.sm, g0.ecc) == (0, "GPU-a", "NVIDIA GeForce RTX 3090", 24576, 422, "8.6", False)
    assert g0.cuda_total_mib == 24154
    assert (g1.sm, g1.ecc, g1.cuda_total_mib) == ("12.0", True, 32120)
    s0 = probe.snapshots()[0]
    assert (s0.used_mib, s0.free_mib, s0.util_pct, s0.temp_c, s0.power_w, s0.power_limit_w) == (1000, 24576 - 422 - 1000, 37, 55, 123.5, 350.0)
    assert [(p.pid, p.gpu_uuid, p.used_mib) for p in s0.processes] == [(4242, "GPU-a", 2048), (7, "GPU-a", None)]
    assert [p.pid for p in probe.processes()] == [4242, 7]
    assert "mem:v2" in nvml.calls
    probe.close()
    probe.close()
    assert nvml.shutdowns == 1


def test_not_supported_fields_become_none():
    err = NVML_ERROR_NOT_SUPPORTED
    nvml = FakeNvml([device(ecc_err=err, util_err=err, temp_err=err, power_mw_err=err, limit_mw_err=err, cc_err=err, procs_err=err)])
    probe = NvmlProbe(nvml)
    gpu = probe.gpus()[0]
    assert (gpu.ecc, gpu.sm) == (None, None)
    snap = probe.snapshots()[0]
    assert (snap.util_pct, snap.temp_c, snap.power_w, snap.power_limit_w, snap.processes) == (None, None, None, None, ())


def test_gb10_memory_not_supported_gives_no_total():
    nvml = FakeNvml([device(name="NVIDIA GB10", cc=(12, 1), mem_err=NVML_ERROR_NOT_SUPPORTED)])
    probe = NvmlProbe(nvml)
    gpu = probe.gpus()[0]
    assert gpu.total_mib is None and gpu.cuda_total_mib is None and gpu.sm == "12.1"
    snap = probe.snapshots()[0]
    assert snap.used_mib is None and snap.free_mib is None


def test_old_driver_without_v2_memory_falls_back_to_v1():
    nvml = FakeNvml([device()], v2=False)
    gpu = NvmlProbe(nvml).gpus()[0]
    assert gpu.total_mib == 24576 and gpu.reserved_mib is None
    assert nvml.calls[:2] == ["mem:v2", "mem:v1"]


def test_process_query_falls_back_to_v2_names():
    nvml = FakeNvml([device(procs=[(10, 1024**2)])], v3_procs=False)
    assert [p.pid for p in NvmlProbe(nvml).processes()] == [10]
    assert nvml.calls[-2:] == ["procs:v3", "procs:v2"]


def test_library_missing_is_an_environment_problem():
    with pytest.raises(EnvironmentProblem) as info:
        NvmlProbe(FakeNvml([], init_error=NVML_ERROR_LIBRARY_NOT_FOUND))
    assert "NVML is not usable: NVML Shared Library Not Found" in info.value.message
    assert "C3_RIG" in info.value.hint


def test_lost_gpu_identity_is_an_environment_problem_naming_it():
    nvml = FakeNvml([device(), device(uuid_err=NVML_ERROR_GPU_IS_LOST)])
    with pytest.raises(EnvironmentProblem, match="NVML cannot identify GPU 1: GPU is lost"):
        NvmlProbe(nvml).gpus()


def test_bytes_names_from_old_bindings_are_decoded():
    nvml = FakeNvml([device(name=b"NVIDIA A100-SXM4-80GB", uuid=b"GPU-x")])
    gpu = NvmlProbe(nvml).gpus()[0]
    assert gpu.name == "NVIDIA A100-SXM4-80GB" and gpu.uuid == "GPU-x"


def test_process_lists_may_be_repeated_up_to_the_age_asked_and_never_beyond(monkeypatch):
    import backend.gpu.nvml as nvml_module

    clock = [100.0]
    monkeypatch.setattr(nvml_module.time, "monotonic", lambda: clock[0])
    nvml = FakeNvml([device(uuid="GPU-a", procs=[(10, 1024**2)]), device(uuid="GPU-b", procs=[])])
    probe = NvmlProbe(nvml)

    def reads() -> int:
        return sum(c == "procs:v3" for c in nvml.calls)

    probe.snapshots(processes_max_age_s=1.5)
    assert reads() == 2  # nothing kept yet: both GPUs read
    nvml.devices[0]["procs"] = [(10, 1024**2), (11, 2 * 1024**2)]
    clock[0] += 1.0
    again = probe.snapshots(processes_max_age_s=1.5)
    assert reads() == 2 and [p.pid for p in again[0].processes] == [10]  # 1 s old: repeated
    clock[0] += 0.5
    fresh = probe.snapshots(processes_max_age_s=1.5)
    assert reads() == 4 and [p.pid for p in fresh[0].processes] == [10, 11]  # 1.5 s old: read again
    assert [p.pid for p in probe.snapshots()[0].processes] == [10, 11] and reads() == 6  # the default: always now
    assert [p.pid for p in probe.processes()] == [10, 11]  # `processes()` never repeats
