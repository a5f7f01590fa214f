"""Bounded resources against the real router process: stalled bodies and slow heads are closed on
their timeouts, memory stays bounded with a 200 MiB chunk, admin endpoints never read a body, and at
the file-descriptor limit the accept loop backs off and logs one line per streak."""

from __future__ import annotations

import resource
import socket
import time

import pytest

from tests.pool.hostile import RawBackend, read_responses


@pytest.fixture
def raw_backend():
    backend = RawBackend()
    yield backend
    backend.close()


def _rss_peak_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


CLOSED_BY_S = 10.0
"""A 1 s timeout of the router counts as having fired when the socket closes within this: room for a busy
2-core box, and still far below the read limit (20 s) that a router which never closes runs into."""


def _closed_after(sock: socket.socket, limit_s: float = 20.0) -> tuple[bytes, float]:
    started = time.monotonic()
    sock.settimeout(limit_s)
    data = b""
    while True:
        piece = sock.recv(65536)
        if not piece:
            return data, time.monotonic() - started
        data += piece


def test_a_stalled_request_body_gets_408_and_is_closed(raw_backend, pool_process):
    pool = pool_process({"raw": f"http://127.0.0.1:{raw_backend.port}"}, "--body-timeout", "1", probe_interval=5)
    for body in (b"Content-Length: 100\r\n\r\n0123456789", b"Transfer-Encoding: chunked\r\n\r\n64\r\n0123456789"):
        with socket.create_connection(("127.0.0.1", pool.port), timeout=10) as sock:
            sock.sendall(b"POST /v1/case HTTP/1.1\r\nHost: x\r\n" + body)
            data, took = _closed_after(sock)
        assert data.startswith(b"HTTP/1.1 408 ") and b"connection: close" in data.lower(), data
        assert 0.9 <= took < CLOSED_BY_S, took
    assert raw_backend.seen == []  # a held body never reached a backend
    # A streamed body (over --retry-body-limit) that stalls midway is cut the same way.
    pool2 = pool_process({"raw": f"http://127.0.0.1:{raw_backend.port}"}, "--body-timeout", "1", "--retry-body-limit", "4",
                         probe_interval=5)
    with socket.create_connection(("127.0.0.1", pool2.port), timeout=10) as sock:
        sock.sendall(b"POST /v1/case HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789")
        data, took = _closed_after(sock)
    assert data.startswith(b"HTTP/1.1 408 ") and 0.9 <= took < CLOSED_BY_S, (data, took)
    assert "Traceback" not in pool.log() + pool2.log()


def test_a_head_that_never_ends_is_closed_after_the_idle_timeout(raw_backend, pool_process):
    pool = pool_process({"raw": f"http://127.0.0.1:{raw_backend.port}"}, "--idle-timeout", "1", probe_interval=5)
    with socket.create_connection(("127.0.0.1", pool.port), timeout=10) as sock:
        sock.sendall(b"POST /v1/case HTTP/1.1\r\nHost: x\r\n")
        for _ in range(3):  # a slow-header client trickling bytes is still closed on time
            time.sleep(0.3)
            sock.sendall(b"X-A: 1\r\n")
        data, took = _closed_after(sock)
    assert data == b"" and took < CLOSED_BY_S, (data, took)


