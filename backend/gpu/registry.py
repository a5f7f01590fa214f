"""The GPU registration directory: how a simulated engine process tells the simulator (and the fake
NVML library) "pid P holds M MiB on GPU U".

The stub engine writes one small JSON file per process; the protocol is the test rig's and is
documented in scripts/rig/README.md. This reader is deliberately lenient (a half-written or foreign
file is skipped, a dead pid is ignored) because a stale registration must never break a GPU listing.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from backend.models.gpu import ComputeProcess
from backend.paths import state_home


def default_registry_dir() -> Path:
    """`$C3_GPU_REGISTRY`, else `$C3_STATE/sim/gpu-registry`."""
    env = os.environ.get("C3_GPU_REGISTRY")
    return Path(env).expanduser() if env else state_home() / "sim" / "gpu-registry"


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    except OSError:
        return False
    return True


def _uuids(entry: dict[str, Any]) -> list[str]:
    for key in ("gpu_uuids", "uuids", "gpus"):
        value = entry.get(key)
        if isinstance(value, list):
            return [str(v) for v in value if isinstance(v, str)]
    for key in ("gpu_uuid", "uuid", "gpu"):
        value = entry.get(key)
        if isinstance(value, str):
            return [value]
    return []


def _used_mib(entry: dict[str, Any]) -> int | None:
    for key in ("used_mib", "mib", "memory_mib"):
        value = entry.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    value = entry.get("used_bytes")
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value // (1024 * 1024)
    return None


@dataclass(frozen=True)
class GpuRegistry:
    """Reads the registration directory; `check_pids=False` keeps entries of dead pids (tests)."""

    path: Path
    check_pids: bool = True

    @classmethod
    def default(cls) -> GpuRegistry:
        return cls(default_registry_dir())

    def processes(self) -> list[ComputeProcess]:
        """Every registered (and still running) process, one row per GPU it holds."""
        try:
            files = sorted(p for p in self.path.iterdir() if p.suffix == ".json" and not p.name.startswith("."))
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            return []
        out: list[ComputeProcess] = []
        for file in files:
            try:
                entry = json.loads(file.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if not isinstance(entry, dict):
                continue
            pid = entry.get("pid")
            if not isinstance(pid, int) or isinstance(pid, bool):
                continue
            if self.check_pids and not _alive(pid):
                continue
            used = _used_mib(entry)
            for uuid in _uuids(entry):
                out.append(ComputeProcess(pid=pid, gpu_uuid=uuid, used_mib=used))
        return out
