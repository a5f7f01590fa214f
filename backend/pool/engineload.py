"""The engines' own load, for `--route cache --cache-load engine`: each backend's Prometheus `/metrics`,
scraped in the background (never on a request's path), read for two gauges.

- vLLM: `vllm:num_requests_waiting` (queued, not yet scheduled) and `vllm:num_requests_running`.
- llama-server (`--metrics`): `llamacpp:requests_deferred` and `llamacpp:requests_processing`.
Values are summed over label sets (a data-parallel vLLM reports one per engine rank).

Why the queue and not the router's in-flight count: an engine with nothing waiting batches one more
request at once, so sending it to the backend that holds its prefix costs no queueing and saves the
prefill; diverting pays off only when the holder's scheduler is already queueing. The router's in-flight
count cannot tell the two apart (two in flight against an idle replica is noise to a batching engine,
and diverting there recomputes a shared system prompt on a cold replica: issue 26's 4-replica bench).

Bounded: one scrape per backend per `interval_s`, each within `timeout_s` and at most `MAX_BYTES` (vLLM's
body is about 60 KB, llama-server's 2 KB); a backend whose scrape fails (no `/metrics`, 404 from a
llama-server run without `--metrics`, a timeout, a body with neither engine's names) is retried after a
growing pause (up to `MAX_BACKOFF` intervals) and meanwhile has no reading: the router then uses its
in-flight bound for it. A reading older than `STALE_AFTER` intervals counts as none.

The two gauges are found by a plain line scan (exact name, then `{labels}` or a space, then the value)
rather than a full Prometheus parser: the scrape runs on the router's event loop, and the full parse of
a vLLM body costs milliseconds (`backend/live/engine_metrics.py` does that for the cockpit).
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass

from backend.pool.heads import HeadError
from backend.pool.http1 import read_response_head
from backend.pool.upstream import Backend

MAX_BYTES = 2 * 1024 * 1024
"""Largest /metrics body read; a larger one is no reading."""
STALE_AFTER = 3
"""Intervals after which a reading is too old to route by."""
MAX_BACKOFF = 30
"""Most intervals between scrapes of a backend whose scrape keeps failing."""

NAMES = {
    b"vllm:num_requests_waiting": ("vllm", "waiting"),
    b"vllm:num_requests_running": ("vllm", "running"),
    b"llamacpp:requests_deferred": ("llamacpp", "waiting"),
    b"llamacpp:requests_processing": ("llamacpp", "running"),
}


@dataclass(slots=True)
class EngineLoad:
    """One reading of an engine's queue."""

    engine: str
    """`vllm` or `llamacpp`: whose names were found."""
    waiting: int
    """Requests queued by the engine's scheduler (vLLM waiting, llama-server deferred)."""
    running: int | None
    """Requests in the engine's running batch, when reported."""
    at: float
    """time.monotonic() of the scrape."""


def parse_load(body: bytes, at: float) -> EngineLoad | None:
    """The queue gauges of a /metrics body, or None when it has no waiting/deferred gauge."""
    sums: dict[tuple[str, str], float] = {}
    for line in body.split(b"\n"):
        if not line.startswith((b"vllm:num_requests_", b"llamacpp:requests_")):
            continue
        end = len(line)
        for sep in (b"{", b" "):
            i = line.find(sep)
            if 0 <= i < end:
                end = i
        what = NAMES.get(line[:end])
        if what is None:
            continue  # e.g. vllm:num_requests_waiting_by_reason: a breakdown of the total
        rest = line[end:]
        if rest.startswith(b"{"):
            close = rest.rfind(b"}")
            if close < 0:
                continue
            rest = rest[close + 1 :]
        fields = rest.split()
        try:
            value = float(fields[0]) if fields else math.nan
        except ValueError:
            continue
        if math.isfinite(value) and value >= 0:
            sums[what] = sums.get(what, 0.0) + value
    for engine in ("vllm", "llamacpp"):
        if (engine, "waiting") in sums:
            running = sums.get((engine, "running"))
            return EngineLoad(engine, int(sums[(engine, "waiting")]), None if running is None else int(running), at)
    return None


