"""The addresses a group's ranks use — one code path for recipes (`c3 recipes launch`) and shards.

What every rank of a multi-node engine needs is the head's address *as the workers reach it* and its
own address and interface on that path (vLLM's VLLM_HOST_IP, NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME;
`--master-addr` for vLLM's multiprocessing backend). None of these is the name the node was
registered by: a registry entry like `--ssh root@127.0.0.1` or `coder@spark2` says how *this machine*
reaches the node, not how the nodes reach each other. So they are resolved on the nodes themselves:

1. the head's IPv4 interfaces (`ip -o -4 addr show` on the head);
2. the head address: an address on a subnet every worker also has (a direct cluster link such as a
   Spark's QSFP cable), preferring the registry's address among those; else the registry's address
   when the head owns it; never loopback or a Docker/libvirt bridge (`choose_head_address`);
3. on each worker, `ip -o -4 route get HEAD`: the interface and source address it will use.

A dry run needs no node: `placeholders` names what will be resolved where. A loopback head address
with a remote worker is refused with the reason (the worker would dial itself).
"""

from __future__ import annotations

import asyncio
import ipaddress
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from backend.cluster.netfacts import NodeFacts, Route, is_virtual, parse_interfaces, parse_route, route_script
from backend.errors import Refused, UsageError
from backend.remote.node import Node, resolved_addresses

INTERFACES_SCRIPT = "export LC_ALL=C\nip -o -4 addr show 2>/dev/null | sed 's/^/addr=/'\n"


@dataclass(frozen=True)
class RankAddress:
    """Where one rank lives on the cluster network."""

    node: str
    """Registry name."""
    address: str
    """The address it advertises (VLLM_HOST_IP, Ray's --node-ip-address)."""
    interface: str
    """Its interface toward the head (NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME)."""


@dataclass(frozen=True)
class GroupAddresses:
    """The head address and every rank's own, keyed by node name."""

    head_address: str
    ranks: dict[str, RankAddress]
    resolved: bool = True
    """False for a dry run's placeholders."""

    def env(self, node: str) -> dict[str, str]:
        """The rank's network environment (same names for recipes and shards)."""
        rank = self.ranks[node]
        return {"VLLM_HOST_IP": rank.address, "NCCL_SOCKET_IFNAME": rank.interface, "GLOO_SOCKET_IFNAME": rank.interface}


def placeholders(nodes: list[Node]) -> GroupAddresses:
    """What a dry run shows instead of addresses only the nodes can tell."""
    head = nodes[0].name
    ranks = {head: RankAddress(head, f"<head address: from the interfaces of {head}>", f"<interface of {head} with the head address>")}
    for node in nodes[1:]:
        ranks[node.name] = RankAddress(node.name, f"<address of {node.name}: ip route get HEAD on {node.name}>",
                                       f"<interface of {node.name} toward the head>")
    return GroupAddresses(ranks[head].address, ranks, resolved=False)


def is_ipv4(text: str) -> bool:
    """True for an IPv4 literal."""
    try:
        return isinstance(ipaddress.ip_address(text), ipaddress.IPv4Address)
    except ValueError:
        return False


def choose_head_address(head: Node, facts: dict[str, NodeFacts], workers: list[Node], override: str | None) -> str:
    """The address workers reach the head at (see the module docstring for the order)."""
    own = facts[head.name].interfaces
    owned = {i.address for i in own}
    if override:
        if not is_ipv4(override):
            raise UsageError(f"--head-address {override} is not an IPv4 address")
        refuse_loopback_head(override, head, workers)
        if override not in owned:
            raise Refused(
                f"--head-address {override} is not an address of {head.name} "
                f"(it has {', '.join(sorted(owned)) or 'no IPv4 address'})"
            )
        return override
    shared: list[str] = []
    for iface in own:
        if is_virtual(iface.name) or iface.address.startswith("127."):
            continue
        net = ipaddress.ip_network(f"{iface.address}/{iface.prefix}", strict=False)
        if all(any(ipaddress.ip_address(w.address) in net for w in facts[n.name].interfaces) for n in workers):
            shared.append(iface.address)
    # The registry's names count through what they resolve to here (a head registered as `spark1`).
    named = [a for host in (head.address, head.ssh_host) for a in ((host,) if is_ipv4(host) else resolved_addresses(host))]
    registry = [a for a in dict.fromkeys(named) if is_ipv4(a) and a in owned]
    for address in registry:
        if address in shared:
            return address
    if shared:
        return shared[0]
    if registry:
        return registry[0]
    candidates = [i.address for i in own if not is_virtual(i.name)]
    if candidates:
        return candidates[0]
    raise Refused(f"{head.name} reports no usable IPv4 address (only loopback or bridges)",
                  hint="connect the nodes on a common network, or pass the head address explicitly")


