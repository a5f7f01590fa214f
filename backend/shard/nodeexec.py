"""Running shell scripts on a shard's nodes: locally (the head, normally) or over SSH.

Two operations are enough: `run` a short script and collect its output (probes, `ray status`,
kills), and `spawn` a long-running one whose merged output is streamed line by line (`ray start
--block`, `vllm serve`). Every spawned script becomes the leader of its own process group (locally
through `start_new_session`; over SSH because sshd puts each session's command in a new session),
and prints `c3-pgid N` first, so the whole group can be stopped later by that number.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import signal
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from backend.envnames import assignments, check_env_name
from backend.shard.models import Step

if TYPE_CHECKING:
    from backend.nodes.registry import Node

PGID_MARK = "c3-pgid "


@dataclass
class Completed:
    """A finished short script."""

    rc: int
    """Exit status (-1 when it timed out or could not run)."""
    out: str
    """Its standard output."""
    err: str
    """Its standard error (or why it could not run)."""


class Spawned(Protocol):
    """A running long script."""

    pgid: int | None
    """Its process group (None until it printed `c3-pgid`)."""

    @property
    def returncode(self) -> int | None:
        """Exit status once it ended."""

    def lines(self) -> AsyncIterator[str]:
        """Merged stdout/stderr, line by line, until it ends."""

    async def wait(self) -> int:
        """Wait for the end; the exit status."""


class NodeExec(Protocol):
    """Where a node's scripts run."""

    name: str
    """Node name (for messages)."""
    local: bool
    """True when scripts run on this machine."""

    async def run(self, script: str, *, timeout: float = 30, stdin: str | None = None) -> Completed:
        """Run a short POSIX-sh script."""

    async def spawn(self, script: str, *, stdin: str | None = None) -> Spawned:
        """Start a long POSIX-sh script (see `launch_script`)."""

    async def close(self) -> None:
        """Release connections."""


def launch_script(env: dict[str, str], step: Step, *, tag: str, secret_names: list[str]) -> str:
    """The script that runs one step: read secrets from stdin, print the pgid, exec the program.

    Secrets arrive as `NAME=VALUE` lines on stdin ended by an empty line, so they never appear in an
    argv (visible in `ps` on the node) or in the SSH command line.
    """
    lines = ["exec </dev/null" if not secret_names else
             'while IFS= read -r c3_line; do [ -z "$c3_line" ] && break; export "$c3_line"; done; exec </dev/null']
    lines.append(f'echo "{PGID_MARK}$$"')
    lines.append(f"export C3_SHARD={shlex.quote(tag)}")
    for name in secret_names:
        check_env_name(name, "secret")
    words = assignments({**env, **step.env}, "shard environment")
    lines.append(f"exec env {words} {' '.join(shlex.quote(a) for a in step.argv)} 2>&1")
    return "\n".join(lines) + "\n"


def secrets_stdin(secrets: dict[str, str]) -> str | None:
    """What `launch_script` reads from stdin (None when there are no secrets)."""
    if not secrets:
        return None
    return "".join(f"{check_env_name(k, 'secret')}={v}\n" for k, v in secrets.items() if "\n" not in v) + "\n"


def kill_group_script(pgid: int, grace_s: float, *, settle_s: float = 0) -> str:
    """TERM a process group, wait up to `grace_s`, then KILL what is left.

    With `settle_s`, first give the group that long to end by itself (a `ray start --block` exits on
    its own once `ray stop` took its daemons; a SIGTERM would make it drain for up to 30 s instead).
    """
    if pgid <= 1:
        # `kill -TERM -1` means every process the user may signal, `-0` the caller's own group.
        raise ValueError(f"refusing to signal process group {pgid}")
    ticks = max(1, int(grace_s * 10))
    settle = int(settle_s * 10)
    return (
        f"i=0; while [ $i -lt {settle} ]; do kill -0 -{pgid} 2>/dev/null || exit 0; sleep 0.1; i=$((i+1)); done\n"
        f"kill -TERM -{pgid} 2>/dev/null || exit 0\n"
        f"i=0; while [ $i -lt {ticks} ]; do kill -0 -{pgid} 2>/dev/null || exit 0; sleep 0.1; i=$((i+1)); done\n"
        f"kill -KILL -{pgid} 2>/dev/null; exit 0\n"
    )


