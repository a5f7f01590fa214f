"""`c3 shard`: one vLLM server split across nodes, with Ray or vLLM's multiprocessing executor, or one
llama.cpp model split by layers over llama.cpp RPC workers (`--backend rpc`).

    c3 shard install-ray --nodes a,b [--ray-version V] [--python PATH]
    c3 shard start --profile big --nodes a,b [--tp 1] [--pp 2] [--backend ray|mp|rpc] [--head NAME] [--dry-run] …
    c3 shard status [TAG] [--nodes a,b] [--backend rpc|mp] [--json]
    c3 shard stop [TAG] [--nodes a,b] [--all] [--backend ray|mp|rpc]

TAG is a shard's C3_SHARD value (`HEAD-PORT`, as `shard start` and `shard status` say); without
`--nodes`, its nodes come from the record `shard start` left on this machine.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from backend.actions.start_shard import RPC_NO_AUTH
from c3.cli.common import PORT, emit_json, json_option
from c3.cli.terminal import error_line


def _echo(line: str) -> None:
    click.echo(line)
    sys.stdout.flush()


def _echo_step(step: Any) -> None:
    """Print a running write's own lines as they come (a shard runs for hours: flush each)."""
    if step.line is not None:
        _echo(step.line)


nodes_option = click.option("--nodes", required=True, help="Registered nodes, comma-separated (c3 node ls).")
ssh_key_option = click.option("--ssh-key", type=click.Path(dir_okay=False), default=None, help="SSH private key for every remote node (overrides the registry's).")
ray_option = click.option("--ray", "ray", default="ray", show_default=True, help="The ray executable on every node.")


@click.group()
def shard() -> None:
    """One model split across nodes (Ray or vLLM's multiprocessing backend). Runs on the head node."""


@shard.command("install-ray")
@nodes_option
@click.option("--ray-version", default=None, help="Ray version to install everywhere (default: the one c3 is tested with).")
@click.option("--python", "python", default="python3", show_default=True, help="Interpreter to pip-install into (the one vLLM runs under).")
@click.option("--wheelhouse", default=None, help="Install offline from this folder of wheels on the nodes (pip download 'ray[default]==V' -d DIR).")
@ssh_key_option
def install_ray(nodes: str, ray_version: str | None, python: str, wheelhouse: str | None, ssh_key: str | None) -> None:
    """pip install ray[default]==V on every node, the same version everywhere."""
    from backend.actions.install_ray import InstallRay

    _echo(InstallRay(nodes, ray_version, python, wheelhouse, ssh_key).run(_echo_step).message)


@shard.command(epilog=f"--backend rpc: {RPC_NO_AUTH}.")
@click.option("--profile", required=True, help="A profile in $C3_HOME/profiles/ (model, args, env), or 'MODEL [vllm args]'.")
@nodes_option
@click.option("--tp", type=click.IntRange(min=1), default=None, help="Tensor-parallel size (default 1, or the profile's).")
@click.option("--pp", type=click.IntRange(min=1), default=None, help="Pipeline-parallel size (default 2, or the profile's).")
@click.option("--backend", type=click.Choice(["ray", "mp", "rpc"]), default=None,
              help="Executor (default ray, or the profile's); rpc: llama.cpp RPC, the profile's model is a GGUF path.")
@click.option("--head", default=None, help="Head node (default: the first of --nodes; mp needs it first).")
@click.option("--head-address", default=None, help="Address workers reach the head at (default: detected).")
@ssh_key_option
@click.option("--stop-services", is_flag=True, help="First stop the single-node unit on every node (needs passwordless sudo).")
@click.option("--service-name", default="vllm.service", show_default=True, help="Unit --stop-services stops.")
@click.option("--vllm", "vllm", default="vllm", show_default=True, help="The vllm executable on every node.")
@ray_option
@click.option("--python", "python", default=None, help="Interpreter Ray runs under (default: the ray script's own).")
@click.option("--port", type=PORT, default=None, help="The head's OpenAI API port (default 8000, or the profile's).")
@click.option("--ray-port", type=PORT, default=6379, show_default=True, help="Ray GCS port on the head.")
@click.option("--master-port", type=PORT, default=29501, show_default=True, help="torch rendezvous port on the head (mp).")
@click.option("--llama-server", "llama_server", default="llama-server", show_default=True, help="llama-server on the head (rpc).")
@click.option("--rpc-server", "rpc_server", default="ggml-rpc-server", show_default=True, help="ggml-rpc-server on every worker (rpc).")
@click.option("--rpc-port", type=PORT, default=50052, show_default=True,
              help="RPC port of the first worker; the i-th worker listens on this + i - 1 (rpc).")
@click.option("--gpus-per-node", type=click.IntRange(min=0), default=None, help="Declare each node's GPUs instead of asking nvidia-smi (CPU test hosts).")
@click.option("--dry-run", is_flag=True, help="Run the checks and print every node's commands without starting anything.")
@click.option("--deadline", "deadlines", multiple=True, metavar="PHASE=SECONDS",
              help="A phase's deadline: reach (60), link (30), rendezvous (90), load (3600, until /models answers) or "
                   "first_token (300, until one completion returns a token); repeatable.")
