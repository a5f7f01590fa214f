"""Stop one shard that `c3 shard start` left on its nodes (found by its C3_SHARD environment), then
`ray stop` (`c3 shard stop [TAG] [--nodes a,b] [--all]`, the cockpit's `d` in the Nodes mode)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from backend.actions.base import Action, Outcome, Plan, Problem, Progress, ProgressSink, problems_of
from backend.actions.inputs import ShardStop
from backend.actions.registry import register


@register
@dataclass
class StopShard(Action):
    key = "shard_stop"
    doing = "stop the shard on {target}"
    nodes: str = ""
    """`a,b` (registry names); empty: the nodes in the record of shard `tag`."""
    ray: str = "ray"
    """The ray executable on every node."""
    use_ray: bool | None = None
    """Run `ray stop` too (mp and rpc have no Ray); None: when the shard's record says ray, or there is none."""
    ssh_key: str | None = None
    tag: str | None = None
    """The shard to stop (its C3_SHARD, `HEAD-PORT`); None: the one shard running on the nodes."""
    every: bool = False
    """`--all`: every shard on the nodes."""

    @classmethod
    def from_request(cls, ws: Any, target: str | None, request: Any) -> StopShard:
        if isinstance(request, ShardStop):
            return cls(tag=request.tag)
        return cls(target or "", **(request or {}))

    @property
    def target(self) -> str | None:
        return self.tag or self.nodes

    def plan(self) -> Plan:
        from backend.errors import C3Error
        from backend.shard.target import resolve

        tag = self.tag
        try:
            found = resolve(self.tag, self.nodes, every=self.every)
            where, ray, tag = ", ".join(n.name for n in found.nodes), self._ray(found.record), found.tag
        except C3Error:
            where, ray = self.nodes or "its nodes", bool(self.use_ray)
        what = "every shard" if self.every else f"shard {tag}" if tag else "the one shard running there"
        tagged = "every process carrying C3_SHARD" if self.every else f"the processes with C3_SHARD={tag}" if tag else \
            "its processes (refused if several shards run there)"
        others = "" if self.every else "; other shards there keep running"
        lines = [f"on {where} at once: SIGTERM (SIGKILL after 15 s) {tagged}{others}"]
        if ray:
            lines.append(f"then `{self.ray} stop` (every Ray on those nodes), then sweep once more")
        return Plan(f"Stop {what} on {where}", tuple(lines), destructive=True)

    def _ray(self, record: Any) -> bool:
        if self.use_ray is not None:
            return self.use_ray
        return record is None or record.backend == "ray"

    def problems(self) -> list[Problem]:
        from backend.shard.target import resolve

        return problems_of(lambda: resolve(self.tag, self.nodes, every=self.every))

    def run(self, progress: ProgressSink) -> Outcome:
        """Every node's line is a progress line, then one line naming the shard(s) stopped; `ok` is False
        when a node could not be handled (`data`: the per-node results)."""
        import asyncio

        from backend.shard.ops import stop
        from backend.shard.target import resolve

        found = resolve(self.tag, self.nodes, every=self.every)
        results = asyncio.run(stop(found.nodes, ray=self.ray, use_ray=self._ray(found.record), ssh_key=self.ssh_key,
                                   tag=found.tag, every=self.every))
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
        where = ", ".join(n.name for n in found.nodes)
        shards = sorted({s for r in results for s in r.shards})
        said = f"stopped shard {', '.join(shards)} on {where}" if len(shards) == 1 else \
            f"stopped {len(shards)} shards on {where}: {', '.join(shards)}" if shards else \
            f"no {'shard ' + found.tag if found.tag else 'shard'} runs on {where}: nothing stopped"
        if failed:
            return Outcome(False, f"{said}; some nodes could not be stopped (see above): run `c3 shard stop` again once they answer",
                           data=results)
        return Outcome(True, said, data=results)
