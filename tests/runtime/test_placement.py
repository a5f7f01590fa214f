"""Placement verdicts: ok only on exactly the requested GPUs."""

from __future__ import annotations

from backend.models import ComputeProcess, Gpu
from backend.runtime.placement import CPU_ENGINE, attribute, verdict

GPUS = [Gpu(index=i, uuid=f"GPU-{i}", name="NVIDIA GeForce RTX 3090", total_mib=24576) for i in range(4)]


def judge(procs, owners, *, requested=("GPU-1", "GPU-2"), running=True, serving=None, problem=None):
    return verdict(pod="chat", requested=requested, gpus=GPUS, processes=procs, owners=owners, running=running, serving=serving, nvml_problem=problem)


def test_ok_when_exactly_the_requested_gpus():
    p = judge([ComputeProcess(pid=10, gpu_uuid="GPU-1", used_mib=20000), ComputeProcess(pid=11, gpu_uuid="GPU-2", used_mib=20000)], {10: "chat", 11: "chat"})
    assert p.verdict == "ok" and p.actual == ("GPU-1", "GPU-2") and p.actual_indices == (1, 2)
    assert p.missing == () and p.extra == () and p.foreign == ()
    assert "ok" in p.summary()


def test_missing_gpu_is_a_mismatch():
    p = judge([ComputeProcess(pid=10, gpu_uuid="GPU-1")], {10: "chat"})
    assert p.verdict == "mismatch" and p.missing == ("GPU-2",) and "not on requested GPU 2" in p.reason


def test_spill_onto_other_gpu_is_a_mismatch_even_when_requested_are_covered():
    # club-3090's check (requested ⊆ actual) would pass this; c3 must not.
    procs = [ComputeProcess(pid=10, gpu_uuid=u) for u in ("GPU-0", "GPU-1", "GPU-2")]
    p = judge(procs, {10: "chat"})
    assert p.verdict == "mismatch" and p.extra == ("GPU-0",) and p.missing == ()
    assert "also on GPU 0" in p.reason


def test_landed_on_entirely_wrong_gpus():
    p = judge([ComputeProcess(pid=10, gpu_uuid="GPU-0"), ComputeProcess(pid=10, gpu_uuid="GPU-3")], {10: "chat"})
    assert p.verdict == "mismatch" and p.missing == ("GPU-1", "GPU-2") and p.extra == ("GPU-0", "GPU-3")


def test_foreign_processes_are_reported_with_their_owner():
    procs = [
        ComputeProcess(pid=10, gpu_uuid="GPU-1"),
        ComputeProcess(pid=11, gpu_uuid="GPU-2"),
        ComputeProcess(pid=99, gpu_uuid="GPU-2", used_mib=812),
        ComputeProcess(pid=50, gpu_uuid="GPU-1"),
        ComputeProcess(pid=77, gpu_uuid="GPU-3"),  # not on our GPUs: not foreign to us
    ]
    p = judge(procs, {10: "chat", 11: "chat", 50: "coder"})
    assert p.verdict == "ok"
    assert {(f.pid, f.gpu_index, f.owner) for f in p.foreign} == {(99, 2, None), (50, 1, "coder")}
    assert "pid 99 on GPU 2 (not a c3 pod)" in p.summary()


def test_unknown_when_not_running_or_no_nvml_or_not_loaded_yet():
    assert judge([], {}, running=False).verdict == "unknown"
    no_nvml = judge(None, {}, problem="NVML is not usable: library not found")
    assert no_nvml.verdict == "unknown" and "library not found" in no_nvml.reason
    loading = judge([ComputeProcess(pid=5, gpu_uuid="GPU-0")], {5: "other"})
    assert loading.verdict == "unknown" and "still loading" in loading.reason


def test_serving_without_any_gpu_process_is_a_mismatch():
    p = judge([], {}, serving=True)
    assert p.verdict == "mismatch" and p.missing == ("GPU-1", "GPU-2")


def test_an_engine_on_the_cpu_is_unknown_with_that_reason_not_a_mismatch():
    """vLLM's CPU build (or a llama.cpp with CPU KV buffers) holds no GPU memory by design."""
    for serving in (True, None):
        p = verdict(pod="chat", requested=("GPU-1",), gpus=GPUS, processes=[], owners={}, running=True, serving=serving,
                    engine_device="CPU")
        assert p.verdict == "unknown" and p.reason == CPU_ENGINE
    on_gpu = ComputeProcess(pid=10, gpu_uuid="GPU-1", used_mib=100)
    assert verdict(pod="chat", requested=("GPU-1",), gpus=GPUS, processes=[on_gpu], owners={10: "chat"}, running=True,
                   serving=True, engine_device="CPU").verdict == "ok"  # a real GPU process wins over the log


def test_attribute_walks_up_to_the_pod_process():
    parents = {300: 200, 200: 100, 100: 1}
    owners = attribute([300, 400], {100: "chat"}.get, parents.get)
    assert owners == {300: "chat", 400: None}
