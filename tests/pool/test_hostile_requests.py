"""The hostile-HTTP request corpus against the real router in front of real HTTP stacks: uvicorn with
h11 and with httptools (what vLLM and SGLang serve on) and the project's stub engine.

The property checked for every case: the backend sees exactly the requests the router answered for —
a hostile head is refused (400/501) and the connection closed before any byte reaches a backend, and
nothing the router treated as a body ever becomes a request of its own upstream, nor another client's
answer.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time

import httpx
import pytest

from tests.plugins.rig import free_port, start_stub, wait_for_port
from tests.pool.conftest import ROOT, launch_pool
from tests.pool.hostile import REJECT, SWALLOW, chunked, cl, read_responses, request

KINDS = ("h11", "httptools", "stub", "h11-asyncio-router")  # the last: the router on plain asyncio (C3_POOL_LOOP)


class Front:
    """One backend of a given HTTP stack and a router in front of it."""

    def __init__(self, kind: str, backend: subprocess.Popen | object, backend_url: str, pool) -> None:
        self.kind = kind
        self.backend = backend
        self.backend_url = backend_url
        self.pool = pool

    def records(self) -> list[dict]:
        if self.kind == "stub":
            rows = httpx.get(self.backend_url + "/debug/requests", timeout=5).json()["requests"]
            return [{"path": r["path"], "marker": r["headers"].get("x-marker"), "method": r["method"], "body_len": r["body_bytes"]}
                    for r in rows if r["path"] not in ("/health", "/v1/models")]
        return httpx.get(self.backend_url + "/__records", timeout=5).json()

    def clear(self) -> None:
        if self.kind == "stub":
            httpx.delete(self.backend_url + "/debug/requests", timeout=5)
        else:
            httpx.delete(self.backend_url + "/__records", timeout=5)

    def send(self, raw: bytes, **kw) -> tuple[list, bool]:
        with socket.create_connection(("127.0.0.1", self.pool.port), timeout=10) as sock:
            sock.sendall(raw)
            return read_responses(sock, **kw)


@pytest.fixture(scope="module", params=KINDS)
def front(request, tmp_path_factory):
    kind = request.param
    router_env = {"C3_POOL_LOOP": "asyncio"} if kind.endswith("-asyncio-router") else None
    kind = kind.removesuffix("-asyncio-router")
    base = tmp_path_factory.mktemp(f"hostile-{kind}")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("C3_HOME", str(base / "home"))
        mp.setenv("C3_STATE", str(base / "state"))
        backend = None
        if kind == "stub":
            stub = backend = start_stub(("--name", "b"), None, base)
            url = stub.url
        else:
            port = free_port()
            backend = subprocess.Popen(
                [sys.executable, "-m", "uvicorn", "tests.pool.recorder_app:app", "--host", "127.0.0.1", "--port", str(port),
                 "--http", kind, "--loop", "asyncio", "--no-access-log", "--lifespan", "off"],
                cwd=ROOT, stdout=subprocess.DEVNULL, stderr=open(base / "uvicorn.log", "wb"), stdin=subprocess.DEVNULL)
            url = f"http://127.0.0.1:{port}"
            assert wait_for_port("127.0.0.1", port, 30, lambda: backend.poll() is None), (base / "uvicorn.log").read_text()
        pool = launch_pool(base, {"b": url}, "--sticky", "none", probe_interval=5.0, env=router_env)
        if router_env:
            assert "event loop: asyncio" in pool.log()
        try:
            yield Front(kind, backend, url, pool)
        finally:
            pool.stop(signal.SIGKILL)
            if kind == "stub":
                backend.stop()
            elif backend is not None:
                backend.send_signal(signal.SIGTERM)
                try:
                    backend.wait(10)
                except subprocess.TimeoutExpired:
                    backend.kill()
                    backend.wait(10)


@pytest.mark.parametrize("case", sorted(REJECT))
def test_hostile_request_is_refused_before_any_backend_byte(front, case):
    raw, statuses = REJECT[case]
    front.clear()
    responses, closed = front.send(raw)
    assert [s for s, _, _ in responses][:1] and responses[0][0] in statuses, (case, responses)
    assert len(responses) == 1 and closed, f"{case}: the connection must close after the refusal ({responses})"
    assert "x-c3-backend" not in responses[0][1]
    error = json.loads(responses[0][2])["error"]
    assert error["code"] == responses[0][0] and error["message"]
    time.sleep(0.05)
    assert front.records() == [], f"{case}: reached the {front.kind} backend"
    assert front.pool.popen.poll() is None
    assert "Traceback" not in front.pool.log()


def test_connection_content_length_cannot_steer_another_clients_answer(front):
    """Issue #10's reproduction: the attacker's body hides a request that swallows the next client's."""
    front.clear()
    attack = request(b"Connection: Content-Length\r\n" + cl(SWALLOW) + b"X-Marker: attacker\r\n", SWALLOW)
    with socket.create_connection(("127.0.0.1", front.pool.port), timeout=10) as attacker:
        attacker.sendall(attack)
        read_responses(attacker, quiet_s=0.5)
    with httpx.Client(base_url=front.pool.url, timeout=10) as client:
        for i in range(3):
            r = client.post("/v1/victim", content=b"{}", headers={"X-Marker": f"victim{i}"})
            assert r.status_code in (200, 404), r.text
            if front.kind != "stub":
                assert r.json()["marker"] == f"victim{i}" and r.json()["path"] == "/v1/victim"
    seen = front.records()
    assert [r["path"] for r in seen] == ["/v1/victim"] * 3, seen
    assert [r["marker"] for r in seen] == ["victim0", "victim1", "victim2"]


