"""Stop a recipe profile's containers on its nodes and remember the stop (`c3 profile stop`, the
Recipes mode's `s`): the watchdog leaves it stopped until the next launch."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from backend.actions.base import Action, Outcome, Plan, Problem, Progress, ProgressSink, problems_of, rank_stop_plan
from backend.actions.registry import register


@register
@dataclass
class StopProfile(Action):
    key = "recipe_stop"
    doing = "stop profile {target}"
    name: str | None
    """The profile (None: the active one)."""
    reason: str = "c3 profile stop"
    """Recorded in the stop marker."""

    @classmethod
    def from_request(cls, ws: Any, target: str | None, request: Any) -> StopProfile:
        return cls(target, reason="c3 cockpit stop")

    @property
    def target(self) -> str | None:
        return self.name

    def _profile(self) -> Any:
        from backend.profiles import resolve

        return resolve(self.name)

    def plan(self) -> Plan:
        from backend.cluster.standdown import running_ranks

        def where(rp: Any) -> str:
            return f"{rp.node.name} (rank {rp.rank}, {'local' if rp.node.local else 'ssh ' + rp.node.ssh})"

        return rank_stop_plan(f"Stop profile {self.name or '(active)'}", f"profile {self.name}", lambda: running_ranks(self._profile()), where)

    def problems(self) -> list[Problem]:
        return problems_of(self._profile)

    def run(self, progress: ProgressSink) -> Outcome:
        from backend.cluster.standdown import stop
        from backend.remote.fleet import run_sync

        profile = self._profile()

        def say(line: str) -> None:
            progress(Progress(profile.name, line, 0.0, line=line))

        run_sync(stop(profile, why=self.reason, say=say))
        return Outcome(True, f"stopped profile {profile.name} on {', '.join(profile.nodes)}", "the stop is remembered: the watchdog leaves it stopped", data=profile)
