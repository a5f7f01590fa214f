"""Live state for the cockpit: GPU poller, workload events, endpoint health, placement — immutable,
time-stamped snapshots; a failing source is marked stale and retried, never crashes anything."""

from __future__ import annotations

from backend.live.hub import LiveState
from backend.live.models import EndpointHealth, PodLive, RigSnapshot, SourceStatus

__all__ = ["EndpointHealth", "LiveState", "PodLive", "RigSnapshot", "SourceStatus"]
