"""The live hub: stamped immutable snapshots, stale marking, event-driven workloads, health, placement."""

from __future__ import annotations

import http.server
import threading
import time

import pytest

from backend.live import LiveState
from backend.live.health import check_all
from backend.live.hub import HEALTH_TIMEOUT_S
from backend.live.source import Source
from backend.models import ComputeProcess, Pod
from backend.runtime.context import RuntimeContext
from backend.runtime.models import Workload
from tests.live.fakes import FakeProbe, FakeRuntime
from tests.support import wait_until


def test_source_marks_stale_keeps_last_value_and_recovers():
    box = {"fail": False, "n": 0}

    def fetch():
        box["n"] += 1
        if box["fail"]:
            raise OSError("socket gone\nsecond line")
        return box["n"]

    s = Source("x", fetch)
    assert s.step() and s.value == 1 and not s.status.stale
    box["fail"] = True
    assert not s.step()
    first = s.status.stale_since
    assert s.status.stale and s.status.error == "socket gone" and s.value == 1
    assert not s.step() and s.status.stale_since == first  # since the FIRST failure
    box["fail"] = False
    assert s.step() and not s.status.stale and s.status.last_ok is not None


@pytest.fixture
def hub():
    probe, runtime = FakeProbe(), FakeRuntime()
    ctx = RuntimeContext(runtime=runtime, probe=probe)
    pods = [Pod(name="chat", slug="custom/stub", gpus=(1,), port=1)]
    live = LiveState(ctx, pods=lambda: pods, gpu_interval_s=0.05, health_interval_s=0.05, placement_interval_s=0.05)
    yield live, probe, runtime
    live.stop()


def test_hub_snapshots_are_stamped_and_sources_fail_independently(hub):
    live, probe, runtime = hub
    seen = []
    unsubscribe = live.subscribe(seen.append)
    changes = live.changes()
    live.start()
    snap = wait_until(lambda: (s := live.latest()).gpus and s.source("workloads").ok and s)
    assert snap.version > 0 and snap.taken_at.tzinfo is not None
    assert [g.gpu.index for g in snap.gpus] == [0, 1]
    assert changes.get(timeout=5).version >= 1
    probe.fail = True
    stale = wait_until(lambda: (s := live.latest()).source("gpus").stale and s)
    assert "GPU_IS_LOST" in stale.source("gpus").error
    assert stale.gpus, "the last good GPU reading stays on screen, marked stale"
    assert stale.source("workloads").ok
    probe.fail = False
    wait_until(lambda: not live.latest().source("gpus").stale)
    unsubscribe()
    count = len(seen)
    time.sleep(0.2)
    assert len(seen) == count


def test_hub_follows_container_events_and_judges_placement(hub):
    live, probe, runtime = hub
    live.start()
    wait_until(lambda: live.latest().source("workloads").ok)
    runtime.state["chat"] = Workload(pod="chat", status="running", gpu_uuids=("GPU-1",))
    probe.procs = [ComputeProcess(pid=500, gpu_uuid="GPU-0")]
    runtime.owner_map = {500: "chat"}
    runtime.events_q.put({"status": "start"})
    snap = wait_until(lambda: (s := live.latest()).pods and s.pods[0].placement and s.pods[0].placement.verdict == "mismatch" and s)
    assert snap.pods[0].workload.running
    assert snap.pods[0].placement.extra == ("GPU-0",) and snap.pods[0].placement.missing == ("GPU-1",)
    # The stream breaks (daemon restart): the source re-lists and reconnects.
    opened = runtime.streams_opened
    runtime.events_q.put(ConnectionError("stream closed"))
    wait_until(lambda: runtime.streams_opened > opened)
    del runtime.state["chat"]
    runtime.events_q.put({"status": "destroy"})
    wait_until(lambda: (p := live.latest().pods) and p[0].workload is None)
    live.pause("gpus")
    assert live.latest().source("gpus").paused
    live.resume("gpus")


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802
        self.send_response(200 if self.path == "/v1/models" else 503)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_health_checks_real_loopback_endpoints():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        port = server.server_address[1]
        with __import__("socket").socket() as closed:
            closed.bind(("127.0.0.1", 0))
            dead = closed.getsockname()[1]
        result = check_all([("a", f"http://127.0.0.1:{port}/v1/models"), ("b", f"http://127.0.0.1:{port}/loading"), ("c", f"http://127.0.0.1:{dead}/v1/models")])
    finally:
        server.shutdown()
        server.server_close()
    assert result["a"].healthy and result["a"].status_code == 200 and result["a"].latency_ms is not None
    assert not result["b"].healthy and result["b"].status_code == 503
    assert not result["c"].healthy and result["c"].error


