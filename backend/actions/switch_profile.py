"""Make another launched profile the active one (`c3 profile switch`): stop the active profile,
then relaunch the named one. If the active one cannot be stopped, nothing starts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from backend.actions.base import Action, Outcome, Plan, Problem, Progress, ProgressSink, problems_of
from backend.actions.registry import register
from backend.actions.restart_profile import profile_lines, relaunch_profile
from backend.errors import C3Error


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
        from backend.cluster.control import stop
        from backend.profiles import load_profile
        from backend.remote import run_sync

        target = load_profile(self.name)
        current = self._current()

        def say(line: str) -> None:
            progress(Progress(self.name, line, 0.0, line=line))

        if current:
            try:
                run_sync(stop(load_profile(current), why=f"c3 profile switch {self.name}", say=say))
                say(f"stopped {current}")
            except C3Error as error:
                raise type(error)(f"could not stop {current} before switching: {error.message}", hint=error.hint) from None
        profile = relaunch_profile(target, wait=self.wait, timeout_s=self.timeout_s, progress=progress)
        return Outcome(True, f"profile {profile.name} is active: {profile.base_url}", data=profile)
