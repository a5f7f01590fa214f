"""Immutable live readings the cockpit renders: every one stamped with when it was taken."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict

from backend.live.engine_metrics import PodMetrics
from backend.models import GpuSnapshot
from backend.runtime.models import Placement, Workload


class SourceStatus(BaseModel):
    """How one live source is doing."""

    model_config = ConfigDict(frozen=True)

    name: str
    """gpus | workloads | health | placement | metrics."""
    ok: bool
    """Its last attempt succeeded."""
    stale_since: datetime | None = None
    """When it stopped answering (None while it answers)."""
    last_ok: datetime | None = None
    """Its last successful reading."""
    error: str | None = None
    """The last failure, one line."""
    paused: bool = False
    """Paused by the caller (e.g. a hidden screen)."""

    @property
    def stale(self) -> bool:
        """True while the source is failing: its last value is shown, marked stale."""
        return self.stale_since is not None


class EndpointHealth(BaseModel):
    """One pod endpoint's last health probe."""

    model_config = ConfigDict(frozen=True)

    pod: str
    """Pod name."""
    url: str
    """What was probed."""
    healthy: bool
    """HTTP 200 on the health path."""
    checked_at: datetime
    """When."""
    status_code: int | None = None
    """HTTP status, when it answered."""
    latency_ms: float | None = None
    """Round trip, when it answered."""
    error: str | None = None
    """Why the probe failed (on a healthy verdict too, when it is carried through a late probe)."""
    timed_out: bool = False
    """The probe got no answer within its timeout: the engine may be busy, not gone."""
    late: int = 0
    """Consecutive timed-out probes of an engine that was healthy before them, through which it is still
    called healthy (up to the hub's `HEALTH_LATE_ALLOWED`); 0 on an answered probe."""


class PodLive(BaseModel):
    """One planned pod, live."""

    model_config = ConfigDict(frozen=True)

    name: str
    """Pod name."""
    slug: str
    """Catalog entry."""
    gpus: tuple[int, ...]
    """Host GPU indices it plans."""
    port: int
    """Host port."""
    workload: Workload | None = None
    """Its container/process now (None until the workloads source answered)."""
    health: EndpointHealth | None = None
    """Its last health probe."""
    placement: Placement | None = None
    """Its last placement verdict."""
    metrics: PodMetrics | None = None
    """Its last engine-metrics scrape (None while it is not serving)."""


class RigSnapshot(BaseModel):
    """Everything live, at one moment. A new object per change; never mutated."""

    model_config = ConfigDict(frozen=True)

    taken_at: datetime
    """When this snapshot was assembled (UTC)."""
    version: int
    """Increases with every change."""
    gpus: tuple[GpuSnapshot, ...] = ()
    """Last GPU readings (each with its own taken_at)."""
    pods: tuple[PodLive, ...] = ()
    """Planned pods with their live state."""
    workloads: tuple[Workload, ...] = ()
    """Every c3 workload on the host, planned or not."""
    sources: tuple[SourceStatus, ...] = ()
    """Per-source health: the cockpit shows a stale badge from these."""

    def source(self, name: str) -> SourceStatus | None:
        """A source's status by name."""
        return next((s for s in self.sources if s.name == name), None)
