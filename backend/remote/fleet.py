"""Opening shells and driving several nodes at once: `open_shell` (the one factory: local when the node
is this machine, else SSH), `open_shells`, `close_all`, `Fleet`, `ShellPool` (shells kept between calls,
on a `LoopThread`) and `run_sync`.

Callers get a Shell from here and never branch on where a node is. The SSH implementation
(backend.remote.ssh) is imported only when a node needs it, so the CLI's local paths never load asyncssh.
"""

from __future__ import annotations

import asyncio
import threading
import time
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


class ShellPool:
    """One shell per node kept open between calls, for a poller that asks the same nodes every second (the
    cockpit's Shards view): a new SSH connection per poll costs a handshake each time and is a login in
    sshd's log every second. A shell not asked for in `idle_s` is closed (its view went away); one a
    caller `discard`s (its command failed: the connection may be gone) is opened afresh next time; a
    node whose target, key or locality changed gets a new one. Lives on one event loop (a LoopThread's)."""

    def __init__(self, idle_s: float = 5.0, options: SshOptions | None = None) -> None:
        self.idle_s = idle_s
        self.options = options
        self.opened = 0
        """Shells opened so far (each remote one an SSH connection)."""
        self._shells: dict[str, tuple[str, Shell]] = {}
        self._used: dict[str, float] = {}
        self._lock: asyncio.Lock | None = None

    @staticmethod
    def _identity(node: Node) -> str:
        return f"{node.ssh}|{node.ssh_key}|{node.local}"

    async def shells(self, nodes: Sequence[Node]) -> tuple[dict[str, Shell], dict[str, NodeFailure]]:
        """The nodes' shells (open_shells' answer), opening only those not open yet."""
        self._lock = self._lock or asyncio.Lock()
        async with self._lock:
            await self.expire()
            missing = [n for n in nodes if self._shells.get(n.name, ("", None))[0] != self._identity(n)]
            await close_all({n.name: self._shells.pop(n.name)[1] for n in missing if n.name in self._shells})
            opened, failures = await open_shells(missing, self.options)
            self.opened += len(opened)
            by_name = {n.name: n for n in nodes}
            self._shells.update({name: (self._identity(by_name[name]), shell) for name, shell in opened.items()})
            now = time.monotonic()
            self._used.update({n.name: now for n in nodes})
            # Close what this view no longer asks for even when no call comes again.
            asyncio.get_running_loop().call_later(self.idle_s + 0.1, lambda: asyncio.ensure_future(self.expire()))
            return {n.name: self._shells[n.name][1] for n in nodes if n.name in self._shells}, failures

    async def discard(self, name: str) -> None:
        held = self._shells.pop(name, None)
        if held is not None:
            await close_all({name: held[1]})

    async def expire(self) -> None:
        now = time.monotonic()
        for name in [n for n, used in self._used.items() if now - used >= self.idle_s]:
            self._used.pop(name, None)
            await self.discard(name)

    async def close(self) -> None:
        shells, self._shells = {name: shell for name, (_, shell) in self._shells.items()}, {}
        await close_all(shells)


class LoopThread:
    """An event loop in a daemon thread, started on first use, for what must outlive one synchronous call
    (a ShellPool's connections: asyncssh binds each to the loop that opened it, and `asyncio.run` closes its loop)."""

    def __init__(self, name: str = "c3-loop") -> None:
        self.name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._start = threading.Lock()

    def run(self, coro: Awaitable[T], timeout: float | None = None) -> T:
        """Run `coro` on the loop and wait for its result (from any thread but the loop's own)."""
        with self._start:
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
                self._thread = threading.Thread(target=self._loop.run_forever, name=self.name, daemon=True)
                self._thread.start()
            loop = self._loop
        return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout)  # type: ignore[arg-type]

    def close(self, last: Awaitable[object] | None = None, timeout: float = 10) -> None:
        """Run `last` (closing what lives on the loop), then stop the loop and its thread."""
        with self._start:
            loop, thread, self._loop, self._thread = self._loop, self._thread, None, None
        if loop is None or thread is None:
            if last is not None and hasattr(last, "close"):
                last.close()  # never started: nothing to close, and no "never awaited" warning
            return
        if last is not None:
            try:
                asyncio.run_coroutine_threadsafe(last, loop).result(timeout)  # type: ignore[arg-type]
            except Exception:  # noqa: BLE001, S110 - closing: what cannot be closed is dropped with the loop
                pass
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout)
        if not thread.is_alive():
            loop.close()


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
