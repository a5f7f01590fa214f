"""The malformed-backend corpus: a backend that answers with broken HTTP gets its client a 502 (or an
SSE error event mid-stream), its connection is dropped (never pooled for the next client), and the
router stays healthy — `/c3/health` answers within a second after every case.
"""

from __future__ import annotations

import signal
import socket
import time

import httpx
import pytest

from tests.pool.conftest import launch_pool
from tests.pool.hostile import OK_HEAD, RawBackend, read_responses

CHUNKED = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"

BAD_HEADS = {
    "cl-and-te": OK_HEAD + b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    "connection-names-content-length": OK_HEAD + b"Connection: Content-Length\r\nContent-Length: 5\r\n\r\nhello",
    "connection-names-transfer-encoding": OK_HEAD + b"Connection: Transfer-Encoding\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    "bare-lf-header-line": OK_HEAD + b"X-A: a\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\nhello",
    "bare-cr-in-value": OK_HEAD + b"X-A: a\rb\r\nContent-Length: 5\r\n\r\nhello",
    "nul-in-value": OK_HEAD + b"X-A: a\x00b\r\nContent-Length: 5\r\n\r\nhello",
    "obs-fold": OK_HEAD + b"X-A: a\r\n b\r\nContent-Length: 5\r\n\r\nhello",
    "space-before-colon": OK_HEAD + b"Content-Length : 5\r\n\r\nhello",
    "two-content-lengths": OK_HEAD + b"Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
    "signed-content-length": OK_HEAD + b"Content-Length: +5\r\n\r\nhello",
    "te-gzip": OK_HEAD + b"Transfer-Encoding: gzip\r\n\r\nhello",
    "status-not-a-number": b"HTTP/1.1 2x0 OK\r\nContent-Length: 0\r\n\r\n",
    "status-out-of-range": b"HTTP/1.1 999 Odd\r\nContent-Length: 0\r\n\r\n",
    "version-garbage": b"HTTP/1.1x 200 OK\r\nContent-Length: 0\r\n\r\n",
    "http2-status-line": b"HTTP/2.0 200 OK\r\nContent-Length: 0\r\n\r\n",
    "unsolicited-101": b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\n",
    "not-http": b"SSH-2.0-OpenSSH_9.6\r\n\r\n",
}
BAD_BODIES = {
    "negative-chunk-size": CHUNKED + b"-6\r\nhello\r\n0\r\n\r\n",
    "hex-prefixed-chunk-size": CHUNKED + b"0x5\r\nhello\r\n0\r\n\r\n",
    "plus-chunk-size": CHUNKED + b"+5\r\nhello\r\n0\r\n\r\n",
    "underscore-chunk-size": CHUNKED + b"0_5\r\nhello\r\n0\r\n\r\n",
    "chunk-without-crlf": CHUNKED + b"5\r\nhelloXX0\r\n\r\n",
    "bare-lf-chunk-line": CHUNKED + b"5\nhello\n0\n\n",
    "bare-lf-trailer": CHUNKED + b"5\r\nhello\r\n0\r\nX-T: a\nContent-Length: 3\r\n\r\n",
    "huge-chunk-size-line": CHUNKED + b"5" + b";x" * 4000 + b"\r\nhello\r\n0\r\n\r\n",
}


@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    base = tmp_path_factory.mktemp("hostile-responses")
    backend = RawBackend()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("C3_HOME", str(base / "home"))
        mp.setenv("C3_STATE", str(base / "state"))
        pool = launch_pool(base, {"raw": f"http://127.0.0.1:{backend.port}"}, "--sticky", "none", probe_interval=0.5)
        try:
            yield backend, pool
        finally:
            pool.stop(signal.SIGKILL)
            backend.close()


def _exchange(pool, answer, backend: RawBackend):
    backend.answer = answer
    with socket.create_connection(("127.0.0.1", pool.port), timeout=10) as sock:
        sock.sendall(b"POST /v1/case HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
        return read_responses(sock, quiet_s=1.0)


def _answers_at_once(pool) -> None:
    """The router still answers at once after a hostile response: a wedged event loop never would (the
    socket times out). "At once" is sized for a busy 2-core box, where a process may wait seconds for a core."""
    # A raw socket: the client's own setup time (httpx builds an SSL context) must not count.
    with socket.create_connection(("127.0.0.1", pool.port), timeout=20) as sock:
        started = time.monotonic()
        sock.sendall(b"GET /c3/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        answer = sock.recv(4096)
        took = time.monotonic() - started
    assert answer.startswith((b"HTTP/1.1 200 ", b"HTTP/1.1 503 ")) and took < 5.0, (answer[:40], took)


def _next_request_uses_a_fresh_connection(pool, backend: RawBackend) -> None:
    bad_conn = backend.seen[-1][1]
    backend.answer = OK_HEAD + b"Content-Length: 2\r\n\r\nok"
    for _ in range(20):  # the single backend may be briefly down after failures: wait for it
        r = httpx.post(pool.url + "/v1/after", content=b"{}", timeout=5)
        if r.status_code == 200:
            break
        time.sleep(0.25)
    assert r.status_code == 200 and r.text == "ok"
    assert backend.seen[-1] == ("/v1/after", backend.seen[-1][1]) and backend.seen[-1][1] != bad_conn


@pytest.mark.parametrize("case", sorted(BAD_HEADS))
def test_malformed_response_head_is_a_502_and_never_pooled(rig, case):
    backend, pool = rig
    responses, _ = _exchange(pool, BAD_HEADS[case], backend)
    assert len(responses) == 1 and responses[0][0] == 502, (case, responses)
    assert b"hello" not in responses[0][2] and "x-c3-backend" not in responses[0][1]
    _answers_at_once(pool)
    _next_request_uses_a_fresh_connection(pool, backend)
    assert pool.popen.poll() is None and "Traceback" not in pool.log()


@pytest.mark.parametrize("case", sorted(BAD_BODIES))
def test_malformed_response_body_never_reaches_the_client_as_complete(rig, case):
    backend, pool = rig
    responses, closed = _exchange(pool, BAD_BODIES[case], backend)
    # Sent in one write, the head and the broken framing arrive together: the client gets a 502.
    # (Had the head gone out first, the connection would be cut instead: never a body that looks whole.)
    assert [r[0] for r in responses] in ([502], []), (case, responses)
    assert closed
    _answers_at_once(pool)
    _next_request_uses_a_fresh_connection(pool, backend)
    assert pool.popen.poll() is None and "Traceback" not in pool.log()


def test_broken_framing_mid_stream_ends_sse_with_an_error_event(rig):
    backend, pool = rig
    good = b'data: {"x":1}\n\n'
    backend.answer = [b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
                      + b"%x\r\n%s\r\n" % (len(good), good), b"-6\r\nhello\r\n0\r\n\r\n"]
    responses, _ = _exchange(pool, backend.answer, backend)
    assert len(responses) == 1 and responses[0][0] == 200, responses
    body = responses[0][2]
    assert body.startswith(good) and b"hello" not in body
    assert b"event: error" in body and b"c3_backend_failed" in body
    _answers_at_once(pool)
    _next_request_uses_a_fresh_connection(pool, backend)
