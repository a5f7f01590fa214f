"""The SSH implementation of the remote-exec Protocol (`backend.remote.shell.Shell`): the only module that
imports asyncssh (lazily, so the CLI's local paths never pay for it).

Targets are what people type: names, IPv4, `[IPv6]`, or `~/.ssh/config` aliases (backend.remote.ssh_target
applies the user's OpenSSH config and resolves the name). Host keys are checked strictly (the files
and trust live in backend.remote.known_hosts), by name and by resolved address as OpenSSH does. The keys
trusted are the union of `$C3_HOME/known_hosts` (the file c3 manages: `c3 node trust NAME` shows a new
host's fingerprint and adds it there, after the user confirms it or passes `--fingerprint SHA256:…` to
match), `~/.ssh/known_hosts` and any files in `$C3_KNOWN_HOSTS` (os.pathsep-separated). An unknown
host and a changed key are refused, each with its own one-line error naming the node.

Every command is sent as `exec /bin/sh -c '…'`: the node user's login shell only starts it, so the
command means the same on every node, and a spawned command's `$$` is the session leader sshd made —
its process group, which `spawn` reports so the whole group can be stopped later.
"""

from __future__ import annotations

import asyncio
import shlex
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from backend.remote.known_hosts import OfferedKey, fingerprint, known_hosts_text, managed_known_hosts
from backend.remote.shell import COMMAND_TIMEOUT_S, PGID_MARK, NodeFailure, ShellBase, Spawned, as_shell_command, short
from backend.remote.ssh_target import connect_options, quiet_asyncssh_import, resolve_target

if TYPE_CHECKING:
    from backend.remote.node import Node

CONNECT_TIMEOUT_S = 10.0


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
    quiet_asyncssh_import()
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


def _sh(command: str) -> str:
    """The command as the node's login shell should start it (see the module docstring)."""
    return "exec /bin/sh -c " + shlex.quote(command)


class _RemoteProcess:
    """A spawned command over SSH: stdout and stderr read concurrently and merged into one queue;
    the first `c3-pgid N` line (printed by the wrapper `spawn` adds) is its process group."""

    def __init__(self, proc: Any) -> None:
        self._proc = proc
        self.pgid: int | None = None
        self._status: int | None = None
        self._queue: asyncio.Queue[str | None] = asyncio.Queue()
        self._open = 2
        self._readers = [asyncio.create_task(self._read(getattr(proc, name))) for name in ("stdout", "stderr")]

    @property
    def returncode(self) -> int | None:
        return self._status

    async def _read(self, stream: Any) -> None:
        try:
            while True:
                line = await stream.readline()
                if not line:
                    break
                text = line.rstrip("\r\n")
                number = text[len(PGID_MARK):]
                if self.pgid is None and text.startswith(PGID_MARK) and number.isdigit() and int(number) > 1:
                    self.pgid = int(number)
                    continue
                await self._queue.put(text)
        except Exception:  # noqa: BLE001, S110 - a dropped connection ends the stream, it does not crash the reader
            pass
        finally:
            self._open -= 1
            if self._open == 0:
                await self._queue.put(None)

    async def lines(self) -> AsyncIterator[str]:
        while True:
            line = await self._queue.get()
            if line is None:
                return
            yield line

    async def started(self, timeout: float = 30) -> None:
        """Wait for the pgid line (so a kill right after start has a group to kill)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self.pgid is None and loop.time() < deadline and not all(r.done() for r in self._readers):
            await asyncio.sleep(0.05)

    async def wait(self) -> int:
        if self._status is None:
            try:
                await self._proc.wait_closed()
                status = self._proc.exit_status
            except Exception:  # noqa: BLE001 - connection lost: the command is gone as far as we can tell
                status = None
            self._status = status if isinstance(status, int) and status >= 0 else 255
        return self._status


class SshShell(ShellBase):
    """A remote node over one asyncssh connection."""

    def __init__(self, node: Node, conn: Any, options: SshOptions) -> None:
        self.node = node
        self._conn = conn
        self._options = options

    @classmethod
    async def connect(cls, node: Node, options: SshOptions | None = None) -> SshShell:
        quiet_asyncssh_import()
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

    async def _communicate(self, text: str, raw: bytes | None, timeout: float | None) -> tuple[int, bytes, bytes]:
        quiet_asyncssh_import()
        import asyncssh

        limit = timeout or self._options.command_timeout

        async def go() -> Any:
            proc = await self._conn.create_process(_sh(text), encoding=None)
            if raw:
                proc.stdin.write(raw)
            # Always send EOF (like `ssh -n`): a command that reads stdin must not wait forever.
            proc.stdin.write_eof()
            return await proc.wait()

        try:
            result = await asyncio.wait_for(go(), limit)
        except (TimeoutError, asyncssh.TimeoutError):
            raise NodeFailure(self.node.name, "timeout", f"`{short(text)}` timed out after {limit:.0f}s") from None
        except (OSError, asyncssh.Error) as exc:
            raise map_ssh_error(self.node, exc, known=True) from None
        status = result.exit_status if result.exit_status is not None and result.exit_status >= 0 else -1
        return status, result.stdout or b"", result.stderr or b""

    async def stream(self, command: str | Sequence[str], *, timeout: float | None = None) -> AsyncIterator[str]:
        quiet_asyncssh_import()
        import asyncssh

        try:
            proc = await self._conn.create_process(_sh(as_shell_command(command)), stderr=asyncssh.STDOUT)
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

    async def spawn(self, command: str | Sequence[str], *, input: str | None = None) -> Spawned:
        quiet_asyncssh_import()
        import asyncssh

        text = f'echo "{PGID_MARK}$$"; ' + as_shell_command(command)
        try:
            proc = await self._conn.create_process(_sh(text), encoding="utf-8", errors="replace")
        except (OSError, asyncssh.Error) as exc:
            raise map_ssh_error(self.node, exc, known=True) from None
        if input:
            proc.stdin.write(input)
        proc.stdin.write_eof()
        remote = _RemoteProcess(proc)
        await remote.started()
        return remote

    async def close(self) -> None:
        self._conn.close()
        try:
            await asyncio.wait_for(self._conn.wait_closed(), 5)
        except (TimeoutError, OSError):
            pass


# --- trusting a new host ----------------------------------------------------------------------


async def fetch_host_key(node: Node, options: SshOptions | None = None) -> OfferedKey:
    """Connect without trusting anything and return the key the node offers, with every known_hosts
    pattern it should be filed under (its name and the addresses that name resolves to)."""
    quiet_asyncssh_import()
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
