"""The SSH adapter: run commands on registered nodes, concurrently, with one error per node.

Every node is reached through one small Protocol, `Shell`: a remote node through asyncssh (imported
lazily, only here), a local node (`Node.local`, see backend.nodes.registry) through a local
subprocess, so callers never branch on where a node is.

Targets are what people type: names, IPv4, `[IPv6]`, or `~/.ssh/config` aliases (backend.ssh_target
applies the user's OpenSSH config and resolves the name). Host keys are checked strictly (the files
and trust live in backend.ssh_known_hosts), by name and by resolved address as OpenSSH does. The keys
trusted are the union of `$C3_HOME/known_hosts` (the file
c3 manages: `c3 node trust NAME` shows a new host's fingerprint and adds it there, after the user
confirms it or passes `--fingerprint SHA256:…` to match), `~/.ssh/known_hosts` and any files in
`$C3_KNOWN_HOSTS` (os.pathsep-separated). An unknown host and a changed key are refused, each with
its own one-line error naming the node.

Secrets never travel on a command line: `Shell.upload` sends bytes on the command's stdin into a
0600 file (`umask 077`), so neither this machine's nor the node's `ps` shows them.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import signal
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from backend.errors import EnvironmentProblem, Refused
from backend.ssh_known_hosts import (  # noqa: F401 - part of this adapter's public surface
    OfferedKey,
    default_known_hosts_files,
    fingerprint,
    known_hosts_text,
    managed_known_hosts,
    trust_host_key,
)
from backend.ssh_target import connect_options, resolve_target

if TYPE_CHECKING:
    from backend.nodes.registry import Node

T = TypeVar("T")

CONNECT_TIMEOUT_S = 10.0
COMMAND_TIMEOUT_S = 120.0


# --- results and errors -----------------------------------------------------------------------


@dataclass(frozen=True)
class CommandResult:
    """What one command did on one node."""

    node: str
    """Registry name of the node."""
    command: str
    """The command as run (a shell string; never holds a secret)."""
    exit_status: int
    """The command's exit status (-1 when killed by a signal)."""
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


class Shell(Protocol):
    """One node's command runner (remote over SSH, or this machine)."""

    node: Node

    async def run(
        self, command: str | Sequence[str], *, input: bytes | str | None = None, timeout: float | None = None, check: bool = False
    ) -> CommandResult:
        """Run a shell command; `check` raises NodeFailure(kind="command") on a non-zero exit."""
        ...

    async def upload(self, data: bytes | str, remote_path: str, *, mode: int = 0o600) -> None:
        """Write `data` to `remote_path` through stdin (never argv), created with `mode`."""
        ...

    def stream(self, command: str | Sequence[str], *, timeout: float | None = None) -> AsyncIterator[str]:
        """Yield the command's output (stdout and stderr merged) line by line."""
        ...

    async def close(self) -> None:
        """Release the connection."""
        ...


def as_shell_command(command: str | Sequence[str]) -> str:
    """A list is an argv and gets quoted; a string is already shell."""
    return command if isinstance(command, str) else shlex.join(command)


def shell_path(path: str) -> str:
    """Quote a path for the node's shell; a leading `~/` stays the node user's home (`"$HOME"/…`)."""
    if path.startswith("~/"):
        return '"$HOME"/' + shlex.quote(path[2:])
    return shlex.quote(path)


def _upload_command(remote_path: str, mode: int) -> str:
    path = shell_path(remote_path)
    folder = shell_path(os.path.dirname(remote_path) or ".")
    tmp = shell_path(remote_path + ".c3tmp")
    return f"umask 077 && mkdir -p {folder} && cat > {tmp} && chmod {mode:o} {tmp} && mv -f {tmp} {path}"


class _ShellBase:
    node: Node

    async def run(
        self, command: str | Sequence[str], *, input: bytes | str | None = None, timeout: float | None = None, check: bool = False
    ) -> CommandResult:  # pragma: no cover - abstract
        raise NotImplementedError

    async def upload(self, data: bytes | str, remote_path: str, *, mode: int = 0o600) -> None:
        raw = data.encode() if isinstance(data, str) else data
        await self.run(_upload_command(remote_path, mode), input=raw, check=True)

    def _checked(self, result: CommandResult, check: bool) -> CommandResult:
        if check and not result.ok:
            raise NodeFailure(self.node.name, "command", f"`{_short(result.command)}` failed: {result.last_line()}")
        return result


