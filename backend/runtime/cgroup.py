"""Host pid → container id, read from /proc/<pid>/cgroup.

cgroup v1 lines look like `12:devices:/docker/<64 hex>`; cgroup v2 with systemd like
`0::/system.slice/docker-<64 hex>.scope`; containerd/podman use `cri-containerd-<id>.scope` and
`libpod-<id>.scope`. The container id is the 64-hex path segment (stem) in any of them.
"""

from __future__ import annotations

import re
from pathlib import Path

_ID = re.compile(r"(?:^|[/:-])([0-9a-f]{64})(?:\.scope)?(?=/|$)")


def container_id_from_cgroup(text: str) -> str | None:
    """The container id a cgroup file names, or None for a process outside any container."""
    for line in text.splitlines():
        path = line.split(":", 2)[-1]
        for segment in path.split("/"):
            match = _ID.search(segment)
            if match:
                return match.group(1)
    return None


def container_id_of_pid(pid: int, proc: Path = Path("/proc")) -> str | None:
    """The container id of a host pid; None when the process is gone or not in a container."""
    try:
        text = (proc / str(pid) / "cgroup").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    return container_id_from_cgroup(text)


def _stat_field(pid: int, index: int, proc: Path) -> int | None:
    """Numeric field `index` of /proc/PID/stat, counted from the state field (0) after `(comm)`."""
    try:
        stat = (proc / str(pid) / "stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    # comm may contain spaces and parentheses: the fields after the last `)` are fixed.
    fields = stat.rsplit(")", 1)[-1].split()
    try:
        return int(fields[index])
    except (IndexError, ValueError):
        return None


def parent_pid(pid: int, proc: Path = Path("/proc")) -> int | None:
    """The parent of a host pid (None when gone); used to attribute an engine's worker processes."""
    return _stat_field(pid, 1, proc)


def start_time(pid: int, proc: Path = Path("/proc")) -> int | None:
    """The process start time in clock ticks since boot (guards pid files against pid reuse)."""
    return _stat_field(pid, 19, proc)
