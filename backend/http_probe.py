"""The one HTTP probe: every health, readiness, model-list, metrics and router-admin request c3 makes
to an engine, a node or its own router goes through here (httpx, imported lazily).

One proxy policy: these targets are loopback, a node on the user's network, or c3's own router, so
the environment's proxies (`HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY`, …) are never used for them — a
corporate proxy cannot reach `127.0.0.1` of this machine, and a node's answer must not come from
somewhere else. A user whose nodes are only reachable through a proxy says so with
`C3_PROBE_USE_ENV_PROXY=1` (backend.settings); then httpx's usual rules apply, `NO_PROXY` included.

Bounded: every request has a timeout, and at most `max_bytes` of a body is read (a misbehaving
endpoint cannot make c3 buffer gigabytes). An API key goes only into the `Authorization` header of
the request; it never appears in a result, a message or a log line (httpx logs no headers).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import httpx

MAX_BODY_BYTES = 1 << 20
"""Default cap on a body read by a probe (model lists and status documents are a few KiB)."""
AUTH_HINT = "set VLLM_API_KEY in c3's environment to the engine's key (c3 sends it as a Bearer token)"


@dataclass(frozen=True)
class ProbeResult:
    """One request's outcome; `status` is None when nothing answered."""

    url: str
    """What was asked (never holds a credential: node URLs with userinfo are refused on input)."""
    status: int | None
    """HTTP status, or None (refused, timed out, reset, bad URL)."""
    body: bytes = b""
    """The body, cut at the probe's `max_bytes`."""
    truncated: bool = False
    """True when the body was longer than `max_bytes`."""
    error: str = ""
    """Why there was no answer (`timed out after 3s`, `ConnectError`), else empty."""
    elapsed_ms: float = 0.0
    """Wall time of the request."""
    timed_out: bool = False
    """Nothing answered within the timeout (a busy server, or a gone one that still holds its port), as
    opposed to refused, reset or a bad URL."""

    @property
    def answered(self) -> bool:
        """The endpoint sent an HTTP answer (any status)."""
        return self.status is not None

    @property
    def ok(self) -> bool:
        """A 2xx answer."""
        return self.status is not None and 200 <= self.status < 300

    @property
    def auth_required(self) -> bool:
        """401/403: the endpoint wants (another) API key."""
        return self.status in (401, 403)

    @property
    def phase(self) -> str:
        """`ready` (200), `auth` (401/403), `loading` (answers, not 200) or `starting` (no answer)."""
        if self.status is None:
            return "starting"
        if self.auth_required:
            return "auth"
        return "ready" if self.status == 200 else "loading"

    def line(self) -> str:
        """One line for a message: `URL: HTTP 200`, `URL: auth required (HTTP 401)` or `URL: <error>`."""
        if self.status is None:
            return f"{self.url}: {self.error}"
        if self.auth_required:
            return f"{self.url}: auth required (HTTP {self.status})"
        return f"{self.url}: HTTP {self.status}"


def client(timeout: float, *, use_env_proxy: bool | None = None, api_key: str | None = None) -> httpx.Client:
    """An httpx client under the probe policy, for callers that ask many URLs (metrics, health rounds)."""
    import httpx  # lazy: importing httpx can import rich and click, which backend/ must not load on import

    if use_env_proxy is None:
        from backend.settings import current

        use_env_proxy = current().probe_use_env_proxy
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    return httpx.Client(timeout=timeout, trust_env=use_env_proxy, headers=headers, follow_redirects=False)


