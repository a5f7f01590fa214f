"""A memory budget enforced by Docker for the real-engine gateway test (issue 28): a parent cgroup with a
memory limit that the pod containers are created under (`cgroup_parent`), each with its own `--memory`,
so that an overshoot is a visible OOM kill (Docker's `oom` event, the container's `OOMKilled`), not a
slowdown. cgroupfs driver only (its `cgroup_parent` is a path; systemd's would be a slice); cgroup v1
(`memory.limit_in_bytes`) or v2 (`memory.max`). The machine has no swap, and each container's swap is
pinned to its memory limit, so nothing can page out instead of being killed."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CGROUP = Path("/sys/fs/cgroup")


def _memory_root() -> tuple[Path, int]:
    """(the memory controller's root, cgroup version)."""
    if (CGROUP / "memory" / "memory.limit_in_bytes").exists():
        return CGROUP / "memory", 1
    if (CGROUP / "cgroup.controllers").exists() and "memory" in (CGROUP / "cgroup.controllers").read_text():
        return CGROUP, 2
    pytest.skip("no cgroup memory controller on this machine: the budget cannot be enforced")


class Budget:
    """The parent cgroup: `parent` (Docker's `cgroup_parent`), `limit_mib`; `peak_mib(cid)` of a container under it."""

    def __init__(self, root: Path, version: int, name: str, limit_mib: int) -> None:
        self.root, self.version, self.limit_mib = root, version, limit_mib
        self.parent = f"/{name}"
        self.path = root / name

    def create(self) -> None:
        self.path.mkdir()
        limit = str(self.limit_mib * 1024 * 1024)
        (self.path / ("memory.limit_in_bytes" if self.version == 1 else "memory.max")).write_text(limit)
        if self.version == 2 and (self.path / "memory.swap.max").exists():
            (self.path / "memory.swap.max").write_text("0")

    def peak_mib(self, container_id: str) -> float | None:
        """The container's peak memory (its own cgroup's high-water mark), None once it is gone."""
        name = "memory.max_usage_in_bytes" if self.version == 1 else "memory.peak"
        with contextlib.suppress(OSError, ValueError):
            return int((self.path / container_id / name).read_text()) / (1024 * 1024)
        return None

    def remove(self) -> None:
        for _ in range(50):  # the containers' own cgroups go a moment after their removal
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.1)


@contextlib.contextmanager
def memory_budget(docker_client: Any, limit_mib: int) -> Iterator[Budget]:
    """A fresh parent cgroup limited to `limit_mib`; removed afterwards (its containers must be gone by then)."""
    if docker_client.info().get("CgroupDriver") != "cgroupfs":
        pytest.skip("dockerd does not use the cgroupfs driver: a parent cgroup path cannot be given")
    root, version = _memory_root()
    if not os.access(root, os.W_OK):
        pytest.skip(f"{root} is not writable: the budget cannot be created")
    budget = Budget(root, version, f"c3-budget-{os.getpid()}-{time.monotonic_ns()}", limit_mib)
    budget.create()
    try:
        yield budget
    finally:
        budget.remove()


def under_budget(budget: Budget, pod_mib: int, create_kwargs: Any) -> Any:
    """`docker_adapter.create_kwargs` with every pod container put under `budget`, limited to `pod_mib`."""

    def wrapped(*args: Any, **kwargs: Any) -> dict[str, Any]:
        made = create_kwargs(*args, **kwargs)
        return {**made, "cgroup_parent": budget.parent, "mem_limit": f"{pod_mib}m", "memswap_limit": f"{pod_mib}m"}

    return wrapped


def oom_events(docker_client: Any, since: float, until: float) -> list[str]:
    """Names of the containers the kernel OOM-killed (Docker's `oom` events) between the two Unix times."""
    events = docker_client.events(since=int(since), until=int(until) + 1, filters={"event": "oom"}, decode=True)
    return [e.get("Actor", {}).get("Attributes", {}).get("name", "?") for e in events]
