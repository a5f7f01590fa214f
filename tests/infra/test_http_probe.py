"""backend.http_probe against a real HTTP server on loopback: one proxy policy for every probe c3
makes (a proxy in the environment, pointing at a dead port, is never used unless the user opts in),
the auth-required mapping, a key that never shows, bounded bodies and timeouts."""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from backend import http_probe

KEY = "sk-probe-secret-0123456789"


class _Handler(BaseHTTPRequestHandler):
    seen_auth: list[str | None] = []

    def log_message(self, *args: object) -> None:  # keep test output quiet
        return

    def _send(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.seen_auth.append(self.headers.get("Authorization"))
        if self.path == "/slow":
            time.sleep(10)  # far past the probe's 0.3 s timeout and the test's bound for it
        if self.path in ("/v1/models", "/health", "/slow", "/c3/status"):
            self._send(200, json.dumps({"data": [{"id": "m"}], "nodes": []}).encode())
        elif self.path == "/auth":
            self._send(200 if self.headers.get("Authorization") == f"Bearer {KEY}" else 401, b"{}")
        elif self.path == "/forbidden":
            self._send(403, b"{}")
        elif self.path == "/big":
            self._send(200, b"x" * (3 << 20))
        else:
            self._send(404, b"{}")

    do_POST = do_GET


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        return  # a probe that stopped reading (timeout, body cap) breaks the pipe: expected here


@pytest.fixture
def server() -> Iterator[str]:
    httpd = _Server(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    _Handler.seen_auth = []
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture
def dead_proxy(monkeypatch) -> str:
    """Every proxy variable pointing at a port nothing listens on, and no NO_PROXY."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.setenv(name, url)
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    return url


def _every_probe(base: str) -> dict[str, bool]:
    """Each of c3's HTTP probes against `base`: did it get the answer?"""
    from backend.cluster.health import probe as rank_probe
    from backend.live.engine_metrics import read_pod
    from backend.live.health import check_all
    from backend.pool.status import fetch_status
    from backend.runtime.readiness import probe_health
    from backend.shard.runner import _get_models

    port = int(base.rsplit(":", 1)[1])
    with http_probe.client(2.0) as client:
        metrics, _ = read_pod(client, "p", port)
    return {
        "readiness": probe_health(base + "/v1/models", timeout=2) == "ready",
        "rank0": rank_probe(base + "/v1", "/health", timeout=2)[0],
        "live-health": check_all([("p", base + "/health")], timeout_s=2)["p"].healthy,
        "shard-ready": _get_models(base + "/v1/models") == ["m"],
        "pool-status": fetch_status(base, timeout_s=2) is not None,
        # /metrics is a 404 here: what matters is that the server answered, not the proxy.
        "engine-metrics": "HTTP 404" in (metrics.error or ""),
    }


def test_no_probe_uses_a_proxy_from_the_environment(server, dead_proxy):
    got = _every_probe(server)
    assert all(got.values()), got


def test_opting_in_sends_probes_through_the_proxy(server, dead_proxy, monkeypatch):
    # The proof that the dead proxy above was live bait: with the opt-in, the probes hit it and fail.
    monkeypatch.setenv("C3_PROBE_USE_ENV_PROXY", "1")
    result = http_probe.probe(server + "/v1/models", timeout=2)
    assert not result.answered and result.error


def test_auth_required_maps_401_and_403_and_the_key_is_sent_but_never_shown(server, monkeypatch, caplog):
    from backend.runtime.readiness import probe_health

    assert probe_health(server + "/auth") == "auth"
    forbidden = http_probe.probe(server + "/forbidden")
    assert forbidden.auth_required and forbidden.phase == "auth" and "auth required (HTTP 403)" in forbidden.line()
    monkeypatch.setenv("VLLM_API_KEY", KEY)
    caplog.set_level(logging.DEBUG)
    assert probe_health(server + "/auth") == "ready"
    assert _Handler.seen_auth[-1] == f"Bearer {KEY}"
    result = http_probe.probe(server + "/auth", api_key=KEY)
    assert result.ok
    assert KEY not in repr(result) and KEY not in result.line() and KEY not in caplog.text


def test_bodies_are_bounded_and_slow_endpoints_time_out(server):
    big = http_probe.probe(server + "/big", max_bytes=1 << 20)
    assert big.ok and big.truncated and len(big.body) == 1 << 20
    started = time.monotonic()
    slow = http_probe.probe(server + "/slow", timeout=0.3)
    assert not slow.answered and "timed out" in slow.error and time.monotonic() - started < 5  # 0.3 s timeout, busy-box slack; the answer comes at 10 s


@pytest.mark.parametrize("url", ["not a url", "http://[::1", "ftp://127.0.0.1/x", "http://127.0.0.1:1/"])
def test_bad_or_dead_urls_are_an_answer_not_an_exception(url):
    result = http_probe.probe(url, timeout=0.5)
    assert not result.answered and result.phase == "starting" and result.error
