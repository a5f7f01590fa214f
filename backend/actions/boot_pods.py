"""Boot pods: gates, launch pinned to their GPUs, wait until they serve, verify placement
(`c3 pod up`, `c3 up`, the cockpit's `u`)."""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from backend.actions.base import Action, Outcome, Plan, Problem, Progress, ProgressSink
from backend.actions.registry import register
from backend.actions.workspace import Workspace, boot_blockers, gpu_collisions
from backend.errors import C3Error, Refused


@register
@dataclass
class BootPods(Action):
    """Boot the named pods of the estate, one after the other or `parallel`."""

    key = "up"
    doing = "boot {target}"
    progress_panel = "boot"
    ws: Workspace
    names: tuple[str, ...]
    force: bool = False
    """Pass a failing gate (VRAM, port, GPUs held, not checked) with a warning."""
    timeout_s: float = 900.0
    parallel: bool = False
    jobs: int | None = None
    stagger_s: float = 0.0
    isolate: bool = False
    """A refusal of one pod is that pod's failed outcome (the estate-wide `c3 up`), not the end of the write."""
    follow_logs: bool = False
    """While a pod boots, read its engine's last lines about once a second (the cockpit's boot panel)."""
    asleep: tuple[str, ...] = ()
    """Pods the gateway put to sleep on these GPUs: the GPU gate lets them be (the VRAM gate judges what they hold)."""

    @classmethod
    def from_request(cls, ws: Any, target: str | None, request: Any) -> BootPods:
        return cls(ws, (target or "",), follow_logs=True)

    @property
    def target(self) -> str | None:
        return self.names[0] if len(self.names) == 1 else None

    def plan(self) -> Plan:
        lines: list[str] = []
        for name in self.names:
            try:
                lines += _boot_lines(self.ws, self.ws.pod(name))
            except C3Error as error:
                lines.append(error.message)
        return Plan(f"Boot pod {', '.join(self.names)}", tuple(lines))

    def problems(self) -> list[Problem]:
        try:
            pods = [self.ws.pod(name) for name in self.names]
        except C3Error as error:
            return [Problem(error.message, hint=error.hint)]
        found = boot_blockers(self.ws, [p.name for p in pods], force=self.force) or gpu_collisions(self.ws, [p.name for p in pods])
        if found:
            return found
        return [Problem(f"pod `{p.name}` is already running", "noop") for p in pods if self.ws.ctx.runtime.workload(p.name).running]

    def run(self, progress: ProgressSink) -> Outcome:
        from backend.runtime.boot import BootOutcome, boot_many

        pods = [self.ws.pod(name) for name in self.names]
        started = time.monotonic()

        def say(pod: str, line: str) -> None:
            progress(Progress(pod, line.split(" … ")[0], time.monotonic() - started, line=line))

        if self.parallel and len(pods) > 1:
            outcomes = boot_many(self.ws.ctx, pods, estate=self.ws.estate_label, force=self.force, timeout_s=self.timeout_s,
                                 jobs=self.jobs, stagger_s=self.stagger_s, progress=say)
        else:
            outcomes = []
            for pod in pods:
                try:
                    outcomes.append(self._boot_one(pod, progress))
                except Refused as error:
                    if not self.isolate:
                        raise
                    outcomes.append(BootOutcome(pod=pod.name, ok=False, phase="refused", detail=error.message))
        return _summary(outcomes, {p.name: p.port for p in pods})

    def _boot_one(self, pod: Any, progress: ProgressSink) -> Any:
        from backend.runtime.boot import boot_pod

        name = pod.name
        started = time.monotonic()
        tail: deque[str] = deque(maxlen=4)
        last_logs = [0.0]
        phase = ["starting"]
        emitting = threading.Lock()

        def emit(line: str | None = None) -> None:
            with emitting:  # the boot's own callback and the ticker below
                now = time.monotonic()
                if self.follow_logs and now - last_logs[0] > 0.8:  # the engine's own last lines, at most about once a second
                    last_logs[0] = now
                    try:
                        lines = self.ws.ctx.runtime.logs(name, tail=3).splitlines()[-3:]
                        tail.clear()
                        tail.extend(lines)
                    except C3Error:
                        pass
                progress(Progress(name, phase[0], now - started, tuple(tail), line=line))

        def report(_pod: str, line: str) -> None:
            phase[0] = line.split(" … ")[0]
            emit(line)

        # The boot reports a phase only when it changes (or every 10 s); a real engine loads for
        # minutes, so the engine's own lines are read once a second meanwhile.
        finished = threading.Event()

        def tick() -> None:
            while not finished.wait(1.0):
                emit()

        ticker = threading.Thread(target=tick, name=f"c3-boot-log-{name}", daemon=True) if self.follow_logs else None
        if ticker is not None:
            ticker.start()
        try:
            outcome = boot_pod(self.ws.ctx, pod, estate=self.ws.estate_label, force=self.force, timeout_s=self.timeout_s, progress=report,
                               asleep=self.asleep)
        finally:
            finished.set()
            if ticker is not None:
                ticker.join(timeout=5)
        log_tail = tuple(outcome.log_tail.rstrip().splitlines()[-4:]) if outcome.log_tail else tuple(tail)
        progress(Progress(name, "serving" if outcome.ok else outcome.phase, time.monotonic() - started, log_tail, done=True, ok=outcome.ok))
        return outcome


