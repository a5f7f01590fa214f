"""Booting pods: gates → launch → wait until serving → mark healthy → placement. One pod or many in parallel.

Parallel boot runs each pod's whole sequence in a worker thread (the waits are I/O), so N pods take
about as long as the slowest; `stagger` spaces the launches when engines contend at start-up.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from backend.errors import C3Error, Refused
from backend.models import CatalogEntry, Gpu, Pod
from backend.runtime import engines, gates
from backend.runtime import placement as placement_rules
from backend.runtime.bootlog import BootLog
from backend.runtime.context import RuntimeContext
from backend.runtime.models import GateResult, LaunchSpec, Placement
from backend.runtime.readiness import wait_ready
from backend.runtime.status import describe_estate, placement_of, same_estate

SECRET_ENV = ("HF_TOKEN",)
Progress = Callable[[str, str], None]
"""progress(pod, line)."""


@dataclass
class BootOutcome:
    """How one pod's boot ended."""

    pod: str
    ok: bool
    phase: str
    """ready | already-running | exited | timeout | absent | refused."""
    elapsed_s: float = 0.0
    """From the start of this pod's boot (gates, launch, readiness) to serving or failure."""
    detail: str = ""
    log_tail: str = ""
    placement: Placement | None = None
    placement_s: float | None = None
    """Seconds from the workload's start to a placement verdict other than `unknown`."""
    verdict_after_ready_s: float | None = None
    """Seconds from serving to that verdict (what placement itself costs)."""
    warnings: list[GateResult] = field(default_factory=list)
    boot_log: Path | None = None


def secret_env() -> dict[str, str]:
    """Secrets the container needs, from the caller's environment (never logged, never in argv)."""
    from backend.settings import current

    return {k: v for k, v in current().secret_env().items() if k in SECRET_ENV}


def pod_gpus(ctx: RuntimeContext, pod: Pod) -> list[Gpu]:
    """The pod's GPUs, resolved on this rig now (UUIDs are resolved at boot, indices are stored)."""
    if ctx.probe is None:
        # No NVML: pin by host index (what `docker --gpus device=N` does); placement will be `unknown`.
        return [Gpu(index=i, uuid=str(i), name="unknown (NVML unavailable)", total_mib=None) for i in pod.gpus]
    by_index = {g.index: g for g in ctx.gpus()}
    missing = [i for i in pod.gpus if i not in by_index]
    if missing:
        raise Refused(f"pod {pod.name} uses GPU {','.join(map(str, missing))}, which this rig does not have ({len(by_index)} GPUs)")
    return [by_index[i] for i in pod.gpus]


def launch_spec(pod: Pod, entry: CatalogEntry, gpus: Sequence[Gpu], *, mode: str, estate: str) -> LaunchSpec:
    """The launch plan of a pod (pure)."""
    command = engines.with_sleep_mode(engines.render(entry)) if pod.sleep_mode and entry.engine == "vllm" else engines.render(entry)
    image = f"{entry.image}@{entry.image_digest}" if entry.image_digest and "@" not in entry.image else entry.image
    return LaunchSpec(
        pod=pod.name,
        slug=entry.slug,
        engine=entry.engine,
        image=image,
        argv=tuple(command.argv),
        env=command.env,
        gpu_indices=tuple(g.index for g in gpus),
        gpu_uuids=tuple(g.uuid for g in gpus),
        host_port=pod.port,
        container_port=command.container_port,
        health_path=command.health_path,
        estate=estate,
        gpu_mode=mode,
    )


def run_gates(
    ctx: RuntimeContext,
    pod: Pod,
    entry: CatalogEntry,
    gpus: Sequence[Gpu],
    *,
    force: bool,
    vram_attempts: int = gates.VRAM_ATTEMPTS,
    vram_interval_s: float = gates.VRAM_INTERVAL_S,
    asleep: Sequence[str] = (),
) -> list[GateResult]:
    """All gates for one pod; Refused on failure unless forced (then the failures come back as warnings).
    `asleep`: pods the gateway put to sleep on these GPUs: their claim and processes do not block the GPU gate;
    what they still hold is free memory the VRAM gate does not see, so it judges them."""
    workloads = list(ctx.runtime.workloads().values())
    procs = ctx.processes()
    owners = ctx.runtime.owners(p.pid for p in procs) if procs else {}
    awake = [w for w in workloads if w.pod not in asleep]
    theirs = [p for p in procs if owners.get(p.pid) not in asleep] if procs is not None and asleep else procs
    results = [
        gates.gpus_gate(pod=pod.name, gpus=gpus, workloads=awake, processes=theirs, owners=owners),
        gates.port_gate(port=pod.port, workloads=[w for w in workloads if w.pod != pod.name]),
    ]
    if procs is None:  # no NVML, or it stopped answering: nobody can say who holds the GPUs
        results.append(gates.not_checked("gpus", f"processes on the GPUs: {ctx.probe_problem or 'NVML is unavailable'}"))
    results.append(gates.vram_gate(slug=entry.slug, gpus=gpus, entry=entry, read_free=ctx.free_mib, reservation=ctx.reserve,
                                    attempts=vram_attempts, interval_s=vram_interval_s))
    return gates.enforce(pod.name, results, force=force)


