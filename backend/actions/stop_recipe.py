"""Stop a recipe's containers on named nodes and remember the stop (`c3 recipes stop`).

What runs is found by c3's container name on those nodes: the recipe is not re-rendered, so an
edited or removed recipe cannot keep its containers from stopping."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from backend.actions.base import Action, Outcome, Plan, Problem, Progress, ProgressSink, problems_of, rank_stop_plan
from backend.actions.registry import register


@register
@dataclass
class StopRecipe(Action):
    key = "recipe_stop_on_nodes"
    doing = "stop {target}"
    recipe: str
    nodes: tuple[str, ...]
    """The nodes it runs on, rank order."""
    name: str | None = None
    """Profile name (default: the recipe id)."""

    @classmethod
    def from_request(cls, ws: Any, target: str | None, request: Any) -> StopRecipe:
        return cls(target or "", tuple(request))

    @property
    def target(self) -> str | None:
        return self.profile

    @property
    def profile(self) -> str:
        return self.name or self.recipe

    def _ranks(self) -> list[Any]:
        from backend.cluster.plan import RankPlan, container_name, env_file_path
        from backend.nodes.registry import resolve_nodes

        nodes = resolve_nodes(list(self.nodes))
        return [RankPlan(rank, node, container_name(self.profile), [], env_file_path(node, self.profile)) for rank, node in enumerate(nodes)]

    def plan(self) -> Plan:
        return rank_stop_plan(f"Stop {self.profile}", self.profile, self._ranks, lambda rp: f"{rp.node.name} (rank {rp.rank})")

    def problems(self) -> list[Problem]:
        return problems_of(self._ranks)

    def run(self, progress: ProgressSink) -> Outcome:
        from backend.cluster.containers import remove_containers
        from backend.profiles import mark_stopped
        from backend.remote.fleet import Fleet, run_sync
        from backend.remote.shell import NodeFailure

        ranks = self._ranks()
        mark_stopped(self.profile, "c3 recipes stop")

        def say(line: str) -> None:
            progress(Progress(self.profile, line, 0.0, line=line))

        async def go() -> dict[str, str]:
            async with Fleet([rp.node for rp in ranks]) as fleet:
                return await remove_containers(ranks, fleet, say)

        failed = run_sync(go())
        if failed:
            node_name, why = next(iter(failed.items()))
            raise NodeFailure(node_name, "stop", f"could not stop {self.profile}: {why}")
        where = ", ".join(rp.node.name for rp in ranks)
        return Outcome(True, f"stopped {self.profile} on {where} (remembered: the watchdog leaves it stopped)")
