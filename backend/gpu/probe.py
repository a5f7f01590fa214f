"""The seam between c3 and whatever tells it about GPUs: NVML on a real machine, a rig YAML in the
simulator and in tests."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from backend.models.gpu import ComputeProcess, Gpu, GpuSnapshot


@runtime_checkable
class GpuProbe(Protocol):
    """Reads this machine's GPUs. Every method is cheap enough to call about once a second."""

    source: str
    """Where the answers come from, for humans: `nvml`, `simulated:/path/rig.yaml`, `simulated:demo`."""

    def gpus(self) -> list[Gpu]:
        """Every GPU, in host index order."""
        ...

    def snapshots(self, *, processes_max_age_s: float = 0.0) -> list[GpuSnapshot]:
        """A live reading of every GPU, in host index order, each stamped with its time. Its process
        lists may be up to `processes_max_age_s` old (the last ones read again): listing a GPU's
        processes is the dearest query, and a 1 s poller whose placement is judged every 2 s need
        not pay it every time. 0: read them now."""
        ...

    def processes(self) -> list[ComputeProcess]:
        """Compute processes on every GPU (host pids)."""
        ...