def start(profile: str, nodes: str, tp: int | None, pp: int | None, backend: str | None, head: str | None, head_address: str | None,
          ssh_key: str | None, stop_services: bool, service_name: str, vllm: str, ray: str, python: str | None, port: int | None,
          ray_port: int, master_port: int, llama_server: str, rpc_server: str, rpc_port: int, gpus_per_node: int | None,
          dry_run: bool, deadlines: tuple[str, ...]) -> None:
    """Run one vLLM server across the nodes, in the foreground (Ctrl+C stops every node's part).

    With --backend rpc: a ggml-rpc-server on each worker, bound to its cluster-link address, and
    llama-server --rpc on the head; every node must have the same llama.cpp build."""
    from backend.actions.start_shard import StartShard

    options = {"head": head, "head_address": head_address, "vllm": vllm, "ray": ray, "python": python, "gpus_per_node": gpus_per_node,
               "stop_services": stop_services, "service_name": service_name, "llama_server": llama_server, "rpc_server": rpc_server,
               "rpc_port": rpc_port}
    action = StartShard(profile, nodes, tp, pp, backend, port, ray_port, master_port, options, ssh_key, dry_run, list(deadlines))
    sys.exit(action.run(_echo_step).data)


tag_argument = click.argument("tag", required=False, metavar="[TAG]")
some_nodes_option = click.option("--nodes", default=None, help="Registered nodes, comma-separated (default: TAG's, from its record here).")


@shard.command()
@tag_argument
@some_nodes_option
@ray_option
@click.option("--backend", type=click.Choice(["ray", "mp", "rpc"]), default=None,
              help="rpc: each part's state (llama-server on the first node, an rpc-server on each other); mp: each rank's "
                   "vllm serve (node i is rank i); both instead of Ray's view (default: TAG's, else ray).")
@click.option("--rpc-port", type=PORT, default=None, help="The start's --rpc-port (rpc; default TAG's port, else 50052).")
@ssh_key_option
@json_option
def status(tag: str | None, nodes: str | None, ray: str, backend: str | None, rpc_port: int | None, ssh_key: str | None, as_json: bool) -> None:
    """The Ray cluster as the first node sees it (or, rpc and mp, each part's state), and c3's processes on every node,
    each with its shard's tag; with TAG, only that shard's (exit 3 if a node is unreachable, 1 if an rpc or mp part is
    not running)."""
    from backend.views.shard import shard_status

    result, backend = shard_status(nodes, tag=tag, ray=ray, ssh_key=ssh_key, backend=backend, rpc_port=rpc_port)
    unreachable = [n for n in result.nodes if not n.reachable]
    down = [p for p in result.parts if p.state == "not running"]
    if as_json:
        emit_json(result.model_dump())
        sys.exit(3 if unreachable else 1 if down else 0)
    if backend in ("rpc", "mp"):
        _parts_status(result)
        sys.exit(3 if unreachable else 1 if down else 0)
    if result.ray_error:
        _echo(f"ray: {result.ray_error} (asked {result.head})")
    else:
        _echo(f"ray: {len(result.ray_nodes)} node(s) alive (asked {result.head})")
    for node in result.nodes:
        if not node.reachable:
            _echo(f"{node.node}: unreachable: {node.error}")
            continue
        res = ", ".join(f"{k} {v:g}" for k, v in sorted(node.ray_resources.items()) if k in {"CPU", "GPU"})
        member = f"in the Ray cluster at {node.ray_address} ({res})" if node.ray_address else "not in a Ray cluster"
        _echo(f"{node.node}: {member}; {len(node.processes)} c3 shard process(es)")
        for proc in node.processes:
            _echo(f"    {proc['pid']:>7} {proc.get('shard', '')} {proc['command'][:160]}")
    if unreachable:
        error_line(f"{len(unreachable)} of {len(result.nodes)} node(s) unreachable: {', '.join(n.node for n in unreachable)}")
        sys.exit(3)


def _parts_status(result: Any) -> None:
    for part in result.parts:
        pid = f" (pid {part.pid})" if part.pid else ""
        _echo(f"{part.node}: {part.part}: {part.state}{pid}")
    for node in result.nodes:
        if not node.reachable:
            _echo(f"{node.node}: unreachable: {node.error}")
    down = [f"{p.part} on {p.node}" for p in result.parts if p.state != "running"]
    if down:
        click.echo(f"c3: error: not running: {', '.join(down)}", err=True)


@shard.command()
@tag_argument
@some_nodes_option
@click.option("--all", "every", is_flag=True, help="Stop every shard on --nodes (every process carrying C3_SHARD), not one.")
@ray_option
@click.option("--backend", type=click.Choice(["ray", "mp", "rpc"]), default=None,
              help="mp and rpc skip `ray stop` (default: TAG's, from its record, else ray).")
@ssh_key_option
def stop(tag: str | None, nodes: str | None, every: bool, ray: str, backend: str | None, ssh_key: str | None) -> None:
    """Stop shard TAG on its nodes (found by its C3_SHARD environment; other shards there keep running), then `ray stop`.

    Without TAG: the live shard this machine started on exactly --nodes, else the one shard running there
    (several: exit 2, naming them); with --all, every shard on --nodes."""
    from backend.actions.stop_shard import StopShard

    use_ray = None if backend is None else backend == "ray"
    done = StopShard(nodes or "", ray, use_ray, ssh_key, tag=tag, every=every).run(_echo_step)
    if not done.ok:
        error_line(f"{done.message}")
    else:
        _echo(f"c3: {done.message}")
    sys.exit(0 if done.ok else 3)
