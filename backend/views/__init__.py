"""Typed views of what c3 runs: their `model_dump(mode="json")` IS the documented `--json` contract
(docs/DESIGN.md, "JSON shapes that scripts rely on"); front ends render them, nothing re-parses dicts.

`PoolStatus` is the router's own status document (backend/pool/status.py), re-exported here."""

from backend.pool.status import BackendStatus as PoolBackendStatus
from backend.pool.status import PoolStatus
from backend.views.nodes import NodeGpuStatus, NodeStatus
from backend.views.pods import PodStatus
from backend.views.profiles import ProfileStatus, RankStatus

__all__ = ["NodeGpuStatus", "NodeStatus", "PodStatus", "PoolBackendStatus", "PoolStatus", "ProfileStatus", "RankStatus"]
