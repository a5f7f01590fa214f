"""Fakes for the live hub: a probe that can be told to fail, a runtime with a scripted event stream."""

from __future__ import annotations

import queue
import threading
from datetime import UTC, datetime

from backend.models import ComputeProcess, Gpu, GpuSnapshot
from backend.runtime.gpu_mode import ModeDecision
from backend.runtime.models import Workload

GPUS = [Gpu(index=i, uuid=f"GPU-{i}", name="NVIDIA GeForce RTX 3090", total_mib=24576) for i in range(2)]


class FakeProbe:
    source = "fake"

    def __init__(self):
        self.fail = False
        self.procs: list[ComputeProcess] = []
        self.calls = 0
        self.max_ages: list[float] = []

    def gpus(self):
        return list(GPUS)

    def processes(self):
        return list(self.procs)

    def snapshots(self, *, processes_max_age_s: float = 0.0):
        self.calls += 1
        self.max_ages.append(processes_max_age_s)
        if self.fail:
            raise RuntimeError("NVML_ERROR_GPU_IS_LOST")
        return [GpuSnapshot(gpu=g, taken_at=datetime.now(UTC), used_mib=100, free_mib=24000, processes=tuple(p for p in self.procs if p.gpu_uuid == g.uuid)) for g in GPUS]


class ClosableStream:
    def __init__(self, q: queue.Queue):
        self.q = q
        self.closed = threading.Event()

    def __iter__(self):
        while not self.closed.is_set():
            try:
                item = self.q.get(timeout=0.05)
            except queue.Empty:
                continue
            if isinstance(item, Exception):
                raise item
            yield item

    def close(self):
        self.closed.set()


class FakeRuntime:
    kind = "fake"

    def __init__(self):
        self.state: dict[str, Workload] = {}
        self.events_q: queue.Queue = queue.Queue()
        self.streams_opened = 0
        self.owner_map: dict[int, str] = {}

    def gpu_mode(self, forced=None):
        return ModeDecision("env", "fake")

    def workloads(self):
        return dict(self.state)

    def workload(self, pod):
        return self.state.get(pod, Workload(pod=pod, status="absent"))

    def owners(self, pids):
        return {p: self.owner_map.get(p) for p in pids}

    def usage(self, pods):
        return {}

    def events(self):
        self.streams_opened += 1
        return ClosableStream(self.events_q)
