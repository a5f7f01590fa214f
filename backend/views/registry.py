"""The node registry as the front ends read it: `c3 node ls` and `c3 node status`, the cockpit's
node list (each a named query with a typed result; adding, removing and trusting are actions)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from backend.views.nodes import NodeStatus


class RegisteredNode(BaseModel):
    """One registered node as `c3 node ls --json` lists it (not probed)."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    name: str
    """Registry name."""
    host: str
    """Its OpenAI endpoint base URL (`--host`)."""
    ssh: str
    """`USER@HOST[:PORT]` c3 drives it through."""
    local: bool
    """The node is this machine (driven without SSH)."""
    ssh_key: str | None
    """Private key file for SSH (None: the agent's or the default)."""


def registered_nodes() -> list[RegisteredNode]:
    """Every node in `$C3_HOME/nodes.json`, in file order (UsageError for a malformed file)."""
    from backend.nodes.registry import load_registry

    return [RegisteredNode(name=n.name, host=n.host, ssh=n.ssh, local=n.local, ssh_key=n.ssh_key) for n in load_registry().nodes]


def node_statuses(names: str | None = None) -> list[NodeStatus]:
    """Probe every registered node (or the comma-separated `names`, Refused for one not registered):
    SSH reachability, endpoint health, GPUs (this machine's from its GPU probe, as `c3 gpus`); the
    probes run concurrently."""
    from backend.nodes.health import probe_nodes
    from backend.nodes.registry import load_registry, resolve_nodes
    from backend.remote.fleet import run_sync
    from backend.views.node_health import local_gpus, machine_gpus

    nodes = resolve_nodes(names) if names else load_registry().nodes
    return [NodeStatus.from_health(h) for h in run_sync(probe_nodes(nodes, local_gpus=local_gpus(machine_gpus)))] if nodes else []
