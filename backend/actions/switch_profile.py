"""Make another launched profile the active one (`c3 profile switch`): stop the active profile,
then relaunch the named one. The named one's preflight runs first: if it could not start (a node
unreachable, its image missing), or the active one cannot be stopped, nothing changes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from backend.actions.base import Action, Outcome, Plan, Problem, ProgressSink, problems_of
from backend.actions.registry import register
from backend.actions.restart_profile import profile_lines, relaunch_profile


@register
@dataclass
class SwitchProfile(Action):
    key = "profile_switch"
    doing = "switch to profile {target}"
    progress_panel = "launch"
    name: str
    """The profile to make active."""
    wait: bool = True
    timeout_s: float | None = None

    @classmethod
    def from_request(cls, ws: Any, target: str | None, request: Any) -> SwitchProfile:
        return cls(target or "")

    @property
    def target(self) -> str | None:
        return self.name

    def plan(self) -> Plan:
        from backend.cluster.standdown import active_to_stand_down

        current = active_to_stand_down(self.name)  # what the launch's own stand-down will stop
        first = [f"first: stop the active profile {current}"] if current else []
        _profile, lines = profile_lines(self.name, "switch to profile")
        return Plan(f"Switch to profile {self.name}", (*first, *lines, f"then profile {self.name} is the active one"), destructive=current is not None)

    def problems(self) -> list[Problem]:
        from backend.profiles import load_profile

        return problems_of(lambda: load_profile(self.name))

    def run(self, progress: ProgressSink) -> Outcome:
        from backend.profiles import load_profile

        # A relaunch of a profile that is not the active one is the switch: the launch checks the target
        # (preflight) before it stands the active one down, so a profile that could not start changes nothing.
        profile = relaunch_profile(load_profile(self.name), wait=self.wait, timeout_s=self.timeout_s, progress=progress)
        return Outcome(True, f"profile {profile.name} is active: {profile.base_url}", data=profile)
