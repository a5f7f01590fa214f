"""Sticky keys: which request header identifies a session, and how its value is hashed.

Modes (`--sticky`):
- `auto`: `X-Session-ID` when the client sends one, else `Authorization` (a plain OpenAI client is then
  sticky per API key), else no key.
- `authorization`: only `Authorization`.
- `header:NAME`: only that header.
- `none`: no key; requests are balanced by load.

Empty or whitespace-only values count as absent. A value is hashed with a keyed BLAKE2b (a per-machine
salt under `$C3_STATE`, mode 0600) before it is stored, logged, shown or counted: the raw value, an API key
above all, lives only in the request being forwarded. The salt is persistent so the same session hashes
to the same ring position after a router restart.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

from backend.atomic import locked, write_atomic
from backend.errors import UsageError
from backend.userfiles import read_bytes

_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

SESSION_HEADER = b"x-session-id"
AUTH_HEADER = b"authorization"


@dataclass(frozen=True, slots=True)
class StickyMode:
    """A parsed `--sticky` value."""

    kind: str  # auto | authorization | header | none
    header: bytes | None = None  # lower-cased header name for kind == "header"

    def __str__(self) -> str:
        return f"header:{self.header.decode()}" if self.kind == "header" and self.header else self.kind


def parse_sticky(text: str) -> StickyMode:
    """Parse `auto|authorization|header:NAME|none` (a usage error otherwise)."""
    value = text.strip()
    lowered = value.lower()
    if lowered in {"auto", "authorization", "none"}:
        return StickyMode(lowered)
    if lowered.startswith("header:"):
        name = value.split(":", 1)[1].strip()
        if not name or not _TOKEN.match(name):
            raise UsageError(f"--sticky `{text}`: `{name}` is not a header name", hint="e.g. --sticky header:X-Conversation-ID")
        return StickyMode("header", name.lower().encode("ascii"))
    raise UsageError(f"--sticky `{text}` is not one of auto, authorization, header:NAME, none")


def extract_key(headers: dict[bytes, bytes], mode: StickyMode) -> tuple[bytes | None, str]:
    """The raw key value and where it came from (`x-session-id`, `authorization`, a header name, `none`).

    `headers` maps lower-cased names to values. The raw value must go straight to `KeyHasher.digest`.
    """
    kind = mode.kind
    if kind == "none":
        return None, "none"
    if kind == "auto":
        value = headers.get(SESSION_HEADER)
        if value is not None and value.strip():
            return value.strip(), "x-session-id"
        value = headers.get(AUTH_HEADER)
        if value is not None and value.strip():
            return value.strip(), "authorization"
        return None, "none"
    name = AUTH_HEADER if kind == "authorization" else mode.header
    assert name is not None
    value = headers.get(name)
    if value is not None and value.strip():
        return value.strip(), name.decode("latin-1")
    return None, "none"


class KeyHasher:
    """Salted BLAKE2b of sticky-key values; 16 hex characters (64 bits) is plenty for a pin table."""

    __slots__ = ("_salt",)

    def __init__(self, salt: bytes) -> None:
        if len(salt) < 16:
            raise ValueError("salt must be at least 16 bytes")
        self._salt = salt[:64]

    def digest(self, value: bytes) -> str:
        """The hashed key: what pins, logs, metrics and status ever see."""
        return hashlib.blake2b(value, key=self._salt, digest_size=8).hexdigest()


def load_or_create_salt(path: Path, what: str = "router salt") -> bytes:
    """Read the router salt, creating it (32 random bytes, mode 0600) on first use.

    A salt that is not a regular file or is oversized is one usage error: a FIFO would hang the
    router's start and a link to /dev/zero would never end (or, rewritten, be written through). It is
    read once before the lock too, since the lock file sits beside a link's target."""
    path = Path(path)
    data = read_bytes(path, what=what, missing_ok=True)
    if data is not None and len(data) >= 16:
        return data
    with locked(path):
        data = read_bytes(path, what=what, missing_ok=True)
        if data is not None and len(data) >= 16:
            return data
        salt = os.urandom(32)
        write_atomic(path, salt, mode=0o600)
        return salt
