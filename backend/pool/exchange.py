"""One proxied request's way to a backend and back (see `proxy.py` for the request's whole life).

An `Exchange` holds the request's state across attempts: the request head, its body, the client,
the backends tried, the attempts spent and the last failure. Each attempt picks a backend, sends the
request and waits for the response head; every way an attempt can fail before the client has seen a
byte goes through one place, `Exchange._retry`, which counts the attempt and says whether to try
another backend or to refuse the request. Health accounting stays with each failure, because it
differs: a connect error is a hard failure, a silent or broken backend a soft one, a status code
none at all (`Router.answered`).
"""

from __future__ import annotations

import asyncio
import logging
import time

from backend.pool.admin import json_error
from backend.pool.client import Client, Server
from backend.pool.heads import Head, HeadError
from backend.pool.http1 import BadMessage
from backend.pool.intake import Body, send_rest
from backend.pool.respond import READ_ERRORS, ClientGone, read_response_head, relay_response
from backend.pool.upstream import Backend

log = logging.getLogger("c3.pool")

RETRY_STATUSES = frozenset({429, 502, 503, 504})
ONE_WRITE = 64 * 1024
"""A held body up to this size leaves in the same write as the head (copying it costs less than a send)."""

Choice = tuple[Backend, str] | None
"""A routing decision: the backend and its sticky outcome ("hit", "miss", "repin", "none"), or None."""


