"""The live hub's snapshots turned into what the cockpit shows, pushed only when that changes.

The hub (`backend.live.hub.LiveState`) hands every snapshot to its subscribers from the source thread
that made it: a GPU reading every second, an engines round and a placement verdict every two, each
workload event. Most change nothing on screen (the same numbers, newly stamped). `LiveFeed` is such a
subscriber: it derives the GPU panels' and the pod view's inputs from the snapshot, compares them with
what it pushed last (timestamps left out), and calls `on_update` only with the part that changed — so
an idle cockpit gets no message, and redraws nothing. It also records when each part was last read
(`freshness`), which the badges age from without a message per reading.

Snapshots arrive from several threads at once: one lock orders them, and an older one (a smaller
version) that arrives after a newer one is dropped.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from c3.services import Freshness, GpuReading, LiveUpdate, PodsReading, PodState

if TYPE_CHECKING:
    from backend.live.models import RigSnapshot
    from backend.models import GpuSnapshot

SPARK_SAMPLES = 24
"""Readings per GPU a sparkline can show (the GPU pane is at most 64 columns wide: a sparkline 22 cells).
Older ones cannot change what is drawn, so they do not make a reading news."""


def _gpu_key(snap: GpuSnapshot) -> tuple[Any, ...]:
    """Everything a GPU panel shows of one reading: all but when it was taken."""
    return tuple(value for name, value in snap if name != "taken_at")


SCRAPE_STAMPS = frozenset({"taken_at", "scrape_ms"})
"""What every /metrics scrape stamps anew and no view draws: when it was sent and how long the engine took
to answer. Counting `scrape_ms` as news pushed (and redrew) the pod list every 2 s on an idle rig."""


def _pod_key(pod: PodState) -> tuple[Any, ...]:
    """Everything the pod view shows of one pod: all but the stamps of its last scrape."""
    metrics = None if pod.metrics is None else tuple(value for name, value in pod.metrics if name not in SCRAPE_STAMPS)
    return (replace(pod, metrics=None), metrics)


class LiveFeed:
    """A hub subscriber for one cockpit (see the module docstring). `facade` is the `RealServices` whose
    pod rules and GPU history it uses; `on_update` is called from the hub's threads and must only post."""

    def __init__(self, facade: Any, on_update: Callable[[LiveUpdate], None]) -> None:
        self._facade = facade
        self._on_update = on_update
        self._lock = threading.Lock()
        self._version = -1
        self._gpus_key: tuple[Any, ...] | None = None
        self._pods_seen: tuple[Any, ...] | None = None
        self._pods_key: tuple[Any, ...] | None = None
        self._pods: tuple[PodState, ...] = ()
        self.fresh = Freshness()
        """When each part was last read (replaced whole, so any thread may read it)."""

    def __call__(self, snap: RigSnapshot) -> None:
        with self._lock:
            if snap.version <= self._version:
                return  # a newer snapshot was already handled (two source threads raced)
            self._version = snap.version
            gpus = self._gpus(snap)
            pods = self._pods_reading(snap)
            if gpus is not None or pods is not None:
                self._on_update(LiveUpdate(gpus=gpus, pods=pods))  # under the lock: posted in snapshot order

    def _gpus(self, snap: RigSnapshot) -> GpuReading | None:
        status = snap.source("gpus")
        if status is not None and status.last_ok is not None:
            self.fresh = replace(self.fresh, gpus_at=status.last_ok)
        error = (status.error or "no answer") if status is not None and status.stale else None
        if not snap.gpus and error is None:
            return None
        self._facade.remember_gpus(snap.gpus)
        series = self._facade.gpu_series(SPARK_SAMPLES)
        key = (tuple(_gpu_key(s) for s in snap.gpus), tuple(sorted(series.items())), error)
        if key == self._gpus_key:
            return None
        self._gpus_key = key
        util = {index: tuple(u for u, _ in samples) for index, samples in series.items()}
        mem = {index: tuple(m for _, m in samples) for index, samples in series.items()}
        taken = max((s.taken_at for s in snap.gpus), default=None)
        return GpuReading(snapshots=snap.gpus, util=util, mem=mem, taken_at=taken, error=error)

    def _pods_reading(self, snap: RigSnapshot) -> PodsReading | None:
        status = snap.source("workloads")
        if status is None or status.last_ok is None:
            return None  # the runtime has not answered yet: the cockpit's first read says more
        if not status.stale:
            self.fresh = replace(self.fresh, pods_at=snap.taken_at)
        seen = (snap.pods, snap.workloads, status.stale)
        if seen == self._pods_seen:  # a GPU reading: the pods' own inputs are the very same objects
            return None
        self._pods_seen = seen
        from backend.errors import C3Error

        error = None
        try:
            pods = tuple(self._facade.pods_from(snap))
        except C3Error as problem:  # the runtime stopped answering: the last pods stay, marked stale
            pods, error = self._pods, problem.message
        key = (tuple(_pod_key(p) for p in pods), error)
        if key == self._pods_key:
            return None
        self._pods_key, self._pods = key, pods
        return PodsReading(pods=pods, taken_at=snap.taken_at, error=error)