def _short(command: str, limit: int = 80) -> str:
    return command if len(command) <= limit else command[: limit - 1] + "…"


def _kill_group(pid: int) -> None:
    # The shell's children (e.g. `docker logs -f`) hold our pipes open: stop the whole group we made.
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


# --- this machine -----------------------------------------------------------------------------


class LocalShell(_ShellBase):
    """Runs a local node's commands as local processes (`/bin/sh -c`), no SSH."""

    def __init__(self, node: Node) -> None:
        self.node = node

    async def run(
        self, command: str | Sequence[str], *, input: bytes | str | None = None, timeout: float | None = None, check: bool = False
    ) -> CommandResult:
        text = as_shell_command(command)
        proc = await asyncio.create_subprocess_exec(
            "/bin/sh", "-c", text,
            stdin=asyncio.subprocess.PIPE if input is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        raw = input.encode() if isinstance(input, str) else input
        try:
            out, err = await asyncio.wait_for(proc.communicate(raw), timeout or COMMAND_TIMEOUT_S)
        except TimeoutError:
            _kill_group(proc.pid)
            await proc.wait()
            raise NodeFailure(self.node.name, "timeout", f"`{_short(text)}` timed out after {timeout or COMMAND_TIMEOUT_S:.0f}s") from None
        status = proc.returncode if proc.returncode is not None and proc.returncode >= 0 else -1
        return self._checked(CommandResult(self.node.name, text, status, out.decode(errors="replace"), err.decode(errors="replace")), check)

    async def stream(self, command: str | Sequence[str], *, timeout: float | None = None) -> AsyncIterator[str]:
        proc = await asyncio.create_subprocess_exec(
            "/bin/sh", "-c", as_shell_command(command),
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
        assert proc.stdout is not None
        try:
            while True:
                line = await (asyncio.wait_for(proc.stdout.readline(), timeout) if timeout else proc.stdout.readline())
                if not line:
                    break
                yield line.decode(errors="replace").rstrip("\n")
        finally:
            if proc.returncode is None:
                _kill_group(proc.pid)
            await proc.wait()

    async def close(self) -> None:
        return None


# --- over SSH ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class SshOptions:
    """How to reach remote nodes."""

    connect_timeout: float = CONNECT_TIMEOUT_S
    """Seconds to open the TCP connection and finish the SSH handshake."""
    command_timeout: float = COMMAND_TIMEOUT_S
    """Default seconds a command may run."""
    known_hosts_files: tuple[Path, ...] | None = None
    """Files of trusted host keys; None means the default set (see module docstring)."""


def map_ssh_error(node: Node, exc: BaseException, *, known: bool) -> NodeFailure:
    """Turn whatever asyncssh or the socket layer raised into one NodeFailure naming the node."""
    import asyncssh  # lazily: only the SSH paths pay for it

    where = f"ssh {node.ssh}"
    if isinstance(exc, NodeFailure):
        return exc
    if isinstance(exc, asyncssh.HostKeyNotVerifiable):
        if known:
            return NodeFailure(
                node.name, "hostkey-changed",
                f"host key mismatch for {where}: the key it offers is not the one trusted (possible man-in-the-middle, or the host was reinstalled)",
                hint=f"if the change is expected, remove the old key from {managed_known_hosts()} (or ~/.ssh/known_hosts) and run `c3 node trust {node.name}`",
            )
        return NodeFailure(node.name, "hostkey-unknown", f"host key of {where} is not trusted yet",
                           hint=f"check its fingerprint and run `c3 node trust {node.name}`")
    if isinstance(exc, asyncssh.PermissionDenied):
        key = f" with key {node.ssh_key}" if node.ssh_key else ""
        return NodeFailure(node.name, "auth", f"authentication refused by {where}{key}",
                           hint="check the user and that the key is in the node's authorized_keys")
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        return NodeFailure(node.name, "timeout", f"timed out reaching {where}", hint="is the node up and the address right?")
    if isinstance(exc, asyncssh.KeyEncryptionError):
        return NodeFailure(node.name, "keyfile", f"key file {node.ssh_key} is passphrase-protected",
                           hint="load it into ssh-agent (ssh-add) and register the node without --ssh-key")
    if isinstance(exc, asyncssh.KeyImportError) or (isinstance(exc, OSError) and node.ssh_key and str(node.ssh_key) in str(exc)):
        hint = "load it into ssh-agent (ssh-add) and register the node without --ssh-key" if "assphrase" in str(exc) else None
        return NodeFailure(node.name, "keyfile", f"cannot use key file {node.ssh_key}: {exc}", hint=hint)
    if isinstance(exc, ConnectionRefusedError):
        return NodeFailure(node.name, "unreachable", f"unreachable: {where} refused the connection", hint="is sshd running on that port?")
    if isinstance(exc, OSError):
        reason = exc.strerror or str(exc) or type(exc).__name__
        return NodeFailure(node.name, "unreachable", f"unreachable: {where}: {reason.lower()}")
    if isinstance(exc, asyncssh.DisconnectError):
        return NodeFailure(node.name, "ssh", f"{where} disconnected: {exc.reason}")
    return NodeFailure(node.name, "ssh", f"{where}: {type(exc).__name__}: {exc}")


class SshShell(_ShellBase):
    """A remote node over one asyncssh connection."""

    def __init__(self, node: Node, conn: Any, options: SshOptions) -> None:
        self.node = node
        self._conn = conn
        self._options = options

    @classmethod
    async def connect(cls, node: Node, options: SshOptions | None = None) -> SshShell:
        import asyncssh

        options = options or SshOptions()
        try:
            known_hosts = asyncssh.import_known_hosts(known_hosts_text(options.known_hosts_files))
        except ValueError as exc:
            raise NodeFailure(node.name, "ssh", f"a trusted host-key file is not valid: {exc}",
                              hint=f"fix or remove the line in {managed_known_hosts()} or ~/.ssh/known_hosts") from None
        kwargs: dict[str, Any] = {
            **connect_options(node),
            "known_hosts": known_hosts,
            "connect_timeout": options.connect_timeout,
            "login_timeout": options.connect_timeout,
            "keepalive_interval": 15,
        }
        if node.ssh_key:
            kwargs["client_keys"] = [str(Path(node.ssh_key).expanduser())]
            kwargs["agent_path"] = None
        known = False
        try:
            # By name and by every address the name resolves to, as asyncssh (and OpenSSH) match.
            target = await resolve_target(node, options.connect_timeout)
            known = bool(target.trusted_keys(known_hosts))
            conn = await asyncio.wait_for(asyncssh.connect(node.ssh_host, **kwargs), options.connect_timeout + 5)
        except BaseException as exc:
            if isinstance(exc, (KeyboardInterrupt, SystemExit, asyncio.CancelledError)):
                raise
            raise map_ssh_error(node, exc, known=known) from None
        return cls(node, conn, options)

    async def run(
        self, command: str | Sequence[str], *, input: bytes | str | None = None, timeout: float | None = None, check: bool = False
    ) -> CommandResult:
        import asyncssh

        text = as_shell_command(command)
        limit = timeout or self._options.command_timeout
        raw = input.encode() if isinstance(input, str) else input

        async def go() -> Any:
            proc = await self._conn.create_process(text, encoding=None)
            if raw:
                proc.stdin.write(raw)
            # Always send EOF (like `ssh -n`): a command that reads stdin must not wait forever.
            proc.stdin.write_eof()
            return await proc.wait()

        try:
            result = await asyncio.wait_for(go(), limit)
        except (TimeoutError, asyncssh.TimeoutError):
            raise NodeFailure(self.node.name, "timeout", f"`{_short(text)}` timed out after {limit:.0f}s") from None
        except (OSError, asyncssh.Error) as exc:
            raise map_ssh_error(self.node, exc, known=True) from None
        status = result.exit_status if result.exit_status is not None else -1
        out = (result.stdout or b"").decode(errors="replace") if isinstance(result.stdout, (bytes, type(None))) else result.stdout
        err = (result.stderr or b"").decode(errors="replace") if isinstance(result.stderr, (bytes, type(None))) else result.stderr
        return self._checked(CommandResult(self.node.name, text, status, out, err), check)

    async def stream(self, command: str | Sequence[str], *, timeout: float | None = None) -> AsyncIterator[str]:
        import asyncssh

        text = as_shell_command(command)
        try:
            proc = await self._conn.create_process(text, stderr=asyncssh.STDOUT)
            proc.stdin.write_eof()  # the command reads nothing: do not leave it waiting for input
        except (OSError, asyncssh.Error) as exc:
            raise map_ssh_error(self.node, exc, known=True) from None
        try:
            while True:
                line = await (asyncio.wait_for(proc.stdout.readline(), timeout) if timeout else proc.stdout.readline())
                if not line:
                    break
                yield line.rstrip("\n")
        finally:
            proc.close()

    async def spawn(self, command: str | Sequence[str], *, input: str | None = None) -> Any:
        """A long-running remote process (asyncssh SSHClientProcess, text mode): `input` is written to
        its stdin (then EOF) so secrets stay off argv; read `.stdout`/`.stderr` line by line, then
        `await .wait()` or `.wait_closed()` and `.exit_status`."""
        import asyncssh

        try:
            proc = await self._conn.create_process(as_shell_command(command), encoding="utf-8", errors="replace")
        except (OSError, asyncssh.Error) as exc:
            raise map_ssh_error(self.node, exc, known=True) from None
        if input:
            proc.stdin.write(input)
        proc.stdin.write_eof()
        return proc

    async def close(self) -> None:
        self._conn.close()
        try:
            await asyncio.wait_for(self._conn.wait_closed(), 5)
        except (TimeoutError, OSError):
            pass


async def open_shell(node: Node, options: SshOptions | None = None) -> Shell:
    """A Shell for `node`: local when the node is this machine, else SSH."""
    if node.local:
        return LocalShell(node)
    return await SshShell.connect(node, options)


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
        shells, self._shells = list(self._shells.values()), {}
        await asyncio.gather(*(s.close() for s in shells), return_exceptions=True)

    async def __aenter__(self) -> Fleet:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


# --- trusting a new host ----------------------------------------------------------------------


async def fetch_host_key(node: Node, options: SshOptions | None = None) -> OfferedKey:
    """Connect without trusting anything and return the key the node offers, with every known_hosts
    pattern it should be filed under (its name and the addresses that name resolves to)."""
    import asyncssh

    options = options or SshOptions()
    try:
        target = await resolve_target(node, options.connect_timeout)
        kwargs = {k: v for k, v in connect_options(node).items() if k in ("config", "port")}
        key = await asyncio.wait_for(asyncssh.get_server_host_key(node.ssh_host, **kwargs), options.connect_timeout + 5)
    except BaseException as exc:
        if isinstance(exc, (KeyboardInterrupt, SystemExit, asyncio.CancelledError)):
            raise
        raise map_ssh_error(node, exc, known=False) from None
    if key is None:
        raise NodeFailure(node.name, "ssh", f"ssh {node.ssh} offered no host key")
    line = key.export_public_key("openssh").decode().split()
    try:
        trusted = asyncssh.import_known_hosts(known_hosts_text(options.known_hosts_files))
    except ValueError as exc:
        raise NodeFailure(node.name, "ssh", f"a trusted host-key file is not valid: {exc}") from None
    already = target.trusts_everywhere(trusted, key.public_data)
    return OfferedKey(node.name, ",".join(target.patterns()), line[0], line[1], fingerprint(line[1]), already)


def run_sync(coro: Awaitable[T]) -> T:
    """Drive a coroutine from synchronous code (the CLI)."""
    return asyncio.run(coro)  # type: ignore[arg-type]
