"""Everything `shard start` does before the first process starts: probe each node, run the pre-flight
checks, choose the head address and each node's interface, and build the plan.

Refusals here happen before anything has been started on any node. The node-bound checks run as the
phases reach, versions, ports and link (backend.shard.phases); a failure names the phase and the node.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Iterator
from dataclasses import dataclass, field

from backend.cluster import addresses
from backend.cluster.netfacts import parse_route, route_script
from backend.errors import C3Error, PhaseFailure, Refused
from backend.remote.node import Node
from backend.remote.shell import Shell
from backend.shard import cpu_build
from backend.shard import plan as planning
from backend.shard.fit_check import check_fit
from backend.shard.models import NodeFacts, Route, ShardPlan
from backend.shard.phases import Timing, check_model, in_phase
from backend.shard.probe import facts_script, parse_facts
from backend.shard.scripts import run_script


@dataclass
class Prepared:
    """A plan plus what the checks found (shown by `--dry-run`)."""

    plan: ShardPlan
    """What will run."""
    facts: dict[str, NodeFacts]
    """Per-node probe results."""
    checks: list[str] = field(default_factory=list)
    """One line per passed check, with its numbers."""


async def probe_all(ordered: list[Node], execs: dict[str, Shell], options: planning.ShardOptions,
                    timing: Timing | None = None) -> dict[str, NodeFacts]:
    """Run the facts probe on every node at once (phase reach); an unreachable node is an environment problem."""
    script = facts_script(ray=options.ray, vllm=options.vllm, python=options.python, check_sudo=options.stop_services, model=options.model)
    deadline = (timing or Timing()).reach_s
    results = await asyncio.gather(*(run_script(execs[n.name], script, timeout=deadline) for n in ordered), return_exceptions=True)
    facts: dict[str, NodeFacts] = {}
    for node, result in zip(ordered, results, strict=True):
        if isinstance(result, C3Error):
            raise in_phase("reach", node.name, result)
        if isinstance(result, BaseException):
            raise result
        if "probe=done" not in result.stdout:
            said = (result.stderr or result.stdout).strip().splitlines()
            raise PhaseFailure(
                "reach", node.name, f"could not probe {node.name}: {said[-1] if said else f'exit {result.exit_status}'}",
                hint="check `c3 node ls` and that the node answers over SSH", tail=tuple(said[-5:]), exit_code=3,
            )
        facts[node.name] = parse_facts(node.name, result.stdout, local=execs[node.name].node.local)
    return facts


@contextlib.contextmanager
def head_listener(address: str, port: int, *, what: str, node: str) -> Iterator[None]:
    """Listen on the head's port while workers test it; phase ports fails on `node` (the head) when the
    port is taken already."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    # As servers do: TIME_WAIT leftovers of earlier connections do not make a port busy, a listener does.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((address, port))
    except OSError as exc:
        sock.close()
        raise PhaseFailure(
            "ports", node, f"{what} port {port} on {address} is not free on the head ({exc.strerror or exc})",
            hint="a shard (or Ray) may still be running: `c3 shard status` / `c3 shard stop`, or choose another port",
        ) from exc
    sock.listen(64)
    try:
        yield
    finally:
        sock.close()


async def check_reach(
    head: Node, workers: list[Node], execs: dict[str, Shell], facts: dict[str, NodeFacts], address: str, port: int, *, what: str,
    timing: Timing | None = None,
) -> dict[str, Route]:
    """From each worker: the route toward the head, and a TCP connect to head:port (c3 listens there meanwhile)."""
    can_listen = execs[head.name].node.local
    deadline = (timing or Timing()).link_s

    async def one(node: Node) -> Route:
        script = route_script(address, port, facts[node.name].python_path, connect=can_listen)
        try:
            result = await run_script(execs[node.name], script, timeout=deadline)
        except C3Error as error:
            raise in_phase("link", node.name, error) from None
        return parse_route(node.name, result.stdout)

    if can_listen:
        with head_listener(address, port, what=what, node=head.name):
            routes = await asyncio.gather(*(one(n) for n in workers))
    else:
        routes = await asyncio.gather(*(one(n) for n in workers))
    return {r.node: r for r in routes}


def odd_one(ordered: list[Node], facts: dict[str, NodeFacts], backend: str) -> str:
    """The first node whose Ray, Python or vLLM version differs from the head's (else the head)."""
    head = facts[ordered[0].name]
    for node in ordered[1:]:
        mine = facts[node.name]
        if backend == "ray" and mine.ray_version != head.ray_version:
            return node.name
        if mine.python_version != head.python_version:
            return node.name
        if mine.vllm_version and head.vllm_version and mine.vllm_version != head.vllm_version:
            return node.name
    missing = [n.name for n in ordered if not facts[n.name].python_version or (backend == "ray" and not facts[n.name].ray_version)]
    return missing[0] if missing else ordered[0].name


