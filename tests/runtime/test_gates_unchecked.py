"""A gate whose data source fails says "not checked: <reason>" and refuses unless --force.

Before this rule, an NVML failure at boot made `RuntimeContext.free_mib` return `{}` and the
free-VRAM gate passed as ok: a safety decision made on no data. The boot tests run the real gates,
the real sim runtime and a stub engine on the demo rig, with the rig's probe made to fail the way
NVML does when the driver goes away.
"""

from __future__ import annotations

import socket

import pytest

from backend.errors import EnvironmentProblem, Refused
from backend.models import CatalogEntry, Gpu, Pod
from backend.runtime.gates import enforce, vram_gate

GPUS = [Gpu(index=0, uuid="GPU-0", name="NVIDIA GeForce RTX 3090", total_mib=24576)]
ENTRY = CatalogEntry(slug="vllm/qwen3-8b", engine="vllm", image="x", model="Qwen/Qwen3-8B", gpu_memory_utilization=0.9)


def failing_read() -> dict[str, int | None]:
    raise EnvironmentProblem("NVML stopped answering: NVMLError_GpuIsLost")


def test_vram_gate_with_an_unreadable_source_is_not_checked_and_not_ok():
    result = vram_gate(slug=ENTRY.slug, gpus=GPUS, entry=ENTRY, read_free=failing_read, reservation=lambda e, g: 22118, sleep=lambda s: None)
    assert not result.ok and not result.checked
    assert result.message == "vram gate not checked: free VRAM: NVML stopped answering: NVMLError_GpuIsLost"
    assert "--force" in (result.hint or "")


def test_an_unchecked_gate_refuses_unless_forced():
    result = vram_gate(slug=ENTRY.slug, gpus=GPUS, entry=ENTRY, read_free=failing_read, reservation=lambda e, g: 22118, sleep=lambda s: None)
    with pytest.raises(Refused, match="pod chat cannot start: vram gate not checked"):
        enforce("chat", [result], force=False)
    [warning] = enforce("chat", [result], force=True)
    assert warning.forced and not warning.checked


class LostGpuProbe:
    """The demo rig's probe whose readings fail (GPU fell off the bus); its GPU list still answers."""

    def __init__(self, inner) -> None:
        self.inner, self.source = inner, inner.source

    def gpus(self):
        return self.inner.gpus()

    def processes(self):
        raise RuntimeError("NVMLError_GpuIsLost")

    def snapshots(self, *, processes_max_age_s: float = 0.0):
        raise RuntimeError("NVMLError_GpuIsLost")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def lost_gpu_ctx(monkeypatch):
    """The sim runtime on the demo rig (what `c3 demo` boots with), NVML lost."""
    from backend.wiring import open_context

    monkeypatch.setenv("C3_RIG", "demo")
    monkeypatch.setenv("C3_RUNTIME", "sim")
    monkeypatch.setenv("C3_STUB_STARTUP_DELAY", "0")
    ctx = open_context(demo=True)
    ctx.probe = LostGpuProbe(ctx.probe)
    yield ctx
    for name in ctx.runtime.workloads():
        ctx.runtime.stop(name, timeout=5.0)


def test_boot_with_nvml_lost_refuses_saying_what_was_not_checked(lost_gpu_ctx):
    from backend.runtime.boot import boot_pod

    pod = Pod(name="chat", slug="vllm/qwen3-8b", gpus=[0], port=_free_port())
    with pytest.raises(Refused) as refused:
        boot_pod(lost_gpu_ctx, pod, vram_attempts=1)
    message = refused.value.message
    assert "vram gate not checked: free VRAM: NVML stopped answering: NVMLError_GpuIsLost" in message
    assert "gpus gate not checked: processes on the GPUs" in message
    assert "--force" in (refused.value.hint or "")
    assert lost_gpu_ctx.runtime.workload("chat").status == "absent"  # nothing started


def test_forced_boot_with_nvml_lost_starts_and_warns_loudly(lost_gpu_ctx):
    from backend.runtime.boot import boot_pod

    lines: list[str] = []
    pod = Pod(name="chat", slug="vllm/qwen3-8b", gpus=[0], port=_free_port())
    outcome = boot_pod(lost_gpu_ctx, pod, force=True, timeout_s=60, vram_attempts=1, progress=lambda _pod, line: lines.append(line))
    assert outcome.ok, outcome.detail
    assert {w.gate for w in outcome.warnings if not w.checked} == {"vram", "gpus"}
    assert any(line.startswith("WARNING: --force boots without the vram gate: vram gate not checked") for line in lines), lines


@pytest.mark.parametrize("reading", [{}, {"GPU-other": 24000}])
def test_a_reading_without_the_pods_card_is_not_checked_never_ok(reading):
    """NVML answering for no GPU (or another one) used to leave nothing to judge, and the gate passed."""
    result = vram_gate(slug=ENTRY.slug, gpus=GPUS, entry=ENTRY, read_free=lambda: reading, reservation=lambda e, g: 22118,
                       sleep=lambda s: None)
    assert not result.ok and not result.checked
    assert result.message == "vram gate not checked: free VRAM: NVML's reading has no entry for GPU 0"