def tagged_script(action: str, grace_s: float = 10, *, tag: str | None = None) -> str:
    """List (`list`) or stop (`stop`) every process whose environment has C3_SHARD (= `tag` when given).

    Found through /proc/PID/environ, so `stop` needs no state file and touches nothing c3 did not start.
    """
    pattern = "^C3_SHARD=" + (tag + "$" if tag else "")  # tags are node names and a port: no regex characters
    find = (f"c3_pids() {{ grep -lz {shlex.quote(pattern)} /proc/[0-9]*/environ 2>/dev/null "
            "| sed -n 's|^/proc/\\([0-9]*\\)/environ$|\\1|p' | grep -vx \"$$\"; }")
    if action == "list":
        return find + "\nfor p in $(c3_pids); do printf 'proc=%s %s\\n' \"$p\" \"$(tr '\\0' ' ' < /proc/$p/cmdline 2>/dev/null | cut -c1-160)\"; done\n"
    ticks = max(1, int(grace_s * 10))
    return (
        find + "\n"
        "pids=$(c3_pids); [ -z \"$pids\" ] && { echo stopped=0; exit 0; }\n"
        "n=$(echo $pids | wc -w); kill -TERM $pids 2>/dev/null\n"
        f"i=0; while [ $i -lt {ticks} ] && [ -n \"$(c3_pids)\" ]; do sleep 0.1; i=$((i+1)); done\n"
        "left=$(c3_pids); [ -n \"$left\" ] && kill -KILL $left 2>/dev/null\n"
        "echo \"stopped=$n killed=$(echo $left | wc -w)\"\n"
    )


class _LocalProcess:
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
            line = raw.decode(errors="replace").rstrip("\r\n")
            if line.startswith(PGID_MARK):
                continue
            yield line

    async def wait(self) -> int:
        return await self._proc.wait()


