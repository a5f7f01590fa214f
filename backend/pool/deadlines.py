"""The one deadline a client connection waits on at a time, checked by the proxy's reaper tick.

A request passes through phases that each wait on one peer: the backend's response head (`head`),
the backend's next body bytes (`stream`), the client taking bytes off a full buffer (`write`). Each
phase arms the watch with its own limit and the transport to abort when it passes; the reaper aborts
that transport and records which phase expired, and the waiting code turns the resulting connection
error into the right answer (retry, 504, stalled stream, dropped client). An optional cap (an
absolute time, `--max-response-time`) bounds every phase: a deadline never lies past it, and expiry
at the cap is recorded as `total`. No timer is armed per read (see `PoolServer._reap`).
"""

from __future__ import annotations

import asyncio
import time


class Watch:
    """The current phase's deadline, the transport it guards and what expired."""

    __slots__ = ("deadline", "transport", "kind", "cap", "expired")

    def __init__(self) -> None:
        self.deadline = 0.0  # monotonic time; 0 = nothing armed
        self.transport: asyncio.WriteTransport | None = None
        self.kind = ""
        self.cap = 0.0  # absolute bound on every deadline; 0 = none
        self.expired = ""  # the kind that expired last ("head", "stream", "write", "total"), "" when none

    def arm(self, kind: str, seconds: float, transport: asyncio.WriteTransport) -> None:
        """Wait at most `seconds` (and never past the cap) for `kind`; then abort `transport`."""
        deadline = time.monotonic() + seconds
        if self.cap and self.cap <= deadline:
            deadline, kind = self.cap, "total"
        self.deadline, self.kind, self.transport = deadline, kind, transport

    def disarm(self) -> None:
        self.deadline, self.transport = 0.0, None

    def reset(self) -> None:
        """Between requests: nothing armed, nothing expired, no cap."""
        self.disarm()
        self.cap, self.expired = 0.0, ""

    def check(self, now: float) -> str:
        """Abort the guarded transport when the deadline passed; the kind that expired, else ""."""
        if not self.deadline or now < self.deadline or self.transport is None:
            return ""
        transport, kind = self.transport, self.kind
        self.disarm()
        self.expired = kind
        transport.abort()
        return kind