async def prepare(nodes: list[Node], execs: dict[str, Shell], options: planning.ShardOptions, *, secret_names: list[str],
                  timing: Timing | None = None) -> Prepared:
    """Probe, check and plan; raises Refused (exit 1) with the numbers on the first failed check, a
    PhaseFailure naming the phase and node for the node-bound checks."""
    ordered = planning.order_nodes(nodes, options)
    head, workers = ordered[0], ordered[1:]
    facts = await probe_all(ordered, execs, options, timing)
    checks: list[str] = []
    try:
        counts = planning.gpu_counts(ordered, facts, options)
    except Refused as error:
        # The first node nvidia-smi found no GPU on is the usual cause; else the plan is the head's to make.
        unknown = [n.name for n in ordered if options.gpus_per_node is None and facts[n.name].gpus is None]
        raise in_phase("plan", (unknown or [head.name])[0], error) from None
    source = "--gpus-per-node" if options.gpus_per_node is not None else "nvidia-smi"
    checks.append(f"tp {options.tp} × pp {options.pp} = {options.tp * options.pp} = GPUs on the nodes ({source}: "
                  + ", ".join(f"{k} {v}" for k, v in counts.items()) + ")")
    try:
        planning.check_versions(ordered, facts, options.backend)
    except C3Error as error:
        raise in_phase("versions", odd_one(ordered, facts, options.backend), error) from None
    if options.backend == "ray":
        checks.append(f"Ray {facts[head.name].ray_version} on every node")
    checks.append(f"Python {facts[head.name].python_version} on every node")
    if facts[head.name].vllm_version:
        checks.append(f"vLLM {facts[head.name].vllm_version} wherever its version could be read")
    if options.backend == "mp":
        missing = [n.name for n in ordered if not facts[n.name].vllm_path]
        if missing:
            raise PhaseFailure("versions", missing[0], f"`{options.vllm}` not found on {', '.join(missing)}",
                               hint="install vLLM natively there, or name it with --vllm PATH")
    elif not facts[head.name].vllm_path:
        raise PhaseFailure("versions", head.name, f"`{options.vllm}` not found on the head {head.name}",
                           hint="install vLLM natively there, or name it with --vllm PATH")
    check_model(options.model, facts, [n.name for n in ordered],
                hint="each rank reads its part of the weights from its own disk: put the model at the same path on every node "
                     "(or on a file system they share), or name it by its hub id")
    if facts[head.name].model_present:
        checks.append(f"model path {options.model} on every node")
    if (priced := check_fit(ordered, facts, options, counts)) is not None:
        checks.append(priced)
    try:
        cpu_build.check(options.backend, options.pp, options.args, facts)
    except Refused as error:
        raise in_phase("plan", (cpu_build.cpu_nodes(facts) or [head.name])[0], error) from None
    args, env, notes = cpu_build.adjust(options.backend, options.pp, options.args, options.env, facts)
    if notes:
        added = [name for name in env if name not in options.env]
        options = options.model_copy(update={"args": args, "env": env, "public_env": [*options.public_env, *added]})
        checks.extend(notes)
    if options.stop_services:
        try:
            planning.check_sudo(ordered, facts)
        except Refused as error:
            raise in_phase("services", next((n.name for n in ordered if facts[n.name].sudo_ok is not True), head.name), error) from None
        checks.append("passwordless sudo on every node (sudo -n true)")
    try:
        address = addresses.choose_head_address(head, facts, workers, options.head_address)
    except Refused as error:
        raise in_phase("link", head.name, error) from None
    port = options.ray_port if options.backend == "ray" else options.master_port
    what = "Ray GCS" if options.backend == "ray" else "rendezvous"
    if execs[head.name].node.local and not options.stop_services:
        # vLLM's API port must be free too, or the server dies after the whole cluster formed.
        # (With --stop-services the single-node server about to be stopped usually holds it.)
        with head_listener("0.0.0.0", options.api_port, what="API", node=head.name):
            pass
        checks.append(f"API port {options.api_port} free on {head.name}")
    routes = await check_reach(head, workers, execs, facts, address, port, what=what, timing=timing)
    try:
        addresses.check_routes(address, port, routes)
    except C3Error as error:
        bad = next((r.node for r in routes.values() if r.error), None) or next(iter(routes), head.name)
        raise in_phase("link", bad, error) from None
    how = "TCP connect" if execs[head.name].node.local else "route only: the head is not this machine"
    checks.append(f"head {address}:{port} reachable from " + ", ".join(f"{r.node} (via {r.interface}, {r.source})" for r in routes.values()) + f" [{how}]")
    plan = planning.build_plan(nodes, facts, routes, options, head_address=address, secret_names=secret_names)
    return Prepared(plan=plan, facts=facts, checks=checks)
