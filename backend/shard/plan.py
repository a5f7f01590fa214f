"""Turn nodes, their facts and the options into a `ShardPlan` — or refuse, with the numbers.

Pure functions only (no I/O): the pre-flight probes happen elsewhere and hand their results in, so
every refusal is unit-testable and `--dry-run` shows exactly what a real start would run.
"""

from __future__ import annotations

import shlex

from pydantic import BaseModel, Field

from backend.cluster.addresses import (  # noqa: F401 - shared with recipes; tests import them here
    GroupAddresses,
    assign,
    check_routes,
    choose_head_address,
    placeholders,
)
from backend.envnames import assignments, check_env_name
from backend.errors import Refused, UsageError
from backend.limits import PORT_MAX, PORT_MIN
from backend.remote.node import Node
from backend.secrets_env import split_secrets
from backend.shard import mp_cmds, ray_cmds
from backend.shard.models import Backend, NodeFacts, NodePart, Route, ShardPlan, Step
from backend.systemd_unit import check_unit_name


class ShardOptions(BaseModel):
    """What `c3 shard start` was asked for (after the profile was read)."""

    backend: Backend = "ray"
    """Executor backend."""
    tp: int = Field(default=1, ge=1)
    """Tensor-parallel size (`--tp`, default 1)."""
    pp: int = Field(default=2, ge=1)
    """Pipeline-parallel size (`--pp`, default 2)."""
    head: str | None = None
    """`--head NAME`; None means the first of `--nodes`."""
    head_address: str | None = None
    """`--head-address`: force the address workers reach the head at."""
    api_port: int = Field(default=8000, ge=PORT_MIN, le=PORT_MAX)
    """`--port`: the head's OpenAI API port."""
    ray_port: int = Field(default=6379, ge=PORT_MIN, le=PORT_MAX)
    """Ray GCS port on the head (outside Ray's worker range 10002–19999)."""
    master_port: int = Field(default=29501, ge=PORT_MIN, le=PORT_MAX)
    """torch rendezvous port on the head for `--backend mp`."""
    vllm: str = "vllm"
    """The vllm executable on every node (`--vllm PATH`)."""
    ray: str = "ray"
    """The ray executable on every node (`--ray PATH`)."""
    python: str | None = None
    """Interpreter Ray runs under, when not the `ray` script's own (`--python`)."""
    llama_server: str = "llama-server"
    """The llama-server executable on the head (`--backend rpc`, `--llama-server PATH`)."""
    rpc_server: str = "ggml-rpc-server"
    """The ggml-rpc-server executable on every worker (`--backend rpc`, `--rpc-server PATH`)."""
    rpc_port: int = Field(default=50052, ge=PORT_MIN, le=PORT_MAX)
    """RPC port of the first worker; worker i listens on rpc_port + i - 1 (`--backend rpc`)."""
    gpus_per_node: int | None = Field(default=None, ge=0)
    """Declare each node's GPU count instead of asking nvidia-smi (CPU test hosts)."""
    stop_services: bool = False
    """`--stop-services`: stop the single-node unit on every node first."""
    service_name: str = "vllm.service"
    """Unit `--stop-services` stops."""
    model: str
    """What `vllm serve` serves."""
    args: list[str] = Field(default_factory=list)
    """Extra `vllm serve` arguments (from the profile)."""
    env: dict[str, str] = Field(default_factory=dict)
    """Extra environment for every step (from the profile); secret unless named in `public_env`."""
    public_env: list[str] = Field(default_factory=list)
    """Names in `env` that may be shown and passed in the clear (backend.secrets_env)."""


def order_nodes(nodes: list[Node], options: ShardOptions) -> list[Node]:
    """Head first, then the others in `--nodes` order; mp refuses a head that is not first."""
    if len(nodes) < 2:
        raise UsageError("a shard needs at least two nodes, e.g. --nodes a,b", hint="one node? use `c3 serve` or a pod")
    names = [n.name for n in nodes]
    head = options.head or names[0]
    if head not in names:
        raise UsageError(f"--head {head} is not one of --nodes {','.join(names)}")
    if options.backend == "mp" and head != names[0]:
        raise Refused(
            f"--backend mp needs the head first in --nodes: head is {head}, but --nodes starts with {names[0]}",
            hint=f"--nodes {','.join([head] + [n for n in names if n != head])} (mp ranks follow --nodes order)",
        )
    return [nodes[names.index(head)]] + [n for n in nodes if n.name != head]


