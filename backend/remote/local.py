"""This machine as a node: `LocalShell` runs its commands as local processes (`/bin/sh -c`, each in its
own process group), no SSH.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING

from backend.remote.shell import COMMAND_TIMEOUT_S, NodeFailure, ShellBase, Spawned, as_shell_command, short

if TYPE_CHECKING:
    from backend.remote.node import Node


def kill_group(pid: int) -> None:
    """SIGKILL the process group we made (a shell's children, e.g. `docker logs -f`, hold our pipes open)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


# --- this machine -----------------------------------------------------------------------------


class _LocalProcess:
    """A spawned local command: its pid is its process group (start_new_session)."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self._proc = proc
        self.pgid: int | None = proc.pid

    @property
    def returncode(self) -> int | None:
        # asyncio's, set the moment the child is reaped: from then on its pgid may belong to someone else.
        return self._proc.returncode

    async def lines(self) -> AsyncIterator[str]:
        assert self._proc.stdout is not None
        while True:
            raw = await self._proc.stdout.readline()
            if not raw:
                break
            yield raw.decode(errors="replace").rstrip("\r\n")

    async def wait(self) -> int:
        return await self._proc.wait()


class LocalShell(ShellBase):
    """Runs a local node's commands as local processes (`/bin/sh -c`), no SSH."""

    def __init__(self, node: Node) -> None:
        self.node = node

    async def _start(self, text: str, *, stdin: bool, merge: bool = False) -> asyncio.subprocess.Process:
        try:
            return await asyncio.create_subprocess_exec(
                "/bin/sh", "-c", text,
                stdin=asyncio.subprocess.PIPE if stdin else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT if merge else asyncio.subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as exc:
            raise NodeFailure(self.node.name, "command", f"cannot start /bin/sh: {exc.strerror or exc}") from None

    async def _communicate(self, text: str, raw: bytes | None, timeout: float | None) -> tuple[int, bytes, bytes]:
        limit = timeout or COMMAND_TIMEOUT_S
        proc = await self._start(text, stdin=raw is not None)
        try:
            out, err = await asyncio.wait_for(proc.communicate(raw), limit)
        except TimeoutError:
            kill_group(proc.pid)
            await proc.wait()
            raise NodeFailure(self.node.name, "timeout", f"`{short(text)}` timed out after {limit:.0f}s") from None
        status = proc.returncode if proc.returncode is not None and proc.returncode >= 0 else -1
        return status, out, err

    async def stream(self, command: str | Sequence[str], *, timeout: float | None = None) -> AsyncIterator[str]:
        proc = await self._start(as_shell_command(command), stdin=False, merge=True)
        assert proc.stdout is not None
        try:
            while True:
                line = await (asyncio.wait_for(proc.stdout.readline(), timeout) if timeout else proc.stdout.readline())
                if not line:
                    break
                yield line.decode(errors="replace").rstrip("\n")
        finally:
            if proc.returncode is None:
                kill_group(proc.pid)
            await proc.wait()

    async def spawn(self, command: str | Sequence[str], *, input: str | None = None) -> Spawned:
        proc = await self._start(as_shell_command(command), stdin=input is not None, merge=True)
        if input is not None and proc.stdin is not None:
            proc.stdin.write(input.encode())
            with contextlib.suppress(ConnectionError):
                await proc.stdin.drain()
            proc.stdin.close()
        return _LocalProcess(proc)

    async def close(self) -> None:
        return None
