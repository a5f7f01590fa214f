"""One cap on the request bytes the router holds, across all connections (issue 26).

A body held whole can be retried on another backend, but each connection holding up to
`retry_body_limit` let 48 uploads of 8 MB grow the router by ~380 MiB. `--max-buffered-bytes`
(64 MiB) bounds the sum: a body that would pass it is streamed through instead (read as the backend
takes it, never held, and so retried only when the connection to the backend cannot be opened), never
refused — streaming is always possible, and a refusal would fail requests a backend can serve.
"""

from __future__ import annotations


class HeldBytes:
    """Bytes reserved by held request bodies; `take` fails rather than pass the cap."""

    __slots__ = ("cap", "held", "peak", "spilled")

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.held = 0
        self.peak = 0
        self.spilled = 0
        """Bodies streamed because holding them would have passed the cap (for status and metrics)."""

    def take(self, n: int) -> bool:
        """Reserve `n` bytes; False (nothing reserved) when that would pass the cap."""
        if self.held + n > self.cap:
            return False
        self.held += n
        self.peak = max(self.peak, self.held)
        return True

    def give(self, n: int) -> None:
        """Return `n` reserved bytes."""
        self.held -= n
