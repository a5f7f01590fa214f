"""The runtime seam: what boot, placement, status and the live hub need from whatever runs pods.

Two implementations: `docker_adapter.DockerRuntime` (containers via docker-py) and
`simulated.SimRuntime` (the stub engine as local processes, for `c3 demo` and tests).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Protocol

from backend.runtime.gpu_mode import ModeDecision
from backend.runtime.models import ExecResult, LaunchSpec, ResourceUse, Workload


class PodRuntime(Protocol):
    """Starts, stops and inspects pod workloads on this host."""

    kind: str
    """`docker` or `sim`."""

    def gpu_mode(self, forced: str | None = None) -> ModeDecision:
        """How GPUs will reach the workload."""

    def launch(self, spec: LaunchSpec, secret_env: Mapping[str, str]) -> Workload:
        """Create and start the workload (replacing a stopped one of the same pod)."""

    def workload(self, pod: str) -> Workload:
        """The pod's workload now (status `absent` when there is none)."""

    def workloads(self) -> dict[str, Workload]:
        """Every c3 pod workload on this host, by pod name."""

    def mark_healthy(self, pod: str) -> None:
        """Called once the pod served: from now on the runtime may restart it after a crash or reboot."""

    def stop(self, pod: str, timeout: float = 30.0) -> bool:
        """Stop and remove the pod's workload; False when there was none."""

    def logs(self, pod: str, tail: int = 100, timestamps: bool = False) -> str:
        """The last lines of the workload's output ('' when there is none). `timestamps`: prefix each
        line with the runtime's RFC 3339 receive time and a space, where the runtime records one."""

    def follow_logs(self, pod: str, tail: int = 100) -> Iterator[str]:
        """Output lines as they come, until the workload stops."""

    def exec_in(self, pod: str, argv: list[str], timeout: float) -> ExecResult:
        """Run `argv` inside the pod's running workload and wait for it (at most `timeout` s: Refused
        after that, the command may go on running). Refused where the runtime cannot enter a workload."""

    def usage(self, pods: Iterable[str]) -> dict[str, ResourceUse]:
        """CPU and memory of each named pod's running workload, sampled now over about a second (slow:
        call it from a worker, never per fast poll); a pod that does not run or cannot be read is left out."""

    def owners(self, pids: Iterable[int]) -> dict[int, str | None]:
        """Which pod each host pid belongs to (None: not a c3 pod)."""
