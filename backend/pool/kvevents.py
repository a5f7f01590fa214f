"""vLLM's KV-cache events, read by `--route cache --kv-events …` so that the prefix index forgets what the
engines forgot.

vLLM started with `--kv-events-config '{"enable_kv_cache_events": true, "publisher": "zmq", "endpoint":
"tcp://*:5557"}'` publishes every change of its prefix cache on a ZMQ PUB socket: three-frame messages
(topic, an 8-byte big-endian sequence number, a msgpack `EventBatch` `[ts, [event, …], dp_rank]`), each
event a map whose `type` is `BlockStored` (its `block_hashes`, `token_ids`, `block_size`), `BlockRemoved`
(its `block_hashes`: evicted) or `AllBlocksCleared` (a prefix-cache reset: `/reset_prefix_cache`, sleep).
Read from vLLM 0.32's `vllm/distributed/kv_events.py`.

What the router does with them. Its index (`prefix.py`) holds hashes of prompt TEXT blocks; the engine's
hashes are of TOKEN blocks, and the router has no tokenizer, so the two cannot be matched one to one.
What can be matched is how much each forgot:
- `AllBlocksCleared`: the engine holds nothing, so the backend's index is emptied (exact).
- `BlockRemoved`: the engine evicted k of the L blocks it held; both the engine's cache and the router's
  index are least-recently-used over the same requests, so the router drops the same share, k / L, of
  the backend's index, oldest first. Without this the router keeps sending prompts to a backend that
  evicted them long ago (its index is bounded by `--cache-blocks`, not by the engine's memory), where
  they hit nothing and pile load on one replica.
Only blocks stored since the router subscribed are counted (a removal of a block it never saw stored
was cached before the router started, when its index was empty too): L is the blocks stored since then
and not yet removed. Events of other tiers (`medium` CPU or STORAGE: offloaded copies) are ignored.

Bounded: a message over `MAX_MESSAGE` bytes is dropped by ZMQ itself, at most `QUEUE` messages wait per
socket (ZMQ's high-water mark: past it the publisher's messages are dropped, counted as sequence gaps),
the hashes remembered per backend are at most `MAX_KNOWN`. The sockets are read on one thread of their
own (decoding a batch of a long prompt costs milliseconds); what changes the index runs on the router's
event loop (`Router.kv_forgot`).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

MAX_MESSAGE = 16 * 1024 * 1024
"""Largest event message read (ZMQ drops larger ones before they are buffered)."""
QUEUE = 10_000
"""Messages held per socket before the newest are dropped."""
MAX_KNOWN = 1 << 18
"""Block hashes remembered per backend (as 64-bit fingerprints, ~130 bytes each with the dict: ≤ 34 MiB).
An 80 GiB GPU of 16-token blocks of a 7B model holds ~300,000: past the cap new blocks go untracked, their
removals are not counted (the index then forgets less, as without events) until removals make room."""
POLL_MS = 100
"""How long the reader waits for a message before it looks at its stop flag."""
DEVICE_TIERS = (None, "GPU")
"""`medium` values of the engine's own cache (CPU and STORAGE are offloading tiers)."""


