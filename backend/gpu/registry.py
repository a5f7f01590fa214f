"""The GPU registration directory: how a simulated engine process tells the simulator (and the fake
NVML library) "pid P holds M MiB on GPU U".

The stub engine (backend/stub_engine.py, `Registration`) writes one small text file per process,
`<container or host>-<pid>.gpu`, with lines `pid N`, optional `container ID`, and one
`gpu TOKEN MIB FRACTION` per GPU it holds (TOKEN a UUID, a host index or `all`; MIB 0 means it
holds FRACTION × total, as vLLM reserves gpu_memory_utilization × total). The protocol is the test
rig's, documented in scripts/rig/README.md. This reader is deliberately lenient (a half-written or foreign
file is skipped, a dead pid is ignored) because a stale registration must never break a GPU listing.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from backend.models.gpu import ComputeProcess, Gpu
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


@dataclass(frozen=True)
class Registration:
    """One parsed registration file."""

    pid: int
    container: str | None
    gpus: tuple[tuple[str, int, float], ...]
    """(token, MiB, fraction of total) per GPU; token is a UUID, a host index or `all`."""


def parse_registration(text: str) -> Registration | None:
    """Parse the v1 line format (`pid N`, `container ID`, `gpu TOKEN MIB FRACTION`); None if unusable."""
    pid: int | None = None
    container: str | None = None
    gpus: list[tuple[str, int, float]] = []
    for raw in text.splitlines():
        parts = raw.split()
        if not parts or parts[0].startswith("#"):
            continue
        try:
            if parts[0] == "pid" and len(parts) == 2:
                pid = int(parts[1])
            elif parts[0] == "container" and len(parts) == 2:
                container = parts[1]
            elif parts[0] == "gpu" and len(parts) >= 3:
                fraction = float(parts[3]) if len(parts) > 3 else 0.0
                gpus.append((parts[1], max(0, int(parts[2])), max(0.0, min(1.0, fraction))))
        except ValueError:
            return None
    if pid is None or not gpus:
        return None
    return Registration(pid=pid, container=container, gpus=tuple(gpus))


@dataclass(frozen=True)
class GpuRegistry:
    """Reads the registration directory; `check_pids=False` keeps entries of dead pids (tests)."""

    path: Path
    check_pids: bool = True

    @classmethod
    def default(cls) -> GpuRegistry:
        return cls(default_registry_dir())

    def registrations(self) -> list[Registration]:
        """Every readable registration whose process still runs (container pids are not checked:
        they live in another pid namespace, and the engine removes its file when it exits)."""
        try:
            files = sorted(p for p in self.path.iterdir() if p.suffix == ".gpu" and not p.name.startswith("."))
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            return []
        out: list[Registration] = []
        for file in files:
            try:
                found = parse_registration(file.read_text(encoding="utf-8", errors="replace"))
            except OSError:
                continue  # removed between listing and reading
            if found is None:
                continue
            if self.check_pids and found.container is None and not _alive(found.pid):
                continue
            out.append(found)
        return out

    def processes(self, gpus: Sequence[Gpu]) -> list[ComputeProcess]:
        """Registered processes on `gpus`, one row per GPU held; memory = MiB, else fraction × total."""
        by_uuid = {g.uuid: g for g in gpus}
        by_index = {str(g.index): g for g in gpus}
        out: list[ComputeProcess] = []
        for reg in self.registrations():
            for token, mib, fraction in reg.gpus:
                targets = list(gpus) if token == "all" else [by_uuid.get(token) or by_index.get(token)]
                for gpu in targets:
                    if gpu is None:
                        continue  # another machine's GPU, or an index this rig does not have
                    used = mib if mib else (int(fraction * gpu.total_mib) if gpu.total_mib else 0)
                    out.append(ComputeProcess(pid=reg.pid, gpu_uuid=gpu.uuid, used_mib=used))
        return out
