"""The hub's `engines` source: a serving engine costs one request a round — its /metrics scrape stands
in for the health probe — and the health path is still probed when the scrape fails, every
`health_proof_s`, and when the engine changed. A real HTTP server on loopback counts what c3 asks,
and answers with a real vLLM's /metrics body (tests/fixtures/engines)."""

from __future__ import annotations

import http.server
import threading
import time
from pathlib import Path

import pytest

from backend import http_probe
from backend.live import LiveState
from backend.models import Pod
from backend.runtime.context import RuntimeContext
from backend.runtime.models import Workload
from tests.live.fakes import FakeProbe, FakeRuntime
from tests.support import health_verdicts, wait_until

METRICS = (Path(__file__).resolve().parents[1] / "fixtures" / "engines" / "vllm-0.32.0-cpu.metrics.txt").read_bytes()


class Engine(http.server.ThreadingHTTPServer):
    """Answers /health and /metrics with the statuses the test sets, and counts every request by path."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.status = {"/health": 200, "/metrics": 200}
        self.delay_s = 0.0  # a busy engine: every answer this late
        self.gone = False
        self.asked: list[str] = []
        threading.Thread(target=self.serve_forever, daemon=True).start()

    def stop(self) -> None:
        """Gone, as a killed engine is: no listening socket, and kept-alive connections closed unanswered."""
        self.gone = True
        self.shutdown()
        self.server_close()

    def count(self, path: str) -> int:
        return sum(p == path for p in list(self.asked))


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as engines are served
    server: Engine

    def do_GET(self):  # noqa: N802
        if self.server.gone:
            self.close_connection = True
            return
        self.server.asked.append(self.path)
        time.sleep(self.server.delay_s)
        status = self.server.status.get(self.path, 404)
        body = METRICS if self.path == "/metrics" and status == 200 else b"{}"
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def engine(monkeypatch):
    monkeypatch.setattr("backend.live.hub.HEALTH_TIMEOUT_S", 0.3)  # the probe client's timeout: max(this, metrics_timeout_s)
    server = Engine()
    runtime = FakeRuntime()
    runtime.state["chat"] = Workload(pod="chat", status="running", id="c1", pids=(100,))
    pods = [Pod(name="chat", slug="custom/stub", gpus=(0,), port=server.server_address[1])]
    live = LiveState(RuntimeContext(runtime=runtime, probe=FakeProbe()), pods=lambda: pods, health_path_of=lambda p: "/health",
                     health_interval_s=0.1, metrics_interval_s=0.1, health_proof_s=1.0, metrics_timeout_s=0.3)
    live.start()
    try:
        wait_until(lambda: (p := live.latest().pods) and p[0].metrics and p[0].metrics.metrics, what="the first scrape")
        yield server, live, runtime
    finally:
        live.stop()
        server.shutdown()
        server.server_close()


def _pod(live):
    return live.latest().pods[0]


def test_a_serving_engine_costs_one_request_a_round_and_its_health_path_is_still_probed(engine):
    server, live, _runtime = engine
    metrics, health = server.count("/metrics"), server.count("/health")
    started = time.monotonic()
    # Rounds counted, not waited for by the clock: a round every 0.1 s, fewer on a busy machine.
    wait_until(lambda: server.count("/metrics") - metrics >= 10, timeout=30, what="ten scrapes")
    wait_until(lambda: server.count("/health") - health >= 1, timeout=30, what="the periodic health probe")
    elapsed = time.monotonic() - started
    scrapes, probes = server.count("/metrics") - metrics, server.count("/health") - health
    # The health path every `health_proof_s` (1 s), not every round: bounded by the time that passed,
    # not by the rounds (on a quiet machine a probe per round would be 10+ here in about a second).
    assert probes <= elapsed / 1.0 + 2, (scrapes, probes, elapsed)
    assert _pod(live).health.healthy and _pod(live).metrics.metrics.engine == "vllm"


def test_a_failing_scrape_is_backed_by_a_real_probe_in_the_same_round(engine):
    server, live, _runtime = engine
    server.status["/metrics"] = 500
    wait_until(lambda: _pod(live).metrics.error, what="the failed scrape")
    probes, scrapes = server.count("/health"), server.count("/metrics")
    # Every round now (/metrics no longer proves anything): as many probes as failed scrapes, counted
    # by rounds rather than in a fixed 0.6 s that a busy machine may fill with fewer rounds.
    wait_until(lambda: server.count("/metrics") - scrapes >= 4, timeout=30, what="four more rounds")
    assert server.count("/health") - probes >= 3
    pod = _pod(live)
    assert pod.health.healthy and pod.health.url.endswith("/health") and "HTTP 500" in pod.metrics.error


def test_an_engine_whose_server_outlives_it_is_caught_by_the_periodic_probe(engine):
    """vLLM's /health answers 503 once its engine core died, while its /metrics still answers."""
    server, live, _runtime = engine
    server.status["/health"] = 503
    started = time.monotonic()
    wait_until(lambda: not _pod(live).health.healthy, timeout=10, what="the periodic health probe")
    # Within health_proof_s (1 s) and a round, plus slack for a busy 2-core box; without the periodic
    # probe it would never be seen (the /metrics scrapes still succeed), and the wait above times out.
    assert time.monotonic() - started <= 1.0 + 0.5 + 3.0
    assert _pod(live).metrics is None  # not serving: no metrics shown


