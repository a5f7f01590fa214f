"""A pod's state as scripts and the cockpit see it: running, serving, placement."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from backend.errors import C3Error
from backend.models import ComputeProcess, Gpu, Pod
from backend.runtime import placement as placement_rules
from backend.runtime.context import RuntimeContext
from backend.runtime.models import Placement, Workload


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


def is_running(pod_name: str, ctx: RuntimeContext) -> bool | None:
    """True when the pod's workload runs; None when it cannot be told (daemon down) — callers fail closed."""
    try:
        return ctx.runtime.workload(pod_name).running
    except C3Error:
        return None
