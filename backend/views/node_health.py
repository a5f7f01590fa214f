"""The Nodes mode's list: every registered node, probed now (SSH, its endpoint, its GPUs)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from backend.views.nodes import NodeStatus


class NodeReading(BaseModel):
    """One registered node as probed just now, with what the Nodes mode says about it besides the
    `c3 node status --json` row."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    status: NodeStatus
    """The probed row (reachability, endpoint, GPUs)."""
    detail: str
    """Why it is not reachable, or how it is reached (`this machine, no SSH`, `ssh ok`)."""
    ssh_key: str | None
    """The registry's private key for it, if one is set (a path, never the key)."""


def probe_registered_nodes() -> list[NodeReading]:
    """Every node of the registry, probed concurrently (blocks: SSH and HTTP; run it off an event
    loop — it runs its own in this thread)."""
    import asyncio

    from backend.nodes.health import probe_nodes
    from backend.nodes.registry import load_registry

    nodes = list(load_registry().nodes)
    if not nodes:
        return []
    health = asyncio.run(probe_nodes(nodes))
    readings = []
    for node, h in zip(nodes, health, strict=True):
        where = "this machine, no SSH" if node.local else f"ssh {h.ssh_kind or 'ok'}"
        readings.append(NodeReading(status=NodeStatus.from_health(h), detail=h.ssh_error or where, ssh_key=node.ssh_key))
    return readings