def boot_pod(
    ctx: RuntimeContext,
    pod: Pod,
    *,
    estate: str = "",
    force: bool = False,
    timeout_s: float = 900.0,
    progress: Progress | None = None,
    vram_attempts: int = gates.VRAM_ATTEMPTS,
    vram_interval_s: float = gates.VRAM_INTERVAL_S,
    asleep: Sequence[str] = (),
) -> BootOutcome:
    """Boot one pod to serving and judge its placement. Raises C3Error for refusals before launch."""
    say = progress or (lambda _pod, _line: None)
    begun = time.monotonic()
    current = ctx.runtime.workload(pod.name)
    if current.running and not same_estate(current.estate, estate):
        raise Refused(
            f"pod `{pod.name}` runs from {describe_estate(current.estate)}, not from {describe_estate(estate)}"
            f" (container c3-{pod.name}{f', port {current.host_port}' if current.host_port else ''})",
            hint=f"container names are per host: rename this pod, or stop the other one first (`c3 pod down {pod.name}`)",
        )
    if current.running:
        serving_place = placement_of(ctx, pod, current, serving=None)
        return BootOutcome(pod=pod.name, ok=True, phase="already-running", placement=serving_place, detail="already running")
    entry = ctx.entry(pod.slug)
    gpus = pod_gpus(ctx, pod)
    try:
        warnings = run_gates(ctx, pod, entry, gpus, force=force, vram_attempts=vram_attempts, vram_interval_s=vram_interval_s, asleep=asleep)
    except Refused:
        # Another `up` of this very pod may have started it meanwhile: its port and GPUs are then "taken".
        current = ctx.runtime.workload(pod.name)
        if current.running and same_estate(current.estate, estate):
            return BootOutcome(pod=pod.name, ok=True, phase="already-running", placement=placement_of(ctx, pod, current, serving=None), detail="started by another `up` meanwhile")
        raise
    log = BootLog(pod.name)
    try:
        for w in warnings:
            line = f"warning: --force passes the {w.gate} gate: {w.message}" if w.checked else f"WARNING: --force boots without the {w.gate} gate: {w.message}"
            say(pod.name, line)
            log.line(line)
        if ctx.probe is None:
            line = f"warning: {ctx.probe_problem or 'NVML is unavailable'}; pinning GPUs by index, placement cannot be verified"
            say(pod.name, line)
            log.line(line)
        elif pod.uuids and tuple(pod.uuids) != tuple(g.uuid for g in gpus):
            line = f"warning: GPU order changed since pod {pod.name} was created; pinning the GPUs now at indices {','.join(map(str, pod.gpus))}"
            say(pod.name, line)
            log.line(line)
        decision = ctx.runtime.gpu_mode(ctx.forced_mode)
        spec = launch_spec(pod, entry, gpus, mode=decision.mode, estate=estate)
        log.line(f"pod {pod.name}: {entry.slug} on GPU {','.join(map(str, pod.gpus))} port {pod.port}, gpu mode {decision.mode} ({decision.why})")
        log.line("argv: " + " ".join(spec.argv))
        started = time.monotonic()
        ctx.runtime.launch(spec, secret_env())
        say(pod.name, f"started ({ctx.runtime.kind}, gpu mode {decision.mode})")

        def report(phase: str, elapsed: float) -> None:
            line = f"{phase} … {elapsed:.0f} s"
            say(pod.name, line)
            log.line(line)

        result = wait_ready(
            url=f"http://127.0.0.1:{pod.port}{spec.health_path}",
            workload=lambda: ctx.runtime.workload(pod.name),
            logs=lambda n: ctx.runtime.logs(pod.name, tail=n),
            timeout_s=timeout_s,
            progress=report,
        )
        if not result.ok:
            log.line(f"boot failed: {result.detail}")
            log.write(ctx.runtime.logs(pod.name, tail=2000))
            if result.phase == "timeout":
                ctx.runtime.stop(pod.name, timeout=10)  # a hung boot must not keep holding its GPUs
            return BootOutcome(pod=pod.name, ok=False, phase=result.phase, elapsed_s=time.monotonic() - begun, detail=result.detail, log_tail=result.log_tail, warnings=warnings, boot_log=log.path)
        ctx.runtime.mark_healthy(pod.name)
        ready_at = time.monotonic()
        place, placed_at = _settle_placement(ctx, pod)
        log.line(place.summary())
        for line in learn_from_log(ctx, pod, entry, gpus):
            if line.startswith("warning:"):  # the record itself goes to the boot log only: `pod up` output stays as it was
                say(pod.name, line)
            log.line(line)
        return BootOutcome(
            pod=pod.name,
            ok=True,
            phase="ready",
            elapsed_s=ready_at - begun,
            placement=place,
            placement_s=(placed_at - started) if placed_at else None,
            verdict_after_ready_s=(placed_at - ready_at) if placed_at else None,
            warnings=warnings,
            boot_log=log.path,
        )
    finally:
        log.close()


