"""The four `c3 shard` operations, each one coroutine over the nodes' executors.

`start` plans (see prepare.py) and, unless it is a dry run, runs the plan in the foreground
(runner.py). `install_ray`, `status` and `stop` are short and write nothing either.
"""

from __future__ import annotations

import asyncio
import re
import shlex
from collections.abc import Callable
from typing import cast

from pydantic import BaseModel, Field

from backend.cluster.netfacts import parse_interfaces
from backend.errors import EnvironmentProblem, PhaseFailure, Refused, UsageError
from backend.remote.fleet import ShellPool, close_all, open_shells
from backend.remote.node import Node
from backend.remote.shell import CommandResult, Shell
from backend.secrets_env import check_env_file
from backend.settings import current
from backend.shard import rpc
from backend.shard.phases import check_names, in_phase
from backend.shard.plan import ShardOptions, split_env
from backend.shard.prepare import Prepared
from backend.shard.prepare import prepare as prepare_vllm
from backend.shard.runner import ShardRunner, Timing
from backend.shard.scripts import run_script, tagged_script

Echo = Callable[[str], None]

# The Ray c3 installs and tests with when --ray-version is not given.
DEFAULT_RAY_VERSION = "2.60.0"
# Passed on from c3's own environment to every node, never shown.
FORWARDED_SECRETS = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")


def collect_secrets(options: ShardOptions) -> dict[str, str]:
    """Secret values for the nodes: the profile's secret-looking env plus HF_TOKEN from c3's environment."""
    _, secrets = split_env(options.env, options.public_env)
    for name, value in current().secret_env().items():
        if name in FORWARDED_SECRETS and name not in secrets:
            secrets[name] = value
    check_env_file(secrets, where="the shard profile's env")  # they go to the nodes as NAME=VALUE lines on stdin
    return secrets


async def prepare(nodes: list[Node], execs: dict[str, Shell], options: ShardOptions, *, secret_names: list[str],
                  timing: Timing | None = None) -> Prepared:
    """Probe, check and plan for the options' backend (rpc has its own probe and plan)."""
    if options.backend == "rpc":
        plan, facts, checks = await rpc.prepare(nodes, execs, options, secret_names=secret_names)
        return Prepared(plan=plan, facts=facts, checks=checks)
    return await prepare_vllm(nodes, execs, options, secret_names=secret_names, timing=timing)


def _keyed(nodes: list[Node], ssh_key: str | None) -> list[Node]:
    """The nodes with `--ssh-key` in place of their registered key (remote ones only)."""
    if not ssh_key:
        return nodes
    return [n if n.local else n.model_copy(update={"ssh_key": ssh_key}) for n in nodes]


async def _open_every(nodes: list[Node], ssh_key: str | None) -> dict[str, Shell]:
    """A shell per node, or phase reach failed on the first unreachable node (exit 3, its NodeFailure's reason)."""
    shells, failures = await open_shells(_keyed(nodes, ssh_key))
    if failures:
        await close_all(shells)
        name, failure = next(iter(failures.items()))
        raise in_phase("reach", name, failure)
    return shells


async def start(nodes: list[Node], options: ShardOptions, *, echo: Echo, dry_run: bool, ssh_key: str | None = None,
                timing: Timing | None = None) -> int:
    """Plan, then (unless `dry_run`) run in the foreground; the exit code."""
    secrets = collect_secrets(options)
    if dry_run:
        return await _dry_run(nodes, options, echo=echo, ssh_key=ssh_key, secret_names=sorted(secrets))
    from backend.shard.plan import order_nodes

    check_names(order_nodes(nodes, options))
    execs = await _open_every(nodes, ssh_key)
    timing = timing or Timing()
    try:
        prepared: Prepared = await prepare(nodes, execs, options, secret_names=sorted(secrets), timing=timing)
        head = prepared.plan.parts[0]
        if not head.local:
            raise Refused(
                f"`shard start` runs on the head node, and {head.node} is not this machine",
                hint=f"run it on {head.node}, or name this machine with --head (it must be in --nodes); --dry-run works from anywhere",
            )
    except BaseException:
        await close_all(execs)
        raise
    from backend.shard.render import describe

    for line in describe(prepared.plan, checks=prepared.checks):
        echo(line)
    runner = ShardRunner(plan=prepared.plan, execs=execs, echo=echo, secrets=secrets, timing=timing, ray=options.ray)
    return await runner.run()


