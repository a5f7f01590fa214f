"""`c3 shard status`: the Ray cluster as the head sees it, and c3's shard processes on every node."""

from __future__ import annotations

from backend.shard.ops import ShardStatus


def shard_status(nodes: str, *, ray: str = "ray", ssh_key: str | None = None, rpc_port: int | None = None,
                 mp: bool = False) -> ShardStatus:
    """Ask every registered node in `nodes` (`a,b`; the first is asked about Ray) now; a node that
    does not answer is listed with `reachable=False` and why. `rpc_port`: an rpc shard's parts instead of Ray;
    `mp`: an mp shard's ranks instead of Ray."""
    import asyncio

    from backend.nodes.registry import resolve_nodes
    from backend.shard.ops import status

    return asyncio.run(status(resolve_nodes(nodes), ray=ray, ssh_key=ssh_key, rpc_port=rpc_port, mp=mp))
