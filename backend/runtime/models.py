"""What the runtime hands around: a launch plan, a workload's state, a placement verdict, gate results.

Pydantic v2, frozen: these cross threads (the live hub) and the CLI prints them as JSON.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

GpuMode = Literal["nvidia", "cdi", "env"]
PlacementVerdict = Literal["ok", "mismatch", "unknown"]
WorkloadStatus = Literal["running", "exited", "created", "absent"]


class LaunchSpec(BaseModel):
    """Everything needed to start one pod's engine; contains no secret (HF_TOKEN is read at launch)."""

    model_config = ConfigDict(frozen=True)

    pod: str
    """Pod name; the container is `c3-<pod>`."""
    slug: str
    """Catalog entry the pod serves."""
    engine: str
    """vllm | llamacpp | sglang | custom."""
    image: str
    """Container image (tag, or `tag@sha256:…` when the catalog pins a digest)."""
    argv: tuple[str, ...]
    """The engine's command line inside the container."""
    env: dict[str, str] = Field(default_factory=dict)
    """Container environment from the catalog (never secrets)."""
    gpu_indices: tuple[int, ...]
    """Host GPU indices, as the estate names them."""
    gpu_uuids: tuple[str, ...]
    """Host GPU UUIDs the engine is pinned to (resolved at boot)."""
    host_port: int
    """Host port bound to the engine's port."""
    container_port: int
    """Port the engine listens on inside the container."""
    health_path: str = "/v1/models"
    """Readiness path, polled on the host port."""
    estate: str = ""
    """Estate file the pod comes from (label `io.c3.estate`)."""
    gpu_mode: GpuMode = "env"
    """How the GPUs reach the container."""


class Workload(BaseModel):
    """A pod's engine as the runtime sees it right now (a container, or a local process in the simulator)."""

    model_config = ConfigDict(frozen=True)

    pod: str
    """Pod name."""
    status: WorkloadStatus
    """running | exited | created | absent."""
    id: str | None = None
    """Container id (or `sim-<pid>`)."""
    slug: str | None = None
    """Slug label it was started with."""
    estate: str | None = None
    """Estate label it was started with."""
    host_port: int | None = None
    """Host port it is bound to."""
    exit_code: int | None = None
    """Exit status when it has exited."""
    pids: tuple[int, ...] = ()
    """Host pids of its processes (when known)."""
    gpu_uuids: tuple[str, ...] = ()
    """GPUs it was started on (label `io.c3.gpus`), so claims are known even for another estate file's pods."""
    restart_count: int = 0
    """How many times the runtime restarted it after its engine exited (Docker's `RestartCount` under the
    `unless-stopped` policy a pod gets once it has served); 0 where the runtime never restarts."""

    @property
    def running(self) -> bool:
        """True while the engine process is alive."""
        return self.status == "running"


class ResourceUse(BaseModel):
    """A running workload's CPU and memory use, as `docker stats` reports it (the simulator: its process's)."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    cpu_pct: float | None
    """CPU use over the sampling interval, in % of one core (`docker stats`' scale: 200 = two cores busy);
    None when the runtime gave no earlier sample to compare with."""
    mem_bytes: int
    """Memory in use: the cgroup's usage less its inactive page cache (`docker stats`' figure); the simulator: RSS."""
    mem_limit_bytes: int | None = None
    """The workload's own memory limit; None when it has none (c3 sets none: the host's memory is the bound)."""


class ForeignProcess(BaseModel):
    """A process on one of a pod's GPUs that does not belong to the pod."""

    model_config = ConfigDict(frozen=True)

    pid: int
    """Host pid."""
    gpu_uuid: str
    """The pod's GPU it sits on."""
    gpu_index: int | None = None
    """That GPU's host index."""
    used_mib: int | None = None
    """Memory it holds."""
    owner: str | None = None
    """Another pod's name, or None for a process c3 did not start (a stranger)."""


class Placement(BaseModel):
    """Where a pod's engine really landed, seen from the host (NVML → cgroup → container → pod)."""

    model_config = ConfigDict(frozen=True)

    verdict: PlacementVerdict
    """ok (exactly the requested GPUs) | mismatch | unknown."""
    requested: tuple[str, ...]
    """UUIDs the pod asked for."""
    actual: tuple[str, ...] = ()
    """UUIDs the pod's processes hold memory on."""
    requested_indices: tuple[int, ...] = ()
    """Host indices the pod asked for."""
    actual_indices: tuple[int, ...] = ()
    """Host indices of `actual` (UUIDs the probe does not know are left out)."""
    missing: tuple[str, ...] = ()
    """Requested GPUs the pod is not on."""
    extra: tuple[str, ...] = ()
    """GPUs the pod spilled onto without asking."""
    foreign: tuple[ForeignProcess, ...] = ()
    """Other processes on the pod's GPUs."""
    reason: str = ""
    """Why the verdict is `unknown` or `mismatch`, in words."""

    def summary(self) -> str:
        """One line for humans."""
        if self.verdict == "ok":
            text = "placement ok: on exactly its GPUs " + _idx(self.requested_indices)
        elif self.verdict == "mismatch":
            text = f"placement MISMATCH: {self.reason}"
        else:
            text = f"placement unknown: {self.reason}"
        if self.foreign:
            who = ", ".join(
                f"pid {f.pid} on GPU {f.gpu_index if f.gpu_index is not None else f.gpu_uuid}"
                + (f" (pod {f.owner})" if f.owner else " (not a c3 pod)")
                for f in self.foreign
            )
            text += f"; foreign process: {who}"
        return text


def _idx(indices: tuple[int, ...]) -> str:
    return ",".join(str(i) for i in indices) if indices else "-"


class GateResult(BaseModel):
    """One pre-boot check: passed, refused, or passed by --force with a warning."""

    model_config = ConfigDict(frozen=True)

    gate: str
    """vram | port | gpus."""
    ok: bool
    """True when the gate passed on its own."""
    message: str = ""
    """What is wrong (empty when ok)."""
    hint: str | None = None
    """What to do about it."""
    forced: bool = False
    """Passed only because of --force."""
    checked: bool = True
    """False when the gate's data source failed (NVML did not answer): nothing was judged, and the
    gate refuses like a failure (`message` starts `not checked:`) unless --force."""


class ExecResult(BaseModel):
    """A command run inside a pod's workload (`c3 pod exec`)."""

    model_config = ConfigDict(frozen=True)

    exit_code: int
    """The command's exit status."""
    output: str
    """Its stdout and stderr, interleaved as the runtime received them (cut at `MAX_EXEC_OUTPUT` bytes)."""
    truncated: bool = False
    """The output was longer than `MAX_EXEC_OUTPUT` and was cut."""


MAX_EXEC_OUTPUT = 4 << 20
"""The most of a command's output `c3 pod exec` keeps (4 MiB)."""
