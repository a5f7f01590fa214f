"""Stop the estate's pods — all that run, or the ones named (`c3 down`, the cockpit's `S`)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from backend.actions.base import Action, Outcome, Plan, Problem, ProgressSink
from backend.actions.registry import register
from backend.actions.workspace import Workspace


@register
@dataclass
class StopPods(Action):
    """Stop several pods at once (up to 8 in parallel). Without `names`, the estate's pods that have a
    workload when the plan is first made: exactly those are stopped, whatever starts meanwhile."""

    key = "stop_all"
    doing = "stop the estate"
    ws: Workspace
    names: tuple[str, ...] | None = None
    timeout_s: float = 30.0
    _chosen: tuple[str, ...] | None = field(default=None, repr=False)

    @classmethod
    def from_request(cls, ws: Any, target: str | None, request: Any) -> StopPods:
        return cls(ws)

    @property
    def pods(self) -> tuple[str, ...]:
        """The pods this write stops (fixed on first use)."""
        if self._chosen is None:
            self._chosen = self.names if self.names is not None else tuple(self.ws.running_pods())
        return self._chosen

    @property
    def affects(self) -> tuple[str, ...]:
        return self.pods

    def plan(self) -> Plan:
        title = "Stop the whole estate"
        if not self.pods:
            return Plan(title, ("nothing in the estate is running",), destructive=True)
        planned = {p.name: p for p in self.ws.pods()}
        lines = [f"stop and remove the workload of pod {name}" + (f" (GPU {','.join(map(str, planned[name].gpus))}, port {planned[name].port})" if name in planned else "")
                 for name in self.pods]
        return Plan(title, (*lines, "the estate file is not changed; u boots a pod again"), destructive=True)

    def problems(self) -> list[Problem]:
        return [] if self.pods else [Problem("nothing in the estate is running", "noop")]

    def run(self, progress: ProgressSink) -> Outcome:
        names = self.pods
        with ThreadPoolExecutor(max_workers=max(1, min(8, len(names)))) as pool:
            results = list(pool.map(lambda n: (n, self.ws.ctx.runtime.stop(n, timeout=self.timeout_s)), names))
        stopped = [name for name, done in results if done]
        return Outcome(True, f"stopped {len(stopped)} pod(s): {', '.join(stopped) or 'none'}", data=results)
