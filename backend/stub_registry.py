"""Read the GPU registration files the stub engine writes into `$C3_GPU_REGISTRY`.

The simulated GPU probe and the test rig's fake NVML (scripts/rig/fake_nvml.c, same rules in C) use these
files to know which process "runs" on which GPU and how much memory it holds. Format and rules:
scripts/rig/README.md ("GPU registration").
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

from backend.errors import C3Error
from backend.userfiles import read_text

SUFFIX = ".gpu"


@dataclass(frozen=True)
class RegisteredGpu:
    """One `gpu TOKEN MIB FRACTION` line: a GPU the process was given and the memory it holds there."""

    token: str
    """A GPU UUID (`GPU-…`), an index (`0`), or `all`."""
    mib: int
    """Memory held on this GPU in MiB; 0 means "fraction × the GPU's total"."""
    fraction: float
    """The engine's memory fraction (vLLM --gpu-memory-utilization) used when `mib` is 0."""

    def mib_for(self, total_mib: int) -> int:
        """MiB held on a GPU of `total_mib` (vLLM reserves ceil(total × utilisation))."""
        return self.mib if self.mib > 0 else math.ceil(total_mib * self.fraction)

    def matches(self, uuid: str, index: int) -> bool:
        return self.token in ("all", uuid, str(index))


@dataclass(frozen=True)
class Registration:
    """One registration file: who the process is and which GPUs it holds."""

    path: Path
    """The file it was read from."""
    pid: int
    """The pid as the process sees it (inside a container: its pid in the container's namespace)."""
    name: str
    """The stub's backend name (`--name`)."""
    port: int
    """The port it serves on."""
    hostname: str
    """Its host name (inside a container: the container's host name)."""
    container: str | None
    """The 64-hex container id when it runs inside Docker, else None."""
    pidns: str
    """Its pid namespace (`pid:[inode]`); the same as the reader's means `pid` is already the host pid."""
    gpus: tuple[RegisteredGpu, ...]
    """The GPUs it holds, in the order it was given them."""

    def host_pid(self, proc: str = "/proc") -> int | None:
        """The pid as the host sees it (what NVML reports), or None when the process is gone."""
        if self.container is None or self.pidns == own_pidns():
            return self.pid if pid_alive(self.pid, proc) else None
        return resolve_host_pid(self.container, self.pid, proc)


def parse_registration(path: Path, text: str) -> Registration | None:
    fields: dict[str, str] = {}
    gpus: list[RegisteredGpu] = []
    for line in text.splitlines():
        parts = line.split()
        if not parts or parts[0].startswith("#"):
            continue
        if parts[0] == "gpu" and len(parts) >= 4:
            gpus.append(RegisteredGpu(parts[1], int(parts[2]), float(parts[3])))
        elif len(parts) >= 2:
            fields[parts[0]] = " ".join(parts[1:])
    if "pid" not in fields:
        return None
    return Registration(path=path, pid=int(fields["pid"]), name=fields.get("name", ""),
                        port=int(fields.get("port", "0")), hostname=fields.get("hostname", ""),
                        container=fields.get("container"), pidns=fields.get("pidns", ""), gpus=tuple(gpus))


def read_registrations(directory: str | os.PathLike[str], *, live_only: bool = False,
                       proc: str = "/proc") -> list[Registration]:
    """Every registration in `directory` (sorted by file name); `live_only` drops those whose process is gone."""
    found: list[Registration] = []
    try:
        names = sorted(os.listdir(directory))
    except FileNotFoundError:
        return []
    for name in names:
        if not name.endswith(SUFFIX):
            continue
        path = Path(directory) / name
        try:  # the bounded reader: a FIFO or a huge file dropped in the folder is skipped, never waited on
            text = read_text(path, what="GPU registration file", missing_ok=True, errors="replace")
            reg = parse_registration(path, text) if text is not None else None
        except (C3Error, ValueError):
            continue  # removed, half-written or spoiled under us: the next poll sees it settled
        if reg and (not live_only or reg.host_pid(proc) is not None):
            found.append(reg)
    return found


def own_pidns() -> str:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return "unknown-reader"


def pid_alive(pid: int, proc: str = "/proc") -> bool:
    """True when the pid exists and is not a zombie."""
    try:
        stat = Path(proc, str(pid), "stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[:1] != ["Z"]


def resolve_host_pid(container_id: str, ns_pid: int, proc: str = "/proc") -> int | None:
    """The host pid of the process with pid `ns_pid` inside container `container_id`.

    Scan /proc/*/cgroup for the container id, then confirm with the last NSpid field (the pid in the
    innermost namespace). Works for cgroup v1 and v2 paths (`/docker/<id>`, `docker-<id>.scope`).
    """
    for entry in os.scandir(proc):
        if not entry.name.isdigit():
            continue
        try:
            if container_id not in Path(entry.path, "cgroup").read_text():
                continue
            status = Path(entry.path, "status").read_text()
        except OSError:
            continue
        match = re.search(r"^NSpid:\s+([\d\s]+)$", status, re.M)
        if match and int(match.group(1).split()[-1]) == ns_pid and pid_alive(int(entry.name), proc):
            return int(entry.name)
    return None