SERVE = {
    "pipelined-pair": (request(cl(b"{}") + b"X-Marker: one\r\n", b"{}") + request(cl(b"") + b"X-Marker: two\r\nConnection: close\r\n"), 2),
    "chunked-with-extension": (request(b"Transfer-Encoding: chunked\r\nX-Marker: ext\r\nConnection: close\r\n", b"2;name=val\r\nhi\r\n0\r\n\r\n"), 1),
    "chunked-with-trailer": (request(b"Transfer-Encoding: chunked\r\nX-Marker: trl\r\nConnection: close\r\n", b"2\r\nhi\r\n0\r\nX-T: 1\r\n\r\n"), 1),
    "chunked-then-pipelined": (request(b"Transfer-Encoding: Chunked\r\nX-Marker: a\r\n", chunked(b"hello"))
                               + request(cl(b"") + b"X-Marker: b\r\nConnection: close\r\n"), 2),
    "te-case-mangled-alone": (request(b"tRaNsFeR-eNcOdInG: ChUnKeD\r\nX-Marker: case\r\nConnection: close\r\n", b"2\r\nhi\r\n0\r\n\r\n"), 1),
    "http10-without-host": (request(cl(b"") + b"X-Marker: old\r\n", version=b"HTTP/1.0", host=b""), 1),
    "hop-by-hop-named-header-dropped": (request(b"Connection: close, X-Secret-Hop\r\nX-Secret-Hop: 1\r\nX-Marker: hop\r\n" + cl(b"")), 1),
}


@pytest.mark.parametrize("case", sorted(SERVE))
def test_valid_edge_requests_are_served_with_the_same_boundaries(front, case):
    raw, count = SERVE[case]
    front.clear()
    responses, _ = front.send(raw)
    proxied = [r for r in responses if "x-c3-backend" in r[1]]
    assert len(proxied) == count == len(responses), (case, responses)
    seen = front.records()
    assert len(seen) == count and all(r["path"] == "/v1/case" for r in seen), seen
    if case.startswith("chunked") or case == "te-case-mangled-alone":
        assert seen[0]["body_len"] == (5 if case == "chunked-then-pipelined" else 2)
