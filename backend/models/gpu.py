"""GPUs as a probe sees them: the static identity (`Gpu`) and a live reading (`GpuSnapshot`)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field, computed_field


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


class GpuProcessRow(BaseModel):
    """One compute process on one GPU, as the cockpit's process view and `c3 gpus --processes` show it."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    pid: int
    """Host pid."""
    gpu_index: int
    """The GPU it really runs on (host index)."""
    gpu_uuid: str
    """That GPU's UUID."""
    used_mib: int | None = None
    """GPU memory it holds (None: NVML did not say, e.g. on some consumer drivers)."""
    pod: str | None = None
    """The c3 pod whose container it runs in; None: not a c3 pod (foreign)."""
    planned_gpus: tuple[int, ...] | None = None
    """The GPUs that pod plans (None for a foreign process or a pod not in the estate)."""
    user: str | None = None
    """Owner of the process (None: gone or not visible)."""
    command: str | None = None
    """Its command line, spaces between arguments (None: gone or not visible)."""

    @computed_field  # type: ignore[prop-decorator]
    @property
    def foreign(self) -> bool:
        """Not a c3 pod's process."""
        return self.pod is None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def misplaced(self) -> bool:
        """A pod's process on a GPU the pod did not ask for."""
        return self.pod is not None and self.planned_gpus is not None and self.gpu_index not in self.planned_gpus

    def row(self) -> dict[str, object]:
        """The `c3 gpus --processes --json` form (its fields, then `foreign` and `misplaced`)."""
        return self.model_dump(mode="json")
