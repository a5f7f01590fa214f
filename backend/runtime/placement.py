"""Placement verified from the host: which GPUs a pod's processes really hold memory on.

NVML lists compute processes by host pid; the runtime maps each pid to a pod (cgroup → container →
`io.c3.pod` label, or the simulator's pid files). The verdict is computed here, purely, so every case
is unit-tested. Unlike club-3090's in-container `nvidia-smi` check (which can false-pass when the
container sees other tenants, and never flags extra GPUs), `ok` means *exactly* the requested GPUs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from backend.models import ComputeProcess, Gpu
from backend.runtime.models import ForeignProcess, Placement

#: The reason given for an engine that runs on the CPU (its boot log says so) — final, not "still loading".
CPU_ENGINE = "the engine runs on the CPU (its boot log says so): it holds no GPU memory, so placement cannot be verified"


def verdict(
    *,
    pod: str,
    requested: Sequence[str],
    gpus: Sequence[Gpu],
    processes: Iterable[ComputeProcess] | None,
    owners: Mapping[int, str | None],
    running: bool,
    serving: bool | None = None,
    nvml_problem: str | None = None,
    engine_device: str | None = None,
) -> Placement:
    """Judge one pod's placement.

    `processes` is every NVML compute process on the host (None when NVML could not be asked);
    `owners` maps a pid to the pod it belongs to (None or absent: not a c3 pod). `engine_device` is
    where the engine's own boot log says its KV cache lives (`CPU` for vLLM's CPU build or a llama.cpp
    without GPU buffers): such an engine holds no GPU memory, so there is nothing to verify — `unknown`
    with that reason, not a mismatch.
    """
    index_of = {g.uuid: g.index for g in gpus}
    req = tuple(requested)
    req_idx = tuple(index_of[u] for u in req if u in index_of)
    base = {"requested": req, "requested_indices": req_idx}
    if not running:
        return Placement(verdict="unknown", reason="the pod is not running", **base)
    if processes is None:
        return Placement(verdict="unknown", reason=nvml_problem or "NVML is not available on this host", **base)
    procs = list(processes)
    mine = [p for p in procs if owners.get(p.pid) == pod]
    actual = tuple(sorted({p.gpu_uuid for p in mine}, key=lambda u: (index_of.get(u, 1 << 30), u)))
    act_idx = tuple(index_of[u] for u in actual if u in index_of)
    foreign = tuple(
        ForeignProcess(pid=p.pid, gpu_uuid=p.gpu_uuid, gpu_index=index_of.get(p.gpu_uuid), used_mib=p.used_mib, owner=owners.get(p.pid))
        for p in procs
        if p.gpu_uuid in req and owners.get(p.pid) != pod
    )
    base.update(actual=actual, actual_indices=act_idx, foreign=foreign)
    if not mine:
        if engine_device == "CPU":
            return Placement(verdict="unknown", reason=CPU_ENGINE, **base)
        if serving:
            # Serving with no GPU process at all: the engine fell back to CPU or its GPUs never arrived.
            return Placement(verdict="mismatch", missing=req, reason="the pod answers but holds memory on none of its GPUs", **base)
        return Placement(verdict="unknown", reason="no GPU process of the pod yet (still loading?)", **base)
    missing = tuple(u for u in req if u not in actual)
    extra = tuple(u for u in actual if u not in req)
    if not missing and not extra:
        return Placement(verdict="ok", **base)
    parts = []
    if missing:
        parts.append("not on requested GPU " + _names(missing, index_of))
    if extra:
        parts.append("also on GPU " + _names(extra, index_of) + " it did not ask for")
    return Placement(verdict="mismatch", missing=missing, extra=extra, reason="; ".join(parts), **base)


def _names(uuids: Iterable[str], index_of: Mapping[str, int]) -> str:
    return ", ".join(str(index_of[u]) if u in index_of else u for u in uuids)


def attribute(pids: Iterable[int], owner_of_pid: Callable[[int], str | None], parent_of: Callable[[int], int | None], depth: int = 8) -> dict[int, str | None]:
    """Map each pid to its pod, walking up a few parents (an engine's GPU workers are its children)."""
    result: dict[int, str | None] = {}
    for pid in pids:
        owner, cursor = None, pid
        for _ in range(depth):
            owner = owner_of_pid(cursor)
            if owner is not None:
                break
            parent = parent_of(cursor)
            if parent is None or parent <= 1:
                break
            cursor = parent
        result[pid] = owner
    return result
