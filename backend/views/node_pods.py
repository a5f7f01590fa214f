"""The pods of the other registered nodes (`c3 pod status --all-nodes`, the cockpit's Orchestration view):
each node's c3 pod containers read over its SSH target (backend/nodes/pods.py). This machine's own pods
are the estate's (`backend.views.estate_status`), so a node that is this machine is not read twice."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from backend.nodes.pods import RemotePod

__all__ = ["NodePods", "RemotePod", "other_node_pods"]


class NodePods(BaseModel):
    """One registered node's pods, or why they could not be read."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    node: str
    """Registry name."""
    reachable: bool
    """SSH answered."""
    error: str | None
    """Why there is no list: the node did not answer, or docker did not (no docker, daemon down)."""
    pods: list[RemotePod]
    """Its c3 pods, by name."""
    cut: bool
    """More pods than are listed (200 per node)."""


def other_node_pods() -> list[NodePods]:
    """Every registered node that is not this machine, read concurrently (empty when there is none)."""
    from backend.nodes.pods import read_node_pods
    from backend.nodes.registry import load_registry
    from backend.remote.fleet import run_sync

    nodes = [n for n in load_registry().nodes if not n.local]
    if not nodes:
        return []
    return [NodePods(node=r.node, reachable=r.reachable, error=r.error, cut=r.cut, pods=r.pods) for r in run_sync(read_node_pods(nodes))]
