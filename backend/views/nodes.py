"""`c3 node status --json`'s rows."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class NodeGpuStatus(BaseModel):
    """One GPU as the node's `nvidia-smi` reports it."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    index: int
    """Its index on that node."""
    name: str
    """The card's name."""
    total_mib: int | None
    """Its memory (None when the card reports none, e.g. a GB10)."""
    used_mib: int | None
    """Memory in use."""


class NodeStatus(BaseModel):
    """One registered node, probed: SSH reachability, its endpoint's health, its GPUs."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    name: str
    """Registry name."""
    host: str
    """Its OpenAI endpoint base URL (`--host`)."""
    ssh: str
    """`USER@HOST[:PORT]` c3 drives it through."""
    local: bool
    """The node is this machine (driven without SSH)."""
    reachable: bool
    """SSH answered (always true for the local node)."""
    ssh_error: str | None
    """Why not reachable, one line (unreachable, auth, host key, timeout)."""
    endpoint_ok: bool
    """The endpoint answered /health (or /v1/models)."""
    endpoint: str
    """What the endpoint said, or why it did not answer."""
    gpus: list[NodeGpuStatus]
    """Its GPUs (empty when they could not be read: see `gpu_error`)."""
    gpu_error: str | None
    """Why there is no GPU list (no nvidia-smi, node unreachable)."""

    @classmethod
    def from_health(cls, h: Any) -> NodeStatus:
        """From `backend.nodes.health.NodeHealth`."""
        return cls(name=h.name, host=h.host, ssh=h.ssh, local=h.local, reachable=h.reachable, ssh_error=h.ssh_error, endpoint_ok=h.endpoint_ok,
                   endpoint=h.endpoint_detail, gpu_error=h.gpu_error,
                   gpus=[NodeGpuStatus(index=g.index, name=g.name, total_mib=g.total_mib, used_mib=g.used_mib) for g in h.gpus])
