"""`c3 demo` starts the demo's gateway: a real `c3 gateway serve` over the demo's estate, on loopback, so the
quickstart can show a pod booted by its first request. It is the demo's, so it stops with the last demo."""

from __future__ import annotations

import json
import socket
import time

import httpx
import pytest

pytestmark = pytest.mark.usefixtures("demo_world")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_models(port: int, timeout_s: float = 30.0) -> list[str]:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            answer = httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=2.0)
            if answer.status_code == 200:
                return [m["id"] for m in answer.json()["data"]]
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, f"the demo's gateway did not answer on :{port} in {timeout_s:.0f} s"
        time.sleep(0.2)


def running() -> set[str]:
    from backend.sim.runtime import SimRuntime

    return {name for name, w in SimRuntime().workloads().items() if w.running}


def test_the_demo_starts_its_gateway_which_boots_a_pod_on_demand_and_stops_with_the_last_demo():
    from backend.runtime import cgroup
    from backend.sim.demo import _gateway_record
    from backend.sim.runtime import SimRuntime
    from c3.services_real import build_services

    port = free_port()
    services = build_services(demo=True, demo_gateway_port=port)
    try:
        assert services.startup_notice == (
            f"The demo's gateway answers on http://127.0.0.1:{port} (one model name per pod; a stopped pod boots on demand)"
        )
        assert "coder" in wait_for_models(port)
        pid = json.loads(_gateway_record().read_text())["pid"]
        # A second demo finds it running and starts none.
        again = build_services(demo=True, demo_gateway_port=free_port())
        assert again.startup_notice is not None and f"127.0.0.1:{port}" in again.startup_notice
        assert json.loads(_gateway_record().read_text())["pid"] == pid
        again.close()
        assert cgroup.start_time(pid) is not None, "a demo that was not the last one stopped the gateway"

        SimRuntime().stop("coder", timeout=5.0)
        assert "coder" not in running()
        answer = httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", timeout=60.0,
                            json={"model": "coder", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4})
        assert answer.status_code == 200, answer.text
        assert answer.json()["choices"][0]["message"]["content"]
        assert "coder" in running(), "the gateway answered without booting the stopped pod"
    finally:
        services.close()
    deadline = time.monotonic() + 10
    while cgroup.start_time(pid) is not None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert cgroup.start_time(pid) is None, "the last demo left and its gateway still runs"
    assert running() == set()


def test_a_taken_port_leaves_the_demo_without_a_gateway_and_says_so():
    from c3.services_real import build_services

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        services = build_services(demo=True, demo_gateway_port=port)
        try:
            assert services.startup_notice == f"Port {port} is taken: this demo runs without its gateway (c3 demo --gateway-port N picks another)"
        finally:
            services.close()