def gpu_counts(ordered: list[Node], facts: dict[str, NodeFacts], options: ShardOptions) -> dict[str, int]:
    """GPUs each node contributes; refuses tp × pp ≠ their sum (and uneven nodes for mp)."""
    counts: dict[str, int] = {}
    unknown: list[str] = []
    for node in ordered:
        if options.gpus_per_node is not None:
            counts[node.name] = options.gpus_per_node
        elif facts[node.name].gpus is None:
            unknown.append(node.name)
            counts[node.name] = 0
        else:
            counts[node.name] = facts[node.name].gpus or 0
    total = sum(counts.values())
    per_node = ", ".join(f"{name}: {count}" for name, count in counts.items())
    if options.tp * options.pp != total:
        hint = "set --tp × --pp to the GPUs the nodes have (tp = GPUs per node, pp = nodes is the usual layout)"
        if unknown:
            hint = (f"nvidia-smi found no GPU on {', '.join(unknown)}; on CPU-only hosts declare one with "
                    "--gpus-per-node N")
        raise Refused(
            f"--tp {options.tp} × --pp {options.pp} = {options.tp * options.pp} GPUs, "
            f"but the nodes have {total} ({per_node})",
            hint=hint,
        )
    if options.backend == "mp" and len(set(counts.values())) > 1:
        raise Refused(
            f"--backend mp needs the same number of GPUs on every node ({per_node})",
            hint="use --backend ray, which places ranks by Ray's resources",
        )
    return counts


def check_versions(ordered: list[Node], facts: dict[str, NodeFacts], backend: Backend) -> None:
    """Refuse Ray, Python or vLLM versions that differ between nodes (Ray refuses to join them later
    anyway; mixed vLLM builds fail at the first collective, far into a long boot)."""
    if backend == "ray":
        missing = [n.name for n in ordered if not facts[n.name].ray_version]
        if missing:
            raise Refused(
                f"Ray is not installed on {', '.join(missing)} (no `ray` found)",
                hint="`c3 shard install-ray --nodes " + ",".join(n.name for n in ordered) + "`, or --backend mp, or --ray PATH",
            )
        _same("Ray", {n.name: facts[n.name].ray_version for n in ordered}, "install one version everywhere: c3 shard install-ray --ray-version V")
    pythons = {n.name: facts[n.name].python_version for n in ordered}
    missing = [name for name, version in pythons.items() if not version]
    if missing:
        raise Refused(f"no Python found on {', '.join(missing)}", hint="name the interpreter with --python PATH")
    _same("Python", pythons, "use the same Python minor and patch version on every node (same image or venv recipe)")
    # Both executors run vLLM's own code on every node (Ray actors import it there too).
    _same("vLLM", {n.name: facts[n.name].vllm_version for n in ordered if facts[n.name].vllm_version},
          "install the same vLLM on every node")


def _same(what: str, versions: dict[str, str | None], hint: str) -> None:
    if len(set(versions.values())) > 1:
        listing = ", ".join(f"{name}: {version}" for name, version in versions.items())
        raise Refused(f"{what} versions differ between nodes ({listing})", hint=hint)


def check_sudo(ordered: list[Node], facts: dict[str, NodeFacts]) -> None:
    """`--stop-services` needs `sudo -n true` to succeed on every node."""
    bad = [n.name for n in ordered if facts[n.name].sudo_ok is not True]
    if bad:
        said = "; ".join(f"{name}: {facts[name].sudo_error or 'not checked'}" for name in bad)
        raise Refused(
            f"--stop-services needs passwordless sudo, which {', '.join(bad)} lack ({said})",
            hint="allow `systemctl stop` for that unit in a sudoers drop-in, or stop the service by hand and drop --stop-services",
        )


def split_env(env: dict[str, str], public: list[str] | None = None) -> tuple[dict[str, str], dict[str, str]]:
    """(shown, secret): everything not public is passed on stdin, never shown or put in argv."""
    return split_secrets(env, public or [])


def build_plan(
    nodes: list[Node],
    facts: dict[str, NodeFacts],
    routes: dict[str, Route],
    options: ShardOptions,
    *,
    head_address: str,
    secret_names: list[str] | None = None,
) -> ShardPlan:
    """Assemble each node's part in start order (checks must already have passed)."""
    ordered = order_nodes(nodes, options)
    counts = gpu_counts(ordered, facts, options)
    addresses = assign(ordered, facts, routes, head_address)
    return _assemble(ordered, counts, addresses, options, secret_names=secret_names,
                     local={n.name: facts[n.name].local for n in ordered},
                     gb10={n.name: any("GB10" in g for g in facts[n.name].gpu_names) for n in ordered})