def parse_endpoints(spec: str, backends: list[tuple[str, str]]) -> dict[str, str]:
    """`--kv-events`: `PORT` (every backend's host at that port) or `NAME=tcp://HOST:PORT,…` (one per
    backend named); UsageError with a one-line reason otherwise."""
    from urllib.parse import urlsplit

    from backend.errors import UsageError
    from backend.limits import is_port, port_text

    spec = spec.strip()
    names = [name for name, _ in backends]
    if spec.isdigit() and spec.isascii():
        try:
            port = port_text(spec)
        except ValueError as exc:
            raise UsageError(f"--kv-events {exc}") from None
        out = {}
        for name, url in backends:
            host = urlsplit(url).hostname
            if not host:
                raise UsageError(f"--kv-events {port}: backend {name}'s URL {url} has no host")
            out[name] = f"tcp://[{host}]:{port}" if ":" in host else f"tcp://{host}:{port}"
        return out
    out = {}
    for part in spec.split(","):
        name, sep, endpoint = part.strip().partition("=")
        if not sep:
            raise UsageError(f"--kv-events {part.strip()!r}: give a port, or NAME=tcp://HOST:PORT per backend",
                             hint="e.g. --kv-events 5557 (each backend's host) or --kv-events a=tcp://10.0.0.2:5557,b=tcp://10.0.0.3:5557")
        if name not in names:
            raise UsageError(f"--kv-events names {name!r}, which is not one of the pool's nodes ({', '.join(names)})")
        if name in out:
            raise UsageError(f"--kv-events names {name} twice")
        parts = urlsplit(endpoint)
        try:
            given: int | None = parts.port
        except ValueError:
            given = None
        if parts.scheme != "tcp" or not parts.hostname or given is None or not is_port(given) or parts.path or parts.query:
            raise UsageError(f"--kv-events {name}={endpoint}: the endpoint must be tcp://HOST:PORT",
                             hint="vLLM publishes where its --kv-events-config endpoint says, e.g. tcp://*:5557")
        out[name] = endpoint
    return out


@dataclass
class Feed:
    """One backend's event stream: what its engine holds (as far as the events tell) and what was read."""

    endpoint: str
    known: dict[int, None] = field(default_factory=dict)
    """Fingerprints (`hash()`) of the engine block hashes stored since the router subscribed and not removed since."""
    messages: int = 0
    stored: int = 0
    removed: int = 0
    cleared: int = 0
    gaps: int = 0
    """Times the sequence numbers skipped (messages lost: the publisher's or our queue was full)."""
    restarts: int = 0
    """Times the sequence started again (a new engine process: its cache, and so the index, is empty)."""
    bad: int = 0
    """Messages that were not an event batch (dropped)."""
    untracked: int = 0
    """Blocks stored while `known` was full (their removal is not counted)."""
    trimmed: int = 0
    """Prefix-index entries the router dropped because of this engine's events."""
    last_seq: int | None = None
    last_at: float | None = None
    """time.monotonic() of the last message."""
    error: str | None = None


