"""Cache-aware routing (`--route cache`): a bounded, approximate index of the prompt prefixes each backend
has recently been sent, so a request can go where its prefix is most likely still in the engine's KV cache.

A prompt is turned into canonical bytes (`prompt_bytes`: a chat's messages as `role NUL content RS`
in order, so a later turn's bytes start with the earlier turn's; a completion's `prompt`), cut into
`BLOCK`-byte blocks, and each full block is hashed together with every block before it (a keyed
BLAKE2b chain under the router's salt: a block hash names its whole prefix, and no raw prompt text is
kept). Per backend the index is an LRU set of such block hashes, at most `cap` of them (measured
≈ 120 bytes each, so the default 16,384 is about 2 MiB per backend). Recording a prompt touches its
blocks last to first, so a shared start (a system prompt) stays the most recently used and is evicted
after the longer prompts that extend it.

The match of a backend is the number of leading blocks of the prompt its set holds. The index is
approximate on purpose: the router sees the engine's own evictions only where vLLM publishes its KV
events (`--kv-events`, `kvevents.py`: the same share of the set is dropped, oldest first), it records where it sent a
request (not whether it succeeded), and a backend that leaves rotation forgets its whole set (an engine
that restarts has an empty cache). `Router.choose` decides with it, within a balance bound (see `router.py`).
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from typing import Any

BLOCK = 256
"""Bytes per indexed block (about 64 tokens of English text; vLLM caches 16-token blocks)."""
MAX_BLOCKS = 1024
"""Blocks of one prompt that are hashed (its first 256 KiB); a longer prompt matches on that start."""
PARSE_LIMIT = 1024 * 1024
"""Largest held JSON body parsed for its prompt (as `keys.PARSE_LIMIT`)."""


def prompt_bytes(body: bytes | None, limit: int = BLOCK * MAX_BLOCKS) -> bytes:
    """The canonical prompt of an OpenAI JSON body (chat `messages` or completion `prompt`), at most
    `limit` bytes; b"" when there is none or the body is not a JSON object of at most PARSE_LIMIT bytes."""
    if not body or len(body) > PARSE_LIMIT or body[:1] != b"{":
        return b""
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError):
        return b""
    if not isinstance(doc, dict):
        return b""
    messages = doc.get("messages")
    if isinstance(messages, list):
        out = bytearray()
        for m in messages:
            if not isinstance(m, dict):
                break
            content: Any = m.get("content")
            text = content if isinstance(content, str) else json.dumps(content, sort_keys=True, separators=(",", ":"))
            out += f"{m.get('role')}\0{text}\x1e".encode("utf-8", "surrogatepass")
            if len(out) >= limit:
                break
        return bytes(out[:limit])
    prompt = doc.get("prompt")
    if isinstance(prompt, list) and prompt and not isinstance(prompt[0], int):
        prompt = prompt[0]  # a batch: its first prompt
    if isinstance(prompt, str):
        return prompt.encode("utf-8", "surrogatepass")[:limit]
    if isinstance(prompt, list) and all(isinstance(t, int) for t in prompt):
        return ",".join(map(str, prompt)).encode()[:limit]
    return b""


def block_hashes(data: bytes, salt: bytes) -> list[int]:
    """Chained hashes of the full `BLOCK`-byte blocks of `data` (at most MAX_BLOCKS): the i-th names
    blocks 0..i together, so equal hashes mean an equal prefix."""
    out: list[int] = []
    prev = b""
    key = salt[:64]
    for start in range(0, min(len(data), BLOCK * MAX_BLOCKS) - BLOCK + 1, BLOCK):
        prev = hashlib.blake2b(prev + data[start : start + BLOCK], key=key, digest_size=8).digest()
        out.append(int.from_bytes(prev, "big"))
    return out


class PrefixIndex:
    """Per-backend LRU sets of prefix block hashes, each at most `cap` entries."""

    __slots__ = ("cap", "_sets", "evictions", "_carry")

    def __init__(self, names: list[str], cap: int = 16_384) -> None:
        if cap < 1:
            raise ValueError("cap must be at least 1")
        self.cap = cap
        self._sets: dict[str, OrderedDict[int, None]] = {name: OrderedDict() for name in names}
        self.evictions = 0
        self._carry: dict[str, float] = {}

    def __len__(self) -> int:
        return sum(len(s) for s in self._sets.values())

    def size(self, name: str) -> int:
        """Block hashes held for backend `name`."""
        return len(self._sets[name])

    def matched(self, name: str, hashes: list[int]) -> int:
        """Leading blocks of `hashes` that backend `name` holds."""
        held = self._sets[name]
        n = 0
        for h in hashes:
            if h not in held:
                break
            n += 1
        return n

    def longest(self, hashes: list[int], names: list[str]) -> tuple[list[str], int]:
        """(every backend among `names` holding the longest leading run of `hashes`, in the order given;
        that run's length); ([], 0) when none holds the first block. A shared system prompt is often held
        by several: the router then picks among them by load."""
        best: list[str] = []
        best_n = 0
        for name in names:
            n = self.matched(name, hashes)
            if n > best_n:
                best, best_n = [name], n
            elif n == best_n and n:
                best.append(name)
        return best, best_n

    def record(self, name: str, hashes: list[int]) -> None:
        """Backend `name` was sent a prompt with these blocks: hold them (most recent), evict past the cap."""
        held = self._sets[name]
        for h in reversed(hashes):  # the first block ends up most recently used: prefixes outlive extensions
            if h in held:
                held.move_to_end(h)
            else:
                held[h] = None
        over = len(held) - self.cap
        for _ in range(max(0, over)):
            held.popitem(last=False)
        if over > 0:
            self.evictions += over

    def forget_share(self, name: str, share: float) -> int:
        """Drop the least recently used `share` (0..1) of what is held for `name` (its engine evicted that
        share of its cache, `kvevents.py`); the fraction of an entry is carried to the next call, so many
        small evictions add up. Returns the entries dropped."""
        held = self._sets[name]
        if share >= 1.0:
            n = len(held)
            held.clear()
            self._carry.pop(name, None)
            return n
        want = share * len(held) + self._carry.get(name, 0.0)
        n = min(len(held), int(want))
        self._carry[name] = want - n
        for _ in range(n):
            held.popitem(last=False)
        return n

    def forget(self, name: str) -> None:
        """Drop everything held for `name` (its engine's cache is presumed gone)."""
        self._sets[name].clear()
        self._carry.pop(name, None)
