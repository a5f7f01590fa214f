"""Opening shells and driving several nodes at once: `open_shell` (the one factory: local when the node
is this machine, else SSH), `open_shells`, `close_all`, `Fleet` and `run_sync`.

Callers get a Shell from here and never branch on where a node is. The SSH implementation
(backend.remote.ssh) is imported only when a node needs it, so the CLI's local paths never load asyncssh.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

from backend.remote.local import LocalShell
from backend.remote.shell import CommandResult, NodeFailure, Shell

if TYPE_CHECKING:
    from backend.remote.node import Node
    from backend.remote.ssh import SshOptions

T = TypeVar("T")


# --- opening shells ---------------------------------------------------------------------------


async def open_shell(node: Node, options: SshOptions | None = None) -> Shell:
    """A Shell for `node`: local when the node is this machine, else SSH."""
    if node.local:
        return LocalShell(node)
    from backend.remote.ssh import SshShell

    return await SshShell.connect(node, options)


async def open_shells(nodes: Sequence[Node], options: SshOptions | None = None) -> tuple[dict[str, Shell], dict[str, NodeFailure]]:
    """Shells for every node, connected concurrently; the nodes that could not be reached come back
    as their NodeFailure instead of raising (status and stop do what they can on the others)."""
    results = await asyncio.gather(*(open_shell(n, options) for n in nodes), return_exceptions=True)
    shells: dict[str, Shell] = {}
    failures: dict[str, NodeFailure] = {}
    for node, result in zip(nodes, results, strict=True):
        if isinstance(result, NodeFailure):
            failures[node.name] = result
        elif isinstance(result, BaseException):
            await close_all(shells)
            raise result
        else:
            shells[node.name] = result
    return shells, failures


async def close_all(shells: Mapping[str, Shell]) -> None:
    """Close every shell; one that fails to close does not keep the others open."""
    await asyncio.gather(*(s.close() for s in shells.values()), return_exceptions=True)


# --- several nodes at once --------------------------------------------------------------------


class Fleet:
    """Shells for several nodes, opened on first use and closed together.

        async with Fleet(nodes) as fleet:
            results = await fleet.each(lambda sh: sh.run("docker ps"))
    """

    def __init__(self, nodes: Sequence[Node], options: SshOptions | None = None,
                 opener: Callable[[Node, SshOptions | None], Awaitable[Shell]] | None = None) -> None:
        self.nodes = list(nodes)
        self.options = options
        self._opener = opener or open_shell
        self._shells: dict[str, Shell] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    async def shell(self, node: Node) -> Shell:
        """The node's shell, connecting once."""
        lock = self._locks.setdefault(node.name, asyncio.Lock())
        async with lock:
            if node.name not in self._shells:
                self._shells[node.name] = await self._opener(node, self.options)
            return self._shells[node.name]

    async def each(self, op: Callable[[Shell], Awaitable[T]], nodes: Sequence[Node] | None = None) -> dict[str, T | NodeFailure]:
        """Run `op` on every node concurrently; a node's failure is its value, never raised."""

        async def one(node: Node) -> T | NodeFailure:
            try:
                return await op(await self.shell(node))
            except NodeFailure as failure:
                return failure

        targets = list(nodes or self.nodes)
        values = await asyncio.gather(*(one(n) for n in targets))
        return {n.name: v for n, v in zip(targets, values, strict=True)}

    async def run_all(self, command: str | Sequence[str], *, timeout: float | None = None) -> dict[str, CommandResult | NodeFailure]:
        """The same command on every node, concurrently."""
        return await self.each(lambda sh: sh.run(command, timeout=timeout))

    async def close(self) -> None:
        shells, self._shells = dict(self._shells), {}
        await close_all(shells)

    async def __aenter__(self) -> Fleet:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


@dataclass
class NodeRead(Generic[T]):
    """What `read_each` got from one node: its value, or why not."""

    node: Node
    value: T | None = None
    reachable: bool = True
    """False: the node did not answer (SSH); True with `error`: what ran there failed."""
    error: str | None = None
    """The failure's one-line detail."""


async def read_each(nodes: Sequence[Node], read: Callable[[Node, Shell], Awaitable[T]], options: SshOptions | None = None) -> list[NodeRead[T]]:
    """`read(node, shell)` on every node concurrently; a node that cannot be reached, or whose read
    raises NodeFailure, is its own NodeRead — the reads of the others go on."""

    async def one(fleet: Fleet, node: Node) -> NodeRead[T]:
        try:
            shell = await fleet.shell(node)
        except NodeFailure as failure:
            return NodeRead(node, reachable=False, error=failure.detail)
        try:
            return NodeRead(node, await read(node, shell))
        except NodeFailure as failure:
            return NodeRead(node, error=failure.detail)

    async with Fleet(nodes, options) as fleet:
        return list(await asyncio.gather(*(one(fleet, n) for n in nodes)))


def run_sync(coro: Awaitable[T]) -> T:
    """Drive a coroutine from synchronous code (the CLI)."""
    return asyncio.run(coro)  # type: ignore[arg-type]