async def _dry_run(nodes: list[Node], options: ShardOptions, *, echo: Echo, ssh_key: str | None, secret_names: list[str]) -> int:
    """The plan, exit 0, whatever the nodes say. Every node is probed; when all answer and pass the
    checks the plan has their real addresses and the checks' results. Otherwise, whether a node is
    unreachable or answers but fails a check (no vllm, no ray, versions, GPUs), the dry run says so in one
    line and prints the plan with placeholders: it never needs a node, and treats every node alike.
    Bad input (ports, a unit name) is still a usage error."""
    from backend.shard.plan import placeholder_plan
    from backend.shard.render import describe

    execs, failures = await open_shells(_keyed(nodes, ssh_key))
    problem = "; ".join(f"{name}: {getattr(f, 'detail', None) or getattr(f, 'message', str(f))}" for name, f in failures.items())
    prepared: Prepared | None = None
    try:
        if not failures:
            prepared = await prepare(nodes, execs, options, secret_names=secret_names)
    except (Refused, EnvironmentProblem, PhaseFailure) as refused:
        problem = refused.message
    finally:
        await close_all(execs)
    if prepared is not None:
        for line in describe(prepared.plan, checks=prepared.checks):
            echo(line)
        return 0
    where = f"{', '.join(failures)} could not be reached ({problem})" if failures else f"a check failed ({problem})"
    echo(f"dry run without checks: {where}; a real start refuses until this is fixed")
    echo("values in <…> are resolved on the nodes at start: the head address from the head's interfaces, "
         "each worker's address and interface from `ip -o -4 route get HEAD` there; GPUs from nvidia-smi")
    if options.backend == "rpc":
        from backend.cluster.addresses import placeholders
        from backend.shard.plan import order_nodes

        ordered = order_nodes(nodes, options)
        shown = rpc.assemble(ordered, placeholders(ordered), options, secret_names=secret_names, local={n.name: n.local for n in ordered})
    else:
        shown = placeholder_plan(nodes, options, secret_names=secret_names)
    for line in describe(shown):
        echo(line)
    return 0


class NodeStatus(BaseModel):
    """One node in `c3 shard status`."""

    node: str
    """Registry name."""
    reachable: bool
    """The node answered."""
    error: str | None = None
    """Why not, when it did not."""
    processes: list[dict[str, str]] = Field(default_factory=list)
    """Processes c3 started there (`pid`, `shard`: its C3_SHARD tag, `command`), found by their C3_SHARD environment."""
    ray_address: str | None = None
    """The node's address in the Ray cluster, when it is a member."""
    ray_resources: dict[str, float] = Field(default_factory=dict)
    """Its Ray resources (CPU, GPU, memory…), when it is a member."""


class PartStatus(BaseModel):
    """One part of an rpc shard in `c3 shard status --backend rpc`."""

    node: str
    """Registry name of the node it runs on."""
    part: str
    """`llama-server` (the head) or `rpc-server HOST:PORT` (a worker)."""
    state: str
    """`running`, `not running` or `unreachable`."""
    pid: str | None = None
    """Its process id when running."""


class ShardStatus(BaseModel):
    """What `c3 shard status` reports."""

    head: str
    """Node asked about the cluster (the first in --nodes)."""
    ray_nodes: list[dict[str, object]] = Field(default_factory=list)
    """Alive Ray nodes as the head's Ray sees them (`address`, `resources`)."""
    ray_error: str | None = None
    """Why the cluster could not be read (no Ray running, Ray missing)."""
    nodes: list[NodeStatus]
    """Per node."""
    parts: list[PartStatus] = Field(default_factory=list)
    """Per part, rpc and mp backends only: llama-server on the head and an rpc-server on each worker (rpc), or
    each rank's `vllm serve` (mp)."""


_RAY_NODES = (
    "import json, ray\n"
    "ray.init(address={addr!r}, logging_level='ERROR', log_to_driver=False)\n"
    "print('C3JSON' + json.dumps([{{'address': n['NodeManagerAddress'], 'resources': n['Resources']}} for n in ray.nodes() if n['Alive']]))\n"
)