def test_a_busy_engine_that_answers_late_is_healthy_until_three_probes_in_a_row_timed_out(engine):
    """A CPU-bound engine misses a probe while it serves well (seen with the real vLLM CPU build under
    load): that is "busy", not "sick" — the third timeout in a row is, and an answer clears the count."""
    server, live, _runtime = engine
    server.delay_s = 0.6  # past the 0.3 s timeout, on /metrics and /health alike
    seen = health_verdicts(live, lambda h: not h.healthy, timeout=10)
    assert seen == [(True, 0, False), (True, 1, True), (True, 2, True), (False, 0, True)], seen
    server.delay_s = 0.0
    seen = health_verdicts(live, lambda h: h.healthy, timeout=5)
    assert seen[-1] == (True, 0, False), seen  # healthy again, its count cleared
    server.delay_s = 0.6
    seen = health_verdicts(live, lambda h: h.late == 1, timeout=5)
    assert all(healthy for healthy, _, _ in seen), seen  # the count started again from 0


def test_an_engine_that_refuses_is_unhealthy_at_once(engine):
    """Only timeouts get the grace: a closed port means the engine's server is gone."""
    server, live, _runtime = engine
    server.stop()  # returns only once its serve loop ended (up to 0.5 s): the hub may have seen it gone by then
    seen = health_verdicts(live, lambda h: not h.healthy, timeout=5)
    # Straight from healthy (when the first look came in time to see it) to unhealthy, never through "late".
    assert seen in ([(True, 0, False), (False, 0, False)], [(False, 0, False)]), seen


def test_a_changed_engine_is_probed_at_once(engine):
    server, live, runtime = engine
    server.status["/health"] = 503  # the restarted engine is loading
    runtime.state["chat"] = Workload(pod="chat", status="running", id="c1", pids=(200,))
    runtime.events_q.put({"status": "start"})
    wait_until(lambda: not _pod(live).health.healthy, timeout=0.9, what="a probe of the health path right after the restart")


def test_the_loopback_client_reuses_its_connection_and_reports_failures_as_the_probe_does():
    server = Engine()
    port = server.server_address[1]
    try:
        with http_probe.LoopbackClient(2.0) as client:
            first = http_probe.fetch(client, f"http://127.0.0.1:{port}/metrics", max_bytes=1 << 20)
            assert first.status == 200 and first.body == METRICS and not first.truncated
            cut = http_probe.fetch(client, f"http://127.0.0.1:{port}/metrics", max_bytes=100)
            assert cut.truncated and len(cut.body) == 100
            assert http_probe.fetch(client, f"http://127.0.0.1:{port}/missing").status == 404
            assert http_probe.fetch(client, "http://example.com/metrics").error == "InvalidURL"  # loopback only
    finally:
        server.shutdown()
        server.server_close()
    with http_probe.LoopbackClient(0.5) as client:
        gone = http_probe.fetch(client, f"http://127.0.0.1:{port}/metrics")
    assert gone.status is None and gone.error == "ConnectError"
