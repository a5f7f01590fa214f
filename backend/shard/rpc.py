"""`--backend rpc`: llama.cpp's RPC, one GGUF model split over several nodes by layers.

Each worker runs `ggml-rpc-server -H ADDR -p PORT`, bound to its own cluster-link address (the source
address of its route toward the head), never 0.0.0.0; the head runs `llama-server -m MODEL --rpc
w1:p1,w2:p2 …`, which puts layers on the workers' devices. Worker i (1-based, `--nodes` order after the
head) listens on `--rpc-port + i - 1`, so workers that share a machine (llama.cpp's own CI runs two CPU
rpc-servers on loopback) never collide.

The RPC protocol has no authentication: whoever reaches a worker's port can allocate and read its
memory. c3 refuses an unspecified bind address and says so in `--help` and the dry run.

The protocol version must match exactly on every node, so the pre-flight compares each node's
`llama-server --version` (found beside its `ggml-rpc-server`, else on PATH) before anything starts.
"""

from __future__ import annotations

import asyncio
import ipaddress
import shlex

from backend.cluster import addresses
from backend.cluster.addresses import GroupAddresses, RankAddress
from backend.cluster.netfacts import parse_route, route_script
from backend.errors import C3Error, PhaseFailure, Refused, UsageError
from backend.limits import PORT_MAX
from backend.remote.node import Node
from backend.remote.shell import Shell
from backend.shard.models import NodeFacts, NodePart, Route, ShardPlan, Step
from backend.shard.phases import check_model, in_phase
from backend.shard.plan import ShardOptions, order_nodes, split_env
from backend.shard.probe import model_check, parse_facts
from backend.shard.scripts import run_script


def worker_port(options: ShardOptions, index: int) -> int:
    """RPC port of the `index`-th worker (1-based)."""
    return options.rpc_port + index - 1


def check_bind(address: str, what: str) -> None:
    """Refuse an address that listens on every interface (`0.0.0.0`, `::`) or is no address at all."""
    try:
        unspecified = ipaddress.ip_address(address).is_unspecified
    except ValueError:
        return  # a dry run's `<…>` placeholder, resolved (and checked again) at start
    if unspecified:
        raise UsageError(f"{what} {address} would expose the RPC port on every interface of the node",
                         hint="the RPC protocol has no authentication: bind it on the private cluster link only "
                              "(omit --head-address to have it detected)")


def check_options(options: ShardOptions, count: int) -> None:
    """Flag checks before any node is asked."""
    if options.head_address:
        check_bind(options.head_address, "--head-address")
    last = worker_port(options, count - 1)
    if last > PORT_MAX:
        raise UsageError(f"--rpc-port {options.rpc_port} leaves no port for worker {count - 1} ({last} > {PORT_MAX})")
    if options.api_port in range(options.rpc_port, last + 1):
        raise UsageError(f"--port {options.api_port} is one of the workers' RPC ports {options.rpc_port}–{last}")


def facts_script(*, llama_server: str, rpc_server: str, model: str | None = None) -> str:
    """Probe for the rpc backend: both binaries, the build's version, the node's addresses (and, given
    `model`, whether that path exists there)."""
    q = shlex.quote
    lines = [
        "export LC_ALL=C",
        f"LS={q(llama_server)}; RS={q(rpc_server)}",
        'rs=$(command -v "$RS" 2>/dev/null); echo "rpc_server_path=$rs"',
        'ls=$(command -v "$LS" 2>/dev/null); echo "llama_server_path=$ls"',
        # The build is told by llama-server (ggml-rpc-server has no --version): the one beside this
        # node's rpc-server when there is one, else the one on PATH.
        'vs=$ls; if [ -n "$rs" ] && [ -x "$(dirname "$rs")/llama-server" ]; then vs=$(dirname "$rs")/llama-server; fi',
        'if [ -n "$vs" ]; then echo "llama_version=$("$vs" --version 2>&1 </dev/null | grep -E "^(version|built with)" | tr "\\n" " ")"; fi',
        "ip -o -4 addr show 2>/dev/null | sed 's/^/addr=/'",
        *model_check(model),
        "echo probe=done",
    ]
    return "\n".join(lines) + "\n"