async def status(nodes: list[Node], *, ray: str = "ray", ssh_key: str | None = None, rpc_port: int | None = None,
                 mp: bool = False, tag: str | None = None, pool: ShellPool | None = None) -> ShardStatus:
    """Per node: c3's processes there and its Ray membership; the cluster as the first node's Ray sees it.
    With `rpc_port` (`--backend rpc`): each part's state instead of Ray's view (the first node is the head).
    With `mp` (`--backend mp`): each rank's `vllm serve` and its state, node i being rank i.
    With `tag`: only that shard's processes (the cockpit knows each shard's tag; two shards may share a node).
    With `pool`: its shells, left open for the next call (a node whose listing failed is dropped from it)."""
    execs, failures = await (pool.shells(_keyed(nodes, ssh_key)) if pool is not None else open_shells(_keyed(nodes, ssh_key)))
    try:
        head = nodes[0]
        tag = f"{head.name}-{rpc_port}" if rpc_port is not None and tag is None else tag
        script = tagged_script("list", tag=tag) + "ip -o -4 addr show 2>/dev/null | sed 's/^/addr=/'\n"

        async def listing_of(node: Node) -> CommandResult:
            if node.name in failures:
                raise failures[node.name]
            return await run_script(execs[node.name], script, timeout=30)

        listing = await asyncio.gather(*(listing_of(n) for n in nodes), return_exceptions=True)
        if pool is not None:
            for node, out in zip(nodes, listing, strict=True):
                if isinstance(out, BaseException) and node.name in execs:
                    await pool.discard(node.name)  # its connection may be gone: a fresh one next time
        result = ShardStatus(head=head.name, nodes=[])
        ray_nodes: list[dict[str, object]]
        error: str | None
        if rpc_port is not None or mp:
            ray_nodes, error = [], f"not used by --backend {'rpc' if rpc_port is not None else 'mp'}"
        elif head.name in execs:
            ray_nodes, error = await _ray_nodes(execs[head.name], ray)
        else:
            ray_nodes, error = [], f"{head.name} is unreachable"
        result.ray_nodes, result.ray_error = ray_nodes, error
        for node, out in zip(nodes, listing, strict=True):
            if isinstance(out, BaseException):
                result.nodes.append(NodeStatus(node=node.name, reachable=False, error=getattr(out, "message", str(out))))
                continue
            procs = [_process(line[5:]) for line in out.stdout.splitlines() if line.startswith("proc=")]
            status_ = NodeStatus(node=node.name, reachable=True, processes=procs)
            owned = {i.address for i in parse_interfaces([ln[5:] for ln in out.stdout.splitlines() if ln.startswith("addr=")])}
            member = next((entry for entry in ray_nodes if entry["address"] in owned), None)
            if member is not None:
                status_.ray_address = str(member["address"])
                status_.ray_resources = {k: float(v) for k, v in cast(dict[str, float], member["resources"]).items() if not k.startswith("node:")}
            result.nodes.append(status_)
        if rpc_port is not None:
            result.parts = rpc_parts(result.nodes, rpc_port)
        elif mp:
            result.parts = mp_parts(result.nodes)
        return result
    finally:
        if pool is None:
            await close_all(execs)


def _process(said: str) -> dict[str, str]:
    """`PID TAG COMMAND` (tagged_script's listing) as `pid`, `shard` (its C3_SHARD) and `command`."""
    pid, _, rest = said.partition(" ")
    tag, _, command = rest.partition(" ")
    return {"pid": pid, "shard": tag, "command": command.strip()}


def rpc_parts(nodes: list[NodeStatus], rpc_port: int) -> list[PartStatus]:
    """Each rpc part's state from the tagged processes: llama-server on the head, and on worker i an
    rpc-server with `-p rpc_port + i - 1` (workers may share a machine, so the port tells them apart)."""
    parts: list[PartStatus] = []
    for index, node in enumerate(nodes):
        want = "llama-server" if index == 0 else f"rpc-server port {rpc_port + index - 1}"
        if not node.reachable:
            parts.append(PartStatus(node=node.node, part=want, state="unreachable"))
            continue
        found = next((p["pid"] for p in node.processes if _is_part(p["command"].split(), index, rpc_port)), None)
        parts.append(PartStatus(node=node.node, part=want, state="running" if found else "not running", pid=found))
    return parts


