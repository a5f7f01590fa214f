"""The c3 pods running on registered nodes, read over each node's shell (the SSH path of `c3 node
status`): `docker ps` of the containers that carry c3's pod label (`io.c3.pod`, set by
backend/runtime/docker_adapter.py whichever machine created them), with their slug, state and host port.

Only labels, state, status and ports are printed on the node — never a container's environment,
which may hold secrets. Every node is read concurrently with short SSH timeouts; a node that cannot be
reached, or has no docker, is its own row, never an exception.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict

from backend.remote.fleet import read_each
from backend.remote.node import Node
from backend.remote.shell import NodeFailure, Shell
from backend.remote.ssh import SshOptions

PODS_SSH = SshOptions(connect_timeout=4.0, command_timeout=8.0)
MAX_PODS = 200
"""Pods listed per node at most (a node with more is cut and says so)."""
_FIELDS = ('{{.Label "io.c3.pod"}}', '{{.Label "io.c3.slug"}}', "{{.State}}", "{{.Status}}", "{{.Ports}}", '{{.Label "io.c3.estate"}}')
POD_QUERY = "docker ps -a --no-trunc --filter label=io.c3.pod --format '" + "\t".join(_FIELDS) + "'"
_HOST_PORT = re.compile(r":(\d{1,5})->")


class RemotePod(BaseModel):
    """One c3 pod container on another node (a row of `c3 pod status --all-nodes --json`)."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    name: str
    """The pod's name (its container's `io.c3.pod` label)."""
    slug: str
    """Its catalog slug (`io.c3.slug`)."""
    state: str
    """docker's state there: running, exited, created, restarting, paused, dead."""
    status: str
    """docker's status line (`Up 5 minutes`, `Exited (1) 2 minutes ago`)."""
    port: int | None
    """The host port it is published on, when it is (a host-network container has none)."""
    estate: str
    """The estate file that planned it, on that node."""


@dataclass
class NodePodsReading:
    """One node's pods, or why they could not be read."""

    node: str
    reachable: bool = True
    error: str | None = None
    """The node did not answer (reachable False), or docker did not (no docker, daemon down)."""
    pods: list[RemotePod] = field(default_factory=list)
    cut: bool = False
    """More than MAX_PODS: the rest are not listed."""


def parse_pods(text: str) -> tuple[list[RemotePod], bool]:
    """`POD_QUERY`'s lines → pods (name order) and whether the list was cut."""
    pods = []
    for line in text.splitlines():
        parts = line.split("\t")
        if len(parts) != len(_FIELDS) or not parts[0].strip():
            continue
        name, slug, state, status, ports, estate = (p.strip() for p in parts)
        port = _HOST_PORT.search(ports)
        pods.append(RemotePod(name=name[:100], slug=slug[:200], state=state[:20], status=status[:80], port=int(port.group(1)) if port else None,
                              estate=estate[:300]))
    pods.sort(key=lambda p: p.name)
    return pods[:MAX_PODS], len(pods) > MAX_PODS


async def read_node_pods(nodes: Sequence[Node], options: SshOptions | None = None) -> list[NodePodsReading]:
    """Every node's c3 pods, concurrently."""
    options = options or PODS_SSH
    timeout = options.command_timeout

    async def read(node: Node, shell: Shell) -> tuple[list[RemotePod], bool]:
        result = await shell.run(POD_QUERY, timeout=timeout)
        if result.exit_status == 127:
            raise NodeFailure(node.name, "command", "docker not found on the node")
        if not result.ok:
            raise NodeFailure(node.name, "command", f"docker ps: {result.last_line()}")
        return parse_pods(result.stdout)

    readings = []
    for r in await read_each(nodes, read, options):
        pods, cut = r.value or ([], False)
        readings.append(NodePodsReading(r.node.name, r.reachable, r.error, pods, cut))
    return readings