def _summary(outcomes: list[Any], ports: dict[str, int]) -> Outcome:
    """One outcome for the write; `data` keeps every pod's `BootOutcome` for a CLI to print."""
    failed = [o for o in outcomes if not o.ok]
    mismatched = [o for o in outcomes if o.ok and o.placement is not None and o.placement.verdict == "mismatch"]
    if len(outcomes) != 1:
        ok = not failed and not mismatched
        text = f"{len(outcomes) - len(failed)}/{len(outcomes)} pods serving" + (f"; failed: {', '.join(o.pod for o in failed)}" if failed else "")
        return Outcome(ok, text + (f"; placement mismatch: {', '.join(o.pod for o in mismatched)}" if mismatched else ""), data=outcomes)
    o = outcomes[0]
    if failed:
        where = f" (boot log: {o.boot_log})" if o.boot_log else ""
        return Outcome(False, f"pod {o.pod} failed to boot: {o.detail}{where}", "press l for the engine's log", data=outcomes)
    if mismatched:
        return Outcome(False, f"pod {o.pod} serves, but not on exactly its GPUs: {o.placement.reason}", "it is left running; d stops it", data=outcomes)
    summary = o.placement.summary() if o.placement is not None else "placement not verified"
    return Outcome(True, f"pod {o.pod} is serving on http://127.0.0.1:{ports.get(o.pod)}/v1 after {o.elapsed_s:.0f} s — {summary}", data=outcomes)


def _boot_lines(ws: Workspace, pod: Any) -> list[str]:
    from backend.runtime.boot import launch_spec

    try:
        entry = ws.catalog().get(pod.slug)
        by_index = {g.index: g for g in ws.gpus()}
        gpus = [by_index[i] for i in pod.gpus if i in by_index]
        decision = ws.ctx.runtime.gpu_mode(ws.ctx.forced_mode)
        spec = launch_spec(pod, entry, gpus, mode=decision.mode, estate=str(ws.estate_path))
    except C3Error as error:
        return [f"boot pod {pod.name}: {error.message}"]
    where = "container c3-" + pod.name if ws.ctx.runtime.kind == "docker" else f"local stub process for {pod.name}"
    gpu_list = ",".join(str(i) for i in pod.gpus)
    return [
        f"gates: GPUs {gpu_list} not held by another pod or process, port {pod.port} free, enough free VRAM",
        f"start {where} from {spec.image}",
        f"pin GPU {', '.join(f'{g.index} ({g.uuid})' for g in gpus)} — gpu mode {decision.mode} ({decision.why})",
        f"publish port {pod.port} → {spec.container_port}; wait for {spec.health_path}, then verify placement",
        "argv: " + " ".join(spec.argv)[:300],
    ]
