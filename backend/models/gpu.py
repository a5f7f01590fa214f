"""GPUs as a probe sees them: the static identity (`Gpu`) and a live reading (`GpuSnapshot`)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field


class Gpu(BaseModel):
    """One GPU of this machine, as NVML (or the simulated rig) reports it."""

    model_config = ConfigDict(frozen=True)

    index: int = Field(ge=0)
    """Host index, as `nvidia-smi` numbers it (PCI bus order)."""
    uuid: str
    """Stable identity, `GPU-…`; what containers are pinned by."""
    name: str
    """Exact NVML name, e.g. `NVIDIA GeForce RTX 3090`."""
    total_mib: int | None
    """NVML `memory.total` in MiB; None where NVML reports none (GB10 unified memory)."""
    reserved_mib: int | None = None
    """Driver-reserved memory from NVML's v2 memory info; CUDA sees `total − reserved`."""
    sm: str | None = None
    """Compute capability `major.minor`, e.g. `8.6`; None when unknown."""
    ecc: bool | None = None
    """ECC enabled (costs ~1/16 of memory on GDDR cards); None when not reported."""

    @property
    def cuda_total_mib(self) -> int | None:
        """What CUDA (and so vLLM's budget) sees: NVML total minus the driver's reserve."""
        if self.total_mib is None:
            return None
        return self.total_mib - (self.reserved_mib or 0)


class ComputeProcess(BaseModel):
    """A process NVML lists on a GPU (host pid namespace)."""

    model_config = ConfigDict(frozen=True)

    pid: int
    """Host pid."""
    gpu_uuid: str
    """The GPU it runs on."""
    used_mib: int | None = None
    """GPU memory it holds, when NVML reports it."""


class GpuSnapshot(BaseModel):
    """A live reading of one GPU, stamped with when it was taken. Immutable: pollers replace it."""

    model_config = ConfigDict(frozen=True)

    gpu: Gpu
    """Which GPU this reading is of."""
    taken_at: datetime
    """When the reading was taken (UTC)."""
    used_mib: int | None = None
    """Memory in use, MiB."""
    free_mib: int | None = None
    """Memory free, MiB."""
    util_pct: int | None = None
    """SM utilisation over the last sample period, percent."""
    temp_c: int | None = None
    """Core temperature, °C."""
    power_w: float | None = None
    """Power draw, watts."""
    power_limit_w: float | None = None
    """Enforced power limit, watts."""
    processes: tuple[ComputeProcess, ...] = ()
    """Compute processes on this GPU."""
