"""`c3 pool drain` / `undrain` against a running router: no new sessions or unkeyed requests reach the
drained node, a stream in progress there finishes, its session re-pins on its next request once idle,
and undrain does not pull moved sessions back."""

from __future__ import annotations

import json
import subprocess
import sys
import threading

import httpx

from tests.pool.conftest import ROOT, admin_headers, stub_records, wait_until
from tests.pool.test_failover import QUICK, STREAM, pin_sessions


def c3_pool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "c3", "pool", *args], cwd=ROOT, capture_output=True, text=True, timeout=60)


def test_drain_moves_new_work_away_and_lets_the_stream_finish(stubs, pool_process):
    # The stream is held on a (X-Stub-Hold) until the checks that must happen while it runs are done:
    # no stream sized by guess to outlast them.
    backends = stubs("a", "b", extra=("--tokens", "4"))
    pool = pool_process({n: s.url for n, s in backends.items()}, "--sticky", "header:X-Session-ID")
    owners = pin_sessions(pool, 16)
    on_a = [s for s, b in owners.items() if b == "a"]
    assert on_a and len(on_a) < 16, owners
    session = on_a[0]
    box: dict = {}

    def read() -> None:
        with httpx.stream("POST", pool.url + "/v1/chat/completions", json=STREAM, headers={"X-Session-ID": session, "X-Stub-Hold": "drain"}, timeout=120) as r:
            box["backend"] = r.headers["x-c3-backend"]
            box["first"] = True
            box["body"] = "".join(r.iter_text())

    def release() -> None:
        httpx.post(backends["a"].url + "/debug/release/drain", timeout=10)

    reader = threading.Thread(target=read)
    reader.start()
    try:
        wait_until(lambda: stub_records(backends["a"].url)["held"] == {"drain": 1}, timeout=60, what="the stream held on a")
        wait_until(lambda: box.get("first"), timeout=60, what="the stream's head at the client")
        assert box["backend"] == "a"
        out = c3_pool("drain", "a", "--port", str(pool.port))
        assert out.returncode == 0, out.stderr
        assert out.stdout.startswith("draining a in pool ") and "1 in flight" in out.stdout
        assert pool.backend("a")["draining"] is True

        with httpx.Client(base_url=pool.url, timeout=20, headers=admin_headers()) as client:
            # The session with a stream in flight on a still goes to a (its cache is there).
            mid = client.post("/v1/chat/completions", json=QUICK, headers={"X-Session-ID": session})
            assert mid.status_code == 200 and (mid.headers["x-c3-backend"], mid.headers["x-c3-sticky"]) == ("a", "hit")
            assert reader.is_alive() and stub_records(backends["a"].url)["held"] == {"drain": 1}
            # New keys and unkeyed requests never reach a.
            fresh = [client.post("/v1/chat/completions", json=QUICK, headers={"X-Session-ID": f"new{i}"}) for i in range(30)]
            unkeyed = [client.post("/v1/chat/completions", json=QUICK) for _ in range(10)]
            assert {r.headers["x-c3-backend"] for r in fresh + unkeyed} == {"b"}
            # An idle session pinned to a moves at once.
            idle = client.post("/v1/chat/completions", json=QUICK, headers={"X-Session-ID": on_a[1]}) if len(on_a) > 1 else None
            if idle is not None:
                assert (idle.headers["x-c3-backend"], idle.headers["x-c3-sticky"]) == ("b", "repin")

            human = c3_pool("status")
            assert human.returncode == 0 and any(line.split()[1:3] == ["a", "draining"] for line in human.stdout.splitlines() if line.strip()), human.stdout

            release()
            reader.join(timeout=60)
            assert not reader.is_alive()
            assert box["body"].endswith("data: [DONE]\n\n") and "event: error" not in box["body"]

            # The stream is over: the session re-pins on its next request, then stays.
            after = client.post("/v1/chat/completions", json=QUICK, headers={"X-Session-ID": session})
            assert (after.headers["x-c3-backend"], after.headers["x-c3-sticky"]) == ("b", "repin")
            again = client.post("/v1/chat/completions", json=QUICK, headers={"X-Session-ID": session})
            assert (again.headers["x-c3-backend"], again.headers["x-c3-sticky"]) == ("b", "hit")

            back = c3_pool("undrain", "a", "--json")  # the only router running: no --port needed
            assert back.returncode == 0, back.stderr
            assert json.loads(back.stdout)["draining"] is False
            assert pool.backend("a")["draining"] is False
            stays = client.post("/v1/chat/completions", json=QUICK, headers={"X-Session-ID": session})
            assert (stays.headers["x-c3-backend"], stays.headers["x-c3-sticky"]) == ("b", "hit")  # no bounce-back
            later = [client.post("/v1/chat/completions", json=QUICK, headers={"X-Session-ID": f"later{i}"}) for i in range(30)]
            assert "a" in {r.headers["x-c3-backend"] for r in later}
    finally:
        release()
        reader.join(timeout=60)
    assert "Traceback" not in pool.log()


def test_drain_errors(stubs, pool_process):
    backend = stubs("a")["a"]
    pool = pool_process({"a": backend.url})
    unknown = c3_pool("drain", "ghost", "--port", str(pool.port))
    assert unknown.returncode == 1 and unknown.stderr.startswith("c3: error: the router refused: no backend `ghost`")
    assert httpx.get(pool.url + "/c3/drain?node=a", timeout=5).status_code == 405
    from backend.pool.status import admin_token

    assert httpx.post(pool.url + "/c3/drain", headers={"Authorization": f"Bearer {admin_token()}"}, timeout=5).status_code == 400
    assert pool.backend("a")["draining"] is False
    both = c3_pool("drain", "a", "--port", "1", "--bind", ":2")
    assert both.returncode == 2 and "not both" in both.stderr
    from tests.plugins.rig import free_port

    nobody = c3_pool("drain", "a", "--port", str(free_port()))
    assert nobody.returncode == 3 and nobody.stderr.startswith("c3: error: the router at ") and "Traceback" not in nobody.stderr


def test_drain_needs_the_admin_token_not_loopback(stubs, pool_process):
    """Behind a TLS proxy on the same host every request comes from loopback: loopback is no credential.
    Drain and undrain need the token `pool serve` keeps in $C3_STATE/pool/admin-token (0600)."""
    import os
    import stat

    from backend.pool.status import admin_token_file

    backend = stubs("a")["a"]
    pool = pool_process({"a": backend.url})
    for headers in ({}, {"Authorization": "Bearer " + "0" * 64}, {"Authorization": "Basic x"}):
        r = httpx.post(pool.url + "/c3/drain?node=a", headers=headers, timeout=5)
        assert r.status_code == 403 and r.json()["error"]["type"] == "permission_error", (headers, r.text)
        assert pool.backend("a")["draining"] is False
    path = admin_token_file()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    token = path.read_bytes().hex()
    r = httpx.post(pool.url + "/c3/drain?node=a", headers={"Authorization": f"Bearer {token}"}, timeout=5)
    assert r.status_code == 200 and pool.backend("a")["draining"] is True
    out = c3_pool("undrain", "a", "--port", str(pool.port), "--json")
    assert out.returncode == 0, out.stderr
    assert pool.backend("a")["draining"] is False
    assert token not in out.stdout + out.stderr and token not in pool.log()