def mp_parts(nodes: list[NodeStatus]) -> list[PartStatus]:
    """Each rank of an mp shard from the tagged processes: on node i, the `vllm serve … --node-rank i`
    that c3 started (its engine and worker children carry the tag too; the serve process names the rank)."""
    parts: list[PartStatus] = []
    for rank, node in enumerate(nodes):
        want = f"vllm serve rank {rank}" + (" (API)" if rank == 0 else " (headless)")
        if not node.reachable:
            parts.append(PartStatus(node=node.node, part=want, state="unreachable"))
            continue
        found = next((p["pid"] for p in node.processes if _is_rank(p["command"].split(), rank)), None)
        parts.append(PartStatus(node=node.node, part=want, state="running" if found else "not running", pid=found))
    return parts


def _is_rank(argv: list[str], rank: int) -> bool:
    return "serve" in argv and "--node-rank" in argv[:-1] and argv[argv.index("--node-rank") + 1] == str(rank)


def _is_part(argv: list[str], index: int, rpc_port: int) -> bool:
    if index == 0:
        return "--rpc" in argv or (bool(argv) and argv[0].endswith("llama-server"))
    return "-p" in argv[:-1] and argv[argv.index("-p") + 1] == str(rpc_port + index - 1) and "-H" in argv


async def _ray_nodes(head: Shell, ray: str) -> tuple[list[dict[str, object]], str | None]:
    """Ask the Ray running on `head` for its alive nodes (through Ray's own interpreter; `auto`
    finds the cluster this node belongs to)."""
    code = _RAY_NODES.format(addr="auto")
    find = (
        f"rp=$(command -v {shlex.quote(ray)}) || {{ echo 'C3ERR ray not found'; exit 0; }}\n"
        "py=$(head -n1 \"$rp\" | sed -n 's/^#!\\([^ ]*python[^ ]*\\).*/\\1/p'); [ -n \"$py\" ] || py=python3\n"
        f"\"$py\" -c {shlex.quote(code)} 2>&1 | grep -E '^C3JSON|Error' | tail -n 3\n"
    )
    result = await run_script(head, find, timeout=90)
    for line in result.stdout.splitlines():
        if line.startswith("C3JSON"):
            import json

            return json.loads(line[6:]), None
        if line.startswith("C3ERR "):
            return [], line[6:]
    said = (result.stdout or result.stderr).strip().splitlines()
    return [], said[-1] if said else f"could not read the Ray cluster (exit {result.exit_status})"


class StopResult(BaseModel):
    """What `c3 shard stop` did on one node."""

    node: str
    """Registry name."""
    stopped: int = 0
    """c3-started processes that were running."""
    killed: int = 0
    """Of those, how many needed SIGKILL."""
    shards: list[str] = Field(default_factory=list)
    """The tags (C3_SHARD) of the shards whose processes were stopped there."""
    ray_stop: str = ""
    """What `ray stop` said (last line), Ray backend only."""
    error: str | None = None
    """Why the node could not be handled."""


async def running_tags(nodes: list[Node], execs: dict[str, Shell]) -> set[str]:
    """The tags of every shard with a process on the nodes that answered (one `/proc` scan each)."""
    found: set[str] = set()
    said = await asyncio.gather(*(run_script(execs[n.name], tagged_script("list"), timeout=30) for n in nodes if n.name in execs),
                                return_exceptions=True)
    for out in said:
        if isinstance(out, CommandResult):
            found |= {_process(line[5:])["shard"] for line in out.stdout.splitlines() if line.startswith("proc=")}
    return found - {""}


