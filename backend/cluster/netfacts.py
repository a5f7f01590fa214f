"""What a node says about its network before a multi-node launch, and the parsers that read it.

Shared by recipe launches (backend.cluster) and shards (backend.shard, which probes the rest of a
node's facts): the IPv4 interfaces a node has, which interface and source address a worker uses
toward the head, and which interfaces are bridges a peer cannot reach. It lives in cluster, the
lower of the two layers, so neither has to import the other upward.
"""

from __future__ import annotations

import re
import shlex

from pydantic import BaseModel, ConfigDict, Field

# Interfaces that are never the cluster link: Docker/libvirt bridges advertise addresses a peer
# cannot reach (vllm#19670, #14340: "connect to (172.17.0.x, …)" timeouts).
VIRTUAL_PREFIXES = ("docker", "br-", "virbr", "veth", "cni", "flannel", "cali", "tailscale", "zt")


class Interface(BaseModel):
    """One IPv4 address on one interface, as `ip -o -4 addr` lists it."""

    model_config = ConfigDict(frozen=True)

    name: str
    """Interface name, e.g. `enp1s0f0np0`."""
    address: str
    """IPv4 address on it."""
    prefix: int = Field(ge=0, le=32)
    """Prefix length of the address's subnet."""


class NodeFacts(BaseModel):
    """What one node reports about itself before anything starts (one probe over SSH or locally)."""

    node: str
    """Registry name of the node."""
    local: bool = False
    """True when the node is this machine (probed and driven without SSH)."""
    python_path: str | None = None
    """Interpreter that runs Ray (the `ray` script's own interpreter unless `--python` names one)."""
    python_version: str | None = None
    """`major.minor.micro` of that interpreter; None when it did not run."""
    ray_path: str | None = None
    """Where `ray` resolved on the node; None when not found."""
    ray_version: str | None = None
    """Version `ray --version` printed; None when Ray is missing."""
    vllm_path: str | None = None
    """Where `vllm` resolved on the node; None when not found."""
    vllm_version: str | None = None
    """vLLM's package version on the node; None when it cannot be read (a stand-in, no metadata)."""
    gpus: int | None = None
    """GPUs nvidia-smi lists; None when nvidia-smi is missing or failed."""
    gpu_names: list[str] = Field(default_factory=list)
    """Names nvidia-smi printed, one per GPU."""
    gpu_mib: list[int] = Field(default_factory=list)
    """Each GPU's memory.total in MiB, in nvidia-smi's order; empty when it did not say."""
    interfaces: list[Interface] = Field(default_factory=list)
    """Every IPv4 address of the node (loopback excluded)."""
    llama_server_path: str | None = None
    """Where `llama-server` resolved (rpc backend); None when not found."""
    rpc_server_path: str | None = None
    """Where `ggml-rpc-server` resolved (rpc backend); None when not found."""
    llama_version: str | None = None
    """`llama-server --version` of the node's llama.cpp build (rpc backend); None when unread."""
    sudo_ok: bool | None = None
    """`sudo -n true` succeeded; None when not asked (no `--stop-services`)."""
    sudo_error: str | None = None
    """What `sudo -n true` said when it failed."""
    model_present: bool | None = None
    """The model's local path exists on the node (`test -e`); None when not asked (a hub id, not a path)."""


class Route(BaseModel):
    """How a worker reaches the head: `ip -o -4 route get HEAD` on the worker, then a TCP connect."""

    node: str
    """Worker's registry name."""
    interface: str | None = None
    """Outgoing interface toward the head; None when there is no route."""
    source: str | None = None
    """The worker's own address on that route (what it advertises)."""
    error: str | None = None
    """Why the head is unreachable from this worker; None when it is reachable."""
    connected: bool | None = None
    """TCP connect to the head's port succeeded; None when not tried."""


_ADDR = re.compile(r"^\d+:\s+(\S+)\s+inet\s+(\d+\.\d+\.\d+\.\d+)/(\d+)")


def parse_interfaces(lines: list[str]) -> list[Interface]:
    """Parse `ip -o -4 addr show` lines (loopback dropped)."""
    found: list[Interface] = []
    for line in lines:
        match = _ADDR.match(line.strip())
        if not match:
            continue
        name = match.group(1).split("@", 1)[0]
        if name == "lo" or match.group(2).startswith("127."):
            continue
        found.append(Interface(name=name, address=match.group(2), prefix=int(match.group(3))))
    return found


def route_script(head_address: str, port: int, python: str | None, *, connect: bool) -> str:
    """On a worker: the route toward the head, then (when `connect`) a 5 s TCP connect to head:port."""
    q = shlex.quote
    lines = [
        "export LC_ALL=C",
        f"if r=$(ip -o -4 route get {q(head_address)} 2>&1); then echo \"route=$r\"; else echo \"route_error=$r\"; fi",
    ]
    if connect:
        code = (
            "import socket,sys\n"
            "try:\n"
            f"    socket.create_connection(({head_address!r}, {int(port)}), timeout=5).close(); print('connect=ok')\n"
            "except OSError as e:\n"
            "    print('connect=' + (e.strerror or str(e) or type(e).__name__))\n"
        )
        py = q(python or "python3")
        lines.append(f"{py} -c {q(code)} 2>/dev/null || echo connect=no-python")
    return "\n".join(lines) + "\n"


_ROUTE = re.compile(r"\bdev\s+(\S+).*?\bsrc\s+(\d+\.\d+\.\d+\.\d+)")


def parse_route(node: str, output: str) -> Route:
    """Read `route_script` output into a `Route`."""
    route = Route(node=node)
    for raw in output.splitlines():
        key, _, value = raw.partition("=")
        value = value.strip()
        if key == "route":
            match = _ROUTE.search(value)
            if match:
                route.interface, route.source = match.group(1), match.group(2)
            else:
                route.error = f"`ip route get` said: {value}"
            if value.split()[:1] in (["unreachable"], ["prohibit"], ["blackhole"]):
                route.error = f"route is {value.split()[0]}"
        elif key == "route_error":
            route.error = f"no route ({value.removeprefix('RTNETLINK answers: ') or 'ip route get failed'})"
        elif key == "connect":
            route.connected = value == "ok"
            if value == "no-python":
                route.connected = None
            elif value != "ok" and route.error is None:
                route.error = f"TCP connect failed: {value}"
    if route.error is None and route.interface is None:
        route.error = "`ip route get` printed nothing"
    return route


def is_virtual(interface: str) -> bool:
    """Bridges and overlay interfaces that a peer on another machine cannot reach."""
    return interface.startswith(VIRTUAL_PREFIXES)
