"""Relaunch a recipe profile's whole group with its overrides (`c3 profile restart`): a broken rank
does not heal alone."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from backend.actions.base import Action, Outcome, Plan, Problem, Progress, ProgressSink, problems_of
from backend.actions.registry import register
from backend.errors import C3Error


def profile_lines(name: str | None, doing: str) -> tuple[Any, list[str]]:
    """(the profile, what relaunching it does node by node) — or (None, the reason in one line)."""
    from backend.cluster.standdown import running_ranks
    from backend.profiles import resolve

    try:
        profile = resolve(name)
        ranks = running_ranks(profile)
    except C3Error as error:
        return None, [f"{doing} {name or '(active)'}: {error.message}"]
    lines = [f"node {rp.node.name} (rank {rp.rank}): $ docker rm -f {rp.container}, then start it again" for rp in ranks]
    return profile, lines


def relaunch_profile(profile: Any, *, wait: bool, timeout_s: float | None, progress: ProgressSink) -> Any:
    """Stop and start the profile's group, each step a progress line; returns the relaunched profile."""
    from backend.cluster.control import relaunch
    from backend.remote.fleet import run_sync
    from backend.wiring import local_rig_gpus

    def say(line: str) -> None:
        progress(Progress(profile.name, line, 0.0, line=line))

    return run_sync(relaunch(profile, wait=wait, wait_timeout_s=timeout_s, say=say, local_gpus=local_rig_gpus()))


@register
@dataclass
class RestartProfile(Action):
    key = "profile_restart"
    doing = "restart profile {target}"
    progress_panel = "launch"
    name: str | None
    """The profile (None: the active one)."""
    wait: bool = True
    """Wait for rank 0 to answer."""
    timeout_s: float | None = None
    """Seconds to wait for rank 0 (default: the recipe's start-up grace)."""

    @classmethod
    def from_request(cls, ws: Any, target: str | None, request: Any) -> RestartProfile:
        return cls(target)

    @property
    def target(self) -> str | None:
        return self.name

    def plan(self) -> Plan:
        _profile, lines = profile_lines(self.name, "restart profile")
        return Plan(f"Restart profile {self.name or '(active)'}", tuple(lines), destructive=True)

    def problems(self) -> list[Problem]:
        from backend.profiles import resolve

        return problems_of(lambda: resolve(self.name))

    def run(self, progress: ProgressSink) -> Outcome:
        from backend.profiles import resolve

        profile = relaunch_profile(resolve(self.name), wait=self.wait, timeout_s=self.timeout_s, progress=progress)
        return Outcome(True, f"profile {profile.name} relaunched: {profile.base_url}", data=profile)
