"""HTTP/1.0 clients: they cannot parse chunked encoding, so a chunked backend answer reaches them
de-chunked and close-delimited (raw sockets, real stub engines)."""

from __future__ import annotations

import json

from tests.pool.conftest import raw_request
from tests.pool.test_failover import QUICK, STREAM


def post(version: bytes, body: dict, extra: bytes = b"") -> bytes:
    data = json.dumps(body).encode()
    return (b"POST /v1/chat/completions " + version + b"\r\nHost: x\r\nContent-Type: application/json\r\n" + extra
            + b"Content-Length: %d\r\n\r\n" % len(data) + data)


def split(raw: bytes) -> tuple[list[bytes], bytes]:
    head, _, body = raw.partition(b"\r\n\r\n")
    return [line.lower() for line in head.split(b"\r\n")], body


def test_http10_stream_is_close_delimited_and_not_chunked(stubs, pool_process):
    backend = stubs("a", extra=("--tokens", "5"))["a"]
    pool = pool_process({"a": backend.url})
    lines, body = split(raw_request(pool.port, post(b"HTTP/1.0", STREAM)))
    assert b" 200 " in lines[0]
    assert not any(line.startswith(b"transfer-encoding") for line in lines)
    assert not any(line.startswith(b"content-length") for line in lines)
    assert b"connection: close" in lines and b"content-type: text/event-stream; charset=utf-8" in lines
    assert body.startswith(b"data: {") and body.endswith(b"data: [DONE]\n\n")  # no chunk-size lines anywhere
    events = [e for e in body.split(b"\n\n") if e]
    assert all(e.startswith(b"data: ") for e in events) and len(events) >= 6

    # The same request over HTTP/1.1 keeps the backend's chunked framing (sanity check of the contrast).
    lines11, body11 = split(raw_request(pool.port, post(b"HTTP/1.1", STREAM, b"Connection: close\r\n")))
    assert b"transfer-encoding: chunked" in lines11 and body11.endswith(b"0\r\n\r\n")


def test_http10_plain_answer_keeps_its_length_and_keep_alive_works(stubs, pool_process):
    import socket

    backend = stubs("a", extra=("--tokens", "1"))["a"]
    pool = pool_process({"a": backend.url})
    lines, body = split(raw_request(pool.port, post(b"HTTP/1.0", QUICK)))
    length = next(int(line.split(b":")[1]) for line in lines if line.startswith(b"content-length"))
    assert length == len(body) and json.loads(body)["choices"]
    # HTTP/1.0 with keep-alive: told so, and the connection carries a second request.
    with socket.create_connection(("127.0.0.1", pool.port), timeout=10) as sock:
        for _ in range(2):
            sock.sendall(post(b"HTTP/1.0", QUICK, b"Connection: keep-alive\r\n"))
            raw = b""
            while b"\r\n\r\n" not in raw:
                raw += sock.recv(65536)
            head, _, rest = raw.partition(b"\r\n\r\n")
            hl = [line.lower() for line in head.split(b"\r\n")]
            assert b"connection: keep-alive" in hl
            need = next(int(line.split(b":")[1]) for line in hl if line.startswith(b"content-length"))
            while len(rest) < need:
                rest += sock.recv(65536)
            assert json.loads(rest)["choices"]


def test_http10_stream_cut_midway_gets_a_plain_error_event(stubs, pool_process):
    flaky = stubs("flaky", extra=("--tokens", "10", "--abort-after-chunks", "3"))["flaky"]
    pool = pool_process({"flaky": flaky.url})
    lines, body = split(raw_request(pool.port, post(b"HTTP/1.0", STREAM)))
    assert b" 200 " in lines[0] and not any(line.startswith(b"transfer-encoding") for line in lines)
    events = [e for e in body.split(b"\n\n") if e]
    assert sum(1 for e in events if b"chat.completion.chunk" in e and b'"role"' not in e) == 3
    assert events[-1].startswith(b"event: error\ndata: ") and b"c3_backend_failed" in events[-1]
    assert b"\r\n" not in body  # no chunk framing leaked into the close-delimited body


def test_http10_client_never_gets_100_continue(shared_stubs, pool_process):
    """`100 Continue` is HTTP/1.1 (RFC 9110 §10.1.1): an HTTP/1.0 client that sends `Expect` gets only its answer."""
    backend = shared_stubs("a", extra=("--tokens", "1"))["a"]
    pool = pool_process({"a": backend.url})
    raw = raw_request(pool.port, post(b"HTTP/1.0", QUICK, b"Expect: 100-continue\r\n"))
    assert raw.startswith(b"HTTP/1.1 200 ") and b" 100 " not in raw.split(b"\r\n", 1)[0], raw[:80]
    assert b"100 Continue" not in raw