class Exchange:
    """One request proxied to the pool: the backends tried so far and what went wrong with them."""

    def __init__(self, server: Server, proto: Client, req: Head, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 body: Body, key: str | None, tail: bytes, source_b: bytes, client_close: bool, show_sticky: bool) -> None:
        self.server = server
        self.router = server.router
        self.config = server.config
        self.proto = proto
        self.req = req
        """The client's request head (its method and target are sent on; the other fields are in `tail`)."""
        self.reader = reader
        self.writer = writer
        self.body = body
        self.key = key
        """The hashed session key (None: the request has none and is balanced freely)."""
        self.tail = tail
        """The rest of the forwarded head after the Host line: validated fields, framing, blank line."""
        self.source_b = source_b
        """Where the session key came from, for `X-C3-Key-Source`."""
        self.client_close = client_close
        self.show_sticky = show_sticky
        """The request presented the admin token, so the answer says the sticky outcome."""
        self.tried: set[str] = set()
        """Backends that failed this request (not chosen again)."""
        self.attempts = 0
        """Attempts spent, against `max_attempts` (a stale pooled connection's free retry is not one)."""
        self.stale_retry_used = False
        """The one free retry for an idle keep-alive connection the backend had closed is spent."""
        self.outcome = "none"
        """The sticky outcome counted and shown (a retry keeps the first decision's miss/repin)."""
        self.last_failure = "no backend is routable"
        self.fail_status = 502
        """The status when the pool runs out of backends after failures (504 once one timed out)."""

    async def run(self, first: Choice) -> bool:
        """Send the request to a backend (retrying before the first byte) and relay its answer; True
        when the client connection may carry another request. `first`: the routing decision made
        before the request counted as its key's own in-flight."""
        choice = first
        while True:
            if choice is None:
                self.router.metrics.no_backend += 1
                status = self.fail_status if self.tried else 503
                extra = [b"X-C3-Key-Source: " + self.source_b, b"Retry-After: 1"] + ([b"X-C3-Sticky: none"] if self.show_sticky else [])
                return self._refuse(status, f"c3 pool: {self.last_failure}", "c3_no_backend", extra)
            b, sticky = choice
            if not (sticky == "hit" and self.outcome in ("miss", "repin")):
                self.outcome = sticky  # a retry keeps the first decision's miss/repin
            answer = await self._attempt(b)
            if answer is not None:
                return answer
            choice = self.router.choose(self.key, self.tried)

    def _refuse(self, status: int, message: str, kind: str, extra: list[bytes] | None = None) -> bool:
        # An answer before the request body was read to its end closes the connection: the rest
        # of the body must never be read as the next request.
        close = self.client_close or not self.body.done
        self.writer.write(json_error(status, message, kind, close=close, extra=extra))
        return not close

    def _retry(self, b: Backend, failure: str, status: int, kind: str, *, counts_no_backend: bool = False) -> bool | None:
        """The one retry path: attempt on `b` failed with `failure` before the client saw a byte.

        None: try another backend. Otherwise the attempts are spent and the request is refused with
        `status` (the refusal's keep-alive is returned). Health is the caller's to account."""
        self.last_failure = failure
        b.metrics.retries += 1
        self.tried.add(b.name)
        self.attempts += 1
        if self.attempts < self.config.max_attempts:
            return None
        if counts_no_backend:
            self.router.metrics.no_backend += 1
        return self._refuse(status, f"c3 pool: {failure}", kind)

    def _has_other(self, exclude: set[str]) -> bool:
        return any(x.health.routable and x.name not in exclude for x in self.router.order)

    async def _attempt(self, b: Backend) -> bool | None:
        """One try on backend `b`: the answer's keep-alive once committed (or refused), None to retry."""
        router, proto, cfg, streamed = self.router, self.proto, self.config, self.body.streamed
        m = b.metrics
        fresh_only = streamed or self.stale_retry_used
        conn = None if fresh_only else b.take_idle()
        reused = conn is not None
        m.in_flight += 1
        started = time.perf_counter()
        try:
            if conn is None:
                try:
                    conn = await b.connect()
                except (OSError, TimeoutError) as exc:
                    failure = f"cannot connect to {b.name}: {type(exc).__name__}"
                    router.passive_failure(b, failure, hard=True)
                    return self._retry(b, failure, 502, "c3_no_backend", counts_no_backend=True)
            up_r, up_w = conn
            if proto.lost:
                up_w.transport.abort()
                raise ClientGone
            proto.on_lost = up_w.transport.abort
            sent = await self._send(b, up_w)
            if sent is not None:
                return sent

            # -- wait for the answer (still retryable) --
            # The reaper aborts the backend connection when the deadline passes (no per-request timer).
            watch = proto.watch
            watch.expired = ""
            watch.cap = time.monotonic() + cfg.max_response_time_s
            watch.arm("head", cfg.upstream_timeout_s, up_w.transport)
            try:
                resp = await read_response_head(up_r)
            except READ_ERRORS as exc:
                up_w.transport.abort()
                proto.on_lost = None
                if proto.lost:
                    router.metrics.client_disconnects += 1
                    raise ClientGone from None
                return self._no_head(b, exc, reused)
            finally:
                watch.disarm()
            status = int(resp.a)
            if status in RETRY_STATUSES and not streamed and self.attempts + 1 < cfg.max_attempts and self._has_other(self.tried | {b.name}):
                up_w.transport.abort()
                proto.on_lost = None
                router.answered(b, status)
                # Checked above that an attempt is left, so this retries (its refusal arguments go unused).
                return self._retry(b, f"backend {b.name} answered {status}", 502, "c3_backend_failed")

            # -- committed: from here on the client sees this backend's answer --
            self.body.release()  # no retry now: a long answer must not keep the body held
            m.requests += 1
            m.observe(time.perf_counter() - started)
            m.keys.append(self.key)
            router.metrics.sticky[self.outcome] += 1
            router.answered(b, status)
            return await relay_response(self.server, proto, self.req, resp, b, self.outcome if self.show_sticky else "", self.source_b,
                                        up_r, up_w, self.writer, self.client_close)
        finally:
            m.in_flight -= 1
            proto.on_lost = None

    async def _send(self, b: Backend, up_w: asyncio.StreamWriter) -> bool | None:
        """Write the request to `b`; None when it went out, else the keep-alive of the answer given
        instead (a streamed body the backend stopped taking: it cannot be resent)."""
        body = self.body
        head = b"%s %s%s HTTP/1.1\r\nHost: %s\r\n%s" % (self.req.a, b.prefix, self.req.b, b.host_header, self.tail)
        if not body.streamed:
            data = body.data
            if len(data) <= ONE_WRITE:
                up_w.write(head + data if data else head)  # one send, not two (a syscall is ~10 % of a request's CPU)
            else:
                up_w.write(head)  # not `head + data`: that would copy a held body of up to 8 MiB once more
                up_w.write(data)
            return None
        up_w.write(head)
        try:
            await send_rest(self.proto, body, self.reader, up_w, self.config.body_timeout_s)
        except BadMessage:
            up_w.transport.abort()
            raise
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            up_w.transport.abort()
            if self.proto.lost or self.reader.at_eof():
                raise ClientGone from None
            self.router.passive_failure(b, "closed while receiving the request body", hard=False)
            self.writer.write(json_error(502, f"c3 pool: backend {b.name} closed while receiving the request body", "c3_backend_failed", close=True))
            return False
        return None

    def _no_head(self, b: Backend, exc: BaseException, reused: bool) -> bool | None:
        """`b` gave no usable response head (`exc`): a 502 for a malformed one, else a retry while the
        body can be resent (a 502/504 and a closed connection when it was streamed through)."""
        router, streamed, watch = self.router, self.body.streamed, self.proto.watch
        if isinstance(exc, HeadError):
            # A backend that breaks HTTP is failing: this connection is dropped (never pooled)
            # and the client gets a 502 (nothing of the bad answer reaches it).
            self.last_failure = f"backend {b.name} sent a malformed response head ({exc.reason})"
            log.warning("%s", self.last_failure)
            router.passive_failure(b, self.last_failure, hard=False)
            return self._refuse(502, f"c3 pool: {self.last_failure}", "c3_backend_failed")
        if watch.expired:
            # Accepted but silent: a wedged engine. Count it against the backend (suspect;
            # enough of them take it down) and move on while the client has seen nothing.
            limit = self.config.upstream_timeout_s if watch.expired == "head" else self.config.max_response_time_s
            failure = f"backend {b.name} sent no response head within {limit:g}s"
            log.warning("%s%s", failure, "" if streamed else "; retrying elsewhere")
            router.passive_failure(b, failure, hard=False)
            self.fail_status = 504
            if streamed:  # the body was streamed through, not held: it cannot be resent
                self.last_failure = failure
                self.writer.write(json_error(504, f"c3 pool: {failure}", "c3_backend_timeout", close=True))
                return False
            return self._retry(b, failure, 504, "c3_backend_timeout")
        if streamed:
            router.passive_failure(b, "closed before answering", hard=False)
            self.writer.write(json_error(502, f"c3 pool: backend {b.name} closed before answering", "c3_backend_failed", close=True))
            return False
        if reused and not self.stale_retry_used:
            self.stale_retry_used = True  # an idle keep-alive connection the backend had closed: free retry
            return None
        failure = f"backend {b.name} closed before answering ({type(exc).__name__})"
        router.passive_failure(b, failure, hard=False)
        return self._retry(b, failure, 502, "c3_backend_failed")
