"""Which nodes `c3 shard stop|status` asks, and which shard they mean: `--nodes` when given (registry
names), else the nodes in the record of shard TAG that a `c3 shard start` on this machine wrote
(backend.shard.announce; it also says the shard's backend)."""

from __future__ import annotations

from dataclasses import dataclass

from backend.errors import UsageError
from backend.remote.node import Node
from backend.shard import announce
from backend.shard.scripts import plain_tag


@dataclass(frozen=True)
class ShardTarget:
    """The nodes to ask, in rank order, and what is known of the shard."""

    nodes: list[Node]
    tag: str | None
    """The shard's C3_SHARD tag: named, or (not named, with `--nodes`) the one live shard this machine started on
    exactly those nodes; None: `--all`, or not known here (the stop then looks at what runs on the nodes)."""
    record: announce.ShardRecord | None
    """Its record, when it was started on this machine."""


def resolve(tag: str | None, nodes: str | None, *, every: bool = False) -> ShardTarget:
    """The target of `c3 shard stop|status [TAG] [--nodes a,b] [--all]`; bad input is a UsageError."""
    from backend.nodes.registry import resolve_nodes

    if tag is not None and not plain_tag(tag):
        raise UsageError(f"{tag!r} is not a shard tag (HEAD-PORT, e.g. a-8000)", hint="`c3 shard status --nodes a,b` lists each process's shard")
    if tag is not None and every:
        raise UsageError("name one shard or --all, not both", hint="c3 shard stop TAG stops that shard; --all every shard on --nodes")
    record = announce.find(tag) if tag else None
    if nodes:
        found = resolve_nodes(nodes)
        if tag is None and not every:
            # Not named: the shard this machine started on exactly these nodes, if there is one such
            # (its record is exact where a look at the nodes' processes may see another's shard).
            names = {n.name for n in found}
            mine = [r for r in announce.read_records() if (r.state != "ended" or r.runner_gone) and {n.name for n in r.nodes} == names]
            if len(mine) == 1:
                record, tag = mine[0], mine[0].tag
        return ShardTarget(found, tag, record)
    if record is not None:
        return ShardTarget(list(record.nodes), tag, record)
    if tag:
        raise UsageError(f"no shard {tag} was started on this machine, so its nodes are not known here",
                         hint="name them: --nodes a,b (c3 shard status --nodes a,b lists each process's shard)")
    raise UsageError("--nodes is needed unless a shard's tag is given (c3 shard stop TAG)",
                     hint="the cockpit's Nodes mode and `c3 shard status --nodes a,b` show each shard's tag")
