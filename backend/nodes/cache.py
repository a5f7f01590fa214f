"""Reading a node's model-weight cache: on this machine in-process, on a registered node through its
shell (the same SSH path as `c3 node status`), both with the one scanner of `backend.nodes.cache_scan`.

On a node the scanner's own source goes to `python3 -` on stdin (nothing to install there; the roots
and bounds are one JSON argument, never a secret). The node's shell run has its own timeout on top of
the scanner's deadline, so a node whose disk hangs costs a bounded wait, and the JSON read back is
size-capped before it is parsed.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from backend.nodes import cache_scan
from backend.remote.fleet import read_each
from backend.remote.node import Node
from backend.remote.shell import NodeFailure, Shell
from backend.remote.ssh import SshOptions

SCAN_TIMEOUT_S = 30.0
"""The node's whole scan (the scanner stops itself at `LIMITS["deadline_s"]`, 20 s)."""
REPLY_LIMIT = 4 * 1024 * 1024
"""The most JSON a node's scan may print (500 models per root are well under 1 MiB)."""
CACHE_SSH = SshOptions(connect_timeout=5.0, command_timeout=SCAN_TIMEOUT_S)


@dataclass
class CacheReading:
    """One node's cache as scanned, or why it could not be."""

    node: str | None
    """Registry name (None: this machine, no node named)."""
    local: bool
    reachable: bool = True
    error: str | None = None
    """Why there is no scan: the node did not answer (reachable False) or the scan failed on it."""
    scan: dict[str, Any] = field(default_factory=dict)
    """`cache_scan.scan`'s result."""


def _script() -> str:
    return inspect.getsource(cache_scan)


def scan_here(roots: Sequence[str], limits: dict[str, Any] | None = None) -> dict[str, Any]:
    """This machine's cache, read directly."""
    return cache_scan.scan(list(roots), limits)


async def scan_over(shell: Shell, roots: Sequence[str], limits: dict[str, Any] | None = None, timeout: float = SCAN_TIMEOUT_S) -> dict[str, Any]:
    """A node's cache through its shell (`python3 -` reading the scanner on stdin)."""
    request = json.dumps({"roots": list(roots), "limits": limits or {}})
    result = await shell.run(f"python3 - {shlex.quote(request)}", input=_script(), timeout=timeout)
    if result.exit_status == 127:
        raise NodeFailure(shell.node.name, "command", "python3 not found on the node (the cache is read with it)",
                          hint="install python3 there (Debian/Ubuntu: apt install python3)")
    if not result.ok:
        raise NodeFailure(shell.node.name, "command", f"the cache scan failed: {result.last_line()}")
    if len(result.stdout) > REPLY_LIMIT:
        raise NodeFailure(shell.node.name, "command", f"the cache scan printed more than {REPLY_LIMIT} bytes")
    try:
        reply = json.loads(result.stdout)
    except ValueError:
        raise NodeFailure(shell.node.name, "command", f"the cache scan printed no JSON: {result.last_line()}") from None
    if not isinstance(reply, dict) or not isinstance(reply.get("roots"), list):
        raise NodeFailure(shell.node.name, "command", "the cache scan printed an unexpected reply")
    return reply


async def read_caches(nodes: Sequence[Node], roots: Sequence[str], limits: dict[str, Any] | None = None,
                      options: SshOptions | None = None) -> list[CacheReading]:
    """Every node's cache, concurrently; a node that cannot be reached is its own reading, never raised."""
    options = options or CACHE_SSH
    timeout = options.command_timeout

    async def read(node: Node, shell: Shell) -> dict[str, Any]:
        if node.local:  # this machine: the scanner runs here, without a shell
            return await asyncio.to_thread(scan_here, roots, limits)
        return await scan_over(shell, roots, limits, timeout)

    return [CacheReading(r.node.name, r.node.local, r.reachable, r.error, r.value or {}) for r in await read_each(nodes, read, options)]
