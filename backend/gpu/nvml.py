"""The NVML adapter: the only module that imports `pynvml` (from nvidia-ml-py), and only lazily.

Consumer cards answer NOT_SUPPORTED to some queries (ECC, power on some boards, memory on a GB10);
such a field becomes None, never a crash. A missing library or a failed init is an environment
problem (exit 3) with a hint to use the simulator.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from types import ModuleType
from typing import Any

from backend.errors import EnvironmentProblem
from backend.models.gpu import ComputeProcess, Gpu, GpuSnapshot

_MIB = 1024 * 1024
_NOT_AVAILABLE = (1 << 64) - 1  # NVML's "value not available" for unsigned long long fields
_HINT = "install the NVIDIA driver, or set C3_RIG=rig.yaml (or C3_RIG=demo) to use a simulated rig"


def _import_pynvml() -> ModuleType:
    try:
        import pynvml  # noqa: PLC0415 - lazy on purpose: `c3 --help` must not need NVML
    except ImportError as error:  # pragma: no cover - nvidia-ml-py is a dependency
        raise EnvironmentProblem(f"the pynvml module (nvidia-ml-py) cannot be imported: {error}", hint=_HINT) from error
    module: ModuleType = pynvml  # untyped (nvidia-ml-py ships no stubs)
    return module


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


class NvmlProbe:
    """A `GpuProbe` over NVML. `nvml` may be any object with pynvml's names (unit tests pass a fake)."""

    source = "nvml"

    def __init__(self, nvml: ModuleType | Any | None = None) -> None:
        self._nvml = nvml if nvml is not None else _import_pynvml()
        self._lock = threading.Lock()
        self._gpus: list[Gpu] | None = None
        self._handles: dict[int, Any] = {}  # a handle stays valid while NVML is initialised (this probe holds it)
        self._procs: dict[int, tuple[float, tuple[ComputeProcess, ...]]] = {}
        """GPU index → (monotonic time read, its processes): what `snapshots(processes_max_age_s=…)` repeats."""
        try:
            self._nvml.nvmlInit()
        except self._nvml.NVMLError as error:
            raise EnvironmentProblem(f"NVML is not usable: {self._describe(error)}", hint=_HINT) from error
        except OSError as error:  # a broken libnvidia-ml.so that dlopen rejects
            raise EnvironmentProblem(f"NVML is not usable: {error}", hint=_HINT) from error
        self._open = True

    # -- helpers -------------------------------------------------------------------------------

    def _describe(self, error: Exception) -> str:
        try:
            return _text(str(error)) or type(error).__name__
        except Exception:  # pynvml's __str__ itself calls into the library
            return type(error).__name__

    def _optional(self, call: Any, *args: Any) -> Any:
        """One query whose failure (NOT_SUPPORTED, NO_PERMISSION, …) means "unknown", not an error."""
        try:
            return call(*args)
        except self._nvml.NVMLError:
            return None

    def _handle(self, index: int) -> Any:
        handle = self._handles.get(index)
        if handle is not None:
            return handle
        try:
            handle = self._handles[index] = self._nvml.nvmlDeviceGetHandleByIndex(index)
            return handle
        except self._nvml.NVMLError as error:
            raise EnvironmentProblem(f"NVML cannot open GPU {index}: {self._describe(error)}") from error

    def _count(self) -> int:
        try:
            return int(self._nvml.nvmlDeviceGetCount())
        except self._nvml.NVMLError as error:
            raise EnvironmentProblem(f"NVML cannot count GPUs: {self._describe(error)}", hint=_HINT) from error

    def _memory(self, handle: Any) -> tuple[int | None, int | None, int | None, int | None]:
        """(total, reserved, used, free) in MiB; v2 first because only v2 reports the driver's reserve."""
        nvml = self._nvml
        version = getattr(nvml, "nvmlMemory_v2", None)
        if version is not None:
            try:
                info = nvml.nvmlDeviceGetMemoryInfo(handle, version=version)
                reserved = getattr(info, "reserved", None)
                return (
                    info.total // _MIB,
                    None if reserved is None else reserved // _MIB,
                    info.used // _MIB,
                    info.free // _MIB,
                )
            except (nvml.NVMLError, TypeError):
                pass  # old driver without _v2, or NOT_SUPPORTED: try v1 below
        try:
            info = nvml.nvmlDeviceGetMemoryInfo(handle)
        except nvml.NVMLError:
            return None, None, None, None  # GB10: unified memory, NVML reports none
        return info.total // _MIB, None, info.used // _MIB, info.free // _MIB

    def _sm(self, handle: Any) -> str | None:
        cc = self._optional(self._nvml.nvmlDeviceGetCudaComputeCapability, handle)
        if not cc:
            return None
        major, minor = cc
        return f"{int(major)}.{int(minor)}"

    def _ecc(self, handle: Any) -> bool | None:
        mode = self._optional(self._nvml.nvmlDeviceGetEccMode, handle)
        if not mode:
            return None
        return bool(mode[0])

    def _identity(self, index: int, handle: Any) -> Gpu:
        try:
            name = _text(self._nvml.nvmlDeviceGetName(handle))
            uuid = _text(self._nvml.nvmlDeviceGetUUID(handle))
        except self._nvml.NVMLError as error:
            raise EnvironmentProblem(f"NVML cannot identify GPU {index}: {self._describe(error)}") from error
        total, reserved, _, _ = self._memory(handle)
        return Gpu(
            index=index,
            uuid=uuid,
            name=name,
            total_mib=total,
            reserved_mib=reserved,
            sm=self._sm(handle),
            ecc=self._ecc(handle),
        )

    def _processes(self, handle: Any, gpu_uuid: str) -> list[ComputeProcess]:
        nvml = self._nvml
        # pynvml's unversioned name calls _v3; drivers older than 510 only have _v2.
        for name in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetComputeRunningProcesses_v2"):
            call = getattr(nvml, name, None)
            if call is None:
                continue
            try:
                found = call(handle)
            except nvml.NVMLError as error:
                if getattr(error, "value", None) == getattr(nvml, "NVML_ERROR_FUNCTION_NOT_FOUND", 13):
                    continue
                return []
            out: list[ComputeProcess] = []
            for proc in found or ():
                used = getattr(proc, "usedGpuMemory", None)
                out.append(
                    ComputeProcess(
                        pid=int(proc.pid),
                        gpu_uuid=gpu_uuid,
                        used_mib=None if used is None or used == _NOT_AVAILABLE else int(used) // _MIB,
                    )
                )
            return out
        return []

    # -- GpuProbe ------------------------------------------------------------------------------

    def gpus(self) -> list[Gpu]:
        with self._lock:
            if self._gpus is None:
                # Identity, memory size and capability do not change while the driver is loaded.
                self._gpus = [self._identity(i, self._handle(i)) for i in range(self._count())]
            return list(self._gpus)

    def _processes_of(self, gpu: Gpu, handle: Any, max_age_s: float) -> tuple[ComputeProcess, ...]:
        """The GPU's processes, read again only when the last reading is `max_age_s` old or older.
        (Listing processes costs the driver two calls — count, then fill — and is the dearest query.)"""
        now = time.monotonic()
        with self._lock:
            kept = self._procs.get(gpu.index)
        if kept is not None and max_age_s > 0 and now - kept[0] < max_age_s:
            return kept[1]
        procs = tuple(self._processes(handle, gpu.uuid))
        with self._lock:
            self._procs[gpu.index] = (now, procs)
        return procs

    def snapshots(self, *, processes_max_age_s: float = 0.0) -> list[GpuSnapshot]:
        nvml = self._nvml
        out: list[GpuSnapshot] = []
        for gpu in self.gpus():
            handle = self._handle(gpu.index)
            _, _, used, free = self._memory(handle)
            util = self._optional(nvml.nvmlDeviceGetUtilizationRates, handle)
            temp = self._optional(nvml.nvmlDeviceGetTemperature, handle, getattr(nvml, "NVML_TEMPERATURE_GPU", 0))
            power = self._optional(nvml.nvmlDeviceGetPowerUsage, handle)
            limit = self._optional(nvml.nvmlDeviceGetEnforcedPowerLimit, handle)
            out.append(
                GpuSnapshot(
                    gpu=gpu,
                    taken_at=datetime.now(UTC),
                    used_mib=used,
                    free_mib=free,
                    util_pct=None if util is None else int(util.gpu),
                    temp_c=None if temp is None else int(temp),
                    power_w=None if power is None else round(power / 1000.0, 1),
                    power_limit_w=None if limit is None else round(limit / 1000.0, 1),
                    processes=self._processes_of(gpu, handle, processes_max_age_s),
                )
            )
        return out

    def processes(self) -> list[ComputeProcess]:
        out: list[ComputeProcess] = []
        for gpu in self.gpus():
            out.extend(self._processes(self._handle(gpu.index), gpu.uuid))
        return out

    def close(self) -> None:
        """Release NVML (it is reference-counted; each probe holds one reference)."""
        if getattr(self, "_open", False):
            self._open = False
            try:
                self._nvml.nvmlShutdown()
            except self._nvml.NVMLError:
                pass