class LocalExec:
    """Scripts run with /bin/sh on this machine."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.local = True

    async def run(self, script: str, *, timeout: float = 30, stdin: str | None = None) -> Completed:
        try:
            proc = await asyncio.create_subprocess_exec(
                "/bin/sh", "-c", script,
                stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, start_new_session=True,
            )
        except OSError as exc:
            return Completed(-1, "", str(exc))
        try:
            out, err = await asyncio.wait_for(proc.communicate(stdin.encode() if stdin is not None else None), timeout)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
            return Completed(-1, "", f"timed out after {timeout:.0f}s")
        return Completed(proc.returncode or 0, out.decode(errors="replace"), err.decode(errors="replace"))

    async def spawn(self, script: str, *, stdin: str | None = None) -> Spawned:
        proc = await asyncio.create_subprocess_exec(
            "/bin/sh", "-c", script,
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, start_new_session=True,
        )
        if stdin is not None and proc.stdin is not None:
            proc.stdin.write(stdin.encode())
            with contextlib.suppress(ConnectionError):
                await proc.stdin.drain()
            proc.stdin.close()
        return _LocalProcess(proc)

    async def close(self) -> None:
        return None


# --- remote nodes, through backend.ssh ---------------------------------------------------------


class _RemoteProcess:
    """A spawned script over SSH: stdout and stderr read concurrently and merged into one queue."""

    def __init__(self, proc: object) -> None:
        self._proc = proc
        self.pgid: int | None = None
        self.returncode: int | None = None
        self._queue: asyncio.Queue[str | None] = asyncio.Queue()
        self._open = 2
        self._readers = [asyncio.create_task(self._read(getattr(proc, name))) for name in ("stdout", "stderr")]
        self._done = asyncio.Event()

    async def _read(self, stream: object) -> None:
        try:
            while True:
                line = await stream.readline()  # type: ignore[attr-defined]
                if not line:
                    break
                text = line.rstrip("\r\n")
                if self.pgid is None and text.startswith(PGID_MARK) and text[len(PGID_MARK):].isdigit() and int(text[len(PGID_MARK):]) > 1:
                    self.pgid = int(text[len(PGID_MARK):])
                    continue
                await self._queue.put(text)
        except Exception:  # noqa: BLE001, S110 - a dropped connection ends the stream, it does not crash the runner
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
        """Wait for the `c3-pgid` line (so a kill right after start has a group to kill)."""
        deadline = asyncio.get_running_loop().time() + timeout
        while self.pgid is None and self.returncode is None and asyncio.get_running_loop().time() < deadline:
            if all(r.done() for r in self._readers):
                break
            await asyncio.sleep(0.05)

    async def wait(self) -> int:
        if self.returncode is None:
            try:
                await self._proc.wait_closed()  # type: ignore[attr-defined]
                status = self._proc.exit_status  # type: ignore[attr-defined]
            except Exception:  # noqa: BLE001 - connection lost: the part is gone as far as we can tell
                status = None
            self.returncode = status if isinstance(status, int) and status >= 0 else 255
        return self.returncode


class SshExec:
    """A remote node: short scripts through `backend.ssh.Shell.run`, long ones as SSH processes."""

    def __init__(self, shell: object) -> None:
        self._shell = shell
        self.name = shell.node.name  # type: ignore[attr-defined]
        self.local = False

    async def run(self, script: str, *, timeout: float = 30, stdin: str | None = None) -> Completed:
        from backend.ssh import NodeFailure

        try:
            result = await self._shell.run(_sh(script), input=stdin, timeout=timeout)  # type: ignore[attr-defined]
        except NodeFailure as failure:
            if failure.kind == "timeout":
                return Completed(-1, "", failure.detail)
            raise
        return Completed(result.exit_status, result.stdout, result.stderr)

    async def spawn(self, script: str, *, stdin: str | None = None) -> Spawned:
        proc = await self._shell.spawn(_sh(script), input=stdin)  # type: ignore[attr-defined]
        remote = _RemoteProcess(proc)
        await remote.started()
        return remote

    async def close(self) -> None:
        await self._shell.close()  # type: ignore[attr-defined]


def _sh(script: str) -> str:
    """Run under /bin/sh whatever the user's login shell is (`$$` stays the session leader: exec)."""
    return "exec /bin/sh -c " + shlex.quote(script)


async def open_execs(nodes: list[Node], *, ssh_key: str | None = None) -> dict[str, NodeExec]:
    """An executor per node: local ones run here, the others over SSH (connected concurrently).

    A node that cannot be reached raises its NodeFailure (exit 3) naming the node.
    """
    execs, failures = await open_execs_partial(nodes, ssh_key=ssh_key)
    if failures:
        await asyncio.gather(*(e.close() for e in execs.values()), return_exceptions=True)
        raise next(iter(failures.values()))
    return execs


async def open_execs_partial(nodes: list[Node], *, ssh_key: str | None = None) -> tuple[dict[str, NodeExec], dict[str, Exception]]:
    """Like `open_execs`, but returns the nodes that could not be reached instead of raising
    (status and stop do what they can on the others)."""
    from backend.ssh import SshShell

    async def one(node: Node) -> NodeExec:
        if node.local:
            return LocalExec(node.name)
        if ssh_key:
            node = node.model_copy(update={"ssh_key": ssh_key})
        return SshExec(await SshShell.connect(node))

    results = await asyncio.gather(*(one(n) for n in nodes), return_exceptions=True)
    execs: dict[str, NodeExec] = {}
    failures: dict[str, Exception] = {}
    for node, result in zip(nodes, results, strict=True):
        if isinstance(result, Exception):
            failures[node.name] = result
        elif isinstance(result, BaseException):
            raise result
        else:
            execs[node.name] = result
    return execs, failures