def test_a_restarted_engine_is_probed_at_once_not_at_the_next_health_tick():
    """SIGKILL an engine that served and Docker restarts its container (`unless-stopped`) within ~0.1 s:
    the workloads source sees the same container running again, with a new pid. The hub must probe its
    health at once (the 2 s in which the cockpit announces trouble do not wait for the health tick)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    runtime = FakeRuntime()
    runtime.state["chat"] = Workload(pod="chat", status="running", id="c1", pids=(100,))
    pods = [Pod(name="chat", slug="custom/stub", gpus=(0,), port=server.server_address[1])]
    live = LiveState(RuntimeContext(runtime=runtime, probe=FakeProbe()), pods=lambda: pods, health_interval_s=60, metrics_interval_s=60)
    try:
        live.start()
        wait_until(lambda: (p := live.latest().pods) and p[0].health and p[0].health.healthy, what="the first healthy probe")
        server.shutdown()
        server.server_close()  # the restarted engine is still loading: its port refuses
        runtime.state["chat"] = Workload(pod="chat", status="running", id="c1", pids=(200,))
        runtime.events_q.put({"status": "start"})
        wait_until(lambda: not live.latest().pods[0].health.healthy, timeout=2, what="a fresh probe after the restart")
    finally:
        live.stop()


class _Flaky:
    """A subscriber that raises while `broken` is set and records what it saw."""

    def __init__(self) -> None:
        self.broken = True
        self.seen: list[int] = []

    def __call__(self, snap) -> None:
        if self.broken:
            raise ValueError("widget gone\nsecond line of detail")
        self.seen.append(snap.version)


def test_a_failing_subscriber_is_logged_once_per_streak_and_the_others_still_get_snapshots(hub, caplog):
    import logging

    live, _probe, _runtime = hub
    flaky, healthy = _Flaky(), []
    live.subscribe(flaky)
    live.subscribe(healthy.append)
    changes = live.changes()
    caplog.set_level(logging.DEBUG, logger="c3.live")

    def records(level):
        return [r for r in caplog.records if r.name == "c3.live" and r.levelno == level]

    for _ in range(3):  # snapshots assembled by hand: deterministic, no source threads
        live.pause("gpus")
    assert len(healthy) == 3 and changes.qsize() == 3  # the hub kept delivering past the bad subscriber
    warnings = records(logging.WARNING)
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    line = warnings[0].getMessage()
    assert "_Flaky" in line and "ValueError: widget gone" in line and "\n" not in line and warnings[0].exc_info is None
    debugs = records(logging.DEBUG)
    assert len(debugs) == 3 and all(r.exc_info and r.exc_info[0] is ValueError for r in debugs)
    assert "Traceback" in caplog.text and "second line of detail" in caplog.text  # the full story, at debug

    flaky.broken = False
    live.pause("gpus")
    assert flaky.seen == [live.latest().version]
    flaky.broken = True
    live.pause("gpus")
    assert len(records(logging.WARNING)) == 2  # a new streak warns again


def test_hub_threads_survive_a_subscriber_that_always_raises(hub, caplog):
    import logging

    live, _probe, _runtime = hub
    caplog.set_level(logging.WARNING, logger="c3.live")
    live.subscribe(lambda snap: 1 / 0)
    live.start()
    first = wait_until(lambda: (s := live.latest()).version >= 2 and s.source("gpus").ok and s)
    later = wait_until(lambda: (s := live.latest()).version >= first.version + 5 and s)
    assert all(not st.stale for st in later.sources if st.name != "engines")
    alive = {t.name for t in threading.enumerate() if t.is_alive()}
    assert {"c3-live-gpus", "c3-live-placement"} <= alive, alive
    warned = [r for r in caplog.records if r.name == "c3.live" and r.levelno == logging.WARNING]
    assert len(warned) == 1 and "ZeroDivisionError" in warned[0].getMessage()


def test_a_metrics_scrape_past_its_timeout_keeps_the_last_numbers_with_their_age():
    """A busy engine (vLLM on CPU under load) can answer /metrics after the timeout. The failed scrape
    must not blank the pod's engine line: the last numbers stay, with when they were read and why the
    new scrape failed; the history gets no copy of them; after `metrics_keep_s` they are dropped."""
    from pathlib import Path

    body = (Path(__file__).parents[1] / "fixtures" / "engines" / "vllm-0.32.0-cpu.metrics.txt").read_bytes()
    slow = threading.Event()

    class Metrics(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            if slow.is_set() and self.path == "/metrics":  # the engine works hard; its HTTP server still answers
                time.sleep(HEALTH_TIMEOUT_S + 0.3)
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            try:
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):  # the client gave up: the timeout under test
                pass

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Metrics)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    pods = [Pod(name="chat", slug="custom/stub", gpus=(0,), port=server.server_address[1])]
    try:
        for keep_s, kept in ((30.0, True), (0.0, False)):
            slow.clear()
            live = LiveState(RuntimeContext(runtime=FakeRuntime(), probe=FakeProbe()), pods=lambda: pods,
                             metrics_interval_s=0.0, metrics_timeout_s=0.2, metrics_keep_s=keep_s)
            live._planned()
            live.sources["workloads"].value = {"chat": Workload(pod="chat", status="running")}
            engines = live.sources["engines"]
            assert engines.step()  # probed healthy, then scraped at once
            first = engines.value.metrics["chat"]
            assert first.error is None and first.metrics is not None and first.metrics.scrape_ms is not None
            live._record(engines)
            slow.set()
            assert engines.step()  # the scrape times out; the health path still answers
            assert engines.value.health["chat"].healthy
            second = engines.value.metrics["chat"]
            assert second.error and "timed out" in second.error
            live._record(engines)
            if kept:
                assert second.metrics == first.metrics  # the same reading, its taken_at unchanged: its age shows
                points = [s.points for s in live.history.snapshot().series if s.key == "pod/chat/running"]
                assert points and len(points[0]) == 1  # the carried numbers are not a new point
            else:
                assert second.metrics is None
            live.stop()
    finally:
        server.shutdown()
        server.server_close()


def test_the_gpu_poller_lets_process_lists_age_to_half_a_tick_short_of_a_placement_round():
    """Placement is judged every 2 s; the GPU poller ticks every 1 s. Process lists (NVML's dearest query)
    may be repeated up to 1.5 s — read on every other tick, never older than a placement round."""
    from backend.live.hub import LiveState
    from backend.runtime.context import RuntimeContext
    from tests.live.fakes import FakeProbe, FakeRuntime

    probe = FakeProbe()
    live = LiveState(RuntimeContext(runtime=FakeRuntime(), probe=probe))
    live._read_gpus()
    assert probe.max_ages == [1.5]
    fast = FakeProbe()
    LiveState(RuntimeContext(runtime=FakeRuntime(), probe=fast), gpu_interval_s=0.5, placement_interval_s=0.5)._read_gpus()
    assert fast.max_ages == [0.25]
