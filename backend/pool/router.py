"""Routing decisions: which backend serves a request, and the pool's background work.

Choice for a keyed request:
1. The pin, when its backend is routable: `hit`.
2. Otherwise walk the hash ring clockwise from the key's position and take the first backend that may
   take new keys (routable, not draining) and holds fewer than `ceil(load_factor × (pins + 1) / n)` pins
   (consistent hashing with bounded loads, Mirrokni et al. 2018): `miss` for a new key, `repin` when
   the old pin's backend was not routable. The pin is then written; it never moves back on its own.
Unkeyed requests (and `--sticky none`) go to the routable backend with the fewest requests in flight
(ties broken at random).

Drain (`c3 pool drain NODE`): the backend takes no new keys and no unkeyed requests. A key pinned to it
keeps going there only while that key has a request in flight (a conversation mid-turn finishes where
its cache is); its next request once idle re-pins elsewhere (`repin`). Undrain clears the flag; keys
that moved stay where they are now (no bounce-back).

Hot keys: each backend remembers the keys of its last `hot_key_window` requests (one deque append per
request); `status()` flags a key holding more than `hot_key_share` of them (and at least
`hot_key_min` requests). Only salted hashes are kept, so only hashes are shown.

Cache-aware routing (`--route cache`, `prefix.py`): a request whose prompt is given (`prompt`, its
block hashes) and that has no live pin goes to the backend holding the longest leading run of its
blocks (of several that hold it, the one whose engine queues least, then the least loaded), when that run covers at least `cache_min_match` of
them, while that backend is within the balance bound of the least loaded backend: counting this
request, at most `cache_balance_abs` more in flight than the least loaded, or at most
`cache_balance_rel` × its in flight (the shape of sglang-router's balance thresholds, but judged for
the chosen backend, not the pool's extremes). Past the bound the request goes to the least loaded
backend, so a long system prompt that every conversation shares cannot draw all traffic to the one
replica that saw it first. With `cache_load="engine"` (the default) the bound is the engine's own
queue instead (`engineload.py`): the holder keeps the request while its engine reports nothing waiting
(vLLM `num_requests_waiting`, llama-server `requests_deferred`), since a batching engine takes it at no
queueing cost; while it queues, the request goes to the backend whose engine queues least, when some
backend's engine queues less. A backend without a recent reading (no /metrics, a failed or stale
scrape) is judged by the in-flight bound above. Without a match the usual choice applies (the ring for a key, least loaded
without). A pinned session keeps its pin. Whichever backend is chosen is recorded as holding the prompt.

Retries pass `exclude`: the failed backend is skipped for this request; the pin moves only if that
backend is no longer routable.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import random
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from backend.limits import ANY_PORT, PORT_MAX
from backend.pool.budget import HeldBytes
from backend.pool.engineload import EngineLoads
from backend.pool.health import HealthPolicy
from backend.pool.keys import KeyHasher, StickyMode, parse_sticky
from backend.pool.kvevents import KvEvents
from backend.pool.metrics import PoolMetrics
from backend.pool.pins import PinTable
from backend.pool.prefix import PrefixIndex, block_hashes, prompt_bytes
from backend.pool.ring import HashRing, key_point
from backend.pool.upstream import Backend, probe

log = logging.getLogger("c3.pool")


class PoolConfig(BaseModel):
    """Everything a router needs; built by `c3 pool serve` from the node registry and flags."""

    model_config = ConfigDict(extra="forbid")

    backends: list[tuple[str, str]] = Field(min_length=1)
    """(node name, OpenAI base URL) per backend, in `--nodes` order."""
    host: str = "0.0.0.0"
    """Address to listen on."""
    port: int = Field(default=8011, ge=ANY_PORT, le=PORT_MAX)
    """Port to listen on (0 picks a free one; tests use that)."""
    sticky: str = "auto"
    """`auto`, `authorization`, `header:NAME` or `none`."""
    route: Literal["ring", "cache"] = "ring"
    """How a request without a live pin picks its backend: `ring` (bounded-load consistent hashing of its
    key, least loaded without one) or `cache` (the backend holding its longest prompt prefix first)."""
    cache_blocks: int = Field(default=16_384, ge=1)
    """`--route cache`: prefix block hashes remembered per backend (LRU; about 120 bytes each)."""
    cache_min_match: float = Field(default=0.5, ge=0, le=1)
    """`--route cache`: the share of a prompt's blocks a backend must hold for the prompt to follow them."""
    cache_balance_abs: int = Field(default=1, ge=0)
    """`--route cache`: a matched backend takes the request while, counting it, it would have at most this
    many more requests in flight than the least loaded backend (or is within `cache_balance_rel`);
    otherwise the least loaded backend takes it. 1: two requests in flight go to two idle replicas."""
    cache_balance_rel: float = Field(default=1.5, ge=1.0)
    """`--route cache`: ... or, counting the request, at most this × the least loaded backend's in-flight
    requests (the tolerance at high load, where a difference of a few requests is noise)."""
    cache_load: Literal["engine", "in-flight"] = "engine"
    """`--route cache`: what "loaded" means for the balance bound: `engine` (its engine reports requests
    waiting on /metrics; the in-flight bound for backends without a recent reading) or `in-flight` (the
    router's own in-flight counts only)."""
    kv_events: dict[str, str] = Field(default_factory=dict)
    """`--route cache`: backend name → its vLLM KV-event publisher (`tcp://HOST:PORT`, from the engine's
    `--kv-events-config`); the index forgets what those engines evict or clear (`kvevents.py`)."""
    load_interval_s: float = Field(default=1.0, gt=0)
    """`--cache-load engine`: seconds between scrapes of each backend's /metrics (each within
    min(this, `probe_timeout_s`))."""
    probe_interval_s: float = Field(default=2.0, gt=0)
    """Seconds between active health probes."""
    probe_timeout_s: float = Field(default=2.0, gt=0)
    """Timeout of one probe."""
    down_after: int = Field(default=3, ge=1)
    """Consecutive failures that take a healthy backend out."""
    up_after: int = Field(default=2, ge=1)
    """Consecutive successful probes that bring a backend back."""
    connect_timeout_s: float = Field(default=3.0, gt=0)
    """Timeout to open a connection to a backend."""
    max_attempts: int = Field(default=3, ge=1)
    """Backends tried per request before giving up (retries happen only before the first byte)."""
    load_factor: float = Field(default=1.25, ge=1.0)
    """Bounded load: no backend takes more than this × the average of assigned keys."""
    vnodes: int = Field(default=256, ge=1)
    """Virtual nodes per backend on the hash ring."""
    pin_cap: int = Field(default=100_000, ge=1)
    """Most pins kept (least recently used are dropped first)."""
    pin_ttl_s: float = Field(default=6 * 3600.0, gt=0)
    """Idle time after which a pin expires."""
    retry_body_limit: int = Field(default=8 * 1024 * 1024, ge=0)
    """Request bodies up to this size are buffered so they can be retried; larger ones are streamed."""
    max_buffered_bytes: int = Field(default=64 * 1024 * 1024, ge=0)
    """Request body bytes held for retries across all connections together; a body that would pass it
    is streamed through (retried only on connect errors) instead of held, never refused."""
    drain_timeout_s: float = Field(default=30.0, ge=0)
    """On SIGTERM/SIGINT: how long open requests may finish before the router exits."""
    upstream_timeout_s: float = Field(default=300.0, gt=0)
    """Longest wait for a backend's response head once the request is sent; then the backend counts as
    failing (a held request is retried elsewhere, otherwise the client gets 504). Non-streaming requests
    only get their head when generation ends, so raise it for very long non-streamed generations. The
    first body bytes after the head get this long too (a stream's first token comes after prefill)."""
    stream_timeout_s: float = Field(default=60.0, gt=0)
    """Longest silence between a response's body bytes once the first arrived (the first may take
    `upstream_timeout_s`: a stream's head comes at once, its first token after prefill); then the client
    connection closes (an SSE stream gets an `event: error` first) and it counts as a stalled stream
    against that backend."""
    write_timeout_s: float = Field(default=60.0, gt=0)
    """Longest a client may leave the router's buffer full (not reading); then it is disconnected and
    the backend request is closed, so a client that never reads holds no slot."""
    max_response_time_s: float = Field(default=3600.0, gt=0)
    """Longest one response may take, from the request sent upstream to its last byte (a cap over the
    per-phase timeouts; reaching it is not the backend's fault)."""
    body_timeout_s: float = Field(default=60.0, gt=0)
    """Longest wait for the next bytes of a request body; then the client gets 408 and is disconnected."""
    max_body_time_s: float = Field(default=600.0, gt=0)
    """Longest a whole request body may take to arrive, however steadily (then 408, as above)."""
    idle_timeout_s: float = Field(default=75.0, gt=0)
    """A client connection idle this long between requests, or still sending its request head after
    this long, is closed (bounds slow-header clients)."""
    hot_key_share: float = Field(default=0.5, gt=0, le=1)
    """Flag a key holding more than this share of a backend's recent requests."""
    hot_key_window: int = Field(default=200, ge=1)
    """Recent requests per backend the hot-key share is computed over."""
    hot_key_min: int = Field(default=20, ge=1)
    """A key must have at least this many of those requests to be flagged."""
    state_dir: Path | None = None
    """Where the salt, pins and the status file live (`$C3_STATE/pool`); None keeps everything in memory."""


