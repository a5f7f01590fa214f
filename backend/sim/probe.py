"""A simulated rig: GPUs described in a YAML file (`C3_RIG=rig.yaml`) or the built-in demo rig.

The simulator is what `c3 demo`, the tests and a newcomer without a GPU use. Its compute processes
come from the GPU registration directory that the stub engine writes (see `backend.gpu.registry`), so
a simulated pod really "lands" on its GPUs and placement can be verified like on a real machine.
"""

from __future__ import annotations

import uuid as uuidlib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from backend import strict_yaml
from backend.errors import UsageError
from backend.gpu.registry import GpuRegistry
from backend.models.gpu import ComputeProcess, Gpu, GpuSnapshot
from backend.text import show
from backend.userfiles import read_text

DEMO_RIG_NAME = "demo"


class RigGpu(BaseModel):
    """One GPU line of a rig YAML."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    """NVML name, e.g. `NVIDIA GeForce RTX 3090`."""
    total_mib: int | None = Field(default=None, ge=0)
    """NVML total; omit (null) for a unified-memory GB10."""
    sm: str | None = None
    """Compute capability `major.minor`."""
    used_mib: int = Field(default=0, ge=0)
    """Memory already in use before any pod (a desktop, another tenant)."""
    reserved_mib: int | None = Field(default=None, ge=0)
    """Driver reserve (NVML v2); CUDA sees total − reserved."""
    uuid: str | None = None
    """Stable identity; derived from the index and name when absent."""
    ecc: bool | None = None
    """ECC enabled."""
    util_pct: int | None = Field(default=None, ge=0, le=100)
    """Utilisation to report (default: 0 idle, 90 when a process runs)."""
    temp_c: int | None = None
    """Temperature to report (default: 34 idle, 61 busy)."""
    power_w: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    """Power draw to report (default derived from the limit)."""
    power_limit_w: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    """Enforced power limit (default 350 W)."""

    @field_validator("sm", mode="before")
    @classmethod
    def _sm_text(cls, value: Any) -> Any:
        # `sm: 8.6` in YAML is a float; keep the spelling the user meant.
        if isinstance(value, bool):
            raise ValueError("sm must look like 8.6")
        if isinstance(value, int | float):
            value = f"{value:.1f}" if isinstance(value, int) else repr(value)
        if isinstance(value, str):
            parts = value.split(".")
            if len(parts) != 2 or not all(p.isdigit() for p in parts):
                raise ValueError(f"sm must look like 8.6, not {value!r}")
        return value


class Rig(BaseModel):
    """A simulated machine: GPUs in host index order."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    gpus: tuple[RigGpu, ...]
    """The GPUs, index 0 first."""


DEMO_RIG = Rig(
    gpus=(
        # Reserves and power limits are the figures in ../shared/data/cards.csv (deviceQuery logs).
        RigGpu(name="NVIDIA GeForce RTX 3090", total_mib=24576, sm="8.6", reserved_mib=422, used_mib=14, power_limit_w=350),
        RigGpu(name="NVIDIA GeForce RTX 3090", total_mib=24576, sm="8.6", reserved_mib=422, used_mib=14, power_limit_w=350),
        RigGpu(name="NVIDIA GeForce RTX 5090", total_mib=32607, sm="12.0", reserved_mib=487, used_mib=18, power_limit_w=575),
        RigGpu(name="NVIDIA GeForce RTX 5090", total_mib=32607, sm="12.0", reserved_mib=487, used_mib=18, power_limit_w=575),
    )
)


def derive_uuid(index: int, name: str) -> str:
    """A `GPU-…` UUID that is the same on every run for the same index and name — the same rule as
    the test rig's fake NVML (scripts/rig/fake_nvml.py), so one rig described either way has one
    identity."""
    return "GPU-" + str(uuidlib.uuid5(uuidlib.NAMESPACE_URL, f"c3-rig/{index}/{name}"))


def load_rig(path: Path) -> Rig:
    """Read a rig YAML; anything malformed is a usage error naming the file."""
    path = Path(path)
    text = read_text(path, what="simulated rig file", missing_ok=True)
    if text is None:
        raise UsageError(f"simulated rig file {path} does not exist", hint="C3_RIG names a rig YAML (see DESIGN.md \"Simulator\"), or use C3_RIG=demo")
    data = strict_yaml.load(text, source=str(path), what="simulated rig file", hint="fix the rig file C3_RIG names")
    if not isinstance(data, dict) or "gpus" not in data:
        raise UsageError(f"simulated rig file {path} must be a mapping with a `gpus:` list")
    try:
        rig = Rig.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise UsageError(f"simulated rig file {path}: {show(loc, 60)}: {show(first['msg'], 120)}") from None
    uuids = [g.uuid for g in rig.gpus if g.uuid]
    if len(uuids) != len(set(uuids)):
        raise UsageError(f"simulated rig file {path}: two GPUs share a uuid")
    return rig


