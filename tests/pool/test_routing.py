"""The router on loopback in front of real stub engines: stickiness per mode, bounded load, pass-through."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from collections import Counter, defaultdict

import httpx
import pytest

from tests.pool.conftest import ROOT, admin_headers, chat, raw_request, stub_records, wait_until

MODES = {
    "auto": ("x-session-id", lambda k: {"X-Session-ID": k}),
    "authorization": ("authorization", lambda k: {"Authorization": f"Bearer sk-{k}"}),
    "header:X-Conversation": ("x-conversation", lambda k: {"X-Conversation": k}),
}


@pytest.mark.parametrize("mode", list(MODES))
def test_each_key_always_reaches_the_same_backend(mode, shared_stubs, pool_process):
    backends = shared_stubs("a", "b", "c", extra=("--tokens", "2"))
    pool = pool_process({n: s.url for n, s in backends.items()}, "--sticky", mode)
    source, header = MODES[mode]
    seen: dict[str, set[str]] = defaultdict(set)
    outcomes = Counter()
    with httpx.Client(base_url=pool.url, timeout=10, headers=admin_headers()) as client:
        for _round in range(5):
            for i in range(20):
                r = chat(client, header(f"key-{i}"))
                assert r.status_code == 200, r.text
                assert r.headers["x-c3-backend"] == r.headers["x-stub-backend"]
                assert r.headers["x-c3-key-source"] == source
                outcomes[r.headers["x-c3-sticky"]] += 1
                seen[f"key-{i}"].add(r.headers["x-c3-backend"])
    assert all(len(v) == 1 for v in seen.values()), seen
    assert outcomes == {"miss": 20, "hit": 80}
    assert len({next(iter(v)) for v in seen.values()}) == 3  # 20 keys spread over all three
    status = pool.status()
    assert status["pins"] == 20 and status["sticky_outcomes"]["hit"] == 80


def test_auto_falls_back_to_authorization_then_to_load(shared_stubs, pool_process):
    backends = shared_stubs("a", "b", extra=("--tokens", "2"))
    pool = pool_process({n: s.url for n, s in backends.items()}, "--sticky", "auto")
    def head(extra: bytes) -> bytes:
        admin = b"X-C3-Admin: %s\r\n" % admin_headers()["X-C3-Admin"].encode()
        raw = raw_request(pool.port, b"GET /v1/models HTTP/1.1\r\nHost: x\r\n" + admin + extra + b"Connection: close\r\n\r\n")
        return raw.partition(b"\r\n\r\n")[0].lower()

    blank_session = head(b"X-Session-ID:   \r\nAuthorization: Bearer sk-one\r\n")
    assert b"x-c3-key-source: authorization" in blank_session and b"x-c3-sticky: miss" in blank_session
    nothing = head(b"X-Session-ID:\r\nAuthorization: \r\n")
    assert b"x-c3-key-source: none" in nothing and b"x-c3-sticky: none" in nothing


def test_sticky_none_balances_by_load(shared_stubs, pool_process):
    backends = shared_stubs("a", "b", "c", extra=("--tokens", "2"))
    pool = pool_process({n: s.url for n, s in backends.items()}, "--sticky", "none")
    hits = Counter()
    with httpx.Client(base_url=pool.url, timeout=10, headers=admin_headers()) as client:
        for i in range(60):
            r = chat(client, {"X-Session-ID": f"s{i % 2}", "Authorization": "Bearer sk-x"})
            assert r.headers["x-c3-sticky"] == "none" and r.headers["x-c3-key-source"] == "none"
            hits[r.headers["x-c3-backend"]] += 1
    assert set(hits) == {"a", "b", "c"}, hits
    assert pool.status()["pins"] == 0


def test_bounded_load_spreads_300_new_sessions(shared_stubs, pool_process):
    backends = shared_stubs("a", "b", "c", extra=("--tokens", "1"))
    pool = pool_process({n: s.url for n, s in backends.items()})
    per_backend = Counter()
    with httpx.Client(base_url=pool.url, timeout=10, headers=admin_headers()) as client:
        for i in range(300):
            r = client.get("/v1/models", headers={"X-Session-ID": f"session-{i}"})
            assert r.status_code == 200 and r.headers["x-c3-sticky"] == "miss"
            per_backend[r.headers["x-c3-backend"]] += 1
    cap = math.ceil(1.25 * 300 / 3)
    assert max(per_backend.values()) <= cap, per_backend
    pins = {b["node"]: b["pins"] for b in pool.status()["backends"]}
    assert pins == dict(per_backend) and max(pins.values()) <= cap


def test_4xx_passes_through_verbatim_without_retry(shared_stubs, pool_process):
    backends = shared_stubs("a", "b")
    pool = pool_process({n: s.url for n, s in backends.items()})
    with httpx.Client(base_url=pool.url, timeout=10) as client:
        r = client.post("/v1/chat/completions", json={"model": "no-such-model", "messages": []}, headers={"X-Session-ID": "k"})
        direct = httpx.post(backends[r.headers["x-c3-backend"]].url + "/v1/chat/completions", json={"model": "no-such-model", "messages": []})
        assert r.status_code == 404 and r.content == direct.content
        assert client.get("/nope").status_code == 404
    received = {n: sum(1 for q in stub_records(s.url)["requests"] if q["path"] == "/v1/chat/completions") for n, s in backends.items()}
    assert sorted(received.values()) == [0, 2], received  # one through the router, one direct; no retry
    assert sum(b["retries"] for b in pool.status()["backends"]) == 0


def test_503_is_retried_on_another_backend(shared_stubs, scripted, pool_process):
    busy = scripted("busy", status=503)
    ok = shared_stubs("ok", extra=("--tokens", "1"))["ok"]
    pool = pool_process({"busy": busy.url, "ok": ok.url}, "--sticky", "none")
    with httpx.Client(base_url=pool.url, timeout=10) as client:
        results = [chat(client) for _ in range(6)]
    assert all(r.status_code == 200 and r.headers["x-c3-backend"] == "ok" for r in results)
    assert busy.requests, "the 503 backend was never tried"
    status = {b["node"]: b for b in pool.status()["backends"]}
    assert status["busy"]["retries"] == len(busy.requests) and status["busy"]["errors"] >= 1


def test_sse_is_relayed_byte_for_byte(scripted, pool_process):
    chunks = [b'data: {"n": %d, "text": "caf\xc3\xa9 \\u00e9"}\n\n' % i for i in range(5)] + [b"data: [DONE]\n\n"]
    backend = scripted("sse", stream_chunks=chunks, chunk_delay=0.05)
    pool = pool_process({"sse": backend.url})
    request = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"
    import socket

    arrivals = []
    raw = b""
    with socket.create_connection(("127.0.0.1", pool.port), timeout=10) as sock:
        sock.sendall(request)
        while piece := sock.recv(65536):
            arrivals.append(time.monotonic())
            raw += piece
    assert arrivals[-1] - arrivals[0] > 0.06  # chunks came as they were produced, not all at the end
    head, _, body = raw.partition(b"\r\n\r\n")
    expected = b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in chunks) + b"0\r\n\r\n"
    assert body == expected
    assert b"X-C3-Backend: sse" in head and b"Transfer-Encoding: chunked" in head


def test_large_and_chunked_request_bodies(shared_stubs, pool_process):
    backend = shared_stubs("a", extra=("--tokens", "1"))["a"]
    pool = pool_process({"a": backend.url})
    big = json.dumps({"model": "stub/model", "messages": [{"role": "user", "content": "x" * (12 * 1024 * 1024)}]}).encode()

    def pieces():
        for i in range(0, len(big), 1 << 20):
            yield big[i : i + (1 << 20)]

    with httpx.Client(base_url=pool.url, timeout=60) as client:
        r = client.post("/v1/chat/completions", content=big, headers={"Content-Type": "application/json"})
        assert r.status_code == 200, r.text
        r = client.post("/v1/chat/completions", content=pieces(), headers={"Content-Type": "application/json"})
        assert r.status_code == 200, r.text
    sizes = [q["body_bytes"] for q in stub_records(backend.url)["requests"] if q["path"] == "/v1/chat/completions"]
    assert sizes == [len(big), len(big)]


def test_metrics_and_status_reflect_traffic(shared_stubs, pool_process):
    backends = shared_stubs("a", "b", extra=("--tokens", "1"))
    pool = pool_process({n: s.url for n, s in backends.items()})
    with httpx.Client(base_url=pool.url, timeout=10) as client:
        for _ in range(10):
            chat(client, {"X-Session-ID": "same"})
        text = client.get("/metrics").text
    assert 'c3_pool_sticky_total{outcome="hit"} 9' in text
    assert "c3_pool_sticky_hit_ratio 0.900000" in text
    served = [b for b in pool.status()["backends"] if b["requests"]]
    assert len(served) == 1 and served[0]["requests"] == 10 and served[0]["pins"] == 1
    assert served[0]["latency_ms"]["p50"] is not None


def test_cli_status_reads_the_running_router(shared_stubs, pool_process):
    backends = shared_stubs("a", "b", extra=("--tokens", "1"))
    pool = pool_process({n: s.url for n, s in backends.items()})
    httpx.get(pool.url + "/v1/models", headers={"X-Session-ID": "s"}, timeout=10)
    out = subprocess.run([sys.executable, "-m", "c3", "pool", "status", "--json"], cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    rows = {b["node"]: b for b in doc["backends"]}
    assert set(rows) == {"a", "b"}
    for row in rows.values():
        assert {"node", "url", "healthy", "in_flight", "requests", "errors", "latency_ms", "pins"} <= set(row)
        assert row["healthy"] is True
    assert sum(r["requests"] for r in rows.values()) == 1
    human = subprocess.run([sys.executable, "-m", "c3", "pool", "status"], cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert human.returncode == 0 and "a " in human.stdout and backends["a"].url in human.stdout


def test_cli_errors_are_one_line(tmp_path):
    def run(*args):
        return subprocess.run([sys.executable, "-m", "c3", "pool", *args], cwd=ROOT, capture_output=True, text=True, timeout=30)

    none = run("status")
    assert none.returncode == 1 and none.stderr.startswith("c3: error: no pool router is running")
    missing = run("serve", "--nodes", "ghost")
    assert missing.returncode == 1 and "not registered" in missing.stderr and "Traceback" not in missing.stderr
    bad = run("serve", "--nodes", "a", "--sticky", "cookie")
    assert bad.returncode == 2 and bad.stderr.startswith("c3: error: --sticky")
    bad_bind = run("install-service", "--nodes", "a", "--bind", "nowhere", "--dry-run")
    assert bad_bind.returncode == 2 and "--bind" in bad_bind.stderr


def test_install_service_dry_run_shows_the_unit(stubs, pool_process, tmp_path):
    from tests.pool.conftest import register

    register("a", "http://127.0.0.1:1")
    register("b", "http://127.0.0.1:2")
    out = subprocess.run([sys.executable, "-m", "c3", "pool", "install-service", "--nodes", "a,b", "--bind", ":8123", "--sticky", "authorization", "--dry-run"],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "c3-pool-8123.service" in out.stdout
    assert "pool serve --nodes a,b --bind :8123 --sticky authorization" in out.stdout
    assert "dry run: nothing written" in out.stdout


def test_router_admin_is_read_only(shared_stubs, pool_process):
    backend = shared_stubs("a")["a"]
    pool = pool_process({"a": backend.url})
    assert httpx.post(pool.url + "/c3/status", timeout=5).status_code == 405
    assert httpx.get(pool.url + "/c3/health", timeout=5).json() == {"routable_backends": 1}
    wait_until(lambda: pool.backend("a")["last_probe_rtt_ms"] is not None, what="a probe")


def test_install_service_writes_a_verified_unit(tmp_path):
    from tests.pool.conftest import register

    register("a", "http://127.0.0.1:1")
    out = subprocess.run([sys.executable, "-m", "c3", "pool", "install-service", "--nodes", "a", "--bind", "127.0.0.1:8124",
                          "--unit-dir", str(tmp_path / "units")], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    unit = tmp_path / "units" / "c3-pool-8124.service"
    assert unit.exists() and "--bind 127.0.0.1:8124" in unit.read_text()
    assert out.stdout.index("[Service]") < out.stdout.index(f"wrote {unit}")  # shown before written
    assert "enable --now c3-pool-8124.service" in out.stdout


def test_pins_survive_a_router_restart(shared_stubs, pool_process):
    backends = shared_stubs("a", "b", extra=("--tokens", "1"))
    nodes = {n: s.url for n, s in backends.items()}
    pool = pool_process(nodes)
    owners = {}
    with httpx.Client(base_url=pool.url, timeout=10) as client:
        for i in range(6):
            owners[f"s{i}"] = client.get("/v1/models", headers={"X-Session-ID": f"s{i}"}).headers["x-c3-backend"]
    assert pool.stop() == 0
    again = pool_process(nodes, port=pool.port)  # pins are kept per port
    assert "restored 6 pins" in again.log()
    with httpx.Client(base_url=again.url, timeout=10, headers=admin_headers()) as client:
        for session, owner in owners.items():
            r = client.get("/v1/models", headers={"X-Session-ID": session})
            assert (r.headers["x-c3-backend"], r.headers["x-c3-sticky"]) == (owner, "hit")


def test_no_routable_backend_is_a_clean_503(pool_process):
    pool = pool_process({"dead": "http://127.0.0.1:1"})
    r = httpx.get(pool.url + "/v1/models", timeout=10)
    assert r.status_code == 503 and r.headers["retry-after"] == "1"
    assert r.json()["error"]["type"] == "c3_no_backend"
    assert httpx.get(pool.url + "/c3/health", timeout=5).status_code == 503
    assert pool.backend("dead")["state"] == "down"


def test_expect_100_continue_is_answered_by_the_router(shared_stubs, pool_process):
    backend = shared_stubs("a", extra=("--tokens", "1"))["a"]
    pool = pool_process({"a": backend.url})
    body = json.dumps({"model": "stub/model", "messages": []}).encode()
    import socket

    with socket.create_connection(("127.0.0.1", pool.port), timeout=10) as sock:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nConnection: close\r\n"
                     b"Content-Length: %d\r\n\r\n" % len(body))
        assert sock.recv(100).startswith(b"HTTP/1.1 100 Continue\r\n\r\n")
        sock.sendall(body)
        raw = b""
        while piece := sock.recv(65536):
            raw += piece
    assert raw.startswith(b"HTTP/1.1 200") and b"chat.completion" in raw
    assert not any("expect" in q["headers"] for q in stub_records(backend.url)["requests"])


def test_probe_falls_back_to_models_and_503_means_loading_with_hysteresis(scripted, pool_process):
    backend = scripted("x", health=404)
    pool = pool_process({"x": backend.url}, probe_interval=0.1)
    wait_until(lambda: pool.backend("x")["state"] == "up", what="x up through /v1/models")
    backend.health, backend.status = 503, 503  # /health is 404 → /v1/models answers 503: loading
    state = wait_until(lambda: (b := pool.backend("x"))["state"] == "loading" and b, timeout=10, what="x loading")
    assert state["healthy"] is False and state["consecutive_failures"] >= 3
    r = httpx.get(pool.url + "/v1/models", timeout=5)
    assert r.status_code == 503 and r.json()["error"]["type"] == "c3_no_backend"
    backend.status = 200
    wait_until(lambda: pool.backend("x")["state"] == "up", timeout=10, what="x up again after 2 good probes")
    assert httpx.get(pool.url + "/v1/models", timeout=5).headers["x-c3-backend"] == "x"


def test_sticky_outcome_is_shown_only_to_the_admin_token(shared_stubs, pool_process):
    """`X-C3-Sticky` says whether a key was a hit: told to a stranger, it confirms a guessed session key
    (issue 26). Only a request presenting the router's admin token in `X-C3-Admin` gets it, and that
    header never reaches a backend."""
    from backend.pool.status import admin_token

    backends = shared_stubs("a", "b")
    pool = pool_process({n: s.url for n, s in backends.items()}, "--sticky", "auto")
    token = admin_token()
    assert token
    with httpx.Client(base_url=pool.url, timeout=10) as client:
        for headers in ({}, {"X-C3-Admin": "0" * len(token)}, {"X-C3-Admin": ""}, {"Authorization": f"Bearer {token}"}):
            r = chat(client, headers={"X-Session-ID": "guessed", **headers})
            assert r.status_code == 200 and "x-c3-sticky" not in r.headers and r.headers["x-c3-backend"] in backends, r.headers
        r = chat(client, headers={"X-Session-ID": "guessed", "X-C3-Admin": token})
        assert r.headers["x-c3-sticky"] == "hit", r.headers
    seen = [rec["headers"] for s in backends.values() for rec in stub_records(s.url)["requests"] if rec["path"] == "/v1/chat/completions"]
    assert len(seen) == 5 and not any("x-c3-admin" in h for h in seen)
    assert token not in pool.log()
