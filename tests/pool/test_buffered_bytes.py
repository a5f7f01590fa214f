"""Bounded as a whole (issue 26): the request bytes the router holds for retries have one cap across all
connections (`--max-buffered-bytes`); past it bodies stream through. 48 concurrent 8 MB uploads to a
backend that is slow to read must not grow the router by their sum."""

from __future__ import annotations

import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.pool.conftest import raw_request, wait_until

UPLOADS = 48
SIZE = 8_000_000  # under the 8 MiB retry-body limit: each one alone would be held whole


class SlowReader:
    """A loopback backend that waits before reading each request body, then answers 200 with its length."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s
        self.sock = socket.create_server(("127.0.0.1", 0), backlog=128)
        self.port = self.sock.getsockname()[1]
        self.received: list[int] = []
        self._stop = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(60)
            try:
                while True:
                    data = b""
                    while b"\r\n\r\n" not in data:
                        piece = conn.recv(65536)
                        if not piece:
                            return
                        data += piece
                    head, _, rest = data.partition(b"\r\n\r\n")
                    lines = head.lower().split(b"\r\n")
                    if lines[0].startswith(b"get /health"):
                        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
                        continue
                    time.sleep(self.delay_s)
                    got = self._body(conn, lines, rest)
                    self.received.append(got)
                    body = b"%d" % got
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
            except OSError:
                return

    @staticmethod
    def _body(conn: socket.socket, lines: list[bytes], rest: bytes) -> int:
        length = next((int(x.split(b":", 1)[1]) for x in lines if x.startswith(b"content-length:")), None)
        if length is not None:
            got = len(rest)
            while got < length:
                piece = conn.recv(min(1 << 20, length - got))
                if not piece:
                    raise OSError("short body")
                got += len(piece)
            return got
        buf, total = rest, 0  # chunked: decode just enough to count
        while True:
            while b"\r\n" not in buf:
                buf += conn.recv(65536)
            line, _, buf = buf.partition(b"\r\n")
            size = int(line.split(b";")[0], 16)
            while len(buf) < size + 2:
                piece = conn.recv(1 << 20)
                if not piece:
                    raise OSError("short chunk")
                buf += piece
            buf = buf[size + 2:]
            total += size
            if size == 0:
                return total

    def close(self) -> None:
        self._stop = True
        self.sock.close()


@pytest.fixture
def slow_reader():
    backend = SlowReader(delay_s=1.0)
    yield backend
    backend.close()


def _rss_mib(pid: int, field: str = "VmRSS") -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise AssertionError(f"no {field}")


def _upload(body: bytes) -> bytes:
    return b"POST /v1/audio/transcriptions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body)


def test_48_concurrent_8_mb_uploads_stay_under_the_aggregate_cap(slow_reader, pool_process):
    pool = pool_process({"slow": f"http://127.0.0.1:{slow_reader.port}"}, "--sticky", "none", probe_interval=5)
    pid = pool.popen.pid
    assert raw_request(pool.port, _upload(b"warm")).endswith(b"\r\n\r\n4")  # imports and first-request allocations done
    baseline = _rss_mib(pid)
    upload = _upload(b"x" * SIZE)  # one request object shared by every sender
    started = time.monotonic()
    with ThreadPoolExecutor(UPLOADS) as pool_threads:
        answers = list(pool_threads.map(lambda _: raw_request(pool.port, upload, timeout=60), range(UPLOADS)))
    took = time.monotonic() - started
    assert all(a.startswith(b"HTTP/1.1 200") and a.endswith(b"\r\n\r\n%d" % SIZE) for a in answers), [a[:80] for a in answers]
    peak = _rss_mib(pid, "VmHWM")
    assert peak - baseline < 100, f"router grew {peak - baseline:.0f} MiB (baseline {baseline:.0f}) for {UPLOADS} × 8 MB in {took:.1f}s"
    wait_until(lambda: _rss_mib(pid) - baseline < 40, timeout=10, what="the router's RSS to come back")
    buffered = pool.status()["buffered"]
    assert buffered["held_bytes"] == 0 and buffered["cap_bytes"] == 64 * 1024 * 1024  # every reservation returned
    assert 0 < buffered["peak_bytes"] <= buffered["cap_bytes"] and buffered["streamed_over_cap"] > 0, buffered
    assert slow_reader.received.count(SIZE) == UPLOADS  # streamed or held, every byte reached the backend
