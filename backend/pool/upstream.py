"""One backend as the router sees it: its address, a keep-alive connection pool, health and counters,
plus the active health probe.

Idle upstream connections are reused LIFO (the most recently used one is the least likely to have hit
the backend's keep-alive timeout). A reused connection that turns out to be closed is retried once on a
fresh connection to the same backend without counting against it (see `proxy.py`).
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import ssl
import termios
import time
from urllib.parse import urlparse, urlunparse

from backend.pool.heads import HeadError
from backend.pool.health import BackendHealth, HealthPolicy
from backend.pool.http1 import read_response_head
from backend.pool.metrics import BackendMetrics

STREAM_LIMIT = 256 * 1024
log = logging.getLogger("c3.pool")


def redact_url(url: str) -> str:
    """The URL without any `user:password@` part: what the router shows, logs and serves.

    Node URLs with credentials are refused when a node is added; this is the second line of defence
    for one that reaches the router anyway (a hand-edited registry): its userinfo is never used, never
    sent upstream (Host is built from host:port) and never printed, logged or served.
    """
    try:
        parsed = urlparse(url)
    except ValueError:
        return "<unparseable URL>"
    if "@" not in parsed.netloc:
        return url
    return urlunparse(parsed._replace(netloc=parsed.netloc.rsplit("@", 1)[-1]))


class Backend:
    """A node's OpenAI endpoint behind the router."""

    __slots__ = ("name", "url", "host", "port", "ssl", "prefix", "host_header", "idle", "reuse", "max_idle", "connect_timeout_s", "health", "metrics")

    def __init__(self, name: str, url: str, policy: HealthPolicy, *, connect_timeout_s: float = 3.0, max_idle: int = 256) -> None:
        shown = redact_url(url)
        try:
            parsed = urlparse(url)
            port = parsed.port
        except ValueError:
            raise ValueError(f"backend {name}: `{shown}` is not a valid URL") from None
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ValueError(f"backend {name}: `{shown}` is not an http(s) URL")
        self.name = name
        self.url = shown.rstrip("/")  # never the userinfo: this is what status, metrics and logs show
        self.host = parsed.hostname
        self.port = port or (443 if parsed.scheme == "https" else 80)
        self.ssl: ssl.SSLContext | None = ssl.create_default_context() if parsed.scheme == "https" else None
        prefix = parsed.path.rstrip("/")
        # A node registered as http://h:8000/v1 still receives /v1/... paths once, not /v1/v1/...
        self.prefix = (prefix[:-3] if prefix.endswith("/v1") else prefix).encode()
        self.host_header = (parsed.netloc.rsplit("@", 1)[-1]).encode()
        self.idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter, int]] = []  # with the socket's fd (-1: none)
        self.reuse = True  # False once the backend sent bytes after a complete response (see `_stray`)
        self.max_idle = max_idle
        self.connect_timeout_s = connect_timeout_s
        self.health = BackendHealth(policy)
        self.metrics = BackendMetrics()

    async def connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """A fresh connection (raises OSError or TimeoutError)."""
        return await asyncio.wait_for(
            asyncio.open_connection(self.host, self.port, ssl=self.ssl, limit=STREAM_LIMIT), self.connect_timeout_s
        )

    def take_idle(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        """A pooled connection that is still clean, or None.

        An idle connection has nothing to say: any byte on it (in the stream's buffer or still in the
        kernel's, which the event loop has not read yet) is a backend breaking its framing, and sending
        the next request down it would hand those bytes to the next client as its answer (issue 26).
        Such a connection is closed, and the backend's connections are not reused again (`_stray`); one
        the backend closed is dropped here or, when its EOF is still unread, on use (`proxy.py`).
        """
        while self.idle:
            reader, writer, fd = self.idle.pop()
            if _has_bytes(reader) or _kernel_bytes(fd):
                self._stray()
            elif not (reader.at_eof() or writer.is_closing()):
                return reader, writer
            writer.transport.abort()
        return None

    def put_idle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Return a connection whose response was read completely (one with bytes after it is closed)."""
        if _has_bytes(reader):
            self._stray()
        if self.reuse and len(self.idle) < self.max_idle and not writer.is_closing() and not _has_bytes(reader):
            self.idle.append((reader, writer, _fd(writer)))
        else:
            writer.transport.abort()

    def _stray(self) -> None:
        """The backend sent bytes after a complete response. Those caught here are dropped with their
        connection, but the same bytes sent a moment later (the backend's process preempted between two
        sends) would arrive after the next request went down the connection, indistinguishable from its
        answer. So from now on this backend's connections are never reused: one request each."""
        if self.reuse:
            self.reuse = False
            self.close_idle()
            log.warning("backend %s sent bytes after a complete response; its connections are no longer reused", self.name)

    def close_idle(self) -> None:
        """Drop every pooled connection (backend went down, or shutdown)."""
        while self.idle:
            self.idle.pop()[1].transport.abort()


def _has_bytes(reader: asyncio.StreamReader) -> bool:
    return bool(reader._buffer)  # type: ignore[attr-defined]  # noqa: SLF001 - no public peek on StreamReader


def _fd(writer: asyncio.StreamWriter) -> int:
    """The connection's file descriptor, -1 when it has none (looked up once per pooling, not per check)."""
    sock = writer.get_extra_info("socket")
    return -1 if sock is None else int(sock.fileno())


_COUNT = bytearray(4)
"""FIONREAD's answer, written in place (no bytes object and no unpack per check)."""


def _kernel_bytes(fd: int) -> bool:
    """Bytes wait in the socket's kernel receive queue, not yet read by the event loop (FIONREAD;
    an EOF is 0 bytes: a backend closing an idle connection is normal and found on use)."""
    if fd < 0:
        return False
    try:
        fcntl.ioctl(fd, termios.FIONREAD, _COUNT, True)
    except OSError:
        return False
    return _COUNT != b"\0\0\0\0"


async def _get_status(backend: Backend, path: bytes) -> int:
    reader, writer = await backend.connect()
    try:
        writer.write(
            b"GET " + backend.prefix + path + b" HTTP/1.1\r\nHost: " + backend.host_header
            + b"\r\nUser-Agent: c3-pool-probe\r\nConnection: close\r\n\r\n"
        )
        head = await read_response_head(reader)
        return int(head.a)
    finally:
        writer.transport.abort()


async def probe(backend: Backend) -> tuple[str, float | None, str | None]:
    """One active health check: (`ok`|`loading`|`fail`, round-trip ms, error text)."""
    started = time.perf_counter()
    try:
        async with asyncio.timeout(backend.health.policy.timeout_s):
            status = await _get_status(backend, backend.health.probe_path.encode())
            if status in (404, 405) and backend.health.probe_path == "/health":
                backend.health.probe_path = "/v1/models"
                status = await _get_status(backend, b"/v1/models")
    except TimeoutError:
        return "fail", None, f"probe timed out after {backend.health.policy.timeout_s:g}s"
    except (OSError, asyncio.IncompleteReadError, HeadError) as exc:
        return "fail", None, type(exc).__name__ + (f": {exc.strerror}" if isinstance(exc, OSError) and exc.strerror else "")
    rtt = round((time.perf_counter() - started) * 1000.0, 3)
    if 200 <= status < 300:
        return "ok", rtt, None
    if status == 503:
        return "loading", rtt, "503 (loading or not ready)"
    return "fail", rtt, f"HTTP {status} on {backend.health.probe_path}"
