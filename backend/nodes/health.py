"""Live facts about registered nodes, for `c3 node status` and the cockpit's Nodes mode: is SSH
reachable (or is it this machine), does the endpoint answer, which GPUs does `nvidia-smi` list — or,
for this machine, what its own GPU probe reads (`local_gpus`: the NVML adapter, or the simulated rig),
so that the Nodes mode and the Orchestration mode show the same GPUs from the same source.

All nodes are probed concurrently with short timeouts; one node's failure is its own row.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from backend.errors import C3Error
from backend.http_probe import probe
from backend.remote.fleet import Fleet
from backend.remote.node import Node
from backend.remote.shell import NodeFailure, Shell
from backend.remote.ssh import SshOptions

GPU_QUERY = "nvidia-smi --query-gpu=index,name,memory.total,memory.used --format=csv,noheader,nounits"
# uuid and compute_cap too (launches pin GPUs by UUID and check the compute capability); drivers before
# R510 know no `compute_cap` field, and then the plain query above answers.
GPU_QUERY_FULL = "nvidia-smi --query-gpu=index,name,memory.total,memory.used,uuid,compute_cap --format=csv,noheader,nounits"
QUICK = SshOptions(connect_timeout=4.0, command_timeout=8.0)


@dataclass(frozen=True)
class NodeGpu:
    """One GPU as nvidia-smi reports it on the node."""

    index: int
    name: str
    total_mib: int | None
    used_mib: int | None
    uuid: str | None = None
    """`GPU-…`, when the driver reports it."""
    sm: str | None = None
    """Compute capability `major.minor`, when the driver reports it (R510 and later)."""


@dataclass
class NodeHealth:
    """One node's row."""

    name: str
    host: str
    ssh: str
    local: bool
    reachable: bool
    """SSH answered (always True for the local node)."""
    ssh_error: str | None = None
    """The one-line reason when not reachable (unreachable, auth, host key, timeout)."""
    ssh_kind: str | None = None
    """NodeFailure.kind when not reachable."""
    endpoint_ok: bool = False
    """The node's `--host` URL answered /health (or /v1/models)."""
    endpoint_detail: str = ""
    gpus: list[NodeGpu] = field(default_factory=list)
    gpu_error: str | None = None
    """Why no GPU list (no nvidia-smi, node unreachable)."""


LocalGpus = Callable[[], list[NodeGpu]]
"""This machine's GPUs as its GPU probe reads them (blocking; raises C3Error when the probe cannot)."""


def _mib(field: str) -> int | None:
    return int(float(field)) if field.replace(".", "", 1).isdigit() else None


def parse_gpus(text: str) -> list[NodeGpu]:
    gpus = []
    for line in text.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 4 or not parts[0].isdigit():
            continue
        uuid = parts[4] if len(parts) > 4 and parts[4].startswith("GPU-") else None
        sm = parts[5] if len(parts) > 5 and re.fullmatch(r"\d{1,2}\.\d{1,2}", parts[5]) else None
        gpus.append(NodeGpu(int(parts[0]), parts[1], _mib(parts[2]), _mib(parts[3]), uuid, sm))
    return gpus


def _answers(host: str, path: str) -> tuple[bool, str]:
    """(answered 2xx, one-line detail) for one GET of `path` from the server root (`host` may end in /v1)."""
    root = host[: -len("/v1")] if host.endswith("/v1") else host.rstrip("/")
    result = probe(root + path, timeout=2.0, max_bytes=64 * 1024)
    return result.ok, result.line()


async def read_gpus(shell: Shell, timeout: float) -> tuple[list[NodeGpu] | None, str | None]:
    """The node's GPUs as nvidia-smi lists them, or None and why (the Nodes screen's probe, and a launch's)."""
    result = await shell.run(GPU_QUERY_FULL, timeout=timeout)
    if not result.ok and result.exit_status != 127:
        result = await shell.run(GPU_QUERY, timeout=timeout)
    if result.ok:
        return parse_gpus(result.stdout), None
    return None, "nvidia-smi not found" if result.exit_status == 127 else f"nvidia-smi: {result.last_line()}"


def _read_local(local_gpus: LocalGpus) -> tuple[list[NodeGpu] | None, str | None]:
    try:
        return local_gpus(), None
    except C3Error as error:
        return None, error.message


def _endpoint(host: str) -> tuple[bool, str]:
    ok, detail = _answers(host, "/health")
    if ok:
        return ok, detail
    ok2, detail2 = _answers(host, "/v1/models")
    return (True, detail2) if ok2 else (False, detail)


async def probe_nodes(nodes: list[Node], options: SshOptions | None = None, local_gpus: LocalGpus | None = None) -> list[NodeHealth]:
    """Reachability, endpoint health and GPUs of every node, concurrently; a local node's GPUs from
    `local_gpus` when given (nvidia-smi otherwise)."""
    options = options or QUICK

    async def one(fleet: Fleet, node: Node) -> NodeHealth:
        row = NodeHealth(node.name, node.host, node.ssh, node.local, reachable=False)
        endpoint = asyncio.create_task(asyncio.to_thread(_endpoint, node.host))
        try:
            shell = await fleet.shell(node)
            row.reachable = True
            if node.local and local_gpus is not None:
                gpus, row.gpu_error = await asyncio.to_thread(_read_local, local_gpus)
            else:
                gpus, row.gpu_error = await read_gpus(shell, options.command_timeout)
            row.gpus = gpus or []
        except NodeFailure as failure:
            if not row.reachable:
                row.ssh_error, row.ssh_kind = failure.detail, failure.kind
                row.gpu_error = "node not reachable"
            else:
                row.gpu_error = failure.detail
        except Exception as exc:  # noqa: BLE001 - one node's surprise is its own row, never the whole table's
            detail = f"{type(exc).__name__}: {exc}"[:200]
            if not row.reachable:
                row.ssh_error, row.ssh_kind, row.gpu_error = detail, "ssh", "node not reachable"
            else:
                row.gpu_error = detail
        row.endpoint_ok, row.endpoint_detail = await endpoint
        return row

    async with Fleet(nodes, options) as fleet:
        return list(await asyncio.gather(*(one(fleet, n) for n in nodes)))
