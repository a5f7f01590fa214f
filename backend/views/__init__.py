"""Typed views of what c3 runs: their `model_dump(mode="json")` IS the documented `--json` contract
(docs/DESIGN.md, "JSON shapes that scripts rely on"); front ends render them, nothing re-parses dicts.

`PoolStatus` is the router's own status document (backend/pool/status.py), re-exported here.

The names below are loaded on first use (PEP 562), not when the package is: importing one small view
(`backend.views.preferences`, which the cockpit reads before its first frame) must not import every
model — that made the cockpit's first frame 2.4× a bare Textual app's instead of ~1.3×.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from backend.pool.status import BackendStatus as PoolBackendStatus
    from backend.pool.status import PoolStatus
    from backend.views.nodes import NodeGpuStatus, NodeStatus
    from backend.views.pods import PodStatus
    from backend.views.profiles import ProfileStatus, RankStatus

_WHERE = {
    "PoolBackendStatus": ("backend.pool.status", "BackendStatus"),
    "PoolStatus": ("backend.pool.status", "PoolStatus"),
    "NodeGpuStatus": ("backend.views.nodes", "NodeGpuStatus"),
    "NodeStatus": ("backend.views.nodes", "NodeStatus"),
    "PodStatus": ("backend.views.pods", "PodStatus"),
    "ProfileStatus": ("backend.views.profiles", "ProfileStatus"),
    "RankStatus": ("backend.views.profiles", "RankStatus"),
}

__all__ = ["NodeGpuStatus", "NodeStatus", "PodStatus", "PoolBackendStatus", "PoolStatus", "ProfileStatus", "RankStatus"]


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(where[0]), where[1])
    globals()[name] = value  # once loaded, a plain module attribute
    return value
