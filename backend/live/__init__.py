"""Live state for the cockpit: GPU poller, workload events, endpoint health, placement — immutable,
time-stamped snapshots; a failing source is marked stale and retried, never crashes anything.

The names below are loaded on first use (PEP 562), as in `backend.views`: a view that needs one small
module here (`backend.views.pods` reads `engine_metrics`) must not import the hub, and with it the
runtime and the HTTP probe — that was a third of `c3 pod list`'s start-up (issue 22).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from backend.live.hub import LiveState
    from backend.live.models import EndpointHealth, PodLive, RigSnapshot, SourceStatus

_WHERE = {
    "LiveState": "backend.live.hub",
    "EndpointHealth": "backend.live.models",
    "PodLive": "backend.live.models",
    "RigSnapshot": "backend.live.models",
    "SourceStatus": "backend.live.models",
}

__all__ = ["EndpointHealth", "LiveState", "PodLive", "RigSnapshot", "SourceStatus"]


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(where), name)
    globals()[name] = value  # once loaded, a plain module attribute
    return value
