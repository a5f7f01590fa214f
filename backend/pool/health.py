"""Backend health: active probes plus passive signals from live traffic, with hysteresis.

States: `unknown` (before the first probe), `up`, `loading` (answers 503 or says it is loading: alive but
not ready), `down`. Only `up` and `unknown` are routable; `draining` is a flag on top (no new keys).

- Active: every `interval_s`, GET `/health` (falling back to `/v1/models` when `/health` is 404/405) with
  `timeout_s`. `down_after` consecutive failures take an `up` backend out; `up_after` consecutive successes
  bring a `down`/`loading` one back. The very first probe decides at once (there is no history to damp).
- Passive: a refused or reset connection before any response byte marks the backend down at once (it is
  definitive, and waiting three probe intervals would fail requests meanwhile). The backend's own
  failures on live traffic (closed before answering, no response head in time, malformed HTTP, a
  stream that dies midway) count toward `down_after`; an answer below 500 resets the count. A status
  code is never a failure: a client chooses what it sends, so a 5xx is that request's outcome.
  Passive signals never bring a backend back: only probes do, so a flapping node cannot pull traffic.
"""

from __future__ import annotations

import time
from dataclasses import dataclass


@dataclass(slots=True)
class HealthPolicy:
    """Probe timing and hysteresis thresholds."""

    interval_s: float = 2.0
    timeout_s: float = 2.0
    down_after: int = 3
    up_after: int = 2


class BackendHealth:
    """Health state of one backend."""

    __slots__ = (
        "policy", "state", "draining", "fails", "successes", "last_probe_at", "last_probe_rtt_ms",
        "last_error", "changed_at", "probe_path", "transitions",
    )

    def __init__(self, policy: HealthPolicy) -> None:
        self.policy = policy
        self.state = "unknown"
        self.draining = False
        self.fails = 0
        self.successes = 0
        self.last_probe_at: float | None = None
        self.last_probe_rtt_ms: float | None = None
        self.last_error: str | None = None
        self.changed_at = time.time()
        self.probe_path = "/health"
        self.transitions = 0

    @property
    def routable(self) -> bool:
        """May take requests (pinned ones included)."""
        return self.state in ("up", "unknown")

    @property
    def assignable(self) -> bool:
        """May take new keys (routable and not draining)."""
        return self.routable and not self.draining

    def _set(self, state: str) -> bool:
        if state == self.state:
            return False
        self.state = state
        self.changed_at = time.time()
        self.transitions += 1
        return True

    def probe_result(self, outcome: str, rtt_ms: float | None, error: str | None = None) -> bool:
        """Record an active probe: outcome is `ok`, `loading` or `fail`. True when the state changed."""
        self.last_probe_at = time.time()
        self.last_probe_rtt_ms = rtt_ms
        if outcome == "ok":
            self.last_error = None
            self.fails = 0
            self.successes += 1
            if self.state == "unknown" or self.successes >= self.policy.up_after:
                return self._set("up")
            return False
        self.last_error = error or outcome
        self.successes = 0
        self.fails += 1
        target = "loading" if outcome == "loading" else "down"
        if self.state == "unknown":
            return self._set(target)
        if self.state == "up":
            return self._set(target) if self.fails >= self.policy.down_after else False
        return self._set(target)  # already out: keep the latest reason

    def passive_failure(self, reason: str, hard: bool) -> bool:
        """A failure seen on live traffic. True when the state changed."""
        self.last_error = reason
        self.successes = 0
        self.fails += 1
        if hard or self.fails >= self.policy.down_after:
            return self._set("down")
        return False

    def passive_success(self) -> None:
        """A normal answer on live traffic: the failure streak is over."""
        if self.fails and self.state == "up":
            self.fails = 0
