"""`c3 shard status`: the Ray cluster as the head sees it, and c3's shard processes on every node; and,
for the cockpit, every shard this machine started with each rank's state now (`live_shards`)."""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any, Literal, TypeVar

from pydantic import BaseModel

from backend.shard.announce import ShardRecord
from backend.shard.ops import ShardStatus


def shard_status(nodes: str | None, *, tag: str | None = None, ray: str = "ray", ssh_key: str | None = None,
                 backend: str | None = None, rpc_port: int | None = None) -> tuple[ShardStatus, str]:
    """Ask every registered node in `nodes` (`a,b`; the first is asked about Ray) now, or shard `tag`'s nodes from
    its record; a node that does not answer is listed with `reachable=False` and why. With `tag`, only that
    shard's processes. `backend` (default: the record's, else ray): `rpc` lists an rpc shard's parts and `mp`
    an mp shard's ranks instead of Ray. Returns the status and the backend it was read as."""
    import asyncio

    from backend.shard.ops import status
    from backend.shard.target import resolve

    found = resolve(tag, nodes)
    backend = backend or (found.record.backend if found.record is not None else "ray")
    if backend == "rpc" and rpc_port is None:
        suffix = tag.rsplit("-", 1)[-1] if tag else ""
        rpc_port = found.record.head_port if found.record is not None else int(suffix) if suffix.isdigit() else 50052
    return asyncio.run(status(found.nodes, ray=ray, ssh_key=ssh_key, rpc_port=rpc_port if backend == "rpc" else None,
                              mp=backend == "mp", tag=tag)), backend


T = TypeVar("T")
RankState = Literal["running", "starting", "dead", "unreachable", "stopped"]
Headline = Literal["starting", "serving", "degraded", "stopped"]


class LiveRank(BaseModel):
    """One rank (one node's part) of a shard, as the cockpit shows it."""

    node: str
    """Registry name of the node it runs on."""
    rank: int
    """Its rank (0 = the head)."""
    part: str
    """What runs there (`vllm serve rank 1 (headless)`, `rpc-server port 50052`, …)."""
    pid: str | None = None
    """Its process id when running."""
    state: RankState
    """`running`; `starting` (not running yet, before the first token); `dead` (not running while the shard serves: it
    died); `unreachable`; `stopped` (the shard ended)."""


class LiveShard(BaseModel):
    """A shard started on this machine, with each rank's state read from its node now."""

    tag: str
    """Its C3_SHARD value."""
    backend: str
    """`mp`, `rpc` or `ray`."""
    model: str
    """What it serves."""
    api_url: str
    """The head's OpenAI base URL."""
    headline: Headline
    """`starting` (no token yet), `serving`, `degraded` (a rank is dead or unreachable) or `stopped`."""
    detail: str = ""
    """One line: which rank is down and where, or why the shard stopped."""
    ranks: list[LiveRank]
    """In rank order."""
    nodes: list[str]
    """Node names in rank order."""
    started_at: float = 0.0
    """Unix time its runner started."""


class ShardWatch:
    """What a view that polls `live_shards` every second holds: one SSH connection per node, kept between
    polls on its own loop thread (backend.remote.fleet.ShellPool) and closed `idle_s` after the last poll
    (the view went away) or by `close()`. Without it each poll connects to every node afresh."""

    def __init__(self, idle_s: float = 5.0) -> None:
        from backend.remote.fleet import LoopThread, ShellPool

        self.pool = ShellPool(idle_s)
        self._loop = LoopThread("c3-shard-watch")

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` on the watch's loop, where its connections live."""
        return self._loop.run(coro)

    def poll(self) -> list[LiveShard]:
        """`live_shards` through the kept connections (blocking; call it from a worker)."""
        return live_shards(self)

    def close(self) -> None:
        self._loop.close(self.pool.close())


def live_shards(watch: ShardWatch | None = None) -> list[LiveShard]:
    """Every shard this machine's `c3 shard start` announced (backend.shard.announce), newest first; a
    running one's ranks are read from their nodes now (blocking: SSH; call it from a worker), through
    `watch`'s kept connections when given."""
    import asyncio

    from backend.shard.announce import read_records
    from backend.shard.ops import status

    shards = []
    for record in read_records():
        polled: ShardStatus | None = None
        if record.state != "ended" or record.runner_gone:
            rpc_port = record.head_port if record.backend == "rpc" else None
            # mp for ray too: its ranks are read from the tagged processes, never from Ray (slow to ask).
            asking = status(record.nodes, rpc_port=rpc_port, mp=rpc_port is None, tag=record.tag,
                            pool=watch.pool if watch is not None else None)
            polled = watch.run(asking) if watch is not None else asyncio.run(asking)
        shards.append(judge(record, polled))
    return shards


def judge(record: ShardRecord, polled: ShardStatus | None) -> LiveShard:
    """The shard's headline and ranks from its record and (while it should run) its nodes' answers."""
    from backend.shard.ops import NodeStatus, mp_parts, rpc_parts

    names = [n.name for n in record.nodes]
    base = {"tag": record.tag, "backend": record.backend, "model": record.model, "api_url": record.api_url, "nodes": names,
            "started_at": record.started_at}
    if polled is None:  # ended, and its runner stopped every part: say why, and which node failed
        blank = [NodeStatus(node=n, reachable=True) for n in names]
        labels = rpc_parts(blank, record.head_port) if record.backend == "rpc" else mp_parts(blank)
        ranks = [LiveRank(node=p.node, rank=i, part=_label(record, p.part, i), state="dead" if p.node == record.failed_node else "stopped")
                 for i, p in enumerate(labels)]
        return LiveShard(**base, headline="stopped", detail=record.reason or "", ranks=ranks)
    if polled.parts:
        found = [(p.node, p.part, p.pid, p.state) for p in polled.parts]
    else:
        found = [(n.node, "", n.processes[0]["pid"] if n.processes else None,
                  "unreachable" if not n.reachable else "running" if n.processes else "not running") for n in polled.nodes]
    ranks = []
    for i, (node, part, pid, state) in enumerate(found):
        shown: RankState = "running" if state == "running" else "unreachable" if state == "unreachable" else \
            "stopped" if record.runner_gone else "starting" if record.state == "starting" else "dead"
        ranks.append(LiveRank(node=node, rank=i, part=_label(record, part, i), pid=pid, state=shown))
    # A rank not started yet is not down: one that dies while loading ends the runner, whose record then names it.
    down = [r for r in ranks if r.state not in ("running", "starting")]
    said = "; ".join(f"rank {r.rank} on {r.node} is {'dead' if r.state == 'stopped' else r.state}" for r in down)
    if record.runner_gone:
        running = len(ranks) - len(down)
        left = f"; {running} part(s) still running: c3 shard stop {record.tag}" if running else ""
        return LiveShard(**base, headline="degraded" if running else "stopped", detail=f"{record.reason}{left}", ranks=ranks)
    if down:
        return LiveShard(**base, headline="degraded", detail=said, ranks=ranks)
    return LiveShard(**base, headline="serving" if record.state == "serving" else "starting", ranks=ranks)


def _label(record: ShardRecord, part: str, rank: int) -> str:
    if record.backend == "ray":
        return "ray head + vllm serve" if rank == 0 else "ray worker"
    return part
