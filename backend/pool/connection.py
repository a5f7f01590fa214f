"""One client connection of the router, and what it holds while idle.

An idle keep-alive connection is the router's commonest state (clients keep connections open between
requests for up to `--idle-timeout`), so it holds as little as asyncio allows: this protocol object
(`__slots__`), its `Watch`, and the event loop's transport. Its `StreamReader`, `StreamWriter` and the
task that serves it exist only from the first bytes of a request until the request is answered and no
further bytes wait; then the task ends and drops them (`park`), and the next bytes start a new one.
A connection that has carried more than one request keeps its task between requests instead (making
a reader and a writer took 0.85 µs, starting and finishing a task 2.9 µs, per request under wrk); the
proxy's reaper parks it once it has been idle for one tick (`ClientProtocol.nudge`), so an idle
connection costs the same a tick later. A connection's first request still parks at once, so a
burst of one-request connections never holds a task each.
Measured with `bench/pool_idle_conns.py` (2,000 idle connections, uvloop): 6.46 KiB each with a
`StreamReaderProtocol` and a task parked in `readuntil` per connection (the task, four coroutine
frames, the reader's waiter, the last request's parsed head, the flow-control deque), 1.3 KiB now.

The protocol does what `asyncio.StreamReaderProtocol` did for the streams: feeds the reader, passes
EOF and connection loss on, and keeps the writer's flow control (`pause_writing`/`resume_writing`,
`_drain_helper` behind `StreamWriter.drain`). A client that half-closes is treated as gone (nginx
does the same for a proxied request), so `eof_received` closes the connection.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Coroutine
from typing import Any, Protocol, cast

from backend.pool.deadlines import Watch
from backend.pool.http1 import MAX_HEAD


class Host(Protocol):
    """The server a connection belongs to (`proxy.PoolServer`)."""

    connections: set[ClientProtocol]

    def serve_client(self, proto: ClientProtocol, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter) -> Coroutine[Any, Any, None]: ...

    def connection_gone(self, proto: ClientProtocol) -> None:
        """A parked connection closed (no task is left to say so)."""
        ...


class _Writer(asyncio.StreamWriter):
    """A StreamWriter that leaves the transport alone when it is collected: a parked connection drops
    its writer and stays open (the proxy closes or aborts its transports itself)."""

    def __del__(self) -> None:
        return None


class Parked(Exception):  # noqa: N818 - a signal, not an error
    """Raised out of an idle connection's read by `ClientProtocol.nudge`: park now."""


class ClientProtocol(asyncio.Protocol):
    """A client connection: parked (no streams, no task) while idle, streams and a task while serving."""

    __slots__ = ("server", "transport", "reader", "writer", "task", "lost", "busy", "on_lost", "idle_since", "watch",
                 "body_deadline", "body_cap", "_paused", "_drain_waiters", "_closed", "loop", "served")

    def __init__(self, server: Host) -> None:
        self.server = server
        self.transport: asyncio.Transport | None = None
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.task: asyncio.Task[None] | None = None
        self.lost = False
        self.busy = False
        self.on_lost: Callable[[], None] | None = None  # set to the backend transport's abort() while a request is in progress
        self.idle_since = time.monotonic()  # when the last request ended (the reaper closes long-idle ones)
        self.watch = Watch()  # the response head, body bytes or client write waited on now (see `deadlines.py`)
        self.body_deadline = 0.0  # while reading a request body: when the next bytes are overdue; else 0
        self.body_cap = math.inf  # when the current request body must have arrived in all
        self._paused = False  # the transport's write buffer is over its high-water mark
        self._drain_waiters: list[asyncio.Future[None]] | None = None
        self._closed: asyncio.Future[None] | None = None  # made only if someone waits for the close
        self.loop: asyncio.AbstractEventLoop | None = None  # kept: `get_running_loop()` is a getpid() syscall each call
        self.served = 0  # requests answered on this connection (after the first, the task outlives a request)

    # -- transport callbacks ------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # a stream server's transports read and write
        self.loop = asyncio.get_running_loop()
        self.server.connections.add(self)

    def data_received(self, data: bytes) -> None:
        reader = self.reader
        if reader is not None:
            reader.feed_data(data)
            return
        # The first bytes after an idle spell: streams and a task for as long as requests keep coming.
        loop = self.loop or asyncio.get_running_loop()
        reader = self.reader = asyncio.StreamReader(limit=MAX_HEAD, loop=loop)
        transport = self.transport
        assert transport is not None
        reader.set_transport(transport)
        writer = self.writer = _Writer(transport, self, reader, loop)
        reader.feed_data(data)
        self.task = loop.create_task(self.server.serve_client(self, reader, writer))

    def eof_received(self) -> bool:
        # A client that half-closes is gone for an LLM request: close, so connection_lost runs and
        # aborts the backend request.
        if self.reader is not None:
            self.reader.feed_eof()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        reader = self.reader
        if reader is not None:
            if exc is None:
                reader.feed_eof()
            else:
                reader.set_exception(exc)
        self._wake_drains(exc)
        if self._closed is not None and not self._closed.done():
            self._closed.set_result(None)
        callback, self.on_lost = self.on_lost, None
        if callback is not None:
            callback()
        if self.task is None:  # parked: no task is left to take the connection off the books
            self.server.connection_gone(self)

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        self._wake_drains(None)

    # -- what StreamWriter asks of its protocol --------------------------------------------------------------

    async def _drain_helper(self) -> None:
        if self.lost:
            raise ConnectionResetError("Connection lost")
        if not self._paused:
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self._drain_waiters is None:
            self._drain_waiters = []
        self._drain_waiters.append(waiter)
        try:
            await waiter
        finally:
            if self._drain_waiters is not None and waiter in self._drain_waiters:
                self._drain_waiters.remove(waiter)

    def _get_close_waiter(self, stream: asyncio.StreamWriter) -> asyncio.Future[None]:
        del stream
        if self._closed is None:
            self._closed = asyncio.get_running_loop().create_future()
            if self.lost:
                self._closed.set_result(None)
        return self._closed

    def _wake_drains(self, exc: Exception | None) -> None:
        waiters, self._drain_waiters = self._drain_waiters, None
        for waiter in waiters or ():
            if waiter.done():
                continue
            if exc is None:
                waiter.set_result(None)
            else:
                waiter.set_exception(exc)

    # -- parking -------------------------------------------------------------------------------------------

    def nudge(self) -> None:
        """Wake a task waiting idle for the next head so that it parks (`Parked` out of its read); it
        goes on serving instead when bytes came meanwhile."""
        reader = self.reader
        if reader is not None and not self.busy and not self.lost and not reader._buffer:  # type: ignore[attr-defined]  # noqa: SLF001
            reader.set_exception(Parked())

    def park(self) -> None:
        """The request is answered and no bytes wait: drop the streams and the task (its coroutine is
        returning); the next bytes start new ones."""
        self.reader = None
        self.writer = None
        self.task = None
