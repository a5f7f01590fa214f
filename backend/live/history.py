"""Bounded history of what the live hub reads: per GPU util/memory/power, per serving pod the engine's
running/waiting requests, KV-cache use and generation tok/s.

It lives in the hub, not in a screen, so it keeps recording while the cockpit shows a modal or
another mode. Each series is a ring buffer of (wall time, value); a reading older than the window is
dropped on the next append, and a series is capped at `window_s / min_step_s` points whatever the
readers' cadence, so memory stays bounded (8 GPUs × 3 + 16 pods × 4 series × 600 points ≈ 1 MB).
A pod that leaves the estate loses its series at the next metrics reading.

    history = LiveHistory(window_s=600)
    history.record_gpus(snapshots)          # the hub's GPU thread
    history.record_metrics(pod_metrics)     # the hub's engines thread
    history.snapshot()                      # any thread: an immutable `HistoryView`
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict

from backend.live.engine_metrics import PodMetrics
from backend.models import GpuSnapshot

WINDOW_S = 600.0
"""Ten minutes: long enough to see a load ramp or a leak, short enough to stay in memory."""
MIN_STEP_S = 1.0
"""The fastest reader (GPUs every second): fixes each series' capacity."""

GPU_SERIES: tuple[tuple[str, str, str], ...] = (("util", "GPU util", "%"), ("mem", "memory", "%"), ("power", "power", "W"))
POD_SERIES: tuple[tuple[str, str, str], ...] = (
    ("running", "running", "req"), ("waiting", "waiting", "req"), ("kv", "KV cache", "%"), ("gen_tps", "generation", "tok/s"),
)


class Series(BaseModel):
    """One recorded quantity over the window, oldest point first."""

    model_config = ConfigDict(frozen=True)

    key: str
    """`gpu/0/util`, `pod/chat/kv`…: what it measures, addressable."""
    label: str
    """Human name, e.g. `GPU0 util`."""
    unit: str
    """`%`, `W`, `req`, `tok/s`."""
    points: tuple[tuple[float, float], ...] = ()
    """(wall time in epoch seconds, value), oldest first."""


class HistoryView(BaseModel):
    """Every series at one moment; what the cockpit's history view draws."""

    model_config = ConfigDict(frozen=True)

    taken_at: float
    """Epoch seconds when this view was made: the right edge (`now`) of every chart."""
    window_s: float
    """How far back the series go at most."""
    series: tuple[Series, ...] = ()
    """GPU series (index order), then pod series (pod name order)."""

    def get(self, key: str) -> Series | None:
        """A series by key."""
        return next((s for s in self.series if s.key == key), None)


class LiveHistory:
    """Thread-safe ring buffers, one per series; appends are O(1), a snapshot copies."""

    def __init__(self, *, window_s: float = WINDOW_S, min_step_s: float = MIN_STEP_S, clock: Callable[[], float] = time.time) -> None:
        self.window_s = window_s
        self.capacity = max(2, int(window_s / min_step_s) + 1)
        self._clock = clock
        self._lock = threading.Lock()
        self._series: dict[str, tuple[str, str, deque[tuple[float, float]]]] = {}

    def _append(self, key: str, label: str, unit: str, when: float, value: float | None) -> None:
        if value is None:  # not exported / not measured: a gap, never a made-up zero
            return
        entry = self._series.get(key)
        if entry is None:
            entry = self._series[key] = (label, unit, deque(maxlen=self.capacity))
        points = entry[2]
        if points and when <= points[-1][0]:
            return  # the same reading published twice (every source's change republishes the snapshot)
        points.append((when, float(value)))
        horizon = when - self.window_s
        while points and points[0][0] < horizon:
            points.popleft()

    def record_gpus(self, snapshots: Iterable[GpuSnapshot]) -> None:
        """One point per GPU and quantity, stamped with the reading's own time."""
        with self._lock:
            for snap in snapshots:
                index = snap.gpu.index
                total = snap.gpu.total_mib or 0
                mem = 100.0 * snap.used_mib / total if total and snap.used_mib is not None else None
                when = snap.taken_at.timestamp()
                values = {"util": snap.util_pct, "mem": mem, "power": snap.power_w}
                for name, label, unit in GPU_SERIES:
                    self._append(f"gpu/{index}/{name}", f"GPU{index} {label}", unit, when, values[name])

    def record_metrics(self, metrics: Mapping[str, PodMetrics], *, pods: Iterable[str]) -> None:
        """One point per serving pod and quantity; series of pods no longer in `pods` are dropped."""
        keep = set(pods)
        with self._lock:
            for key in [k for k in self._series if k.startswith("pod/") and k.split("/")[1] not in keep]:
                del self._series[key]
            for name, reading in metrics.items():
                m = reading.metrics
                if m is None or reading.error:  # no scrape, or the last numbers carried past a failed one: not a new point
                    continue
                when = m.taken_at.timestamp()
                values = {"running": m.running, "waiting": m.waiting, "kv": m.kv_cache_pct, "gen_tps": m.generation_tps}
                for field, label, unit in POD_SERIES:
                    self._append(f"pod/{name}/{field}", f"{name} {label}", unit, when, values[field])

    def snapshot(self) -> HistoryView:
        """An immutable copy (model_construct: the points were validated on the way in)."""
        with self._lock:
            items = [(key, label, unit, tuple(points)) for key, (label, unit, points) in self._series.items()]
        items.sort(key=_order)
        series = tuple(Series.model_construct(key=k, label=label, unit=unit, points=p) for k, label, unit, p in items)
        return HistoryView.model_construct(taken_at=self._clock(), window_s=self.window_s, series=series)

    def points(self) -> int:
        """How many points are held in all (for tests and the memory bound)."""
        with self._lock:
            return sum(len(points) for _, _, points in self._series.values())


_FIELD_ORDER = {name: n for n, (name, _, _) in enumerate(GPU_SERIES + POD_SERIES)}


def _order(item: tuple[str, str, str, tuple[Any, ...]]) -> tuple[Any, ...]:
    kind, owner, field = item[0].split("/", 2)
    return (kind != "gpu", int(owner) if kind == "gpu" and owner.isdigit() else 0, owner, _FIELD_ORDER.get(field, 99))
