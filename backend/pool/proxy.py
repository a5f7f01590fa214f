"""The router's HTTP/1.1 front end: a pass-through proxy on asyncio streams.

Heads are parsed strictly by llhttp (`heads.py`) and the forwarded head is rebuilt from validated
fields; request bodies are decoded strictly and re-framed by the router (`intake.py`); response bodies
are relayed as raw bytes with their framing checked on the way (`http1.py`), so SSE arrives
byte-identical and unbuffered. Swapping the upstream side for `httpx.AsyncClient.stream` (same
front end, same stub engines, 64 streams) served ~200 req/s against ~2,600-2,900 req/s for this
hand-rolled upstream: httpx builds request/response objects, runs its own pool and decoders. The
relay coalesces: whatever bytes arrived are forwarded in one write, and a response head leaves
together with the first body bytes when they are already there (see `http1.relay_chunked`).
`bench/router.py` has the end-to-end numbers.

Request life:
1. Read the head (a malformed one is 400/431/501 and the connection closes before any byte goes
   upstream); bodies up to `retry_body_limit` are read whole (so they can be retried), larger ones
   are streamed to the backend as they arrive (and then are not retried). Any answer the router
   gives before the body was read to its end closes the connection.
2. Pick a backend (`router.py`), send, wait for the response head (`exchange.py`, one `Exchange` per
   request, holding its attempts). A connect error, a connection that
   closes before answering, or 429/502/503/504 retries on another backend, at most `max_attempts` in
   all. Retries happen only before the client has seen a single byte. A status code never counts
   against a backend's health (see `Router.answered`).
   A backend that sends no response head within `upstream_timeout_s` fails the same way (504 when
   the body was streamed through and cannot be resent).
   A backend's malformed response head is a 502 (that connection is dropped, never pooled).
3. Forward the head (plus `X-C3-Backend`, `X-C3-Key-Source`, and `X-C3-Sticky` only for a request
   presenting the admin token in `X-C3-Admin`) and relay the body.
   If the backend dies midway through an SSE stream, the client gets one final
   `event: error` with an OpenAI-style error object and the response ends; nothing is replayed.
4. A client that goes away (closes or half-closes) aborts the backend connection at once, which is
   what makes vLLM abort the generation.
"""

from __future__ import annotations

import asyncio
import logging
import time

from backend.pool.admin import ADMIN_HEADER, handle_admin, is_admin_path, json_error, shows_sticky
from backend.pool.connection import ClientProtocol, Parked
from backend.pool.exchange import Exchange
from backend.pool.heads import ALLOWED, Head, HeadError, forward_fields, parse_request
from backend.pool.http1 import BadMessage, read_head
from backend.pool.intake import Body, take_body
from backend.pool.keys import session_key
from backend.pool.listener import Listener
from backend.pool.respond import ClientGone
from backend.pool.router import Router

log = logging.getLogger("c3.pool")

UPSTREAM_DROP = frozenset({b"host", b"expect", ADMIN_HEADER})