async def _fetch(backend: Backend) -> bytes:
    """GET /metrics over HTTP/1.0 (so the body is never chunked: it ends at EOF or Content-Length)."""
    reader, writer = await backend.connect()
    try:
        writer.write(b"GET " + backend.prefix + b"/metrics HTTP/1.0\r\nHost: " + backend.host_header
                     + b"\r\nUser-Agent: c3-pool-load\r\nAccept: text/plain\r\n\r\n")
        head = await read_response_head(reader)
        if head.a != b"200":
            raise LoadError(f"HTTP {head.a.decode(errors='replace')} on /metrics")
        if b"transfer-encoding" in head.headers:
            raise LoadError("/metrics answered with a Transfer-Encoding to an HTTP/1.0 request")
        body = bytearray()
        while len(body) <= MAX_BYTES:
            chunk = await reader.read(65536)
            if not chunk:
                return bytes(body)
            body += chunk
        raise LoadError(f"/metrics body over {MAX_BYTES} bytes")
    finally:
        writer.transport.abort()


class LoadError(Exception):
    """A scrape that gave no reading (the text is shown in `c3 pool status`)."""


class EngineLoads:
    """The latest queue reading of every backend, and when to scrape each next."""

    def __init__(self, names: list[str], interval_s: float, timeout_s: float) -> None:
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self.readings: dict[str, EngineLoad | None] = dict.fromkeys(names)
        self.errors: dict[str, str | None] = dict.fromkeys(names)
        self._fails: dict[str, int] = dict.fromkeys(names, 0)
        self._next: dict[str, float] = dict.fromkeys(names, 0.0)

    def fresh(self, name: str, now: float | None = None) -> EngineLoad | None:
        """The backend's reading while it is recent enough to route by, else None."""
        reading = self.readings.get(name)
        if reading is None:
            return None
        if (now if now is not None else time.monotonic()) - reading.at > STALE_AFTER * self.interval_s:
            return None
        return reading

    async def scrape(self, backend: Backend) -> None:
        """One scrape of `backend` (if it is due), kept or recorded as failed."""
        now = time.monotonic()
        if now < self._next[backend.name]:
            return
        try:
            async with asyncio.timeout(self.timeout_s):
                body = await _fetch(backend)
            reading = parse_load(body, time.monotonic())
            if reading is None:
                raise LoadError("/metrics has no vllm:num_requests_waiting or llamacpp:requests_deferred "
                                "(llama-server exports them only with --metrics)")
        except (LoadError, HeadError, OSError, TimeoutError, asyncio.IncompleteReadError) as exc:
            self.readings[backend.name] = None
            self.errors[backend.name] = _why(exc, self.timeout_s)
            self._fails[backend.name] += 1
            # from the failure's end: a scrape that timed out must not be due again at once
            self._next[backend.name] = time.monotonic() + min(MAX_BACKOFF, 2 ** self._fails[backend.name]) * self.interval_s
            return
        self.readings[backend.name] = reading
        self.errors[backend.name] = None
        self._fails[backend.name] = 0
        self._next[backend.name] = 0.0

    async def scrape_all(self, backends: list[Backend]) -> None:
        """Scrape every due backend concurrently."""
        await asyncio.gather(*(self.scrape(b) for b in backends))

    def forget(self, name: str) -> None:
        """Drop `name`'s reading (it left rotation) and scrape it again at once when it is back."""
        self.readings[name] = None
        self._fails[name] = 0
        self._next[name] = 0.0

    def row(self, name: str) -> dict[str, object]:
        """The backend's `engine_load` field of `c3 pool status --json`."""
        reading = self.fresh(name)
        if reading is None:
            old = self.readings.get(name)
            why = self.errors.get(name) or (f"last reading {time.monotonic() - old.at:.0f}s old" if old else "no reading yet")
            return {"read": False, "error": why, "fallback": "in-flight bound"}
        return {"read": True, "engine": reading.engine, "waiting": reading.waiting, "running": reading.running,
                "age_s": round(time.monotonic() - reading.at, 2)}


def _why(exc: BaseException, timeout_s: float) -> str:
    if isinstance(exc, TimeoutError):
        return f"/metrics timed out after {timeout_s:g}s"
    if isinstance(exc, LoadError):
        return str(exc)
    if isinstance(exc, HeadError):
        return f"/metrics: {exc.reason}"
    if isinstance(exc, OSError):
        return f"/metrics: {type(exc).__name__}" + (f": {exc.strerror}" if exc.strerror else "")
    return f"/metrics: {type(exc).__name__}"
