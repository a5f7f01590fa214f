"""`c3 node add|ls|rm|trust`: the node registry and the host keys c3 trusts."""

from __future__ import annotations

import sys

import click

from c3.cli.common import echo_line, emit_json, json_option
from c3.cli.terminal import error_line


@click.group("node")
def node() -> None:
    """Machines c3 drives: `--host` is where a node answers OpenAI requests, `--ssh` how c3 reaches it."""


@node.command("add")
@click.argument("name")
@click.option("--host", "host", required=True, help="OpenAI endpoint base URL, e.g. http://10.0.0.5:8000")
@click.option("--ssh", "ssh", required=True, help="USER@HOST[:PORT] this machine orchestrates it through")
@click.option("--ssh-key", "ssh_key", default=None, help="Private key file (default: agent / ~/.ssh)")
@click.option("--local", "local", is_flag=True,
              help="This machine, driven without SSH, whatever --ssh names (locality otherwise follows --ssh only).")
def add(name: str, host: str, ssh: str, ssh_key: str | None, local: bool) -> None:
    """Register a node. HOST in --ssh may be a DNS name, an IPv4 address, [IPv6] or a ~/.ssh/config alias."""
    from backend.actions import NewNode
    from backend.actions.add_node import AddNode

    node_ = AddNode(NewNode(name, host, ssh, ssh_key, local)).run(echo_line).data
    where = "this machine (run without SSH)" if node_.local else f"ssh {node_.ssh}"
    click.echo(f"added node {node_.name}: {node_.host} via {where}")
    if not node_.local:
        click.echo(f"next: `c3 node trust {node_.name}` to check and trust its host key")


@node.command("ls")
@json_option
def ls(as_json: bool) -> None:
    """List registered nodes."""
    from backend.views.registry import registered_nodes

    nodes = registered_nodes()
    if as_json:
        emit_json({"nodes": [n.model_dump(mode="json") for n in nodes]})
        return
    if not nodes:
        click.echo("no nodes registered (c3 node add NAME --host URL --ssh USER@HOST)")
        return
    width = max(len(n.name) for n in nodes)
    for n in nodes:
        click.echo(f"{n.name:<{width}}  {n.host:<28}  {n.ssh}{'  (local)' if n.local else ''}")


@node.command("status")
@click.argument("names", required=False)
@json_option
def status(names: str | None, as_json: bool) -> None:
    """Probe every node (or NAMES a,b): SSH reachability, endpoint health, GPUs (exit 3 if a node is unreachable)."""
    from backend.views.registry import node_statuses

    rows = node_statuses(names)
    # An unreachable node is the environment refusing (DESIGN.md exit codes): scripts that ask
    # `node status` before a launch must see it in the code, not only in the text.
    unreachable = [r.name for r in rows if not r.local and not r.reachable]
    if as_json:
        emit_json({"nodes": [r.model_dump(mode="json") for r in rows]})
        sys.exit(3 if unreachable else 0)
    if not rows:
        click.echo("no nodes registered")
        return
    for r in rows:
        reach = "local" if r.local else ("ssh ok" if r.reachable else f"ssh: {r.ssh_error}")
        gpus = ", ".join(f"{g.index}:{g.name}" for g in r.gpus) or (r.gpu_error or "no GPUs")
        click.echo(f"{r.name}  {reach}  endpoint {'serving' if r.endpoint_ok else 'down'}  GPUs: {gpus}")
    if unreachable:
        error_line(f"{len(unreachable)} of {len(rows)} node(s) unreachable: {', '.join(unreachable)}",
                   hint="check the node's SSH target with `c3 node ls` and that sshd answers")
        sys.exit(3)


@node.command("rm")
@click.argument("name")
def rm(name: str) -> None:
    """Unregister a node."""
    from backend.actions.remove_node import RemoveNode

    RemoveNode(name).run(echo_line)
    click.echo(f"removed node {name}")


@node.command("trust")
@click.argument("name")
@click.option("--fingerprint", default=None, help="Trust only if the node's key has this SHA256:… fingerprint.")
@click.option("--yes", "-y", "yes", is_flag=True, help="Trust the key the node offers now without asking.")
def trust(name: str, fingerprint: str | None, yes: bool) -> None:
    """Show a node's SSH host key fingerprint and add it to $C3_HOME/known_hosts.

    Compare the fingerprint with `ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub` run on the node
    (or its console) before trusting it.
    """
    from backend.actions.trust_node import TrustNode
    from backend.errors import Refused

    def approve(offered: object) -> bool:
        if not sys.stdin.isatty():
            raise Refused("not trusting a host key without confirmation", hint="pass --fingerprint SHA256:… (checked on the node) or --yes")
        if not click.confirm("trust this key?", default=False):
            raise Refused("host key not trusted")
        return True

    click.echo(TrustNode(name, fingerprint, approve=None if yes else approve).run(echo_line).message)