class LoopbackClient:
    """Keep-alive plain-HTTP requests to this machine's own ports (the live hub's engine checks: a
    request per serving pod every 2 s), on the standard library's `http.client`: ~0.25 ms of CPU a
    request where an httpx client takes ~1 ms (bench/tui.py, idle CPU). One connection per port,
    reopened once when the engine closed it; no proxy can apply to loopback. Not thread-safe: one
    owner thread, like the hub's."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self._connections: dict[tuple[str, int], Any] = {}

    def get(self, url: str, max_bytes: int) -> ProbeResult:
        """GET `url` (http://127.0.0.1:PORT/…, or localhost / ::1); never raises for a network problem."""
        import http.client
        from urllib.parse import urlsplit

        started = time.monotonic()
        parts = urlsplit(url)
        if parts.scheme != "http" or parts.hostname not in ("127.0.0.1", "localhost", "::1") or parts.port is None:
            return ProbeResult(url, None, error="InvalidURL", elapsed_ms=_ms(started))
        key = (parts.hostname, parts.port)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        for attempt in (1, 2):
            conn = self._connections.get(key)
            reused = conn is not None
            if conn is None:
                conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=self.timeout)
                self._connections[key] = conn
            try:
                conn.request("GET", path, headers={"Accept-Encoding": "identity"})
                response = conn.getresponse()
                body = response.read(max_bytes + 1)
                truncated = len(body) > max_bytes
                if truncated or response.will_close:
                    self._drop(key)  # an unread rest, or the server said it closes: a new connection next time
                return ProbeResult(url, response.status, body[:max_bytes], truncated, elapsed_ms=_ms(started))
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as error:
                self._drop(key)
                if reused and attempt == 1:
                    continue  # the engine closed an idle keep-alive connection: once more on a new one
                return ProbeResult(url, None, error="ReadError" if reused else type(error).__name__, elapsed_ms=_ms(started))
            except TimeoutError:
                self._drop(key)
                return ProbeResult(url, None, error=f"timed out after {self.timeout:g}s", elapsed_ms=_ms(started), timed_out=True)
            except ConnectionRefusedError:
                self._drop(key)
                return ProbeResult(url, None, error="ConnectError", elapsed_ms=_ms(started))
            except (OSError, http.client.HTTPException) as error:
                self._drop(key)
                return ProbeResult(url, None, error=type(error).__name__, elapsed_ms=_ms(started))
        return ProbeResult(url, None, error="ReadError", elapsed_ms=_ms(started))  # not reached: the loop returns

    def _drop(self, key: tuple[str, int]) -> None:
        conn = self._connections.pop(key, None)
        if conn is not None:
            conn.close()

    def close(self) -> None:
        for key in list(self._connections):
            self._drop(key)

    def __enter__(self) -> LoopbackClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def fetch(http: Any, url: str, *, method: str = "GET", max_bytes: int = MAX_BODY_BYTES) -> ProbeResult:
    """One request with `http` (from `client`, or a `LoopbackClient` for GETs to this machine's own
    ports); never raises for a network problem or a bad URL."""
    if isinstance(http, LoopbackClient) and method == "GET":
        return http.get(url, max_bytes)
    import httpx

    started = time.monotonic()
    try:
        with http.stream(method, url) as response:
            body = bytearray()
            truncated = False
            for chunk in response.iter_bytes():
                body += chunk
                if len(body) > max_bytes:
                    del body[max_bytes:]
                    truncated = True
                    break
            status = response.status_code
    except httpx.TimeoutException:
        limit = http.timeout.read if isinstance(http.timeout, httpx.Timeout) and http.timeout.read else None
        said = f"timed out after {limit:g}s" if limit else "timed out"
        return ProbeResult(url, None, error=said, elapsed_ms=_ms(started), timed_out=True)
    except (httpx.HTTPError, httpx.InvalidURL, ValueError) as error:
        return ProbeResult(url, None, error=type(error).__name__, elapsed_ms=_ms(started))
    return ProbeResult(url, status, bytes(body), truncated, elapsed_ms=_ms(started))


def probe(url: str, *, timeout: float = 3.0, method: str = "GET", api_key: str | None = None,
          use_env_proxy: bool | None = None, max_bytes: int = MAX_BODY_BYTES) -> ProbeResult:
    """One request on a fresh client (see `fetch`)."""
    with client(timeout, use_env_proxy=use_env_proxy, api_key=api_key) as http:
        return fetch(http, url, method=method, max_bytes=max_bytes)