def learn_from_log(ctx: RuntimeContext, pod: Pod, entry: CatalogEntry, gpus: Sequence[Gpu]) -> list[str]:
    """Keep what the engine measured at this boot for the next fit of the same setup (backend/fit/learned.py);
    the lines to show. Never fails the boot that has just served: a store that cannot be written is one warning."""
    from backend.fit import learn_boot

    try:
        text = ctx.runtime.logs(pod.name, tail=4000)
        rec, warning = learn_boot(entry, list(gpus), text, pod=pod.name, catalog=ctx.catalog)
    except (C3Error, OSError, ValueError) as error:
        return [f"warning: fit store not updated: {getattr(error, 'message', None) or error}"]
    lines = [f"warning: {warning}"] if warning else []
    if rec is not None:
        kv = rec.measured.available_kv_gib
        guess = rec.predicted.available_kv_gib if rec.predicted is not None else None
        off = f", {kv - guess:+.2f} GiB from c3's prediction" if kv is not None and guess is not None else ""
        lines.append(f"fit: recorded this boot's measured memory{f' (KV {kv:.2f} GiB{off})' if kv is not None else ''} for the next `c3 fit {entry.slug}`")
    return lines


def _settle_placement(ctx: RuntimeContext, pod: Pod, wait_s: float = 10.0) -> tuple[Placement, float | None]:
    """Placement right after serving; an engine may register its GPU memory a moment late, so retry `unknown` briefly."""
    deadline = time.monotonic() + wait_s
    delay = 0.1
    while True:
        workload = ctx.runtime.workload(pod.name)
        place = placement_of(ctx, pod, workload, serving=None)
        final = place.verdict != "unknown" or place.reason == placement_rules.CPU_ENGINE
        if final or ctx.probe is None or not workload.running or time.monotonic() >= deadline:
            return place, (time.monotonic() if place.verdict != "unknown" else None)
        time.sleep(delay)
        delay = min(delay * 2, 1.0)


def boot_many(
    ctx: RuntimeContext,
    pods: Sequence[Pod],
    *,
    estate: str = "",
    force: bool = False,
    timeout_s: float = 900.0,
    jobs: int | None = None,
    stagger_s: float = 0.0,
    progress: Progress | None = None,
) -> list[BootOutcome]:
    """Boot several pods concurrently (`jobs` at a time, launches `stagger_s` apart); outcomes in input order."""
    if not pods:
        return []
    workers = max(1, min(jobs or len(pods), len(pods)))

    def one(pod: Pod) -> BootOutcome:
        try:
            return boot_pod(ctx, pod, estate=estate, force=force, timeout_s=timeout_s, progress=progress)
        except C3Error as error:
            return BootOutcome(pod=pod.name, ok=False, phase="refused", detail=error.message + (f" ({error.hint})" if error.hint else ""))

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="c3-boot") as pool:
        futures = []
        for i, pod in enumerate(pods):
            if i and stagger_s > 0:
                time.sleep(stagger_s)
            futures.append(pool.submit(one, pod))
        return [f.result() for f in futures]