def refuse_loopback_head(address: str, head: Node, workers: list[Node]) -> None:
    """A loopback head address only works when every rank is on the head itself."""
    try:
        loopback = ipaddress.ip_address(address).is_loopback
    except ValueError:
        loopback = address.lower() == "localhost"
    if loopback and workers:
        raise Refused(
            f"head address {address} is loopback, but {', '.join(w.name for w in workers)} would dial "
            f"{address} on their own machine, not {head.name}",
            hint=f"use an address of {head.name} the workers route to (its LAN or cluster-link address)",
        )


def check_routes(head_address: str, port: int | None, routes: dict[str, Route]) -> None:
    """Refuse when any worker cannot reach the head (no route, or a failed TCP connect), or would
    reach it through loopback or a bridge."""
    where = f"{head_address}:{port}" if port else head_address
    bad = [r for r in routes.values() if r.error]
    if bad:
        said = "; ".join(f"{r.node}: {r.error}" for r in bad)
        raise Refused(
            f"head address {where} is not reachable from {', '.join(r.node for r in bad)} ({said})",
            hint="pick an address every worker routes to with --head-address, or fix the route/firewall",
        )
    for route in routes.values():
        if route.source and (route.source.startswith("127.") or (route.interface and is_virtual(route.interface))):
            raise Refused(
                f"{route.node} would reach the head through {route.interface} ({route.source}), a loopback or bridge address",
                hint="use --head-address on the cluster link",
            )


def assign(ordered: list[Node], facts: dict[str, NodeFacts], routes: dict[str, Route], head_address: str) -> GroupAddresses:
    """Each rank's address and interface: the head's own for rank 0, each worker's route for the rest."""
    head = ordered[0]
    head_iface = next((i.name for i in facts[head.name].interfaces if i.address == head_address), "")
    ranks = {head.name: RankAddress(head.name, head_address, head_iface)}
    for node in ordered[1:]:
        route = routes[node.name]
        ranks[node.name] = RankAddress(node.name, route.source or "", route.interface or "")
    return GroupAddresses(head_address, ranks)


Run = Callable[[Node, str], Awaitable[str]]
"""Runs a short POSIX-sh script on a node and returns its stdout (raises the node's failure)."""


async def resolve(ordered: list[Node], run: Run) -> GroupAddresses:
    """Ask the nodes: every node's interfaces, the head address, each worker's route to it."""
    outputs = await asyncio.gather(*(run(n, INTERFACES_SCRIPT) for n in ordered))
    facts = {
        node.name: NodeFacts(node=node.name, interfaces=parse_interfaces([ln[5:] for ln in out.splitlines() if ln.startswith("addr=")]))
        for node, out in zip(ordered, outputs, strict=True)
    }
    head, workers = ordered[0], ordered[1:]
    address = choose_head_address(head, facts, workers, None)
    refuse_loopback_head(address, head, workers)
    said = await asyncio.gather(*(run(n, route_script(address, 0, None, connect=False)) for n in workers))
    routes = {n.name: parse_route(n.name, out) for n, out in zip(workers, said, strict=True)}
    check_routes(address, None, routes)
    return assign(ordered, facts, routes, address)
