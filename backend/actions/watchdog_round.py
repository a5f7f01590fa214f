"""One watchdog round over the active (or named) profile (`c3 profile watchdog-check`, what the
systemd timer runs): probe rank 0, count failures, relaunch after enough of them (not in cooldown,
never a deliberately stopped profile)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from backend.actions.base import Action, Outcome, Plan, Problem, ProgressSink
from backend.actions.registry import register


@register
@dataclass
class WatchdogRound(Action):
    key = "profile_watchdog"
    doing = "run a watchdog round for {target}"
    name: str | None = None
    failures: int = 3
    """Consecutive failed probes before a relaunch."""
    cooldown_s: float = 600.0
    """Seconds after a relaunch with no other relaunch."""
    grace_s: float | None = None
    """Start-up grace seconds (default: the recipe's)."""

    @classmethod
    def from_request(cls, ws: Any, target: str | None, request: Any) -> WatchdogRound:
        return cls(target)

    @property
    def target(self) -> str | None:
        return self.name

    def plan(self) -> Plan:
        return Plan(f"Watchdog round for {self.name or 'the active profile'}", (
            "probe rank 0's endpoint",
            f"relaunch the whole group after {self.failures} failed rounds in a row, at most once per {self.cooldown_s:g} s",
            "leave a deliberately stopped profile stopped",
        ))

    def problems(self) -> list[Problem]:
        return []  # every state (no profile, stopped, in grace) is the round's own answer, not a refusal

    def run(self, progress: ProgressSink) -> Outcome:
        from backend.cluster.watchdog import check

        result = check(self.name, failures=self.failures, cooldown_s=self.cooldown_s, grace_s=self.grace_s)
        return Outcome(result.action != "relaunch-failed", result.line(), data=result)
