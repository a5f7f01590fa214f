"""Sticky keys: which request header identifies a session, and how its value is hashed.

Modes (`--sticky`):
- `auto`: the session is the conversation, not the API key (one key shared by a team or an app names a
  tenant, and pinning a tenant put all its conversations on one backend: issue 26). In order:
  `X-Session-ID`; the JSON body's `user` field; the conversation's prefix — the messages up to and
  including the first user message of a chat (`messages`), or the first `PROMPT_PREFIX` bytes of a
  completion `prompt` (later turns resend the same start, so they hash alike); else `Authorization`
  (a request with no body, or one not parsed), else no key. Each session value is combined with the
  tenant (the `Authorization` value), so two tenants' `user: alice` are two sessions. Work is bounded:
  only a held JSON body of at most `PARSE_LIMIT` bytes is parsed, and only its first few messages are
  hashed. The Responses API (`input`, `previous_response_id`) keeps the tenant key: a chained response
  must reach the backend that stored its predecessor.
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
import json
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
PARSE_LIMIT = 1024 * 1024
"""Largest request body parsed for a session (`user`, conversation prefix); a larger one keys by tenant."""
PROMPT_PREFIX = 4096
"""Bytes of a completion prompt (items of a token-id prompt) that name its conversation."""


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


def session_key(headers: dict[bytes, bytes], body: bytes | None, mode: StickyMode) -> tuple[bytes | None, str]:
    """Like `extract_key`, but in `auto` mode the session inside the tenant (see the module doc).

    `body` is the whole request body when the router holds it, else None (a streamed body is not read
    ahead for a key). The raw value must go straight to `KeyHasher.digest`.
    """
    if mode.kind != "auto":
        return extract_key(headers, mode)
    tenant = headers.get(AUTH_HEADER, b"").strip()
    value = headers.get(SESSION_HEADER)
    if value is not None and value.strip():
        return b"s\0" + tenant + b"\0" + value.strip(), "x-session-id"
    found = _body_session(body) if body else None
    if found is not None:
        session, source = found
        return source[0].encode() + b"\0" + tenant + b"\0" + session, source
    return (tenant, "authorization") if tenant else (None, "none")


def _body_session(body: bytes) -> tuple[bytes, str] | None:
    """(session value, `user` | `prefix`) from an OpenAI JSON body, or None."""
    if len(body) > PARSE_LIMIT or body[:1] != b"{":
        return None
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError):  # not JSON (UnicodeDecodeError is a ValueError), or nested too deep
        return None
    if not isinstance(doc, dict):
        return None
    user = doc.get("user")
    if isinstance(user, str) and user.strip():
        return user.strip().encode(), "user"
    messages = doc.get("messages")
    if isinstance(messages, list) and messages:
        upto = next((i for i, m in enumerate(messages) if isinstance(m, dict) and m.get("role") == "user"), None)
        if upto is None:
            return None
        # Canonical form: a client that reorders keys between turns still names the same conversation.
        text = json.dumps(messages[: upto + 1], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return text.encode("utf-8", "surrogatepass"), "prefix"
    prompt = doc.get("prompt")
    if isinstance(prompt, list) and prompt and not isinstance(prompt[0], int):
        prompt = prompt[0]  # a batch: its first prompt
    if isinstance(prompt, str) and prompt:
        return prompt.encode("utf-8", "surrogatepass")[:PROMPT_PREFIX], "prefix"
    if isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt[:PROMPT_PREFIX]):
        return json.dumps(prompt[:PROMPT_PREFIX]).encode(), "prefix"
    return None


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