def parse_rpc_facts(node: str, output: str, *, local: bool) -> NodeFacts:
    """`facts_script`'s output as NodeFacts (the llama.cpp fields filled)."""
    facts = parse_facts(node, output, local=local)
    values = dict(line.partition("=")[::2] for line in output.splitlines() if "=" in line)
    return facts.model_copy(update={
        "llama_server_path": values.get("llama_server_path", "").strip() or None,
        "rpc_server_path": values.get("rpc_server_path", "").strip() or None,
        "llama_version": values.get("llama_version", "").strip() or None,
    })


def odd_build(ordered: list[Node], facts: dict[str, NodeFacts]) -> str:
    """The node a failed build check is about: the head without llama-server, a worker without
    ggml-rpc-server, a node whose build could not be read, else the first whose build differs from the head's."""
    head = facts[ordered[0].name]
    if not head.llama_server_path:
        return ordered[0].name
    for node in ordered[1:]:
        if not facts[node.name].rpc_server_path:
            return node.name
    for node in ordered:
        if not facts[node.name].llama_version:
            return node.name
    return next((n.name for n in ordered[1:] if facts[n.name].llama_version != head.llama_version), ordered[0].name)


def check_builds(ordered: list[Node], facts: dict[str, NodeFacts], options: ShardOptions) -> str:
    """The head has llama-server, every worker ggml-rpc-server, and every node the same build; its version."""
    head, workers = ordered[0], ordered[1:]
    if not facts[head.name].llama_server_path:
        raise Refused(f"`{options.llama_server}` not found on the head {head.name}",
                      hint="build llama.cpp with -DGGML_RPC=ON there, or name it with --llama-server PATH")
    missing = [n.name for n in workers if not facts[n.name].rpc_server_path]
    if missing:
        raise Refused(f"`{options.rpc_server}` not found on {', '.join(missing)}",
                      hint="build llama.cpp with -DGGML_RPC=ON (target ggml-rpc-server) there, or name it with --rpc-server PATH")
    versions = {n.name: facts[n.name].llama_version for n in ordered}
    unknown = [name for name, version in versions.items() if not version]
    if unknown:
        raise Refused(f"could not read the llama.cpp build on {', '.join(unknown)} (no llama-server beside ggml-rpc-server or on PATH)",
                      hint="install the same llama.cpp build (llama-server and ggml-rpc-server) on every node")
    if len(set(versions.values())) > 1:
        listing = "; ".join(f"{name}: {version}" for name, version in versions.items())
        raise Refused(f"llama.cpp builds differ between nodes ({listing})",
                      hint="the RPC protocol must match exactly: install one llama.cpp build on every node")
    return str(versions[head.name])


def all_local_loopback(ordered: list[Node], facts: dict[str, NodeFacts], head_address: str | None) -> bool:
    """Every part on this machine with a loopback `--head-address`: nothing leaves the machine."""
    if not head_address or not addresses.is_ipv4(head_address):
        return False
    return ipaddress.ip_address(head_address).is_loopback and all(facts[n.name].local for n in ordered)


