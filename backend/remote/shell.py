"""The one remote-exec Protocol (`Shell`, and `Spawned` for a long-running command), what a command
did (`CommandResult`), why a node could not be driven (`NodeFailure`), and what the local and the SSH
shell share (`ShellBase`: run, put_file, read_file on top of one `_communicate`).

Every command runs under `/bin/sh` whatever the node user's login shell is (fish, csh and zsh read
`$HOME`, `;` and quoting differently), so one quoting rule (POSIX sh, `shlex`) holds everywhere.

Secrets never travel on a command line: `Shell.put_file` and `Shell.run(input=…)` send bytes on the
command's stdin, so neither this machine's nor the node's `ps` shows them. `env=` values do appear in
the node's process list (they are part of the command), so they are for non-secret settings only.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from backend.envnames import assignments
from backend.errors import EnvironmentProblem, Refused

if TYPE_CHECKING:
    from backend.remote.node import Node

COMMAND_TIMEOUT_S = 120.0
READ_LIMIT_BYTES = 4 * 1024 * 1024
"""The most `Shell.read_file` returns: node files c3 reads are small (env files, status, logs' tails)."""
PGID_MARK = "c3-pgid "
"""First line a spawned SSH command prints: its process group, so it can be stopped by that number."""


# --- results and errors -----------------------------------------------------------------------


@dataclass(frozen=True)
class CommandResult:
    """What one command did on one node."""

    node: str
    """Registry name of the node."""
    command: str
    """The command as given (a shell string; never holds a secret)."""
    exit_status: int
    """The command's exit status (-1 when killed by a signal or timed out)."""
    stdout: str
    """Everything it printed on stdout."""
    stderr: str
    """Everything it printed on stderr."""

    @property
    def ok(self) -> bool:
        """True when the command exited 0."""
        return self.exit_status == 0

    def last_line(self) -> str:
        """The last non-empty line of stderr (else stdout): what a one-line error should quote."""
        for text in (self.stderr, self.stdout):
            lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
            if lines:
                return lines[-1][:300]
        return f"exit status {self.exit_status}"


class NodeFailure(EnvironmentProblem):
    """A node could not be driven: `kind` says why (unreachable, auth, hostkey-unknown,
    hostkey-changed, timeout, keyfile, ssh, docker, command, image, engine). The message names the node."""

    def __init__(self, node: str, kind: str, detail: str, hint: str | None = None) -> None:
        super().__init__(f"node `{node}`: {detail}", hint=hint)
        self.node = node
        self.kind = kind
        self.detail = detail
        # The node answered but what ran there failed (a command, the engine, a missing image):
        # exit 1 like any failed request; only reaching the node is an environment problem (3).
        if kind in ("command", "engine", "image"):
            self.exit_code = Refused.exit_code


# --- the protocol -----------------------------------------------------------------------------


class Spawned(Protocol):
    """A long-running command started by `Shell.spawn`, leader of its own process group."""

    pgid: int | None
    """Its process group on the node (None when it ended before saying)."""

    @property
    def returncode(self) -> int | None:
        """Exit status once it ended, else None."""
        ...

    def lines(self) -> AsyncIterator[str]:
        """Its output (stdout and stderr merged), line by line, until it ends."""
        ...

    async def wait(self) -> int:
        """Wait for the end; the exit status (-1 or 255 when it was killed or the link dropped)."""
        ...


class Shell(Protocol):
    """One node's command runner (remote over SSH, or this machine)."""

    node: Node

    async def run(
        self,
        command: str | Sequence[str],
        *,
        input: bytes | str | None = None,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
        check: bool = False,
    ) -> CommandResult:
        """Run a command (a list is an argv, a string is sh); a timeout raises NodeFailure(kind="timeout"),
        and `check` raises NodeFailure(kind="command") on a non-zero exit."""
        ...

    async def put_file(self, data: bytes | str, path: str, *, mode: int = 0o600) -> None:
        """Write `data` to `path` through stdin (never argv), atomically, created with `mode`."""
        ...

    async def read_file(self, path: str, *, limit: int = READ_LIMIT_BYTES) -> bytes:
        """A file's bytes; more than `limit` bytes, a missing or unreadable file raise NodeFailure."""
        ...

    def stream(self, command: str | Sequence[str], *, timeout: float | None = None) -> AsyncIterator[str]:
        """Yield the command's output (stdout and stderr merged) line by line."""
        ...

    async def spawn(self, command: str | Sequence[str], *, input: str | None = None) -> Spawned:
        """Start a long-running command in its own process group; `input` (then EOF) goes to its stdin."""
        ...

    async def close(self) -> None:
        """Release the connection."""
        ...


# --- what both implementations share ----------------------------------------------------------


def as_shell_command(command: str | Sequence[str], env: Mapping[str, str] | None = None) -> str:
    """A list is an argv and gets quoted; a string is already shell. `env` becomes validated, quoted
    `export` assignments in front (a hostile name is refused, a hostile value stays a value)."""
    text = command if isinstance(command, str) else shlex.join(command)
    if env:
        text = f"export {assignments(env, 'command environment')}; {text}"
    return text


def shell_path(path: str) -> str:
    """Quote a path for the node's shell; a leading `~/` stays the node user's home (`"$HOME"/…`)."""
    if path.startswith("~/"):
        return '"$HOME"/' + shlex.quote(path[2:])
    return shlex.quote(path)


def _put_command(path: str, mode: int) -> str:
    target = shell_path(path)
    folder = shell_path(os.path.dirname(path) or ".")
    tmp = shell_path(path + ".c3tmp")
    return f"umask 077 && mkdir -p {folder} && cat > {tmp} && chmod {mode:o} {tmp} && mv -f {tmp} {target}"


def _read_command(path: str, limit: int) -> str:
    # One byte over the limit tells "too large" from "exactly the limit" without reading it all.
    return f"head -c {limit + 1} -- {shell_path(path)}"


def short(command: str, limit: int = 80) -> str:
    """A command cut for a one-line message."""
    return command if len(command) <= limit else command[: limit - 1] + "…"


class ShellBase:
    """run/put_file/read_file/check on top of an implementation's `_communicate` (one command, its
    stdin, a time limit → exit status, stdout, stderr as bytes)."""

    node: Node

    async def _communicate(self, text: str, raw: bytes | None, timeout: float | None) -> tuple[int, bytes, bytes]:  # pragma: no cover - abstract
        raise NotImplementedError

    async def run(self, command: str | Sequence[str], *, input: bytes | str | None = None, timeout: float | None = None,
                  env: Mapping[str, str] | None = None, check: bool = False) -> CommandResult:
        text = as_shell_command(command, env)
        raw = input.encode() if isinstance(input, str) else input
        status, out, err = await self._communicate(text, raw, timeout)
        return self._checked(CommandResult(self.node.name, text, status, out.decode(errors="replace"), err.decode(errors="replace")), check)

    async def put_file(self, data: bytes | str, path: str, *, mode: int = 0o600) -> None:
        raw = data.encode() if isinstance(data, str) else data
        await self.run(_put_command(path, mode), input=raw, check=True)

    async def read_file(self, path: str, *, limit: int = READ_LIMIT_BYTES) -> bytes:
        result = await self._run_bytes(_read_command(path, limit))
        if result[0] != 0:
            raise NodeFailure(self.node.name, "command", f"cannot read {path}: {result[2].decode(errors='replace').strip()[-200:] or f'exit {result[0]}'}")
        if len(result[1]) > limit:
            raise NodeFailure(self.node.name, "command", f"{path} is larger than {limit} bytes")
        return result[1]

    async def _run_bytes(self, command: str) -> tuple[int, bytes, bytes]:
        return await self._communicate(command, None, None)

    def _checked(self, result: CommandResult, check: bool) -> CommandResult:
        if check and not result.ok:
            raise NodeFailure(self.node.name, "command", f"`{short(result.command)}` failed: {result.last_line()}")
        return result


