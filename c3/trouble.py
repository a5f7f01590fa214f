"""Trouble that calls for attention: which pods are failed, misplaced, unhealthy, restarted or
preempting, or shown from a stale reading — counted for the title bar, and announced once per change.

`TroubleWatch.update(pods, stale=…)` is fed every pod reading; it returns what is new since the last
one (to toast, and ring the bell for) and what cleared. The first reading announces what is already
wrong too: an operator opening the cockpit on a broken rig must be told.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from c3.services import PodState

Kind = Literal["failed", "misplaced", "unhealthy", "restarted", "preempting", "stale"]
KINDS: tuple[Kind, ...] = ("failed", "misplaced", "unhealthy", "restarted", "preempting", "stale")
"""In the order the title bar lists them: worst first."""


@dataclass(frozen=True)
class Trouble:
    """One pod in one kind of trouble."""

    pod: str
    kind: Kind
    detail: str
    """One line: what is wrong, in the cockpit's words."""
    count: int = 0
    """How many times it happened, for kinds that recur (`restarted`: the container's restart count)."""

    @property
    def key(self) -> tuple[str, Kind]:
        return (self.pod, self.kind)

    @property
    def title(self) -> str:
        """`restarted (2×)`, or the kind alone."""
        return f"{self.kind} ({self.count}×)" if self.count else self.kind


def troubles_of(pods: list[PodState], *, stale: bool, was_serving: set[str]) -> list[Trouble]:
    """Every trouble in one pod reading. `was_serving`: pods seen serving before (a running pod that
    stopped answering after serving is unhealthy; one still booting is not)."""
    found: list[Trouble] = []
    for pod in pods:
        if pod.state == "failed":
            found.append(Trouble(pod.name, "failed", "the engine exited — press l for its log"))
        if pod.placement == "mismatch":
            found.append(Trouble(pod.name, "misplaced", pod.placement_detail or "not on the GPUs it asked for"))
        if pod.state == "booting" and pod.name in was_serving:
            found.append(Trouble(pod.name, "unhealthy", "running but its endpoint stopped answering"))
        if pod.restarts > 0 and pod.state != "down":
            # Docker brought the engine back by itself: the pod may be serving again, but it crashed.
            found.append(Trouble(pod.name, "restarted", "its engine exited and Docker restarted the container — press l for its log", count=pod.restarts))
        if pod.metrics is not None and pod.metrics.new_preemptions > 0:
            found.append(Trouble(pod.name, "preempting", f"{pod.metrics.new_preemptions} requests preempted since the last reading (KV cache full)"))
        if stale and pod.state != "down":
            found.append(Trouble(pod.name, "stale", "its state is from a reading that stopped updating"))
    return found


class TroubleWatch:
    """The current troubles, and what changed with each reading."""

    def __init__(self) -> None:
        self.current: dict[tuple[str, Kind], Trouble] = {}
        self._was_serving: set[str] = set()

    def update(self, pods: list[PodState], *, stale: bool = False) -> tuple[list[Trouble], list[Trouble]]:
        """Feed one reading; returns (new troubles, cleared troubles). A trouble that recurs (another
        restart) is new again with its higher count."""
        names = {p.name for p in pods}
        self._was_serving = {n for n in self._was_serving if n in names} | {p.name for p in pods if p.state == "serving"}
        now = {t.key: t for t in troubles_of(pods, stale=stale, was_serving=self._was_serving)}
        new = [t for k, t in now.items() if k not in self.current or t.count > self.current[k].count]
        cleared = [t for k, t in self.current.items() if k not in now]
        self.current = now
        for pod in pods:
            if pod.state != "serving" and pod.state != "booting":
                self._was_serving.discard(pod.name)  # down or failed: a later boot is not "unhealthy"
        return new, cleared

    def counts(self) -> dict[Kind, int]:
        """Pods per kind of trouble, worst first, only kinds present."""
        out: dict[Kind, int] = {}
        for kind in KINDS:
            n = sum(1 for t in self.current.values() if t.kind == kind)
            if n:
                out[kind] = n
        return out

    def summary(self) -> str:
        """`2 failed · 1 misplaced`, or "" when all is well."""
        return " · ".join(f"{n} {kind}" for kind, n in self.counts().items())

    def pods(self) -> set[str]:
        """Names of pods in any trouble (the "problems" filter)."""
        return {pod for pod, _ in self.current}