def test_a_200_mib_request_chunk_streams_with_bounded_memory(raw_backend, pool_process):
    pool = pool_process({"raw": f"http://127.0.0.1:{raw_backend.port}"}, probe_interval=5)
    size = 200 * 1024 * 1024
    block = b"x" * (1 << 20)
    with socket.create_connection(("127.0.0.1", pool.port), timeout=60) as sock:
        sock.sendall(b"POST /v1/case HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n" % size)
        for _ in range(size // len(block)):
            sock.sendall(block)
        sock.sendall(b"\r\n0\r\n\r\n")
        responses, _ = read_responses(sock, quiet_s=5, total_s=60)
    assert responses and responses[0][0] == 200 and responses[0][2] == b"ok", responses
    assert raw_backend.body_bytes == size  # re-chunked by the router, every byte arrived
    peak = _rss_peak_mib(pool.popen.pid)
    assert peak < 150, f"router peak RSS {peak:.0f} MiB for a 200 MiB chunk"


def test_admin_endpoints_answer_without_reading_a_body(raw_backend, pool_process):
    pool = pool_process({"raw": f"http://127.0.0.1:{raw_backend.port}"}, probe_interval=5)
    with socket.create_connection(("127.0.0.1", pool.port), timeout=10) as sock:
        sock.sendall(b"POST /c3/status HTTP/1.1\r\nHost: x\r\nContent-Length: 209715200\r\n\r\n")
        data, took = _closed_after(sock)  # a router that waited for the 200 MiB body would never answer
    assert data.startswith(b"HTTP/1.1 405 ") and b"connection: close" in data.lower() and took < CLOSED_BY_S, (data, took)


@pytest.mark.parametrize("loop", ["uvloop", "asyncio"])
def test_at_the_fd_limit_the_accept_loop_backs_off_and_logs_one_line_per_streak(raw_backend, pool_process, loop):
    pool = pool_process({"raw": f"http://127.0.0.1:{raw_backend.port}"}, probe_interval=60, env={"C3_POOL_LOOP": loop})
    assert f"event loop: {loop}" in pool.log()
    resource.prlimit(pool.popen.pid, resource.RLIMIT_NOFILE, (40, 40))
    held = []
    try:
        for _ in range(80):  # more connections than the router has descriptors
            try:
                held.append(socket.create_connection(("127.0.0.1", pool.port), timeout=5))
            except OSError:
                break
        time.sleep(3)
        log = pool.log()
        storm = [line for line in log.splitlines() if "accept" in line.lower() or "Too many open files" in line]
        assert 1 <= len(storm) <= 5, "\n".join(storm[:20])
        assert "Traceback" not in log
    finally:
        for sock in held:
            sock.close()
    # Once descriptors are free again, the router serves (the kernel queues this connection until the
    # backed-off accept loop takes it: no fixed wait for the back-off to end).
    with socket.create_connection(("127.0.0.1", pool.port), timeout=10) as sock:
        sock.sendall(b"GET /c3/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data, _ = _closed_after(sock)
    assert data.startswith(b"HTTP/1.1 200 "), data


def test_a_slow_client_of_a_large_chunked_answer_keeps_router_memory_bounded(raw_backend, pool_process):
    """Backpressure through the data_received relay: the backend is not read faster than the client reads."""
    piece = b"y" * (1 << 20)
    chunk = b"%x\r\n%s\r\n" % (len(piece), piece)
    raw_backend.answer = b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk * 120 + b"0\r\n\r\n"
    pool = pool_process({"raw": f"http://127.0.0.1:{raw_backend.port}"}, probe_interval=5)
    with socket.create_connection(("127.0.0.1", pool.port), timeout=60) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        sock.sendall(b"GET /v1/big HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        time.sleep(2.0)  # not reading: the router must stop reading the backend, not buffer 120 MiB
        peak_while_stalled = _rss_peak_mib(pool.popen.pid)
        total = 0
        while True:
            got = sock.recv(1 << 20)
            if not got:
                break
            total += len(got)
    assert total > 120 * (1 << 20)  # every byte arrived once the client read
    assert peak_while_stalled < 150, f"router peak RSS {peak_while_stalled:.0f} MiB while the client did not read"
    assert _rss_peak_mib(pool.popen.pid) < 150


def test_an_answer_before_the_body_was_read_closes_the_connection(pool_process):
    """No backend is up and the body is streamed (over --retry-body-limit), so the router answers 503
    before reading it: the unread body — here a whole request — must never be parsed as the next one."""
    from tests.plugins.rig import free_port

    dead = free_port()  # nothing listens here
    pool = pool_process({"dead": f"http://127.0.0.1:{dead}"}, "--retry-body-limit", "4", probe_interval=5)
    hidden = b"GET /c3/health HTTP/1.1\r\nHost: x\r\n\r\n"
    with socket.create_connection(("127.0.0.1", pool.port), timeout=10) as sock:
        sock.sendall(b"POST /v1/case HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(hidden) + hidden)
        responses, closed = read_responses(sock, quiet_s=1.5)
    assert [r[0] for r in responses] in ([502], [503]) and closed, responses
