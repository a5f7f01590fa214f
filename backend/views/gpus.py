"""This machine's GPUs as the front ends read them: `c3 gpus [--processes] --json`, the GPUs a
fit-check or `--fits-on` prices, and the free GPUs `c3 pod list` reports."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from backend.errors import EnvironmentProblem, Refused
from backend.models import Gpu, GpuSnapshot
from backend.models.gpu import GpuProcessRow


class GpuProcessUse(BaseModel):
    """One compute process as `c3 gpus` counts it on its GPU."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    pid: int
    """Host pid."""
    used_mib: int | None
    """GPU memory it holds (None: the driver did not say)."""


class GpuRow(BaseModel):
    """One GPU as `c3 gpus --json` prints it (the contract's keys first, then the extras)."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    index: int
    """Host index (NVML order)."""
    uuid: str
    """The GPU's UUID."""
    name: str
    """NVML's name, e.g. `NVIDIA GeForce RTX 3090`."""
    total_mib: int | None
    """Memory NVML reports (None on unified-memory parts such as a GB10)."""
    used_mib: int | None
    """Memory in use now."""
    sm: str | None
    """Compute capability, e.g. `8.6`."""
    free_mib: int | None
    """Memory free now."""
    reserved_mib: int | None
    """What the driver keeps back (NVML's reserved memory)."""
    cuda_total_mib: int | None
    """What CUDA sees (total − reserved): the figure the fit-check prices."""
    ecc: bool | None
    """ECC on (None: not reported)."""
    card: str | None
    """The card profile the fit-check uses for it (None: unprofiled)."""
    util_pct: int | None
    """Compute utilisation, percent."""
    temp_c: int | None
    """Temperature, °C."""
    power_w: float | None
    """Power draw, W."""
    power_limit_w: float | None
    """Power limit, W."""
    processes: list[GpuProcessUse]
    """Compute processes on it."""

    @classmethod
    def of(cls, snap: GpuSnapshot) -> GpuRow:
        from backend.cards import match_card

        gpu = snap.gpu
        profile = match_card(gpu)
        return cls(
            index=gpu.index, uuid=gpu.uuid, name=gpu.name, total_mib=gpu.total_mib, used_mib=snap.used_mib, sm=gpu.sm, free_mib=snap.free_mib,
            reserved_mib=gpu.reserved_mib, cuda_total_mib=gpu.cuda_total_mib, ecc=gpu.ecc, card=profile.id if profile is not None else None,
            util_pct=snap.util_pct, temp_c=snap.temp_c, power_w=snap.power_w, power_limit_w=snap.power_limit_w,
            processes=[GpuProcessUse(pid=p.pid, used_mib=p.used_mib) for p in snap.processes],
        )


class GpuList(BaseModel):
    """`c3 gpus --json`: every GPU and where the readings come from."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    gpus: list[GpuRow]
    """One row per GPU, in index order."""
    source: str
    """The probe: `nvml`, or `simulated (…)` for a rig file."""


class GpuProcessList(BaseModel):
    """`c3 gpus --processes --json`: every compute process on the GPUs, mapped to the estate's pods."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    processes: list[GpuProcessRow]
    """GPU then pid order; `foreign` (no c3 pod) and `misplaced` (a pod off its planned GPUs) included."""
    source: str
    """The probe the processes were read from."""


class GpuAvailability(BaseModel):
    """This machine's GPUs when a command can do without them (`c3 pod list`, `c3 pod validate`)."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    gpus: list[Gpu] | None
    """The GPUs; None when there is no probe (see `problem`)."""
    problem: str | None = None
    """Why there is no probe (no NVML and no `C3_RIG`), one line."""


def gpu_list() -> GpuList:
    """Every GPU of this machine (NVML) or of the simulated rig. EnvironmentProblem without a probe."""
    from backend.wiring import open_probe

    probe = open_probe()
    return GpuList(gpus=[GpuRow.of(s) for s in probe.snapshots()], source=probe.source)


def gpu_process_list(estate_path: Path) -> GpuProcessList:
    """Every compute process on this machine's GPUs, mapped to `estate_path`'s pods by the runtime (the
    runtime is not asked when no GPU has a process)."""
    from backend.estate import load_estate
    from backend.runtime.gpu_processes import process_rows
    from backend.wiring import open_context, open_probe

    probe = open_probe()
    snapshots = probe.snapshots()
    pods = load_estate(estate_path).pods if estate_path.exists() else []
    if not any(s.processes for s in snapshots):
        return GpuProcessList(processes=[], source=probe.source)
    return GpuProcessList(processes=process_rows(snapshots, pods, open_context().runtime.owners), source=probe.source)


def gpus_at(indices: Sequence[int]) -> list[Gpu]:
    """This machine's GPUs at `indices`, in that order; Refused naming the ones it does not have."""
    from backend.wiring import open_probe

    measured = {g.index: g for g in open_probe().gpus()}
    missing = [i for i in indices if i not in measured]
    if missing:
        have = ", ".join(str(i) for i in sorted(measured)) or "none"
        raise Refused(f"GPU {', '.join(map(str, missing))} is not on this machine (GPUs: {have})", hint="`c3 gpus` lists them")
    return [measured[i] for i in indices]


def gpu_availability() -> GpuAvailability:
    """The GPUs, or why there are none (never raises for a missing probe)."""
    from backend.wiring import open_probe

    try:
        return GpuAvailability(gpus=list(open_probe().gpus()))
    except EnvironmentProblem as error:
        return GpuAvailability(gpus=None, problem=error.message)
