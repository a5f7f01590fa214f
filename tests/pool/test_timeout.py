"""Upstream response timeout: a backend that accepts the request but never answers (the stub engine's
hang mode, swapped in on a port the router already probed as healthy) fails before the first byte:
a held request is retried on another backend, a streamed one gets 504, and the backend turns suspect."""

from __future__ import annotations

import time

import httpx

from tests.plugins.rig import wait_for_port
from tests.pool.test_failover import QUICK, pin_sessions


def hang_on(stub_process, name: str, port: int):
    """A stub in hang mode on `port` (a later --port wins over the one the fixture picks)."""
    hung = stub_process("--name", name, "--hang", "--port", str(port), wait=False)
    assert wait_for_port("127.0.0.1", port, 30, hung.alive), hung.log()
    return hung


def test_a_silent_backend_times_out_retries_elsewhere_and_turns_suspect(stubs, stub_process, pool_process):
    backends = stubs("a", "b", extra=("--tokens", "1"))
    # Probes every 120 s: after the first (healthy) round only live traffic judges the hung backend.
    pool = pool_process({n: s.url for n, s in backends.items()}, "--sticky", "header:X-Session-ID", "--upstream-timeout", "1",
                        "--retry-body-limit", "256", probe_interval=120)
    owners = pin_sessions(pool, 12)
    session = next(s for s, b in owners.items() if b == "b")
    port = backends["b"].port
    backends["b"].stop()
    hang_on(stub_process, "b-hung", port)

    with httpx.Client(base_url=pool.url, timeout=30) as client:
        started = time.monotonic()
        r = client.post("/v1/chat/completions", json=QUICK, headers={"X-Session-ID": session})
        took = time.monotonic() - started
        assert r.status_code == 200, r.text
        assert r.headers["x-c3-backend"] == "a" and r.json()["choices"]
        assert 0.9 <= took < 20, took
        row = pool.backend("b")
        assert row["suspect"] is True and row["healthy"] is True and row["consecutive_failures"] >= 1
        assert "no response head within 1s" in row["last_error"] and row["retries"] >= 1

        # A chunked request body over --retry-body-limit is streamed to the backend, so it cannot be resent: 504.
        def body():
            yield b'{"model": "stub/model", "messages": [{"role": "user", "content": "hi%s"}], ' % (b" " * 300)
            yield b'"max_tokens": 1}'

        started = time.monotonic()
        streamed = client.post("/v1/chat/completions", content=body(), headers={"X-Session-ID": session, "Content-Type": "application/json"})
        assert streamed.status_code == 504, streamed.text
        assert streamed.json()["error"]["type"] == "c3_backend_timeout" and time.monotonic() - started < 20
    log = pool.log()
    assert "sent no response head within 1s; retrying elsewhere" in log and "Traceback" not in log


def test_a_single_silent_backend_is_a_504(stubs, stub_process, pool_process):
    backend = stubs("a", extra=("--tokens", "1"))["a"]
    pool = pool_process({"a": backend.url}, "--upstream-timeout", "1", probe_interval=120)
    port = backend.port
    backend.stop()
    hang_on(stub_process, "a-hung", port)
    r = httpx.post(pool.url + "/v1/chat/completions", json=QUICK, timeout=30)
    assert r.status_code == 504 and "no response head within 1s" in r.json()["error"]["message"]
