"""A pod's state as scripts and the cockpit see it: running, serving, placement."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from backend.errors import C3Error
from backend.models import ComputeProcess, Gpu, Pod
from backend.runtime import placement as placement_rules
from backend.runtime.context import RuntimeContext
from backend.runtime.models import Placement, Workload
from backend.runtime.readiness import probe_health

if TYPE_CHECKING:
    from backend.views import PodStatus


def requested_uuids(pod: Pod, gpus: Iterable[Gpu]) -> tuple[str, ...]:
    """The pod's GPUs as UUIDs (indices the rig lacks are dropped; validation reports those)."""
    by_index = {g.index: g.uuid for g in gpus}
    return tuple(by_index[i] for i in pod.gpus if i in by_index)


def placement_of(
    ctx: RuntimeContext,
    pod: Pod,
    workload: Workload,
    *,
    serving: bool | None,
    processes: list[ComputeProcess] | None = None,
    owners: Mapping[int, str | None] | None = None,
) -> Placement:
    """Placement verdict for one pod; never raises (a failing source gives `unknown` with the reason)."""
    gpus = ctx.gpus() if ctx.probe is not None else []
    requested = requested_uuids(pod, gpus) if gpus else ()
    if ctx.probe is None:
        return placement_rules.verdict(pod=pod.name, requested=requested, gpus=gpus, processes=None, owners={}, running=workload.running, nvml_problem=ctx.probe_problem)
    procs = processes if processes is not None else ctx.processes()
    if owners is None and procs is not None and workload.running:
        try:
            owners = ctx.runtime.owners(p.pid for p in procs)
        except C3Error as error:
            return placement_rules.verdict(pod=pod.name, requested=requested, gpus=gpus, processes=None, owners={}, running=True, nvml_problem=f"cannot map processes to pods: {error.message}")
    place = placement_rules.verdict(
        pod=pod.name,
        requested=requested,
        gpus=gpus,
        processes=procs,
        owners=owners or {},
        running=workload.running,
        serving=serving,
        nvml_problem=ctx.probe_problem,
    )
    if place.verdict != "ok" and not place.actual and workload.running and procs is not None:
        # No GPU process at all: ask the engine's own log whether it runs on the CPU (one log read, only here).
        device = engine_device(ctx, pod)
        if device == "CPU":
            return placement_rules.verdict(pod=pod.name, requested=requested, gpus=gpus, processes=procs, owners=owners or {},
                                           running=True, serving=serving, engine_device=device)
    return place


def engine_device(ctx: RuntimeContext, pod: Pod, tail: int = 2000) -> str | None:
    """`CPU` when the pod's engine log says its KV cache is on the CPU; None when unknown or on a GPU.

    Read from the last `tail` lines: a long-serving engine's access log can push its boot lines out, and
    then the answer is None (the no-GPU-process verdict stands)."""
    from backend.fit.bootlog import parse_boot_log

    try:
        text = ctx.runtime.logs(pod.name, tail=tail)
    except C3Error:
        return None
    return parse_boot_log(text).kv_device


def same_estate(running: str | None, wanted: str | None) -> bool:
    """Whether a running workload's estate label names the same estate file as `wanted`.

    Workloads are identified by estate file and pod name; `""` is `c3 serve` (no estate file).
    """
    if running == wanted:
        return True
    if not running or not wanted:
        return False
    try:
        return os.path.samefile(running, wanted) or Path(running).resolve() == Path(wanted).resolve()
    except OSError:
        return Path(running).resolve() == Path(wanted).resolve()


def describe_estate(estate: str | None) -> str:
    """An estate label in words."""
    return f"estate {estate}" if estate else "`c3 serve` (no estate file)"


def pod_rows(ctx: RuntimeContext, pods: Iterable[Pod], *, health_path_of: Any = None, estate: str | None = None) -> list[PodStatus]:
    """`c3 pod status` rows: name, slug, gpus, port, running, serving, placement.

    With `estate` (the file's absolute path), a workload of the same name started from another estate
    file is not this pod: the row says `state: other-estate` and names that file in `other_estate`.
    """
    from backend.views import PodStatus

    pods = list(pods)
    workloads = dict(ctx.runtime.workloads())
    foreign = {}
    if estate is not None:
        foreign = {p.name: workloads.pop(p.name) for p in pods if p.name in workloads and not same_estate(workloads[p.name].estate, estate)}
    procs = ctx.processes()
    owners: Mapping[int, str | None] = {}
    if procs and any(workloads.get(p.name) and workloads[p.name].running for p in pods):
        owners = ctx.runtime.owners(p.pid for p in procs)
    rows: list[PodStatus] = []
    for pod in pods:
        workload = workloads.get(pod.name) or Workload(pod=pod.name, status="absent")
        serving = False
        if workload.running:
            path = health_path_of(pod) if health_path_of else "/v1/models"
            serving = probe_health(f"http://127.0.0.1:{pod.port}{path}", timeout=2.0) == "ready"
        place = placement_of(ctx, pod, workload, serving=serving, processes=procs, owners=owners)
        other = foreign.get(pod.name)
        if other is not None:
            place = place.model_copy(update={"reason": f"container c3-{pod.name} belongs to {describe_estate(other.estate)}"})
        rows.append(PodStatus(
            name=pod.name, slug=pod.slug, gpus=list(pod.gpus), port=pod.port, running=workload.running, serving=serving,
            state=workload.status if other is None else "other-estate", placement=place,
            other_estate=(other.estate or "") if other is not None else None, restart_count=workload.restart_count if other is None else 0,
        ))
    return rows


def is_running(pod_name: str, ctx: RuntimeContext) -> bool | None:
    """True when the pod's workload runs; None when it cannot be told (daemon down) — callers fail closed."""
    try:
        return ctx.runtime.workload(pod_name).running
    except C3Error:
        return None