async def prepare(nodes: list[Node], execs: dict[str, Shell], options: ShardOptions, *,
                  secret_names: list[str]) -> tuple[ShardPlan, dict[str, NodeFacts], list[str]]:
    """Probe, check the builds, choose the addresses and plan (nothing started)."""
    from backend.shard.prepare import head_listener

    ordered = order_nodes(nodes, options)
    check_options(options, len(ordered))
    head, workers = ordered[0], ordered[1:]
    results = await asyncio.gather(*(run_script(execs[n.name], facts_script(llama_server=options.llama_server, rpc_server=options.rpc_server,
                                                                          model=options.model if n is head else None), timeout=60)
                                     for n in ordered), return_exceptions=True)
    facts: dict[str, NodeFacts] = {}
    for node, result in zip(ordered, results, strict=True):
        if isinstance(result, C3Error):
            raise in_phase("reach", node.name, result)
        if isinstance(result, BaseException):
            raise result
        if "probe=done" not in result.stdout:
            said = (result.stderr or result.stdout).strip().splitlines()
            raise PhaseFailure("reach", node.name, f"could not probe {node.name}: {said[-1] if said else f'exit {result.exit_status}'}",
                               hint="check `c3 node ls` and that the node answers over SSH", tail=tuple(said[-5:]), exit_code=3)
        facts[node.name] = parse_rpc_facts(node.name, result.stdout, local=execs[node.name].node.local)
    try:
        version = check_builds(ordered, facts, options)
    except Refused as error:
        raise in_phase("versions", odd_build(ordered, facts), error) from None
    check_model(options.model, facts, [head.name],
                hint="llama-server reads the GGUF on the head (the workers get their layers over RPC): put it there, or fix the path")
    checks = [f"same llama.cpp build on every node ({version.strip()})"]
    if all_local_loopback(ordered, facts, options.head_address):
        address = str(options.head_address)
        group = GroupAddresses(address, {n.name: RankAddress(n.name, address, "lo") for n in ordered})
        checks.append(f"every part on this machine, on loopback {address}")
    else:
        try:
            address = addresses.choose_head_address(head, facts, workers, options.head_address)
        except Refused as error:
            raise in_phase("link", head.name, error) from None

        async def route(node: Node) -> Route:
            try:
                out = await run_script(execs[node.name], route_script(address, 0, None, connect=False), timeout=30)
            except C3Error as error:
                raise in_phase("link", node.name, error) from None
            return parse_route(node.name, out.stdout)

        routes = {r.node: r for r in await asyncio.gather(*(route(n) for n in workers))}
        try:
            addresses.check_routes(address, None, routes)
        except Refused as error:
            raise in_phase("link", next((r.node for r in routes.values() if r.error), head.name), error) from None
        group = addresses.assign(ordered, facts, routes, address)
        checks.append("each worker's cluster-link address (`ip route get` toward the head): "
                      + ", ".join(f"{r.node} {r.source} on {r.interface}" for r in routes.values()))
    if execs[head.name].node.local:
        with head_listener(address, options.api_port, what="API", node=head.name):
            pass
        checks.append(f"API port {options.api_port} free on {head.name}")
    plan = assemble(ordered, group, options, secret_names=secret_names, local={n.name: facts[n.name].local for n in ordered})
    return plan, facts, checks


def assemble(ordered: list[Node], group: GroupAddresses, options: ShardOptions, *, secret_names: list[str] | None,
             local: dict[str, bool]) -> ShardPlan:
    """The plan: an rpc-server per worker on its own address, then llama-server on the head."""
    check_options(options, len(ordered))
    shown_env, secret_env = split_env(options.env, options.public_env)
    head = ordered[0]
    endpoints: list[str] = []
    parts: list[NodePart] = []
    for index, node in enumerate(ordered[1:], start=1):
        bind = group.ranks[node.name].address
        check_bind(bind, f"the RPC bind address of {node.name}")
        port = worker_port(options, index)
        endpoints.append(f"{bind}:{port}")
        parts.append(_part(node, index, local[node.name], group, shown_env,
                           Step(label="rpc-server", argv=[options.rpc_server, "-H", bind, "-p", str(port)])))
    serve = Step(label="llama-server (rpc head)", argv=[
        options.llama_server, "-m", options.model, "--rpc", ",".join(endpoints),
        "--host", group.head_address, "--port", str(options.api_port), *options.args,
    ])
    parts.insert(0, _part(head, 0, local[head.name], group, shown_env, serve))
    return ShardPlan(
        backend="rpc", model=options.model, head=head.name, head_address=group.head_address, head_port=options.rpc_port,
        api_port=options.api_port, tp=1, pp=len(ordered), parts=parts,
        secret_env=sorted(set(secret_names or []) | set(secret_env)), tag=f"{head.name}-{options.rpc_port}",
    )


def _part(node: Node, rank: int, local: bool, group: GroupAddresses, env: dict[str, str], step: Step) -> NodePart:
    rank_address = group.ranks[node.name]
    return NodePart(node=node.name, role="head" if rank == 0 else "worker", rank=rank, local=local,
                    ssh=None if local else f"{node.ssh_user}@{node.ssh_host}:{node.ssh_port}",
                    address=rank_address.address, interface=rank_address.interface, gpus=0, env=dict(env), steps=[step])


def endpoint_of(step: Step) -> tuple[str, int] | None:
    """(address, port) an rpc-server step listens on."""
    if step.label != "rpc-server":
        return None
    argv = step.argv
    return argv[argv.index("-H") + 1], int(argv[argv.index("-p") + 1])