class PoolServer:
    """The listening socket, the client connections and the per-request proxy logic."""

    def __init__(self, router: Router) -> None:
        self.router = router
        self.config = router.config
        self.server: Listener | None = None
        self.port = 0
        self.closing = False
        self.force = False  # a second signal: stop waiting for requests in progress
        self.connections: set[ClientProtocol] = set()
        self._idle = asyncio.Event()
        self._reaper: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Probe the backends, then listen."""
        await self.router.start()
        loop = asyncio.get_running_loop()
        self.server = Listener(self.config.host, self.config.port, lambda: ClientProtocol(self))
        self.server.start()
        self.port = self.server.port
        self._reaper = loop.create_task(self._reap())

    async def _reap(self) -> None:
        """Idle connections, overdue request bodies, silent backends and clients that do not read,
        checked on a tick; a connection that kept its task between requests parks after a tick idle.

        One sweep over the connections replaces timers per request (idle, body, head, stream, write):
        under load, arming and cancelling those left a cancelled handle per request in the event
        loop's heap. Deadlines are met to within one tick (at most 1 s, a quarter of the shortest
        timeout when shorter).
        """
        cfg = self.config
        limits = (cfg.upstream_timeout_s, cfg.idle_timeout_s, cfg.body_timeout_s, cfg.stream_timeout_s, cfg.write_timeout_s,
                  cfg.max_body_time_s, cfg.max_response_time_s)
        tick = max(0.05, min(1.0, *(limit / 4 for limit in limits)))
        while True:
            await asyncio.sleep(tick)
            now = time.monotonic()
            for proto in list(self.connections):
                expired = proto.watch.check(now)
                if expired:
                    if expired == "write":
                        log.info("closed a client connection: it did not read its answer for %gs", cfg.write_timeout_s)
                elif proto.body_deadline and now >= proto.body_deadline and proto.transport is not None:
                    capped = proto.body_deadline >= proto.body_cap
                    proto.body_deadline = 0.0
                    why = f"took longer than {cfg.max_body_time_s:g}s in all" if capped else f"stalled for {cfg.body_timeout_s:g}s"
                    log.info("closed a client connection: its request body %s", why)
                    proto.transport.write(json_error(408, f"request body {why}", "invalid_request_error", close=True))
                    proto.transport.close()
                elif not proto.busy and now - proto.idle_since > cfg.idle_timeout_s and proto.transport is not None:
                    proto.transport.close()
                elif proto.task is not None and now - proto.idle_since >= tick:
                    proto.nudge()  # idle for a tick with its task kept (see `serve_client`): park it

    async def shutdown(self, timeout_s: float | None = None) -> None:
        """Stop accepting, let requests in progress finish (up to the drain timeout), then close."""
        timeout_s = self.config.drain_timeout_s if timeout_s is None else timeout_s
        self.closing = True
        reaper, self._reaper = self._reaper, None
        if reaper is not None:
            reaper.cancel()
        if self.server is not None:
            self.server.close()
        for proto in list(self.connections):
            if not proto.busy and proto.transport is not None:
                proto.transport.close()
        deadline = time.monotonic() + timeout_s
        while any(p.busy for p in self.connections) and time.monotonic() < deadline and not self.force:
            self._idle.clear()
            try:
                await asyncio.wait_for(self._idle.wait(), timeout=min(0.5, max(0.01, deadline - time.monotonic())))
            except TimeoutError:
                pass
        for proto in list(self.connections):
            if proto.transport is not None:
                proto.transport.abort()
        await self.router.stop()

    # -- connections ------------------------------------------------------------------------------------

    def connection_gone(self, proto: ClientProtocol) -> None:
        """A parked (idle, taskless) connection closed."""
        self.connections.discard(proto)
        if self.closing:
            self._idle.set()

    async def serve_client(self, proto: ClientProtocol, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Serve requests from the connection's first bytes until it closes or idles (see `connection.py`)."""
        parked = False
        try:
            while not self.closing:
                # An idle keep-alive connection, or a head that takes longer than idle_timeout_s to
                # arrive, is closed by the reaper (`_reap`).
                try:
                    raw = await read_head(reader)
                except Parked:
                    if proto.lost:  # gone in the same pass as the nudge: its reset may sit behind the nudge
                        break
                    reader._exception = None  # type: ignore[attr-defined]  # noqa: SLF001 - the nudge, not a failure
                    if reader._buffer or reader.at_eof():  # type: ignore[attr-defined]  # noqa: SLF001 - bytes came meanwhile
                        continue
                    parked = True
                    proto.park()
                    return
                except (asyncio.IncompleteReadError, ConnectionError):
                    break
                except HeadError as exc:
                    writer.write(json_error(exc.status, f"malformed request: {exc.reason}", "invalid_request_error", close=True))
                    break
                proto.busy = True
                try:
                    req = parse_request(raw)
                except HeadError as exc:
                    # Refused before a byte goes anywhere; the connection closes (its framing is unknown).
                    kind = "malformed request" if exc.status != 405 else "method not allowed"
                    writer.write(json_error(exc.status, f"{kind}: {exc.reason}", "invalid_request_error", close=True,
                                            extra=[ALLOWED] if exc.status == 405 else None))
                    break
                try:
                    keep = await self.handle(proto, req, reader, writer)
                except BadMessage as exc:
                    if not proto.lost:
                        writer.write(json_error(exc.status, f"malformed request body: {exc.reason}", "invalid_request_error", close=True))
                    keep = False
                except (ClientGone, asyncio.IncompleteReadError, ConnectionError):
                    keep = False
                except Exception:  # one bad request must not take the router down
                    log.exception("internal error while proxying %s", req.a.decode("latin-1"))
                    if not proto.lost:
                        writer.write(json_error(500, "internal router error", "c3_router_error", close=True))
                    keep = False
                proto.busy = False
                proto.served += 1
                proto.watch.reset()
                proto.idle_since = time.monotonic()
                if self.closing:
                    self._idle.set()
                if not keep or proto.lost:
                    break
                if proto.served < 2 and not reader._buffer and not reader.at_eof():  # type: ignore[attr-defined]  # noqa: SLF001
                    # Nothing waiting on a connection that has carried one request: hold no task and no
                    # streams while idle. One that carries more keeps them until idle for a tick (`_reap`).
                    parked = True
                    proto.park()
                    return
        finally:
            proto.busy = False
            if self.closing:
                self._idle.set()
            if not parked:
                self._close_client(proto, writer)

    def _close_client(self, proto: ClientProtocol, writer: asyncio.StreamWriter) -> None:
        self.connections.discard(proto)
        if proto.transport is not None:
            if proto.lost:
                proto.transport.abort()
            else:
                writer.close()

    # -- one request -------------------------------------------------------------------------------------

    async def handle(self, proto: ClientProtocol, req: Head, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Serve one request; True when the client connection may carry another."""
        if is_admin_path(req.b):
            return await handle_admin(self, req, reader, writer)
        client_close = not req.keep_alive or self.closing
        # 100 Continue is HTTP/1.1 only (RFC 9110 §10.1.1): a 1.0 client cannot parse it.
        if req.framing != "none" and req.version == b"HTTP/1.1" and req.headers.get(b"expect", b"").lower() == b"100-continue":
            writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        body = await take_body(proto, req, reader, self.config.retry_body_limit, self.config.body_timeout_s, self.config.max_body_time_s,
                               budget=self.router.held)
        try:
            return await self._route(proto, req, reader, writer, body, client_close)
        finally:
            body.release()

    async def _route(self, proto: ClientProtocol, req: Head, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, body: Body,
                     client_close: bool) -> bool:

        router = self.router
        raw_key, source = session_key(req.headers, None if body.streamed else body.data, router.mode)
        key = router.hasher.digest(raw_key) if raw_key is not None else None
        del raw_key
        # The forwarded head is rebuilt from validated fields; framing is the router's own.
        tail = forward_fields(req, UPSTREAM_DROP) + body.framing_header() + b"\r\n"
        source_b = source.encode("latin-1")
        show = shows_sticky(router.admin_token, req.headers)
        blocks = router.prompt_blocks(None if body.streamed else body.data)  # None unless --route cache
        first = router.choose(key, prompt=blocks)  # decided before counting this request as the key's own in-flight
        exchange = Exchange(self, proto, req, reader, writer, body, key, tail, source_b, client_close, show)
        if key is None:
            return await exchange.run(first)
        busy = router.key_busy
        busy[key] = busy.get(key, 0) + 1  # holds a pin on a draining backend while the key is mid-request
        try:
            return await exchange.run(first)
        finally:
            left = busy.get(key, 1) - 1
            if left > 0:
                busy[key] = left
            else:
                busy.pop(key, None)
