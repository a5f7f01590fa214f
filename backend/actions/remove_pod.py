"""Remove a pod from the estate file, refused while it runs (`c3 pod rm`, the cockpit's `x`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from backend.actions.base import Action, Outcome, Plan, Problem, ProgressSink
from backend.actions.registry import register
from backend.actions.workspace import Workspace
from backend.errors import C3Error


@register
@dataclass
class RemovePod(Action):
    """Take one pod out of the plan. When the runtime cannot tell whether it runs (Docker down), it is
    removed with a warning naming the container to stop by hand (the file is only a plan)."""

    key = "rm"
    doing = "remove {target}"
    ws: Workspace
    name: str
    is_running: Callable[[Any], bool | None] | None = field(default=None, repr=False)
    """How to ask whether the pod runs (default: the workspace's runtime)."""

    @classmethod
    def from_request(cls, ws: Any, target: str | None, request: Any) -> RemovePod:
        return cls(ws, target or "")

    @property
    def target(self) -> str | None:
        return self.name

    @property
    def affects(self) -> tuple[str, ...]:
        return (self.name,)

    def _running(self, pod: Any) -> bool | None:
        if self.is_running is not None:
            return self.is_running(pod)
        return self.ws.ctx.runtime.workload(pod.name).running

    def plan(self) -> Plan:
        try:
            p = self.ws.pod(self.name)
        except C3Error as error:
            return Plan(f"Remove pod {self.name}", (error.message,), destructive=True)
        return Plan(f"Remove pod {p.name}", (f"remove pod {p.name} ({p.slug}, GPU {','.join(map(str, p.gpus))}, port {p.port}) from {self.ws.estate_path}",
                                             "refused while it runs"), destructive=True)

    def problems(self) -> list[Problem]:
        try:
            pod = self.ws.pod(self.name)
        except C3Error as error:
            return [Problem(error.message, hint=error.hint)]
        try:
            running = self._running(pod)
        except Exception:  # noqa: BLE001 - the runtime cannot tell: removed with a warning (see run)
            running = None
        if running:
            return [Problem(f"pod `{pod.name}` is running — stop it first", hint=f"`c3 pod down {pod.name}` (d in the cockpit)")]
        return []

    def run(self, progress: ProgressSink) -> Outcome:
        from backend.estate import remove_pod

        result = remove_pod(self.ws.estate_path, self.name, is_running=self._running)
        return Outcome(True, f"removed pod {result.pod.name} from {result.path}", result.warning, data=result)
