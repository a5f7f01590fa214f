"""The Nodes mode's list: every registered node, probed now (SSH, its endpoint, its GPUs)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from backend.views.nodes import NodeStatus

if TYPE_CHECKING:
    from backend.models.gpu import GpuSnapshot
    from backend.nodes.health import LocalGpus

Readings = Callable[[], Sequence["GpuSnapshot"]]
"""A GPU probe's readings of this machine (the cockpit's facade, or `machine_gpus`)."""


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


def machine_gpus() -> Sequence[GpuSnapshot]:
    """This machine's GPUs as the Orchestration mode and `c3 gpus` read them: the NVML adapter, or
    the simulated rig (`C3_RIG`, `c3 demo`)."""
    from backend.wiring import open_probe

    return open_probe().snapshots()


def local_gpus(read: Readings) -> LocalGpus:
    """The local node's GPU list from a probe's readings instead of nvidia-smi: a machine without
    nvidia-smi (or with a different view of the GPUs than NVML) shows in the Nodes mode what the
    Orchestration mode shows."""
    from backend.nodes.health import NodeGpu

    return lambda: [NodeGpu(s.gpu.index, s.gpu.name, s.gpu.total_mib, s.used_mib, s.gpu.uuid, s.gpu.sm) for s in read()]


def probe_registered_nodes(gpu_readings: Readings = machine_gpus) -> list[NodeReading]:
    """Every node of the registry, probed concurrently (blocks: SSH and HTTP; run it off an event
    loop — it runs its own in this thread); the local node's GPUs from `gpu_readings` (this machine's
    GPU probe; the cockpit passes its facade's, the same reading its Orchestration mode shows)."""
    import asyncio

    from backend.nodes.health import probe_nodes
    from backend.nodes.registry import load_registry

    nodes = list(load_registry().nodes)
    if not nodes:
        return []
    health = asyncio.run(probe_nodes(nodes, local_gpus=local_gpus(gpu_readings)))
    readings = []
    for node, h in zip(nodes, health, strict=True):
        where = "this machine, no SSH" if node.local else f"ssh {h.ssh_kind or 'ok'}"
        readings.append(NodeReading(status=NodeStatus.from_health(h), detail=h.ssh_error or where, ssh_key=node.ssh_key))
    return readings
