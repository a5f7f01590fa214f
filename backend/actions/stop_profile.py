"""Stop a recipe profile's containers on its nodes and remember the stop (`c3 profile stop`, the
Recipes mode's `s`): the watchdog leaves it stopped until the next launch."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from backend.actions.base import Action, Outcome, Plan, Problem, Progress, ProgressSink
from backend.actions.registry import register
from backend.errors import C3Error


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
        from backend.cluster.control import running_ranks

        title = f"Stop profile {self.name or '(active)'}"
        try:
            ranks = running_ranks(self._profile())
        except C3Error as error:
            return Plan(title, (f"stop profile {self.name}: {error.message}",), destructive=True)
        lines = [f"node {rp.node.name} (rank {rp.rank}, {'local' if rp.node.local else 'ssh ' + rp.node.ssh}): $ docker rm -f {rp.container}" for rp in ranks]
        lines.append("remember the stop: the watchdog leaves it stopped until the next launch")
        return Plan(title, tuple(lines), destructive=True)

    def problems(self) -> list[Problem]:
        try:
            self._profile()
        except C3Error as error:
            return [Problem(error.message, hint=error.hint)]
        return []

    def run(self, progress: ProgressSink) -> Outcome:
        from backend.cluster.control import stop
        from backend.remote import run_sync

        profile = self._profile()

        def say(line: str) -> None:
            progress(Progress(profile.name, line, 0.0, line=line))

        run_sync(stop(profile, why=self.reason, say=say))
        return Outcome(True, f"stopped profile {profile.name} on {', '.join(profile.nodes)}", "the stop is remembered: the watchdog leaves it stopped", data=profile)
