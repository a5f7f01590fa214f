"""The live hub's history: bounded ring buffers over a time window, recorded by the sources' threads
(so it keeps growing whatever the cockpit shows), gaps instead of made-up zeros."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from backend.live import LiveState
from backend.live.engine_metrics import EngineMetrics, PodMetrics
from backend.live.history import LiveHistory
from backend.models import GpuSnapshot, Pod
from backend.runtime.context import RuntimeContext
from tests.live.fakes import GPUS, FakeProbe, FakeRuntime
from tests.support import wait_until

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def reading(second: float, util: int | None = 50, used: int | None = 12288, power: float | None = 200.0) -> list[GpuSnapshot]:
    return [GpuSnapshot(gpu=GPUS[0], taken_at=T0 + timedelta(seconds=second), used_mib=used, util_pct=util, power_w=power)]


def metrics(second: float, **values) -> dict[str, PodMetrics]:
    m = EngineMetrics(engine="vllm", taken_at=T0 + timedelta(seconds=second), **values)
    return {"chat": PodMetrics(pod="chat", metrics=m)}


def test_gpu_series_have_units_and_values():
    h = LiveHistory(clock=lambda: (T0 + timedelta(seconds=2)).timestamp())
    h.record_gpus(reading(0))
    h.record_gpus(reading(1, util=70))
    view = h.snapshot()
    util = view.get("gpu/0/util")
    assert util is not None and util.unit == "%" and [v for _, v in util.points] == [50.0, 70.0]
    assert view.get("gpu/0/mem").points[-1][1] == 50.0  # 12288 of 24576 MiB
    assert view.get("gpu/0/power").unit == "W"
    assert view.taken_at == (T0 + timedelta(seconds=2)).timestamp()


def test_window_and_capacity_bound_memory():
    h = LiveHistory(window_s=60, min_step_s=1)
    for second in range(0, 1000):
        h.record_gpus(reading(second))
    util = h.snapshot().get("gpu/0/util")
    assert len(util.points) <= 61
    assert util.points[-1][0] - util.points[0][0] <= 60
    assert h.points() <= 3 * 61


def test_a_republished_reading_is_recorded_once():
    h = LiveHistory()
    h.record_gpus(reading(0))
    h.record_gpus(reading(0))  # every source's change republishes the whole snapshot
    assert len(h.snapshot().get("gpu/0/util").points) == 1


def test_missing_values_are_gaps_not_zeros():
    h = LiveHistory()
    h.record_gpus(reading(0, util=None, power=None))
    h.record_metrics(metrics(0, running=2, waiting=None, kv_cache_pct=None, generation_tps=None), pods=["chat"])
    view = h.snapshot()
    assert view.get("gpu/0/util") is None and view.get("gpu/0/power") is None
    assert view.get("pod/chat/running").points[0][1] == 2.0
    assert view.get("pod/chat/kv") is None and view.get("pod/chat/waiting") is None


def test_a_pod_leaving_the_estate_loses_its_series():
    h = LiveHistory()
    h.record_metrics(metrics(0, running=1, kv_cache_pct=10.0), pods=["chat"])
    h.record_metrics({}, pods=[])
    assert [s.key for s in h.snapshot().series] == []


def test_hub_records_gpu_readings_while_other_sources_are_paused():
    """What the cockpit does under a modal: placement paused; the history keeps growing."""
    ctx = RuntimeContext(runtime=FakeRuntime(), probe=FakeProbe())
    live = LiveState(ctx, pods=lambda: [Pod(name="chat", slug="custom/stub", gpus=(1,), port=1)], gpu_interval_s=0.02, placement_interval_s=0.02)
    try:
        live.start()
        live.pause("placement")
        wait_until(lambda: len((live.history.snapshot().get("gpu/0/mem") or _empty()).points) >= 5, timeout=5, what="five GPU readings in the history")
        first = len(live.history.snapshot().get("gpu/0/mem").points)
        wait_until(lambda: len(live.history.snapshot().get("gpu/0/mem").points) > first, timeout=5, what="the history growing")
    finally:
        live.stop()


class _empty:
    points = ()
