"""A consistent-hash ring with virtual nodes, walked clockwise.

Each backend gets `vnodes` points (BLAKE2b of `name#i`), so removing one backend moves only the keys it
owned, spread over the survivors. Positions depend on backend *names*, not URLs, so moving a node to a
new address keeps its keys. The ring only proposes an order; the router picks the first candidate that
is routable and under its load bound (see `router.py`).
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Iterator


def point(data: bytes) -> int:
    """A 64-bit ring position."""
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big")


def key_point(hashed_key: str) -> int:
    """Ring position of an already-hashed key (16 hex digits from `KeyHasher.digest`)."""
    return int(hashed_key, 16)


class HashRing:
    """Immutable ring over backend names."""

    __slots__ = ("names", "_positions", "_owners")

    def __init__(self, names: list[str], vnodes: int = 256) -> None:
        if len(set(names)) != len(names):
            raise ValueError("backend names must be unique")
        self.names = list(names)
        points = sorted((point(f"{name}#{i}".encode()), name) for name in names for i in range(vnodes))
        self._positions = [p for p, _ in points]
        self._owners = [n for _, n in points]

    def walk(self, position: int) -> Iterator[str]:
        """Every backend once, in clockwise order from `position` (the first is the owner)."""
        count = len(self._positions)
        if not count:
            return
        start = bisect.bisect_left(self._positions, position) % count
        seen: set[str] = set()
        total = len(self.names)
        for i in range(count):
            name = self._owners[(start + i) % count]
            if name not in seen:
                seen.add(name)
                yield name
                if len(seen) == total:
                    return

    def owner(self, position: int) -> str | None:
        """The backend that owns `position` when every backend is routable."""
        return next(self.walk(position), None)
