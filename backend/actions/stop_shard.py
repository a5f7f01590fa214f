"""Stop what `c3 shard start` left on every node (found by its C3_SHARD environment), then `ray stop`
(`c3 shard stop`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from backend.actions.base import Action, Outcome, Plan, Problem, Progress, ProgressSink, problems_of
from backend.actions.registry import register


@register
@dataclass
class StopShard(Action):
    key = "shard_stop"
    doing = "stop the shard on {target}"
    nodes: str
    ray: str = "ray"
    """The ray executable on every node."""
    use_ray: bool = True
    """Run `ray stop` too (the mp backend has no Ray)."""
    ssh_key: str | None = None

    @classmethod
    def from_request(cls, ws: Any, target: str | None, request: Any) -> StopShard:
        return cls(target or "", **(request or {}))

    @property
    def target(self) -> str | None:
        return self.nodes

    def plan(self) -> Plan:
        lines = [f"on {self.nodes} at once: SIGTERM (SIGKILL after 15 s) every process c3 shard started"]
        if self.use_ray:
            lines.append(f"then `{self.ray} stop`, then sweep once more")
        return Plan(f"Stop the shard on {self.nodes}", tuple(lines), destructive=True)

    def problems(self) -> list[Problem]:
        from backend.nodes.registry import resolve_nodes

        return problems_of(lambda: resolve_nodes(self.nodes))

    def run(self, progress: ProgressSink) -> Outcome:
        """Every node's line is a progress line; `ok` is False when a node could not be handled
        (`data`: the per-node results)."""
        import asyncio

        from backend.nodes.registry import resolve_nodes
        from backend.shard.ops import stop

        results = asyncio.run(stop(resolve_nodes(self.nodes), ray=self.ray, use_ray=self.use_ray, ssh_key=self.ssh_key))
        failed = False
        for r in results:
            if r.error:
                failed = True
                line = f"{r.node}: {r.error}"
            else:
                extra = f" ({r.killed} needed SIGKILL)" if r.killed else ""
                ray_said = f"; ray stop: {r.ray_stop}" if r.ray_stop else ""
                line = f"{r.node}: stopped {r.stopped} process(es){extra}{ray_said}"
            progress(Progress(r.node, line, 0.0, line=line))
        if failed:
            return Outcome(False, "some nodes could not be stopped (see above); run `c3 shard stop` again once they answer", data=results)
        return Outcome(True, f"stopped the shard on {self.nodes}", data=results)
