"""The pin table: hashed session key → backend, with an LRU cap and an idle TTL.

A pin is what keeps a conversation on the node that holds its prefix cache. The router changes a pin
only when its backend is not routable; it never moves a pin back when the old backend recovers (that
would cost a second cold cache). Idle pins expire after `ttl_s`; the table never holds more than `cap`
keys (least recently used go first). Only hashed keys are ever stored.

Per-backend pin counts are kept incrementally, since bounded-load assignment reads them per new key.
"""

from __future__ import annotations

import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Container
from typing import Any


class PinTable:
    """LRU + idle-TTL map of hashed keys to backend names."""

    __slots__ = ("cap", "ttl_s", "_clock", "_pins", "counts", "evictions", "expirations")

    def __init__(self, cap: int = 100_000, ttl_s: float = 6 * 3600.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.cap = cap
        self.ttl_s = ttl_s
        self._clock = clock
        self._pins: OrderedDict[str, list[Any]] = OrderedDict()  # key -> [backend, last_used]
        self.counts: Counter[str] = Counter()
        self.evictions = 0
        self.expirations = 0

    def __len__(self) -> int:
        return len(self._pins)

    def get(self, key: str) -> str | None:
        """The pinned backend (refreshing the pin's idle clock), or None when absent or expired."""
        entry = self._pins.get(key)
        if entry is None:
            return None
        now = self._clock()
        if now - entry[1] > self.ttl_s:
            self._drop(key, entry)
            self.expirations += 1
            return None
        entry[1] = now
        self._pins.move_to_end(key)
        backend: str = entry[0]
        return backend

    def peek(self, key: str) -> str | None:
        """The pinned backend without touching LRU order or expiry (for tests and status)."""
        entry = self._pins.get(key)
        return entry[0] if entry else None

    def set(self, key: str, backend: str) -> None:
        """Pin `key` to `backend` (replacing any pin), evicting the least recently used over the cap."""
        entry = self._pins.get(key)
        if entry is not None:
            self.counts[entry[0]] -= 1
        self._pins[key] = [backend, self._clock()]
        self._pins.move_to_end(key)
        self.counts[backend] += 1
        while len(self._pins) > self.cap:
            old_key, old = self._pins.popitem(last=False)
            self.counts[old[0]] -= 1
            self.evictions += 1

    def sweep(self) -> int:
        """Drop expired pins (the LRU order is also last-use order, so stop at the first live one)."""
        now = self._clock()
        dropped = 0
        while self._pins:
            key, entry = next(iter(self._pins.items()))
            if now - entry[1] <= self.ttl_s:
                break
            self._drop(key, entry)
            dropped += 1
        self.expirations += dropped
        return dropped

    def _drop(self, key: str, entry: list[Any]) -> None:
        del self._pins[key]
        self.counts[entry[0]] -= 1

    def export(self) -> list[tuple[str, str, float]]:
        """(hashed key, backend, idle seconds) for persisting across restarts, oldest first."""
        now = self._clock()
        return [(k, e[0], now - e[1]) for k, e in self._pins.items()]

    def restore(self, rows: list[tuple[str, str, float]], known: Container[str]) -> int:
        """Reload exported pins whose backend is still in the pool and whose idle time is within the TTL."""
        now = self._clock()
        loaded = 0
        for key, backend, idle in rows:
            if backend in known and 0 <= idle <= self.ttl_s:
                self.set(key, backend)
                self._pins[key][1] = now - idle
                loaded += 1
        return loaded
