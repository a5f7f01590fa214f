"""Make another launched profile the active one (`c3 profile switch`): stop the active profile,
then relaunch the named one. The named one's preflight runs first: if it could not start (a node
unreachable, its image missing), or the active one cannot be stopped, nothing changes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from backend.actions.base import Action, Outcome, Plan, Problem, Progress, ProgressSink, problems_of
from backend.actions.registry import register
from backend.actions.restart_profile import profile_lines


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

    def _current(self) -> str | None:
        """The active profile this switch stops first (None when it is this one, or none is active)."""
        from backend.profiles import active_name

        current = active_name()
        return current if current and current != self.name else None

    def plan(self) -> Plan:
        current = self._current()
        first = [f"first: stop the active profile {current}"] if current else []
        _profile, lines = profile_lines(self.name, "switch to profile")
        return Plan(f"Switch to profile {self.name}", (*first, *lines, f"then profile {self.name} is the active one"), destructive=current is not None)

    def problems(self) -> list[Problem]:
        from backend.profiles import load_profile

        return problems_of(lambda: load_profile(self.name))

    def run(self, progress: ProgressSink) -> Outcome:
        from backend.cluster.control import switch
        from backend.profiles import load_profile
        from backend.remote import run_sync

        current = self._current()

        def say(line: str) -> None:
            progress(Progress(self.name, line, 0.0, line=line))

        profile = run_sync(switch(load_profile(self.name), load_profile(current) if current else None, wait=self.wait,
                                  wait_timeout_s=self.timeout_s, say=say))
        return Outcome(True, f"profile {profile.name} is active: {profile.base_url}", data=profile)
