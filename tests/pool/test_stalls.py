"""Timeouts through the whole exchange (issue 26), each proven with a stalled peer on loopback:

- a backend that stalls mid-stream after its head is cut after `--stream-timeout` (client connection
  closed, counted against that backend as a stalled stream);
- a client that never reads is disconnected after `--write-timeout` and its backend slot is freed;
- a request body gets `--body-timeout` between reads, not in total: a slow but steady upload succeeds,
  while `--max-body-time` caps the whole body;
- `--max-response-time` caps a response that trickles forever.
"""

from __future__ import annotations

import socket
import time

import httpx
import pytest

from tests.pool.conftest import wait_until
from tests.pool.hostile import RawBackend, read_responses
from tests.pool.test_resources import CLOSED_BY_S, _closed_after

SSE_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
EVENT = b"data: {\"choices\": [{\"delta\": {\"content\": \"hi\"}}]}\n\n"
ONE_EVENT = b"%x\r\n%s\r\n" % (len(EVENT), EVENT)
REQUEST = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"


@pytest.fixture
def raw_backend():
    backend = RawBackend()
    yield backend
    backend.close()


def _url(backend: RawBackend) -> dict[str, str]:
    return {"raw": backend.url}


def test_a_backend_stalling_mid_stream_is_cut_and_counted_against_it(raw_backend, pool_process):
    raw_backend.answer = SSE_HEAD + ONE_EVENT  # then nothing more, the connection left open
    pool = pool_process(_url(raw_backend), "--stream-timeout", "1", probe_interval=5)
    with socket.create_connection(("127.0.0.1", pool.port), timeout=10) as sock:
        sock.sendall(REQUEST)
        data, took = _closed_after(sock)
    assert data.startswith(b"HTTP/1.1 200 ") and EVENT in data, data
    assert b"event: error" in data and data.endswith(b"0\r\n\r\n"), data  # ends as SSE, then the connection closes
    assert 0.9 <= took < CLOSED_BY_S, took
    row = pool.backend("raw")
    assert row["stalled_streams"] == 1 and row["in_flight"] == 0 and row["errors"] >= 1, row
    assert "stalled" in row["last_error"], row
    assert "c3_pool_stalled_streams_total" in httpx.get(pool.url + "/metrics", timeout=5).text
    assert "Traceback" not in pool.log()


def test_the_first_body_byte_may_take_the_head_timeout_not_the_stream_timeout(raw_backend, pool_process):
    """vLLM sends a stream's head at once and its first token after prefill, which takes long for a
    long prompt: the gap before the first body byte is judged by --upstream-timeout."""
    raw_backend.answer = [SSE_HEAD, b"", b"", b"", b"", b"", b"", ONE_EVENT + b"0\r\n\r\n"]  # 1.8 s of silence after the head
    pool = pool_process(_url(raw_backend), "--stream-timeout", "1", "--upstream-timeout", "30", probe_interval=5)
    with socket.create_connection(("127.0.0.1", pool.port), timeout=20) as sock:
        sock.sendall(REQUEST.replace(b"Host: x\r\n", b"Host: x\r\nConnection: close\r\n"))
        data, _ = _closed_after(sock)
    assert EVENT in data and b"event: error" not in data and data.endswith(b"0\r\n\r\n"), data
    assert pool.backend("raw")["stalled_streams"] == 0


def test_a_client_that_never_reads_is_dropped_and_frees_its_slot(raw_backend, pool_process):
    size = 64 << 20
    raw_backend.answer = b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n" % size + b"z" * size
    pool = pool_process(_url(raw_backend), "--write-timeout", "1", probe_interval=5)
    with socket.create_connection(("127.0.0.1", pool.port), timeout=20) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        sock.sendall(b"GET /v1/big HTTP/1.1\r\nHost: x\r\n\r\n")
        wait_until(lambda: pool.backend("raw")["in_flight"] == 1, timeout=10, what="the request to start")
        started = time.monotonic()
        wait_until(lambda: pool.backend("raw")["in_flight"] == 0, timeout=20, what="the slot to be freed")
        assert time.monotonic() - started < CLOSED_BY_S
        total = 0
        sock.settimeout(10)
        try:
            while piece := sock.recv(1 << 20):
                total += len(piece)
        except ConnectionResetError:
            pass
    assert total < size  # cut off, never made to look complete
    row = pool.backend("raw")
    assert row["stalled_streams"] == 0 and row["healthy"] and row["consecutive_failures"] == 0, row  # the client's fault
    assert "did not read" in pool.log() and "Traceback" not in pool.log()


def _upload(port: int, body: bytes, pieces: int, gap_s: float) -> tuple[bytes, float]:
    """Send a Content-Length request whose body arrives in `pieces` parts `gap_s` apart."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        started = time.monotonic()
        sock.sendall(b"POST /v1/up HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: %d\r\n\r\n" % len(body))
        step = -(-len(body) // pieces)
        try:
            for i in range(0, len(body), step):
                time.sleep(gap_s)
                sock.sendall(body[i : i + step])
        except (BrokenPipeError, ConnectionResetError):
            pass
        responses, _ = read_responses(sock, quiet_s=5, total_s=20)
    return (responses[0][0] if responses else 0), time.monotonic() - started


@pytest.mark.parametrize("limit", ["1000000", "4"], ids=["held", "streamed"])
def test_a_slow_but_steady_upload_succeeds_and_max_body_time_caps_it(raw_backend, pool_process, limit):
    pool = pool_process(_url(raw_backend), "--body-timeout", "1", "--retry-body-limit", limit, probe_interval=5)
    status, took = _upload(pool.port, b"x" * 1000, pieces=8, gap_s=0.4)  # 3.2 s in all, never 1 s without bytes
    assert status == 200 and took > 3, (status, took)
    assert raw_backend.body_bytes == 1000
    capped = pool_process(_url(raw_backend), "--body-timeout", "1", "--max-body-time", "1.5", "--retry-body-limit", limit,
                          probe_interval=5)
    status, took = _upload(capped.port, b"x" * 1000, pieces=8, gap_s=0.4)
    assert status == 408 and took < CLOSED_BY_S, (status, took)
    assert "Traceback" not in pool.log() + capped.log()


def test_max_response_time_caps_a_response_that_trickles_forever(raw_backend, pool_process):
    raw_backend.answer = [SSE_HEAD + ONE_EVENT] + [ONE_EVENT] * 200  # an event every 0.3 s, for a minute
    pool = pool_process(_url(raw_backend), "--stream-timeout", "5", "--max-response-time", "2", probe_interval=5)
    with socket.create_connection(("127.0.0.1", pool.port), timeout=10) as sock:
        sock.sendall(REQUEST)
        data, took = _closed_after(sock)
    assert data.startswith(b"HTTP/1.1 200 ") and data.count(EVENT) >= 2 and b"event: error" in data, data
    assert 1.9 <= took < CLOSED_BY_S, took
    row = pool.backend("raw")
    assert row["in_flight"] == 0 and row["stalled_streams"] == 0 and row["consecutive_failures"] == 0, row  # not the backend's fault
