"""The router's per-request path stays cheap: what issue 26's CPU-per-request profile found, kept found.

Each test pins one cost the profile showed (bench/RESULTS.md, "Router CPU per request"): reference cycles
left per head (the garbage collector's gen-0 passes took ~5 % of the router's CPU) and a second send for
a small held body (a syscall is ~10 % of a request).
"""

from __future__ import annotations

import gc
from types import SimpleNamespace
from typing import Any, cast

import pytest

from backend.pool.exchange import ONE_WRITE, Exchange
from backend.pool.heads import parse_request, parse_response
from backend.pool.intake import Body

REQUEST = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:8011\r\nContent-Type: application/json\r\n"
           b"X-Session-ID: abc\r\nContent-Length: 2\r\n\r\n")
RESPONSE = (b"HTTP/1.1 200 OK\r\nServer: nginx\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
            b"Connection: keep-alive\r\nX-Stub-Backend: s0\r\n\r\n")


def test_parsing_a_head_leaves_nothing_for_the_garbage_collector() -> None:
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    try:
        for _ in range(50):
            parse_request(REQUEST)
            parse_response(RESPONSE)
        assert gc.collect() == 0  # every object went with its last reference: no cycle per head
    finally:
        if was:
            gc.enable()


class _Writes:
    def __init__(self) -> None:
        self.writes: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))


def _exchange(data: bytes) -> Exchange:
    exchange = Exchange.__new__(Exchange)  # _send reads only the request, the forwarded tail and the body
    exchange.req = parse_request(REQUEST)
    exchange.tail = b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(data)
    body = Body("length", len(data))
    body.data, body.done = data, True
    exchange.body = body
    return exchange


@pytest.mark.parametrize(("size", "sends"), [(0, 1), (2, 1), (ONE_WRITE, 1), (ONE_WRITE + 1, 2)])
async def test_a_held_body_leaves_with_its_head_in_one_send_unless_it_is_large(size: int, sends: int) -> None:
    data = b"x" * size
    up = _Writes()
    backend = SimpleNamespace(prefix=b"", host_header=b"10.0.0.1:8000")
    assert await _exchange(data)._send(cast(Any, backend), cast(Any, up)) is None
    assert len(up.writes) == sends
    sent = b"".join(up.writes)
    assert sent.startswith(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 10.0.0.1:8000\r\n")
    assert sent.endswith(b"\r\n\r\n" + data)


async def _answer_ok(reader: Any, writer: Any) -> None:
    """A keep-alive backend: every request (head, then a Content-Length body) gets `200 ok`."""
    import asyncio

    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = parse_request(head).length
            if length:
                await reader.readexactly(length)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
    except (asyncio.IncompleteReadError, ConnectionError):
        writer.close()


async def test_a_keep_alive_connection_keeps_its_task_between_requests_and_parks_once_idle() -> None:
    """Making a task, a reader and a writer for every request cost ~4 µs a request (issue 26's profile):
    a connection that carries a second request keeps them, and gives them up after one idle tick."""
    import asyncio

    from backend.pool.proxy import PoolServer
    from backend.pool.router import PoolConfig, Router

    backend = await asyncio.start_server(_answer_ok, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{backend.sockets[0].getsockname()[1]}"
    config = PoolConfig(backends=[("a", url)], host="127.0.0.1", port=0, probe_interval_s=60, body_timeout_s=0.4)  # reaper tick 0.1 s
    server = PoolServer(Router(config))
    started = 0
    serve = server.serve_client

    def counting(*args: Any) -> Any:
        nonlocal started
        started += 1
        return serve(*args)

    server.serve_client = counting  # type: ignore[method-assign]
    await server.start()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        request = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"
        for _ in range(5):
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 200 ") and await reader.readexactly(2) == b"ok"
        assert started == 2  # the first request's task parked; the second's served the other four
        (proto,) = server.connections
        deadline = asyncio.get_running_loop().time() + 2
        while proto.task is not None and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.02)
        assert proto.task is None and proto.reader is None and proto.writer is None  # parked by the reaper
        writer.write(request)
        assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 200 ") and await reader.readexactly(2) == b"ok"
        assert started == 3
        writer.close()
    finally:
        await server.shutdown(0)
        backend.close()


async def test_a_repeated_response_head_is_parsed_once_and_a_bad_or_long_one_never_cached() -> None:
    """The response head parse was ~4 µs of a request (issue 26's profile); an engine's heads repeat byte for byte."""
    import asyncio

    from backend.pool.heads import _RESPONSES, CACHED_HEAD, RESPONSE_CACHE, HeadError
    from backend.pool.http1 import read_response_head

    async def read(raw: bytes) -> Any:
        reader = asyncio.StreamReader()
        reader.feed_data(raw)
        return await read_response_head(reader)

    first = await read(RESPONSE)
    assert await read(RESPONSE) is first  # the same bytes: the same parse, not a new one
    assert first.framing == "chunked" and first.a == b"200"
    bad = RESPONSE.replace(b"Transfer-Encoding: chunked", b"Transfer-Encoding: gzip")
    for _ in range(2):
        with pytest.raises(HeadError):
            await read(bad)
    assert bad not in _RESPONSES
    long = RESPONSE.replace(b"Server: nginx", b"Server: " + b"n" * CACHED_HEAD)
    assert await read(long) is not await read(long)
    for i in range(RESPONSE_CACHE + 10):
        await read(RESPONSE.replace(b"X-Stub-Backend: s0", b"X-Stub-Backend: %d" % i))
    assert len(_RESPONSES) <= RESPONSE_CACHE


async def test_a_kept_connection_lost_while_it_is_being_parked_leaves_the_books() -> None:
    """The reaper's nudge and the client's reset land in one event-loop pass: the connection must still end."""
    import asyncio

    from backend.pool.proxy import PoolServer
    from backend.pool.router import PoolConfig, Router

    backend = await asyncio.start_server(_answer_ok, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{backend.sockets[0].getsockname()[1]}"
    server = PoolServer(Router(PoolConfig(backends=[("a", url)], host="127.0.0.1", port=0, probe_interval_s=60)))
    await server.start()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        request = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"
        for _ in range(2):  # a second request: the connection keeps its task
            writer.write(request)
            await reader.readuntil(b"\r\n\r\n")
            await reader.readexactly(2)
        (proto,) = server.connections
        task = proto.task
        assert task is not None
        await asyncio.sleep(0.05)  # the task waits for the next head
        proto.nudge()
        proto.connection_lost(ConnectionResetError())  # before the task wakes
        await asyncio.wait_for(task, 2)
        assert proto not in server.connections
        writer.close()
    finally:
        await server.shutdown(0)
        backend.close()
