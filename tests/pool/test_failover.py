"""Failure handling on loopback with real stub engines: a backend killed under load, recovery without
bounce-back, a stream cut midway, client disconnects, drain on SIGTERM, and secret hygiene."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

from tests.plugins.rig import wait_for_port
from tests.pool.conftest import ROOT, admin_headers, stub_records, wait_until

STREAM = {"model": "stub/model", "messages": [{"role": "user", "content": "hi"}], "stream": True}
QUICK = {"model": "stub/model", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}


def pin_sessions(pool, count: int, prefix: str = "s") -> dict[str, str]:
    """Send one quick request per session; return session → backend."""
    owners = {}
    with httpx.Client(base_url=pool.url, timeout=10) as client:
        for i in range(count):
            r = client.post("/v1/chat/completions", json=QUICK, headers={"X-Session-ID": f"{prefix}{i}"})
            assert r.status_code == 200, r.text
            owners[f"{prefix}{i}"] = r.headers["x-c3-backend"]
    return owners


def test_killing_a_backend_under_load(stubs, pool_process):
    backends = stubs("a", "b", "c", extra=("--tokens", "12", "--token-delay", "0.05"))
    pool = pool_process({n: s.url for n, s in backends.items()}, probe_interval=0.25)
    owners = pin_sessions(pool, 24)
    assert {"a", "b", "c"} == set(owners.values())
    results: list[dict] = []
    lock = threading.Lock()
    kill_at = [None]
    active: dict[int, str] = {}  # worker -> backend of the stream it is reading now
    stop_at = time.monotonic() + 60

    def worker(index: int) -> None:
        sessions = [s for j, s in enumerate(owners) if j % 8 == index]
        with httpx.Client(base_url=pool.url, timeout=30, headers=admin_headers()) as client:
            n = 0
            while time.monotonic() < stop_at:
                session = sessions[n % len(sessions)]
                n += 1
                started = time.monotonic()
                row = {"session": session, "started": started, "backend": None, "status": None, "body": "", "error": None}
                try:
                    with client.stream("POST", "/v1/chat/completions", json=STREAM, headers={"X-Session-ID": session}) as r:
                        row.update(status=r.status_code, backend=r.headers.get("x-c3-backend"), sticky=r.headers.get("x-c3-sticky"))
                        row["first_byte"] = time.monotonic()
                        for text in r.iter_text():
                            active[index] = row["backend"]
                            row["body"] += text
                        active.pop(index, None)
                except httpx.HTTPError as exc:
                    row["error"] = repr(exc)
                with lock:
                    results.append(row)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    wait_until(lambda: len(results) >= 16, timeout=30, what="load to run")
    wait_until(lambda: "b" in list(active.values()), timeout=30, what="a stream on b")
    kill_at[0] = time.monotonic()
    backends["b"].popen.kill()  # SIGKILL by pid: streams on b die mid-flight
    wait_until(lambda: sum(1 for r in results if r["started"] > kill_at[0] + 0.5) >= 30, timeout=40, what="post-kill traffic")
    stop_at = time.monotonic()
    for t in threads:
        t.join(timeout=40)
    kill = kill_at[0]

    failed = [r for r in results if r["error"] or r["status"] != 200]
    assert not failed, failed[:3]  # nothing that had not started failed: all got a 200 head
    broken = [r for r in results if not r["body"].endswith("data: [DONE]\n\n")]
    for r in broken:  # only streams that were running on b when it died, and they say so
        assert r["backend"] == "b" and r["first_byte"] < kill + 1.0, r
        assert "event: error" in r["body"] and "c3_backend_failed" in r["body"], r["body"][-300:]
    assert broken, ("no stream was running on b when it was killed", owners, [(r["backend"], r["started"] - kill, r["body"][-40:]) for r in results if r["backend"] == "b"][-6:])
    for r in results:
        if owners[r["session"]] != "b":
            assert r["backend"] == owners[r["session"]], r  # sessions on healthy backends never move
        elif r["started"] > kill + 0.25:  # one health interval
            assert r["backend"] in {"a", "c"}, r
    moved = {r["session"]: r["backend"] for r in results if owners[r["session"]] == "b" and r["started"] > kill + 0.5}
    repinned = {r["session"] for r in results if r.get("sticky") == "repin"}
    assert moved and set(moved) <= repinned | {s for s in moved if s not in repinned}
    state = pool.backend("b")
    assert state["healthy"] is False and state["state"] == "down"


def test_recovered_backend_does_not_pull_its_sessions_back(stubs, stub_process, pool_process):
    backends = stubs("a", "b", extra=("--tokens", "1"))
    port_b = backends["b"].port
    pool = pool_process({n: s.url for n, s in backends.items()}, probe_interval=0.2)
    owners = pin_sessions(pool, 12)
    on_b = [s for s, n in owners.items() if n == "b"]
    assert on_b
    backends["b"].popen.kill()
    backends["b"].popen.wait(timeout=10)
    with httpx.Client(base_url=pool.url, timeout=10, headers=admin_headers()) as client:
        for s in on_b:
            r = client.post("/v1/chat/completions", json=QUICK, headers={"X-Session-ID": s})
            assert r.status_code == 200 and r.headers["x-c3-backend"] == "a"
            assert r.headers["x-c3-sticky"] == "repin"
    reborn = stub_process("--name", "b", "--port", str(port_b), wait=False)
    assert wait_for_port("127.0.0.1", port_b, 30, reborn.alive), reborn.log()
    wait_until(lambda: pool.backend("b")["state"] == "up", timeout=15, what="b to be probed up again")
    with httpx.Client(base_url=pool.url, timeout=10, headers=admin_headers()) as client:
        for s in on_b:
            r = client.post("/v1/chat/completions", json=QUICK, headers={"X-Session-ID": s})
            assert (r.headers["x-c3-backend"], r.headers["x-c3-sticky"]) == ("a", "hit")
        fresh = [client.post("/v1/chat/completions", json=QUICK, headers={"X-Session-ID": f"new{i}"}).headers["x-c3-backend"] for i in range(8)]
    assert "b" in fresh  # new sessions do use the recovered backend
    assert pool.backend("a")["repins"] == len(on_b)


def test_stream_cut_midway_ends_with_an_error_event_and_is_not_replayed(stubs, pool_process):
    flaky = stubs("flaky", extra=("--tokens", "10", "--abort-after-chunks", "3"))["flaky"]
    good = stubs("good", extra=("--tokens", "10"))["good"]
    pool = pool_process({"flaky": flaky.url, "good": good.url}, "--sticky", "header:X-Conv")
    session = next(f"c{i}" for i in range(200)
                   if httpx.get(pool.url + "/v1/models", headers={"X-Conv": f"c{i}"}, timeout=5).headers["x-c3-backend"] == "flaky")
    body = json.dumps(STREAM).encode()
    request = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Conv: " + session.encode()
               + b"\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    with socket.create_connection(("127.0.0.1", pool.port), timeout=15) as sock:
        sock.sendall(request)
        raw = b""
        while True:
            piece = sock.recv(65536)
            if not piece:
                break
            raw += piece
    head, _, rest = raw.partition(b"\r\n\r\n")
    assert b" 200 " in head.split(b"\r\n")[0] and b"X-C3-Backend: flaky" in head
    events = [e for e in rest.split(b"\n\n") if b"data:" in e]
    assert sum(1 for e in events if b"chat.completion.chunk" in e and b'"role"' not in e) == 3
    assert events[-1].split(b"\r\n")[-1].startswith(b"event: error") and b"c3_backend_failed" in events[-1]
    assert rest.endswith(b"0\r\n\r\n")
    assert not [q for q in stub_records(good.url)["requests"] if q["path"] == "/v1/chat/completions"]
    assert len([q for q in stub_records(flaky.url)["requests"] if q["path"] == "/v1/chat/completions"]) == 1


def test_client_disconnect_closes_the_backend_request(stubs, pool_process):
    """The stub holds each request (X-Stub-Hold) and is never told to release it: the backend request
    can only end because the router closed it when its client went — no stream long enough to outlast a
    wall-clock bound, no bound."""
    slow = stubs("slow", extra=("--tokens", "4"))["slow"]
    pool = pool_process({"slow": slow.url})
    body = json.dumps(STREAM).encode()
    with socket.create_connection(("127.0.0.1", pool.port), timeout=30) as sock:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Stub-Hold: stream\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        got = b""
        while b"data:" not in got:
            got += sock.recv(65536)
        assert stub_records(slow.url)["held"] == {"stream": 1}
    wait_until(lambda: stub_records(slow.url)["disconnects"] >= 1, timeout=30, what="the stub to see the disconnect")
    assert stub_records(slow.url)["held"] == {}
    wait_until(lambda: pool.backend("slow")["in_flight"] == 0, timeout=30, what="in-flight to drop")
    # Non-streaming: the router closes its backend connection as soon as the client goes.
    with socket.create_connection(("127.0.0.1", pool.port), timeout=30) as sock:
        held_body = json.dumps(QUICK).encode()
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Stub-Hold: reply\r\nContent-Length: %d\r\n\r\n" % len(held_body) + held_body)
        wait_until(lambda: stub_records(slow.url)["held"] == {"reply": 1}, timeout=30, what="the request held at the stub")
        assert pool.backend("slow")["in_flight"] == 1
    wait_until(lambda: stub_records(slow.url)["disconnects"] >= 2, timeout=30, what="the stub to see the second disconnect")
    wait_until(lambda: pool.backend("slow")["in_flight"] == 0, timeout=30, what="in-flight to drop after disconnect")
    metrics = httpx.get(pool.url + "/metrics", timeout=5).text
    assert "c3_pool_client_disconnects_total 2" in metrics


def test_sigterm_lets_the_open_stream_finish_then_exits_0(stubs, pool_process):
    backend = stubs("a", extra=("--tokens", "4"))["a"]
    pool = pool_process({"a": backend.url})
    status_files = list((Path(os.environ["C3_STATE"]) / "pool").glob("router-*.json"))
    assert len(status_files) == 1
    box = {}

    def read():
        with httpx.stream("POST", pool.url + "/v1/chat/completions", json=STREAM, headers={"X-Stub-Hold": "term"}, timeout=120) as r:
            box["first"] = True
            box["body"] = "".join(r.iter_text())

    reader = threading.Thread(target=read)
    reader.start()
    try:
        wait_until(lambda: stub_records(backend.url)["held"] == {"term": 1}, timeout=60, what="the stream held at the stub")
        wait_until(lambda: box.get("first"), timeout=60, what="the stream's head at the client")
        pool.popen.send_signal(signal.SIGTERM)
        wait_until(lambda: "draining" in pool.log(), timeout=60, what="the router to say it drains")
        assert pool.popen.poll() is None and reader.is_alive()  # it waits for the open stream
    finally:
        httpx.post(backend.url + "/debug/release/term", timeout=10)
        reader.join(timeout=60)
    assert box.get("body", "(the stream broke)").endswith("data: [DONE]\n\n"), box.get("body")
    assert pool.popen.wait(timeout=30) == 0
    assert "draining" in pool.log() and "Traceback" not in pool.log()
    assert not status_files[0].exists()


def test_secrets_never_reach_logs_status_metrics_or_state(stubs, pool_process):
    secret = "sk-c3-test-7f3a9c1e5b2d4f6a8c0e"
    backends = stubs("a", "b", extra=("--tokens", "2", "--api-key", secret))
    pool = pool_process({n: s.url for n, s in backends.items()}, "--sticky", "authorization")
    auth = {"Authorization": f"Bearer {secret}"}
    with httpx.Client(base_url=pool.url, timeout=10) as client:
        first = client.post("/v1/chat/completions", json=QUICK, headers=auth)
        assert first.status_code == 200  # the key was forwarded
        owner = first.headers["x-c3-backend"]
        backends[owner].popen.kill()  # force a repin, which is logged
        backends[owner].popen.wait(timeout=10)
        for _ in range(3):
            r = client.post("/v1/chat/completions", json=QUICK, headers=auth)
            assert r.status_code == 200 and r.headers["x-c3-backend"] != owner
        assert r.headers["x-c3-key-source"] == "authorization"
        wrong = client.post("/v1/chat/completions", json=QUICK, headers={"Authorization": "Bearer wrong"})
        assert wrong.status_code == 401
        exposed = [client.get("/c3/status").text, client.get("/metrics").text]
    cli = subprocess.run([sys.executable, "-m", "c3", "pool", "status", "--json"], cwd=ROOT, capture_output=True, text=True, timeout=30)
    exposed += [cli.stdout, cli.stderr]
    assert pool.stop() == 0
    exposed.append(pool.log())
    assert "repin key=" in pool.log()
    state = Path(os.environ["C3_STATE"])
    for path in state.rglob("*"):
        if path.is_file():
            exposed.append(path.read_bytes().decode("latin-1"))
    assert any("pins" in text for text in exposed)
    for text in exposed:
        assert secret not in text and secret[3:15] not in text