class StreamBroken(Exception):
    """A streamed request (`stream`) that got no complete answer."""

    def __init__(self, error: str, *, stage: Literal["connect", "answer", "body"], timed_out: bool = False) -> None:
        super().__init__(error)
        self.error = error
        """Why, as `ProbeResult.error` names it (`ConnectError`, `RemoteProtocolError`, `timed out`)."""
        self.stage = stage
        """Where it broke: nothing answered (`connect`), no answer's head came (`answer`), or its body broke off (`body`)."""
        self.timed_out = timed_out
        """The deadline passed (as opposed to refused, reset or broken off)."""


class Streamed:
    """An answer being read (`stream`): its status, then its body, bounded, or its lines, as they come."""

    def __init__(self, response: httpx.Response, fired: list[bool]) -> None:
        self._response, self._fired = response, fired
        self.status: int = response.status_code
        """The HTTP status."""

    def read(self, max_bytes: int) -> bytes:
        """At most `max_bytes` of the body (the rest is left unread)."""
        body = bytearray()
        for chunk in self._chunks():
            body += chunk
            if len(body) >= max_bytes:
                break
        return bytes(body[:max_bytes])

    def lines(self, max_line_bytes: int) -> Iterator[bytes]:
        """The body's lines, each with its newline; a line longer than `max_line_bytes` comes as its first
        `max_line_bytes + 1` bytes, and ends the lines (the caller refuses it)."""
        line = bytearray()
        for chunk in self._chunks():
            line += chunk
            while (end := line.find(b"\n")) >= 0 and end <= max_line_bytes:
                yield bytes(line[: end + 1])
                del line[: end + 1]
            if len(line) > max_line_bytes:
                yield bytes(line[: max_line_bytes + 1])
                return
        if line:
            yield bytes(line)

    def _chunks(self) -> Iterator[bytes]:
        import httpx

        try:
            yield from self._response.iter_bytes()
        except httpx.HTTPError as error:
            timed_out = isinstance(error, httpx.TimeoutException) or self._fired[0]
            raise StreamBroken("timed out" if timed_out else type(error).__name__, stage="body", timed_out=timed_out) from None
        if self._fired[0]:  # the watchdog's shutdown can read as a body that ended: it did not
            raise StreamBroken("timed out", stage="body", timed_out=True)


@contextmanager
def stream(url: str, *, deadline_at: float, method: str = "GET", body: Any = None, api_key: str | None = None,
           use_env_proxy: bool | None = None) -> Iterator[Streamed]:
    """One request whose answer is read as it comes (a test prompt's token stream), all of it before the
    monotonic `deadline_at`: the connection, the request and the answer's head each wait at most what is
    left when it is sent, and a watchdog shuts the socket at the deadline, so a slow trickle of a body
    cannot outlast it either. `body` is sent as JSON. Raises StreamBroken for a network problem or the
    deadline, here and from the `Streamed`'s reads."""
    import threading

    import httpx

    left = deadline_at - time.monotonic()
    if left <= 0:
        raise StreamBroken("timed out", stage="connect", timed_out=True)
    with client(left, use_env_proxy=use_env_proxy, api_key=api_key) as http:
        try:
            request = http.build_request(method, url, json=body, headers={"Accept-Encoding": "identity"})
            response = http.send(request, stream=True)
        except httpx.TimeoutException:
            raise StreamBroken("timed out", stage="connect", timed_out=True) from None
        except httpx.ConnectError as error:
            raise StreamBroken(type(error).__name__, stage="connect") from None
        except (httpx.HTTPError, httpx.InvalidURL) as error:
            raise StreamBroken(type(error).__name__, stage="answer") from None
        fired = [False]

        def shut() -> None:
            import socket

            fired[0] = True
            sock = (response.extensions.get("network_stream") or _NoStream()).get_extra_info("socket")
            try:
                if sock is not None:
                    sock.shutdown(socket.SHUT_RDWR)  # wakes the read that waits on it (a close would not)
            except OSError:
                pass  # already closed: the read has ended

        watchdog = threading.Timer(max(deadline_at - time.monotonic(), 0.0), shut)
        watchdog.daemon = True
        watchdog.start()
        try:
            yield Streamed(response, fired)
        finally:
            watchdog.cancel()
            response.close()


class _NoStream:
    def get_extra_info(self, _name: str) -> None:
        return None


def _ms(started: float) -> float:
    return round((time.monotonic() - started) * 1000, 1)