class SimulatedProbe:
    """A `GpuProbe` over a `Rig`; used memory = the rig's base use + registered processes."""

    def __init__(self, rig: Rig, *, source: str = "simulated", registry: GpuRegistry | None = None) -> None:
        self.rig = rig
        self.source = source
        self.registry = registry if registry is not None else GpuRegistry.default()
        self._gpus = [
            Gpu(
                index=i,
                uuid=g.uuid or derive_uuid(i, g.name),
                name=g.name,
                total_mib=g.total_mib,
                reserved_mib=g.reserved_mib,
                sm=g.sm,
                ecc=g.ecc,
            )
            for i, g in enumerate(rig.gpus)
        ]

    def gpus(self) -> list[Gpu]:
        return list(self._gpus)

    def processes(self) -> list[ComputeProcess]:
        return self._within_cards(self.registry.processes(self._gpus))

    def _within_cards(self, procs: list[ComputeProcess]) -> list[ComputeProcess]:
        """A card holds no more than it has. A registration asks for what the engine would take of an
        empty card (vLLM: 0.9 × total), so two engines on one card (the demo's misplaced pod lands on
        a GPU another pod holds) asked for 2 × 22,119 MiB of a 24 GiB card. On a card asked for more
        than it has beside the rig's base use, each process gets its share of that room in proportion
        to what it asked (not by start order: the pictures must not depend on which pid came first),
        so per card the processes never add up to more than the card's used memory."""
        room = {gpu.uuid: None if gpu.total_mib is None else max(0, gpu.total_mib - (gpu.reserved_mib or 0) - spec.used_mib)
                for gpu, spec in zip(self._gpus, self.rig.gpus, strict=True)}
        asked: dict[str, int] = {}
        for proc in procs:
            asked[proc.gpu_uuid] = asked.get(proc.gpu_uuid, 0) + (proc.used_mib or 0)
        out = []
        for proc in procs:
            left, total = room.get(proc.gpu_uuid), asked[proc.gpu_uuid]
            if left is None or proc.used_mib is None or total <= left:
                out.append(proc)
            else:
                out.append(proc.model_copy(update={"used_mib": proc.used_mib * left // total}))
        return out

    def snapshots(self, *, processes_max_age_s: float = 0.0) -> list[GpuSnapshot]:
        # The simulated registry is a folder listing: always read now (the age is an allowance, not a rule).
        by_gpu: dict[str, list[ComputeProcess]] = {}
        for proc in self.processes():
            by_gpu.setdefault(proc.gpu_uuid, []).append(proc)
        now = datetime.now(UTC)
        out: list[GpuSnapshot] = []
        for gpu, spec in zip(self._gpus, self.rig.gpus, strict=True):
            procs = by_gpu.get(gpu.uuid, [])
            busy = bool(procs)
            used = spec.used_mib + sum(p.used_mib or 0 for p in procs)
            free = None
            if gpu.total_mib is not None:
                used = min(used, gpu.total_mib - (gpu.reserved_mib or 0))
                free = gpu.total_mib - (gpu.reserved_mib or 0) - used
            limit = spec.power_limit_w if spec.power_limit_w is not None else 350.0
            util = spec.util_pct if spec.util_pct is not None else (90 if busy else 0)
            out.append(
                GpuSnapshot(
                    gpu=gpu,
                    taken_at=now,
                    used_mib=used,
                    free_mib=free,
                    util_pct=util,
                    temp_c=spec.temp_c if spec.temp_c is not None else (61 if busy else 34),
                    power_w=spec.power_w if spec.power_w is not None else round(limit * (0.78 if busy else 0.07), 1),
                    power_limit_w=limit,
                    processes=tuple(procs),
                )
            )
        return out


def probe_from_env(*, demo: bool = False) -> SimulatedProbe | None:
    """The simulated probe `C3_RIG` asks for (`demo` = the built-in rig), or None when it is unset."""
    from backend.settings import current

    value = current().rig.strip()
    if value:
        if value == DEMO_RIG_NAME and not Path(value).exists():
            return SimulatedProbe(DEMO_RIG, source="simulated:demo")
        path = Path(value).expanduser()
        return SimulatedProbe(load_rig(path), source=f"simulated:{path}")
    if demo:
        return SimulatedProbe(DEMO_RIG, source="simulated:demo")
    return None