class Router:
    """Backends, ring, pins, health loop and counters of one pool."""

    def __init__(self, config: PoolConfig, salt: bytes | None = None) -> None:
        self.config = config
        self.mode: StickyMode = parse_sticky(config.sticky)
        policy = HealthPolicy(config.probe_interval_s, config.probe_timeout_s, config.down_after, config.up_after)
        self.backends: dict[str, Backend] = {
            name: Backend(name, url, policy, connect_timeout_s=config.connect_timeout_s) for name, url in config.backends
        }
        self.order = list(self.backends.values())
        self.admin_token: str | None = None
        """What drain and undrain must present (`Authorization: Bearer …`); None refuses them all."""
        for name, url in config.backends:
            if self.backends[name].url != url.rstrip("/"):
                log.warning("backend %s: its URL carries user:password; the router never uses, sends or shows it "
                            "(authenticate with the pool's own API key or a header instead)", name)
        self.ring = HashRing(list(self.backends), vnodes=config.vnodes)
        self.pins = PinTable(cap=config.pin_cap, ttl_s=config.pin_ttl_s)
        self.salt = salt or os.urandom(32)
        self.hasher = KeyHasher(self.salt)
        self.metrics = PoolMetrics(list(self.backends), key_window=config.hot_key_window)
        self.key_busy: dict[str, int] = {}
        """Requests in flight per key (the proxy keeps it): a pin on a draining backend holds while > 0."""
        for b in self.order:
            b.metrics = self.metrics.backends[b.name]
        self.held = HeldBytes(config.max_buffered_bytes)
        """Request bytes held for retries, all connections together (`budget.py`)."""
        self.prefixes: PrefixIndex | None = PrefixIndex(list(self.backends), config.cache_blocks) if config.route == "cache" else None
        """Recent prompt prefixes per backend (`--route cache` only)."""
        self.loads: EngineLoads | None = None
        """The engines' queues (`--route cache --cache-load engine` only)."""
        if config.route == "cache" and config.cache_load == "engine":
            self.loads = EngineLoads(list(self.backends), config.load_interval_s, min(config.load_interval_s, config.probe_timeout_s))
        self.kv: KvEvents | None = KvEvents(config.kv_events) if config.route == "cache" and config.kv_events else None
        """The engines' KV-cache events (`--kv-events`), which trim the prefix index."""
        self.cache_outcomes = {"prefix": 0, "over_load": 0, "no_match": 0}
        """`--route cache` decisions: followed a prefix, passed over a loaded match, no match."""
        self.started_at = time.time()
        self._tasks: list[asyncio.Task[None]] = []

    # -- choice -------------------------------------------------------------------------------------

    def least_loaded(self, exclude: set[str] | frozenset[str] = frozenset()) -> Backend | None:
        """Fewest in flight among routable backends, random among equals."""
        best: list[Backend] = []
        low = None
        for b in self.order:
            if not b.health.assignable or b.name in exclude:
                continue
            n = b.metrics.in_flight
            if low is None or n < low:
                low, best = n, [b]
            elif n == low:
                best.append(b)
        if not best:
            return None
        return best[0] if len(best) == 1 else random.choice(best)

    def prompt_blocks(self, body: bytes | None) -> list[int] | None:
        """The prefix block hashes of a held request body under `--route cache`; None otherwise."""
        if self.prefixes is None or not body:
            return None
        return block_hashes(prompt_bytes(body), self.salt) or None

    def choose(self, key: str | None, exclude: set[str] | frozenset[str] = frozenset(),
               prompt: list[int] | None = None) -> tuple[Backend, str] | None:
        """(backend, sticky outcome) or None when nothing is routable.

        `prompt`: the request's prefix block hashes (`prompt_blocks`), for `--route cache`."""
        choice = self._choose(key, exclude, prompt)
        if choice is not None and prompt and self.prefixes is not None:
            self.prefixes.record(choice[0].name, prompt)
        return choice

    def _by_prefix(self, prompt: list[int] | None, exclude: set[str] | frozenset[str]) -> Backend | None:
        """`--route cache`: the least loaded backend holding the prompt's longest prefix while it is within
        the balance bound, the least loaded backend past it, or None without a long enough match."""
        if self.prefixes is None or not prompt:
            return None
        candidates = [b for b in self.order if b.health.assignable and b.name not in exclude]
        if not candidates:
            return None
        names, n = self.prefixes.longest(prompt, [b.name for b in candidates])
        if not names or n < self.config.cache_min_match * len(prompt):
            self.cache_outcomes["no_match"] += 1
            return None
        holders = [self.backends[name] for name in names]
        now = time.monotonic()
        order = {b.name: (self._waiting(b, now), b.metrics.in_flight) for b in holders}
        first = min(order.values())  # fewest queued by its engine (0 when unread), then fewest in flight
        best = random.choice([b for b in holders if order[b.name] == first])
        low = best.metrics.in_flight
        least = min(b.metrics.in_flight for b in candidates)
        queued = self._queued_elsewhere(best, candidates)
        if queued is False or queued is None and self.within_balance(low, least):
            self.cache_outcomes["prefix"] += 1
            return best
        self.cache_outcomes["over_load"] += 1
        return queued if isinstance(queued, Backend) else self.least_loaded(exclude)

    def _waiting(self, b: Backend, now: float) -> int:
        """Requests `b`'s engine queues by its last fresh reading; 0 without one (`--cache-load in-flight`,
        or unread: the in-flight count then orders it)."""
        reading = self.loads.fresh(b.name, now) if self.loads is not None else None
        return reading.waiting if reading is not None else 0

    def _queued_elsewhere(self, holder: Backend, candidates: list[Backend]) -> Backend | bool | None:
        """`--cache-load engine`: False when the holder's engine queues nothing, or no other engine
        queues less (follow the prefix); the idlest engine that queues less than the holder's (divert
        there); None without a reading of the holder's queue, or when only backends without a reading
        could take it (the in-flight bound decides)."""
        if self.loads is None:
            return None
        now = time.monotonic()
        mine = self.loads.fresh(holder.name, now)
        if mine is None:
            return None
        if mine.waiting == 0:
            return False
        shorter: list[tuple[int, int, Backend]] = []
        unread = False
        for b in candidates:
            if b is holder:
                continue
            reading = self.loads.fresh(b.name, now)
            if reading is None:
                unread = True
            elif reading.waiting < mine.waiting:
                shorter.append((reading.waiting, b.metrics.in_flight, b))
        if shorter:
            low = min((waiting, flight) for waiting, flight, _ in shorter)
            return random.choice([b for waiting, flight, b in shorter if (waiting, flight) == low])
        return None if unread else False

    def within_balance(self, in_flight: int, least: int) -> bool:
        """Whether a backend with `in_flight` requests may take one more while the least loaded has `least`."""
        load = in_flight + 1
        return load - least <= self.config.cache_balance_abs or load <= self.config.cache_balance_rel * least

    def _choose(self, key: str | None, exclude: set[str] | frozenset[str], prompt: list[int] | None) -> tuple[Backend, str] | None:
        if key is None:
            b = self._by_prefix(prompt, exclude) or self.least_loaded(exclude)
            return (b, "none") if b else None
        pinned = self.pins.get(key)
        if pinned is not None:
            pb = self.backends.get(pinned)
            if pb is not None and pb.health.routable and (not pb.health.draining or self.key_busy.get(key)):
                if pinned not in exclude:
                    return pb, "hit"
                # A retry away from a backend that is still routable: serve elsewhere, keep the pin.
                other = self._walk(key, exclude | {pinned}, bounded=False)
                return (other, "miss") if other else None
        chosen = self._by_prefix(prompt, exclude) or self._walk(key, exclude, bounded=True)
        if chosen is None:
            return None
        self.pins.set(key, chosen.name)
        if pinned is not None and pinned != chosen.name:
            chosen.metrics.repins += 1
            why = "draining" if pinned in self.backends and self.backends[pinned].health.draining else "not routable"
            log.info("repin key=%s %s -> %s (%s %s)", key, pinned, chosen.name, pinned, why)
            return chosen, "repin"
        return chosen, "miss"

    def _walk(self, key: str, exclude: set[str] | frozenset[str], bounded: bool) -> Backend | None:
        candidates = [b for b in self.order if b.health.assignable and b.name not in exclude]
        if not candidates:
            return None
        cap = math.inf
        if bounded and len(candidates) > 1:
            total = sum(max(0, self.pins.counts[b.name]) for b in candidates)
            cap = math.ceil(self.config.load_factor * (total + 1) / len(candidates))
        allowed = {b.name for b in candidates}
        for name in self.ring.walk(key_point(key)):
            if name in allowed and self.pins.counts[name] < cap:
                return self.backends[name]
        return min(candidates, key=lambda b: self.pins.counts[b.name])

    def set_draining(self, name: str, draining: bool) -> Backend | None:
        """Drain or undrain backend `name`; None when there is no such backend."""
        b = self.backends.get(name)
        if b is None:
            return None
        if b.health.draining != draining:
            b.health.draining = draining
            log.warning("backend %s %s", name, "draining: no new sessions; idle pinned sessions move" if draining else "undrained: takes new sessions again")
        return b

    def hot_keys(self) -> list[dict[str, Any]]:
        """Keys carrying more than `hot_key_share` of a backend's recent requests (hashes only)."""
        from collections import Counter

        found = []
        for b in self.order:
            recent = b.metrics.keys
            if not recent:
                continue
            counts = Counter(k for k in recent if k is not None)
            if not counts:
                continue
            key, count = counts.most_common(1)[0]
            share = count / len(recent)
            if count >= self.config.hot_key_min and share > self.config.hot_key_share:
                found.append({"key_hash": key, "backend": b.name, "share": round(share, 3), "requests": count, "window": len(recent)})
        return found

    # -- background -----------------------------------------------------------------------------------

    async def probe_all(self) -> None:
        """Probe every backend once, concurrently, and apply the results."""
        results = await asyncio.gather(*(probe(b) for b in self.order))
        for b, (outcome, rtt, error) in zip(self.order, results, strict=True):
            before = b.health.state
            if b.health.probe_result(outcome, rtt, error):
                self._state_changed(b, before)

    def answered(self, b: Backend, status: int) -> None:
        """`b` sent a well-formed response head with `status`.

        A status says how that request went, not how the backend is: llama-server answers a body that
        is not JSON with 500, so counting 5xx as health failures let any client, with no credentials,
        take every backend out (issue 26). 5xx only count in `errors`; health comes from the backend's
        own failures (connect errors, resets, timeouts, broken HTTP) and the probes. A 5xx does not
        end a failure streak either: a broken engine whose probes fail may still answer 500s.
        """
        if status >= 500:
            b.metrics.errors += 1
        else:
            b.health.passive_success()

    def passive_failure(self, b: Backend, reason: str, hard: bool) -> None:
        """Live traffic saw `b` itself fail (connect error, reset, timeout, broken HTTP or stream)."""
        b.metrics.errors += 1
        before = b.health.state
        if b.health.passive_failure(reason, hard):
            self._state_changed(b, before)

    def _state_changed(self, b: Backend, before: str) -> None:
        level = logging.INFO if b.health.routable else logging.WARNING
        log.log(level, "backend %s %s -> %s%s", b.name, before, b.health.state, f" ({b.health.last_error})" if b.health.last_error else "")
        if not b.health.routable:
            b.close_idle()
            if self.prefixes is not None:
                self.prefixes.forget(b.name)  # a restarted engine's cache is empty
            if self.loads is not None:
                self.loads.forget(b.name)

    async def _probe_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.probe_interval_s)
            try:
                await self.probe_all()
            except Exception:  # a probe bug must never stop health checking
                log.exception("health probe round failed")

    async def _load_loop(self) -> None:
        assert self.loads is not None
        while True:
            try:  # only backends in rotation: a down one is found by the probes, not hammered here
                await self.loads.scrape_all([b for b in self.order if b.health.routable])
            except Exception:  # a scrape bug must never stop routing; the in-flight bound stands in
                log.exception("engine load scrape round failed")
            await asyncio.sleep(self.loads.interval_s)

    async def _housekeeping(self) -> None:
        while True:
            await asyncio.sleep(60.0)
            self.pins.sweep()
            self.save_pins()

    async def start(self) -> None:
        """Load saved pins, probe once so the first requests see real states, start the loops."""
        self.load_pins()
        await self.probe_all()
        self._tasks = [asyncio.create_task(self._probe_loop()), asyncio.create_task(self._housekeeping())]
        if self.loads is not None:
            self._tasks.append(asyncio.create_task(self._load_loop()))
        if self.kv is not None:
            self.kv.start(asyncio.get_running_loop(), self.kv_forgot)

    def kv_forgot(self, name: str, share: float) -> None:
        """Backend `name`'s engine forgot `share` of its prefix cache (1.0: cleared): so does the index."""
        if self.prefixes is None or self.kv is None or name not in self.backends:
            return
        dropped = self.prefixes.forget_share(name, share)
        self.kv.feeds[name].trimmed += dropped

    async def stop(self) -> None:
        """Stop the loops, save pins, drop pooled connections."""
        if self.kv is not None:
            await asyncio.to_thread(self.kv.stop)
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            try:
                await task
            except asyncio.CancelledError:
                pass
        self._tasks = []
        self.save_pins()
        for b in self.order:
            b.close_idle()

    # -- pins on disk (hashed keys only) ------------------------------------------------------------------

    def _pins_file(self) -> Path | None:
        if self.config.state_dir is None:
            return None
        return self.config.state_dir / f"pins-{self.config.port}.json"

    def save_pins(self) -> None:
        """Persist pins (hashed keys, backend, idle seconds) so a restart keeps sessions where their cache is."""
        path = self._pins_file()
        if path is None:
            return
        from backend.atomic import write_atomic

        rows = self.pins.export()
        write_atomic(path, json.dumps({"schema_version": 1, "saved_at": time.time(), "pins": rows}), mode=0o600)

    def load_pins(self) -> None:
        """Reload persisted pins (idle time grows by the downtime)."""
        from backend.errors import C3Error
        from backend.userfiles import read_json

        path = self._pins_file()
        if path is None:
            return
        try:  # the bounded reader: a FIFO or /dev/zero put here must not hang or fill the router's start
            data = read_json(path, what="router pins file", missing_ok=True)
            if data is None:
                return
            downtime = max(0.0, time.time() - float(data.get("saved_at", time.time())))
            rows = [(str(k), str(b), float(idle) + downtime) for k, b, idle in data.get("pins", [])]
        except C3Error as exc:
            log.warning("ignoring unreadable pin file %s: %s", path, exc.message)
            return
        except (AttributeError, ValueError, TypeError) as exc:
            log.warning("ignoring unreadable pin file %s: %s", path, exc)
            return
        loaded = self.pins.restore(rows, set(self.backends))
        if loaded:
            log.info("restored %d pins from %s", loaded, path)

    # -- status ---------------------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """The document `c3 pool status --json` prints per pool (and the cockpit reads)."""
        ratio = self.metrics.hit_ratio()
        backends = []
        for b in self.order:
            h, m = b.health, b.metrics
            backends.append(
                {
                    "node": b.name,
                    "url": b.url,
                    "healthy": h.routable,
                    "state": h.state,
                    "draining": h.draining,
                    "suspect": h.routable and h.fails > 0,
                    "in_flight": m.in_flight,
                    "requests": m.requests,
                    "errors": m.errors,
                    "retries": m.retries,
                    "repins": m.repins,
                    "stalled_streams": m.stalls,
                    "pins": max(0, self.pins.counts[b.name]),
                    "prefix_blocks": self.prefixes.size(b.name) if self.prefixes is not None else 0,
                    "engine_load": self.loads.row(b.name) if self.loads is not None else None,
                    "kv_events": self.kv.row(b.name) if self.kv is not None else None,
                    "latency_ms": {"p50": m.percentile_ms(0.5), "p99": m.percentile_ms(0.99)},
                    "last_probe_rtt_ms": h.last_probe_rtt_ms,
                    "consecutive_failures": h.fails,
                    "last_error": h.last_error,
                    "state_since": h.changed_at,
                }
            )
        return {
            "sticky": str(self.mode),
            "route": self.config.route,
            "cache_load": self.config.cache_load if self.config.route == "cache" else None,
            "cache_routing": dict(self.cache_outcomes),
            "pins": len(self.pins),
            "sticky_outcomes": dict(self.metrics.sticky),
            "sticky_hit_ratio": ratio,
            "uptime_s": round(time.time() - self.started_at, 1),
            "backends": backends,
            "hot_keys": self.hot_keys(),
            "buffered": {"held_bytes": self.held.held, "peak_bytes": self.held.peak, "cap_bytes": self.held.cap,
                         "streamed_over_cap": self.held.spilled},
        }

    def render_metrics(self) -> str:
        """Prometheus text for `/metrics`."""
        states = {b.name: (b.url, b.health.routable) for b in self.order}
        return self.metrics.render(states, dict(self.pins.counts))