class KvEvents:
    """ZMQ SUB sockets to each backend's event publisher, read on one thread; `forgot(name, share)` is
    called on the event loop with share 1.0 for a cleared cache and k / L for an eviction."""

    def __init__(self, endpoints: dict[str, str]) -> None:
        self.feeds = {name: Feed(endpoint) for name, endpoint in endpoints.items()}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._forgot: Callable[[str, float], None] | None = None

    def start(self, loop: asyncio.AbstractEventLoop, forgot: Callable[[str, float], None]) -> None:
        import zmq  # only here: a router without --kv-events never loads libzmq

        self._loop, self._forgot = loop, forgot
        ctx: Any = zmq.Context.instance()
        sockets = {}
        for name, feed in self.feeds.items():
            sock = ctx.socket(zmq.SUB)
            sock.setsockopt(zmq.MAXMSGSIZE, MAX_MESSAGE)
            sock.setsockopt(zmq.RCVHWM, QUEUE)
            sock.setsockopt(zmq.LINGER, 0)
            sock.setsockopt(zmq.IPV6, 1)  # a backend named by an IPv6 address (tcp://[::1]:5557); IPv4 still works
            sock.setsockopt(zmq.SUBSCRIBE, b"")
            sock.connect(feed.endpoint)  # ZMQ connects (and reconnects) in the background
            sockets[sock] = name
        self._thread = threading.Thread(target=self._read, args=(sockets,), name="c3-pool-kv-events", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None

    def _read(self, sockets: dict[Any, str]) -> None:
        import zmq

        poller = zmq.Poller()
        for sock in sockets:
            poller.register(sock, zmq.POLLIN)
        try:
            self._poll(sockets, poller)
        except Exception as exc:  # e.g. the ZMQ context terminated under us: say so, never crash the router
            for feed in self.feeds.values():
                feed.error = f"event reader stopped: {type(exc).__name__}: {exc}"
        finally:
            for sock in sockets:
                sock.close(0)

    def _poll(self, sockets: dict[Any, str], poller: Any) -> None:
        import zmq

        while not self._stop.is_set():
            for sock, _ in poller.poll(POLL_MS):
                name = sockets[sock]
                while True:
                    try:
                        frames = sock.recv_multipart(zmq.NOBLOCK)
                    except zmq.Again:
                        break
                    share = self.take(name, frames)
                    if share and self._loop is not None and self._forgot is not None:
                        try:
                            self._loop.call_soon_threadsafe(self._forgot, name, share)
                        except RuntimeError:  # the loop closed: the router is stopping
                            return

    def take(self, name: str, frames: list[bytes]) -> float:
        """Account one message of backend `name`; the share of its cache the engine forgot (0 if none)."""
        import msgpack  # type: ignore[import-untyped]  # no stubs; one call below

        feed = self.feeds[name]
        feed.messages += 1
        feed.last_at = time.monotonic()
        if len(frames) != 3 or len(frames[1]) != 8:
            feed.bad += 1
            feed.error = f"a message of {len(frames)} frames (want topic, sequence, payload)"
            return 0.0
        seq = int.from_bytes(frames[1], "big")
        restarted = feed.last_seq is not None and seq <= feed.last_seq
        if restarted:
            # A publisher's sequence only grows: a smaller one is a new engine process, whose cache is empty.
            feed.restarts += 1
            feed.known.clear()
        elif feed.last_seq is not None and seq != feed.last_seq + 1:
            feed.gaps += 1
        feed.last_seq = seq
        try:
            batch = msgpack.unpackb(frames[2], raw=False, strict_map_key=False, use_list=True)
            events = batch[1]
            if not isinstance(events, list):
                raise TypeError("events is not a list")
        except Exception as exc:  # any malformed payload: count it, never stop reading
            feed.bad += 1
            feed.error = f"not a vLLM event batch ({type(exc).__name__})"
            return 0.0
        feed.error = None
        forgot = 1.0 if restarted else 0.0
        for event in events:
            if not isinstance(event, dict):
                continue
            kind = event.get("type")
            if kind == "AllBlocksCleared":
                feed.cleared += 1
                feed.known.clear()
                forgot = 1.0
                continue
            if event.get("medium") not in DEVICE_TIERS:
                continue
            hashes = event.get("block_hashes")
            if not isinstance(hashes, list):
                continue
            if kind == "BlockStored":
                for h in hashes:
                    if isinstance(h, (bytes, int, str)):
                        if len(feed.known) < MAX_KNOWN:
                            feed.known[hash(h)] = None
                        else:
                            feed.untracked += 1
                feed.stored += len(hashes)
            elif kind == "BlockRemoved":
                held = len(feed.known)
                gone = 0
                for h in hashes:
                    if isinstance(h, (bytes, int, str)) and feed.known.pop(hash(h), 0) is None:
                        gone += 1
                feed.removed += len(hashes)
                if gone and held:
                    # forgetting twice in one batch: what is left of the first share loses the second
                    forgot = 1.0 - (1.0 - forgot) * (1.0 - gone / held)
        return forgot

    def row(self, name: str) -> dict[str, Any] | None:
        """The backend's `kv_events` field of `c3 pool status --json` (`status.KvEventsStatus`); None without an endpoint."""
        feed = self.feeds.get(name)
        if feed is None:
            return None
        age = None if feed.last_at is None else round(time.monotonic() - feed.last_at, 1)
        return {"endpoint": feed.endpoint, "messages": feed.messages, "engine_blocks": len(feed.known),
                "untracked": feed.untracked, "stored": feed.stored, "removed": feed.removed, "cleared": feed.cleared,
                "gaps": feed.gaps, "restarts": feed.restarts, "bad": feed.bad, "trimmed": feed.trimmed,
                "last_event_age_s": age, "error": feed.error}