def placeholder_plan(nodes: list[Node], options: ShardOptions, *, secret_names: list[str] | None = None) -> ShardPlan:
    """The plan a dry run shows without asking the nodes: addresses and interfaces are placeholders
    that say where they will be resolved; GPUs per node are --gpus-per-node, else tp × pp spread evenly."""
    ordered = order_nodes(nodes, options)
    total = options.tp * options.pp
    per_node = options.gpus_per_node if options.gpus_per_node is not None else max(1, total // len(ordered))
    counts = {n.name: per_node for n in ordered}
    return _assemble(ordered, counts, placeholders(ordered), options, secret_names=secret_names,
                     local={n.name: n.local for n in ordered}, gb10={n.name: False for n in ordered})


def _assemble(ordered: list[Node], counts: dict[str, int], addresses: GroupAddresses, options: ShardOptions, *,
              secret_names: list[str] | None, local: dict[str, bool], gb10: dict[str, bool]) -> ShardPlan:
    shown_env, _ = split_env(options.env, options.public_env)
    head = ordered[0]
    head_address = addresses.head_address
    port = options.ray_port if options.backend == "ray" else options.master_port
    tag = f"{head.name}-{port}"
    parts: list[NodePart] = []
    for rank, node in enumerate(ordered):
        address, iface = addresses.ranks[node.name].address, addresses.ranks[node.name].interface
        env = {**addresses.env(node.name), **shown_env}
        if options.backend == "mp":
            env["MASTER_ADDR"] = head_address
        elif gb10[node.name]:
            # Unified memory: Ray's OOM monitor sees the model's weights as host memory pressure
            # and kills vLLM's workers (NVIDIA's Spark playbook and eugr set this too).
            env["RAY_memory_monitor_refresh_ms"] = "0"
        parts.append(
            NodePart(
                node=node.name,
                role="head" if rank == 0 else "worker",
                rank=rank,
                local=local[node.name],
                ssh=None if local[node.name] else f"{node.ssh_user}@{node.ssh_host}:{node.ssh_port}",
                address=address,
                interface=iface,
                gpus=counts[node.name],
                env=env,
                steps=_steps(options, rank, len(ordered), head_address, address, counts[node.name]),
            )
        )
    stop = []
    if options.stop_services:
        # No `--` here: a sudoers rule names the exact command (`systemctl stop vllm.service`); the
        # name is checked instead, so it can never be read as an option.
        check_unit_name(options.service_name, "--service-name", suffix=False)
        stop = [Step(label=f"stop {options.service_name}", argv=["sudo", "-n", "systemctl", "stop", options.service_name])]
    return ShardPlan(
        backend=options.backend,
        model=options.model,
        head=head.name,
        head_address=head_address,
        head_port=port,
        api_port=options.api_port,
        tp=options.tp,
        pp=options.pp,
        parts=parts,
        stop_services=stop,
        secret_env=sorted(set(secret_names or []) | set(split_env(options.env, options.public_env)[1])),
        tag=tag,
    )


def _steps(options: ShardOptions, rank: int, nnodes: int, head_address: str, address: str, gpus: int) -> list[Step]:
    if options.backend == "mp":
        return [
            mp_cmds.serve(
                options.vllm, model=options.model, tp=options.tp, pp=options.pp, nnodes=nnodes, rank=rank,
                master=head_address, master_port=options.master_port, api_port=options.api_port, args=options.args,
            )
        ]
    if rank == 0:
        return [
            ray_cmds.head_start(options.ray, address=address, port=options.ray_port, gpus=gpus),
            ray_cmds.serve(
                options.vllm, model=options.model, tp=options.tp, pp=options.pp, api_port=options.api_port,
                head=head_address, ray_port=options.ray_port, args=options.args,
            ),
        ]
    return [ray_cmds.worker_start(options.ray, head=head_address, port=options.ray_port, address=address, gpus=gpus)]


def render_step(env: dict[str, str], step: Step, secret_names: list[str]) -> str:
    """One shell line for the dry-run: `VAR=… … argv`, secrets as `VAR=<hidden>`."""
    merged = {**env, **step.env}
    words = [assignments(merged, "shard environment")] if merged else []
    words += [f"{check_env_name(name, 'secret')}=<hidden>" for name in secret_names]
    return " ".join(words + [shlex.quote(a) for a in step.argv])