async def stop(nodes: list[Node], *, ray: str = "ray", use_ray: bool = True, ssh_key: str | None = None,
               tag: str | None = None, every: bool = False) -> list[StopResult]:
    """On every node at once: mark the stop (a foreground `shard start` then ends with exit 0, "stopped
    by request"), TERM (then KILL) the processes of shard `tag`, then `ray stop`, then sweep again.

    Only one shard is ever stopped unless `every` is set (`--all`: every process carrying C3_SHARD): two shards
    may share a node, and test hosts in network namespaces share one pid namespace. With neither `tag` nor
    `every`, the one shard running on the nodes is stopped; several are a UsageError naming them, none is
    nothing to do (and no `ray stop`)."""
    execs, failures = await open_shells(_keyed(nodes, ssh_key))
    try:
        if tag is None and not every:
            running = sorted(await running_tags(nodes, execs))
            if len(running) > 1:
                names = ",".join(n.name for n in nodes)
                raise UsageError(f"{len(running)} shards run on {', '.join(n.name for n in nodes)}: {', '.join(running)}",
                                 hint=f"name the one to stop: c3 shard stop {running[0]} --nodes {names}; or --all to stop every one")
            if not running:
                return [StopResult(node=n.name, error=_why(failures[n.name])) if n.name in failures else StopResult(node=n.name)
                        for n in nodes]
            tag = running[0]

        async def one(node: Node) -> StopResult:
            if node.name in failures:
                return StopResult(node=node.name, error=_why(failures[node.name]))
            e = execs[node.name]
            first = await run_script(e, tagged_script("stop", grace_s=15, tag=tag, mark=True), timeout=60)
            out = StopResult(node=node.name, shards=[ln[6:] for ln in first.stdout.splitlines() if ln.startswith("shard=")])
            match = re.search(r"stopped=(\d+)(?: killed=(\d+))?", first.stdout)
            if match:
                out.stopped, out.killed = int(match.group(1)), int(match.group(2) or 0)
            if use_ray:
                said = await run_script(e, f"command -v {shlex.quote(ray)} >/dev/null 2>&1 || {{ echo 'ray not installed'; exit 0; }}; "
                                   f"{shlex.quote(ray)} stop 2>&1 | tail -n 1", timeout=90)
                out.ray_stop = re.sub(r"\x1b\[[0-9;]*m", "", said.stdout.strip().splitlines()[-1] if said.stdout.strip() else "")
                await run_script(e, tagged_script("stop", grace_s=5, tag=tag), timeout=60)
            return out

        results = await asyncio.gather(*(one(n) for n in nodes), return_exceptions=True)
        return [r if isinstance(r, StopResult) else StopResult(node=n.name, error=str(r)) for n, r in zip(nodes, results, strict=True)]
    finally:
        await close_all(execs)


def _why(failure: BaseException) -> str:
    return getattr(failure, "message", str(failure))


_VERSION = re.compile(r"^\d+\.\d+\.\d+([.-]?(rc|dev|post)\d+)?$")


async def install_ray(nodes: list[Node], *, version: str, python: str, echo: Echo, ssh_key: str | None = None,
                      wheelhouse: str | None = None) -> None:
    """`pip install ray[default]==V` with `python` on every node, one node after the other, then verify.

    `wheelhouse` (a folder on the nodes, e.g. filled by `pip download 'ray[default]==V' -d DIR`) installs
    without an index, for nodes that cannot reach PyPI.
    """
    if not _VERSION.match(version):
        raise UsageError(f"--ray-version {version!r} is not a version like 2.60.0")
    execs = await _open_every(nodes, ssh_key)
    try:
        spec = f"ray[default]=={version}"
        offline = f"--no-index --find-links {shlex.quote(wheelhouse)} " if wheelhouse else ""
        command = f"{shlex.quote(python)} -m pip install --disable-pip-version-check --no-input {offline}{shlex.quote(spec)}"
        for node in nodes:
            # One at a time: readable output, and nodes that share a file system (NFS home, one venv)
            # would otherwise race on the same site-packages.
            echo(f"[{node.name}] $ {command}")
            result = await run_script(execs[node.name], command + " 2>&1", timeout=1800)
            tail = [line for line in result.stdout.splitlines() if line.strip() and not line.startswith("WARNING: Location")]
            for line in tail[-3:]:
                echo(f"[{node.name}]   {line}")
            if result.exit_status != 0:
                hint = None
                if "externally-managed-environment" in result.stdout:
                    hint = "this Python refuses pip installs (PEP 668): pass --python with the venv vLLM runs in"
                raise Refused(f"pip install {spec} failed on {node.name} (exit {result.exit_status})", hint=hint)
        check = f"{shlex.quote(python)} -c 'import ray, sys, os; print(ray.__version__, os.path.join(os.path.dirname(sys.executable), \"ray\"))'"
        results = await asyncio.gather(*(run_script(execs[n.name], check, timeout=120) for n in nodes))
        for node, result in zip(nodes, results, strict=True):
            got = result.stdout.split()
            if result.exit_status != 0 or not got or got[0] != version:
                raise Refused(f"Ray on {node.name} is {got[0] if got else 'not importable'} after the install, not {version}")
            echo(f"[{node.name}] ray {got[0]} ready: {got[1] if len(got) > 1 else ''}")
    finally:
        await close_all(execs)
