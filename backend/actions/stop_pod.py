"""Stop and remove one pod's workload; the estate file is not changed (`c3 pod down`, the cockpit's `d`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from backend.actions.base import Action, Outcome, Plan, Problem, ProgressSink
from backend.actions.registry import register
from backend.actions.workspace import Workspace
from backend.errors import C3Error


@register
@dataclass
class StopPod(Action):
    """Stop `c3-NAME` — any c3 pod, planned or not, unless `planned` asks for a pod of the estate."""

    key = "down"
    doing = "stop {target}"
    ws: Workspace
    name: str
    timeout_s: float = 30.0
    planned: bool = False
    """Refuse a pod that is not in the estate file (the cockpit acts on the pods it lists)."""
    only_from: Path | None = None
    """Refuse a pod another estate file started (`c3 pod down NAME --file P`: workloads are estate file + pod name)."""

    @classmethod
    def from_request(cls, ws: Any, target: str | None, request: Any) -> StopPod:
        return cls(ws, target or "", planned=True)

    @property
    def target(self) -> str | None:
        return self.name

    @property
    def affects(self) -> tuple[str, ...]:
        return (self.name,)

    def _workload(self) -> Any:
        return next((w for w in self.ws.ctx.runtime.workloads().values() if w.pod.casefold() == self.name.casefold()), None)

    def plan(self) -> Plan:
        kind = self.ws.ctx.runtime.kind
        try:
            pod = self.ws.pod(self.name)
            what = f"stop and remove the workload of pod {pod.name} ({kind}; GPU {','.join(map(str, pod.gpus))}, port {pod.port})"
        except C3Error:
            what = f"stop and remove the workload of pod {self.name} ({kind})"
        return Plan(f"Stop pod {self.name}", (what, "the pod stays in the estate file"), destructive=True)

    def problems(self) -> list[Problem]:
        if self.planned:
            try:
                self.ws.pod(self.name)
            except C3Error as error:
                return [Problem(error.message, hint=error.hint)]
        workload = self._workload()
        origin = workload.estate if workload is not None else ""
        if self.only_from is not None and origin:
            mine = str(Path(self.only_from).resolve())
            if origin != mine:
                return [Problem(f"pod `{self.name}` running on this host was started from {origin}, not from {mine}",
                                hint=f"stop it with `c3 pod down {self.name} --file {origin}` (or without --file)")]
        if workload is None or workload.status == "absent":
            return [Problem(f"pod `{self.name}` has no workload to stop", "noop")]
        return []

    def run(self, progress: ProgressSink) -> Outcome:
        workload = self._workload()
        origin = workload.estate if workload is not None else ""
        stopped = self.ws.ctx.runtime.stop(self.name, timeout=self.timeout_s)
        return Outcome(True, f"stopped pod {self.name}" if stopped else f"pod {self.name} was not running", data=StopResult(stopped, origin))


@dataclass(frozen=True)
class StopResult:
    stopped: bool
    origin: str
    """The estate file the workload was started from ("" for `c3 serve` or none)."""
