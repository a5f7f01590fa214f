"""The GPU registration directory: how a simulated engine tells the simulator "pid P holds M MiB on
GPU U" — the same files the test rig's fake NVML reads, so both see one truth.

The format and its reader belong to the test rig (backend/stub_registry.py, scripts/rig/README.md
"GPU registration"): one `<…>-<pid>.gpu` file per engine process with `gpu TOKEN MIB FRACTION`
lines (TOKEN a UUID, a host index or `all`; MIB 0 means ceil(FRACTION × total), as vLLM reserves
gpu_memory_utilization × total). Here they become `ComputeProcess` rows on this rig's GPUs; a
registration of a process that has gone, or for a GPU this rig does not have, is ignored.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from backend import stub_registry
from backend.models.gpu import ComputeProcess, Gpu
from backend.paths import state_home
from backend.settings import current


def default_registry_dir() -> Path:
    """`$C3_GPU_REGISTRY`, else `$C3_STATE/sim/gpu-registry`."""
    env = current().gpu_registry
    return env.expanduser() if env else state_home() / "sim" / "gpu-registry"


@dataclass(frozen=True)
class GpuRegistry:
    """Reads one registration directory."""

    path: Path

    @classmethod
    def default(cls) -> GpuRegistry:
        return cls(default_registry_dir())

    def processes(self, gpus: Sequence[Gpu]) -> list[ComputeProcess]:
        """Registered live processes on `gpus`, one row per GPU held, with host pids (as NVML gives)."""
        out: list[ComputeProcess] = []
        try:
            registrations = stub_registry.read_registrations(self.path)
        except OSError:  # not a directory, no permission: nothing registered that we can see
            return []
        for reg in registrations:
            pid = reg.host_pid()
            if pid is None:
                continue  # the engine is gone; its file is a leftover
            for held in reg.gpus:
                for gpu in gpus:
                    if held.matches(gpu.uuid, gpu.index):
                        used = held.mib_for(gpu.total_mib) if gpu.total_mib is not None else held.mib
                        out.append(ComputeProcess(pid=pid, gpu_uuid=gpu.uuid, used_mib=used))
        return out
