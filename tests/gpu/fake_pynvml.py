"""A stand-in for the `pynvml` module at the adapter seam (unit tests only; the real binding over
the fake libnvidia-ml.so.1 is tested in test_nvml_real.py)."""

from __future__ import annotations

from types import SimpleNamespace

NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_GPU_IS_LOST = 15


class NVMLError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        return {3: "Not Supported", 12: "NVML Shared Library Not Found", 13: "Function Not Found", 15: "GPU is lost"}.get(self.value, "Unknown Error")


def _raise(code):
    raise NVMLError(code)


class FakeNvml:
    """Devices are dicts; a key set to an int error code makes that query raise it."""

    NVMLError = NVMLError
    NVML_ERROR_FUNCTION_NOT_FOUND = NVML_ERROR_FUNCTION_NOT_FOUND
    NVML_TEMPERATURE_GPU = 0
    nvmlMemory_v2 = 0x02000028

    def __init__(self, devices, *, init_error=None, v2=True, v3_procs=True):
        self.devices = devices
        self.init_error = init_error
        self.v2 = v2
        self.v3_procs = v3_procs
        self.calls: list[str] = []
        self.shutdowns = 0
        if not v3_procs:
            self.nvmlDeviceGetComputeRunningProcesses = self._procs_missing

    def _get(self, handle, key):
        value = self.devices[handle][key]
        if isinstance(value, int) and not isinstance(value, bool) and key.endswith("_err"):
            raise NVMLError(value)
        return value

    def _maybe(self, handle, key):
        err = self.devices[handle].get(key + "_err")
        if err:
            raise NVMLError(err)
        return self.devices[handle][key]

    def nvmlInit(self):
        if self.init_error:
            raise NVMLError(self.init_error)

    def nvmlShutdown(self):
        self.shutdowns += 1

    def nvmlDeviceGetCount(self):
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetName(self, h):
        return self._maybe(h, "name")

    def nvmlDeviceGetUUID(self, h):
        return self._maybe(h, "uuid")

    def nvmlDeviceGetMemoryInfo(self, h, version=None):
        self.calls.append(f"mem:{'v2' if version else 'v1'}")
        d = self.devices[h]
        if d.get("mem_err"):
            raise NVMLError(d["mem_err"])
        mib = 1024 * 1024
        if version:
            if not self.v2:
                raise NVMLError(NVML_ERROR_FUNCTION_NOT_FOUND)
            return SimpleNamespace(total=d["total"] * mib, reserved=d["reserved"] * mib, used=d["used"] * mib, free=(d["total"] - d["reserved"] - d["used"]) * mib)
        return SimpleNamespace(total=d["total"] * mib, used=(d["used"] + d["reserved"]) * mib, free=(d["total"] - d["reserved"] - d["used"]) * mib)

    def nvmlDeviceGetCudaComputeCapability(self, h):
        return self._maybe(h, "cc")

    def nvmlDeviceGetEccMode(self, h):
        return self._maybe(h, "ecc")

    def nvmlDeviceGetUtilizationRates(self, h):
        return SimpleNamespace(gpu=self._maybe(h, "util"), memory=0)

    def nvmlDeviceGetTemperature(self, h, sensor):
        return self._maybe(h, "temp")

    def nvmlDeviceGetPowerUsage(self, h):
        return self._maybe(h, "power_mw")

    def nvmlDeviceGetEnforcedPowerLimit(self, h):
        return self._maybe(h, "limit_mw")

    def nvmlDeviceGetComputeRunningProcesses(self, h):
        self.calls.append("procs:v3")
        return [SimpleNamespace(pid=p, usedGpuMemory=m) for p, m in self._maybe(h, "procs")]

    def _procs_missing(self, h):
        self.calls.append("procs:v3")
        raise NVMLError(NVML_ERROR_FUNCTION_NOT_FOUND)

    def nvmlDeviceGetComputeRunningProcesses_v2(self, h):
        self.calls.append("procs:v2")
        return [SimpleNamespace(pid=p, usedGpuMemory=m) for p, m in self._maybe(h, "procs")]


def device(**over):
    base = {
        "name": "NVIDIA GeForce RTX 3090",
        "uuid": "GPU-00000000-0000-0000-0000-000000000000",
        "total": 24576,
        "reserved": 422,
        "used": 1000,
        "cc": (8, 6),
        "ecc": [0, 0],
        "util": 37,
        "temp": 55,
        "power_mw": 123456,
        "limit_mw": 350000,
        "procs": [],
    }
    base.update(over)
    return base
