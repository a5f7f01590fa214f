"""`c3.live_feed.LiveFeed`: a hub snapshot reaches the cockpit only when it changes what a view shows.
The same numbers read again (a new `taken_at` on every GPU reading and every /metrics scrape) push
nothing; a changed number, a changed pod, a source going stale, or an older snapshot arriving late
are handled as said. The facade's own pod rules and GPU history are used (`RealServices` methods)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from backend.live.engine_metrics import EngineMetrics, PodMetrics
from backend.live.models import EndpointHealth, PodLive, RigSnapshot, SourceStatus
from backend.models import GpuSnapshot
from backend.runtime.models import Placement, Workload
from backend.views.live_estate import LiveEstate
from c3.live_feed import SPARK_SAMPLES, LiveFeed
from c3.services_real import RealServices
from tests.live.fakes import GPUS

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


class Live:
    """LiveEstate's own reading of a hub snapshot, without a hub or a runtime behind it."""

    rows_of = LiveEstate.rows_of
    _live_rows = LiveEstate._live_rows
    _hub = None
    path = __import__("pathlib").Path("/nonexistent/estate.yaml")


class Facade:
    """RealServices' own history and pod rules, without a runtime behind them."""

    remember_gpus = RealServices.remember_gpus
    gpu_series = RealServices.gpu_series
    pods_from = RealServices.pods_from
    _state_of = staticmethod(RealServices._state_of)
    live = Live()

    def __init__(self) -> None:
        import threading

        self._lock = threading.Lock()
        self._history: dict = {}
        self._history_at: dict = {}
        self.path = __import__("pathlib").Path("/nonexistent/estate.yaml")


def snapshot(version: int, at: datetime, *, util: int = 10, running: int = 1, healthy: bool = True, stale: bool = False) -> RigSnapshot:
    # Every scrape also takes its own time to answer (scrape_ms): drawn nowhere, so never news.
    gpus = tuple(GpuSnapshot(gpu=g, taken_at=at, used_mib=100, free_mib=24000, util_pct=util) for g in GPUS)
    workload = Workload(pod="chat", status="running", id="c1", pids=(7,), estate="/nonexistent/estate.yaml")
    metrics = PodMetrics(pod="chat", metrics=EngineMetrics(engine="vllm", taken_at=at, scrape_ms=1.0 + version % 7, running=running, waiting=0))
    health = EndpointHealth(pod="chat", url="http://127.0.0.1:8000/metrics", healthy=healthy, checked_at=at, status_code=200)
    placement = Placement(verdict="ok", requested=("GPU-0",), actual=("GPU-0",), requested_indices=(0,), actual_indices=(0,))
    pod = PodLive(name="chat", slug="vllm/qwen3-8b", gpus=(0,), port=8000, workload=workload, health=health, placement=placement, metrics=metrics)
    status = SourceStatus(name="workloads", ok=not stale, last_ok=at, stale_since=at if stale else None, error="socket gone" if stale else None)
    return RigSnapshot(taken_at=at, version=version, gpus=gpus, pods=(pod,), workloads=(workload,),
                       sources=(SourceStatus(name="gpus", ok=True, last_ok=at), status))


def feed() -> tuple[LiveFeed, list]:
    pushed: list = []
    return LiveFeed(Facade(), on_update=pushed.append), pushed


def test_the_same_numbers_read_again_push_nothing_but_freshen():
    live, pushed = feed()
    for n in range(SPARK_SAMPLES):  # the sparklines fill: each reading draws one more bar
        live(snapshot(n + 1, T0 + timedelta(seconds=n)))
    assert pushed[0].pods is not None and pushed[0].pods.pods[0].state == "serving" and pushed[0].pods.pods[0].metrics.running == 1
    count = len(pushed)
    later = T0 + timedelta(seconds=SPARK_SAMPLES + 5)
    live(snapshot(SPARK_SAMPLES + 1, later))  # new stamps everywhere, the same numbers, full sparklines
    assert len(pushed) == count
    assert live.fresh.gpus_at == later and live.fresh.pods_at == later  # the badges still age from it


def test_a_changed_number_pushes_only_its_part():
    live, pushed = feed()
    for n in range(SPARK_SAMPLES):
        live(snapshot(n + 1, T0 + timedelta(seconds=n)))
    count = len(pushed)
    live(snapshot(100, T0 + timedelta(seconds=100), running=3))
    assert len(pushed) == count + 1 and pushed[-1].gpus is None and pushed[-1].pods.pods[0].metrics.running == 3
    live(snapshot(101, T0 + timedelta(seconds=101), running=3, util=90))
    assert pushed[-1].gpus is not None and pushed[-1].gpus.snapshots[0].util_pct == 90 and pushed[-1].pods is None


def test_a_pod_that_stops_answering_and_a_stale_runtime_are_pushed():
    live, pushed = feed()
    live(snapshot(1, T0))
    live(snapshot(2, T0 + timedelta(seconds=1), healthy=False))
    assert pushed[-1].pods.pods[0].state == "booting"
    live(snapshot(3, T0 + timedelta(seconds=2), healthy=False, stale=True))
    assert pushed[-1].pods.error and "socket gone" in pushed[-1].pods.error and pushed[-1].pods.pods[0].name == "chat"
    assert live.fresh.pods_at == T0 + timedelta(seconds=1)  # a stale runtime's snapshot does not freshen the pods


def test_an_older_snapshot_arriving_late_is_dropped():
    live, pushed = feed()
    live(snapshot(5, T0 + timedelta(seconds=5), running=2))
    count = len(pushed)
    live(snapshot(4, T0 + timedelta(seconds=4), running=9))  # another source thread was slower
    assert len(pushed) == count and live.fresh.gpus_at == T0 + timedelta(seconds=5)


def test_a_stopped_pod_claims_no_placement_verdict_from_before_it_stopped():
    """Issue 25: for 1–2 s after stop-all, pods read "○ down ✓ placed": the workloads source already
    said the container was gone while the placement source still held its verdict from when it ran.
    A pod that is not running shows no verdict (as one that never ran: not running), whatever the
    last placement reading said — the mirror of a verdict from before a pod started."""
    from c3.screens.pod_view import pod_prompt

    ran = snapshot(1, T0)
    for workload in (None, ran.pods[0].workload.model_copy(update={"status": "exited"})):
        stopped = ran.pods[0].model_copy(update={"workload": workload, "health": None, "metrics": None})
        snap = ran.model_copy(update={"version": 2, "pods": (stopped,), "workloads": () if workload is None else (workload,)})
        assert snap.pods[0].placement.verdict == "ok"  # the placement source has not read again yet
        [pod] = Facade().pods_from(snap)
        assert pod.state == ("down" if workload is None else "failed")
        assert pod.placement == "unknown", pod
        assert "✓ placed" not in pod_prompt(pod, {}).plain
