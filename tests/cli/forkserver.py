"""A warm `c3` for the CLI contract tests: one interpreter that has already imported c3's commands
forks a child per invocation, so a case costs milliseconds instead of a fresh interpreter's start-up.

Why a fork server and not `c3` per case: the sweep, fuzz and secrets tests run ~1,400 invocations;
each fresh `c3` costs ~0.5–0.9 CPU-s of imports, which on a busy 2-core CI box blew the whole
sweep past its timeout (issue 22). The contract itself is judged on the same `Outcome` either way,
and tests/cli/test_forkserver.py proves both paths flag the same breaches.

The server (`python -m tests.cli.forkserver SOCKET`) is single-threaded: nothing but this loop runs
in it, so a fork never copies a lock held by another thread or a half-run event loop. Per request
(a JSON message on a SOCK_SEQPACKET Unix socket with the child's stdin/stdout/stderr passed as fds)
it forks; the child leaves the loop, closes the server's fds, starts its own session (so the
client can kill its whole process group at the deadline), takes the fds as 0/1/2, moves into the
case's cwd and environment and then runs `c3.cli:main(argv)` exactly as the console script does:
`sys.exit(main())` at module level, so the exit code, an uncaught traceback, atexit handlers and
the final flush of stdout (EPIPE) are the interpreter's own, not an imitation. The server answers
`{"pid": …}` at once and `{"status": …}` (the raw wait status) when the child is reaped.

What differs from a real process, on purpose: every command module (and the libraries commands
import lazily) is already imported, so a command that would fail to *import* is not caught here —
which is why the sweep keeps one real console-script run per leaf command (its `--help`).
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import json
import os
import pkgutil
import select
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_MESSAGE = 1 << 20
# Libraries the commands import inside functions (start-up is being made lazy): imported once here.
LIBRARIES = ("pydantic", "yaml", "ruamel.yaml", "click", "docker", "requests", "httpx", "asyncssh", "asyncio",
             "concurrent.futures", "subprocess", "json", "uuid", "hashlib", "shlex")


# --- server side (runs in the warm interpreter) ---------------------------------------------------


def preload() -> int:
    """Import every c3 command module and all of `backend` (never Textual: the cockpit only gets
    arguments click rejects); return how many modules are loaded."""
    import click

    from c3.cli import cli

    def walk(cmd: click.Command) -> None:
        if isinstance(cmd, click.Group):
            ctx = click.Context(cmd)
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                if sub is not None:
                    walk(sub)

    walk(cli)
    import backend

    for info in pkgutil.walk_packages(backend.__path__, "backend."):
        with contextlib.suppress(ImportError):
            importlib.import_module(info.name)
    for name in LIBRARIES:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    # Out of the collector's sight: a child's GC and its interpreter's shutdown then do not touch
    # (and copy) every preloaded object's page — 0.3 CPU-s less per case.
    gc.freeze()
    if threading.active_count() != 1:
        raise RuntimeError(f"the fork server must stay single-threaded; imports started {threading.enumerate()}")
    return len(sys.modules)


@dataclass
class _Running:
    pid: int
    pidfd: int
    conn: socket.socket


def serve(path: str, life: int) -> dict | None:
    """Answer requests until the client goes away (EOF on the `life` pipe: returns None); in a forked
    child, return its request."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(path)
    listener.listen(64)
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ, "accept")
    sel.register(life, selectors.EVENT_READ, "client")  # EOF: the test session is gone
    waiting: dict[int, socket.socket] = {}  # connections that have not sent their request yet
    running: dict[int, _Running] = {}  # pidfd -> child
    sys.stdout.write("ready\n")
    sys.stdout.flush()  # nothing buffered may be copied into a child
    while True:
        for key, _ in sel.select():
            tag = key.data
            if tag == "client":
                if not os.read(life, 4096):
                    for child in running.values():
                        with contextlib.suppress(ProcessLookupError):
                            os.killpg(child.pid, signal.SIGKILL)
                    return None
            elif tag == "accept":
                conn, _ = listener.accept()
                waiting[conn.fileno()] = conn
                sel.register(conn, selectors.EVENT_READ, "request")
            elif tag == "request":
                conn = waiting.pop(key.fd)
                sel.unregister(conn)
                try:
                    data, fds, flags, _ = socket.recv_fds(conn, MAX_MESSAGE, 3)
                except OSError:
                    conn.close()
                    continue
                if not data or len(fds) != 3 or flags & socket.MSG_TRUNC:
                    for fd in fds:
                        os.close(fd)
                    conn.close()
                    continue
                request = json.loads(data)
                request["fds"] = fds
                pid = os.fork()
                if pid == 0:
                    # The child: drop everything of the server's but the request's fds.
                    sel.close()
                    listener.close()
                    os.close(life)
                    for other in [*waiting.values(), *(c.conn for c in running.values()), conn]:
                        other.close()
                    for pidfd in running:
                        os.close(pidfd)
                    return request
                for fd in fds:
                    os.close(fd)
                pidfd = os.pidfd_open(pid)
                running[pidfd] = _Running(pid, pidfd, conn)
                sel.register(pidfd, selectors.EVENT_READ, "exit")
                with contextlib.suppress(OSError):
                    conn.send(json.dumps({"pid": pid}).encode())
            elif tag == "exit":
                child = running.pop(key.fd)
                sel.unregister(key.fd)
                os.close(child.pidfd)
                _, status = os.waitpid(child.pid, 0)
                with contextlib.suppress(OSError):
                    child.conn.send(json.dumps({"status": status}).encode())
                child.conn.close()


def become_c3(request: dict) -> None:
    """In the forked child: take the request's session, fds, cwd and environment, then be `c3 ARGV`."""
    os.setsid()  # its own process group: the client kills the whole group at the deadline
    for target, fd in enumerate(request["fds"]):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv = [request["argv0"], *request["argv"]]
    from backend.settings import reset

    reset()  # nothing is installed in the server; this keeps it so if preload ever changes
    from c3.cli import main

    sys.exit(main(request["argv"]))  # as the console script: the interpreter itself finishes the process


# --- client side (the test session) ---------------------------------------------------------------


class ForkServerError(RuntimeError):
    """The fork server failed a request (it died?); the message carries its log."""


class ForkServerDidNotStart(ForkServerError):
    """The fork server could not start (its imports failed, or it is too slow); the message carries its log."""


@dataclass
class Raw:
    """What one forked invocation did, before decoding."""

    rc: int
    stdout: bytes
    stderr: bytes
    timed_out: bool


class ForkServer:
    """A handle on one fork server; starts it on first use and again if it died. Thread-safe.

    The server's stdin is /dev/null and its stdout and stderr are pipes, as a real `c3`'s are in the
    tests: Python builds sys.stdin/stdout/stderr at start-up from what the fds are (seekable, tty),
    and every child inherits those objects over the fds it is given."""

    def __init__(self, env: dict[str, str], *, start_timeout: float = 180.0) -> None:
        self.env = env
        self.start_timeout = start_timeout
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._dir: tempfile.TemporaryDirectory[str] | None = None
        self._life: int | None = None  # our end of the pipe whose EOF tells the server we are gone
        self._stderr: list[bytes] = []  # what the server printed (only when something went wrong)
        self.starts = 0

    @property
    def socket_path(self) -> str:
        assert self._dir is not None
        return os.path.join(self._dir.name, "sock")

    def _log(self) -> str:
        return b"".join(self._stderr).decode(errors="replace")[-3000:]

    def ensure(self) -> None:
        """Start the server unless it is running (a cold start imports everything: seconds on a busy box)."""
        with self._lock:
            if self._proc is not None and self._proc.poll() is None:
                return
            self._stop_locked()
            self._dir = tempfile.TemporaryDirectory(prefix="c3-forkserver-")
            life_r, self._life = os.pipe()
            try:
                self._proc = subprocess.Popen([sys.executable, "-m", "tests.cli.forkserver", self.socket_path, str(life_r)], cwd=ROOT,
                                              env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                              pass_fds=[life_r], start_new_session=True)
            finally:
                os.close(life_r)
            self.starts += 1
            self._stderr = []
            threading.Thread(target=self._drain, args=(self._proc.stderr, self._stderr), daemon=True).start()
            assert self._proc.stdout is not None
            ready, _, _ = select.select([self._proc.stdout], [], [], self.start_timeout)
            line = self._proc.stdout.readline() if ready else b""
            if line != b"ready\n":
                self._stop_locked()
                raise ForkServerDidNotStart(f"the c3 fork server did not start within {self.start_timeout:.0f}s: {line!r}\n{self._log()}")

    @staticmethod
    def _drain(stream, into: list[bytes]) -> None:
        for chunk in iter(lambda: stream.read1(65536), b""):
            into.append(chunk)

    def _stop_locked(self) -> None:
        if self._life is not None:
            os.close(self._life)  # EOF: the server kills what still runs and exits
            self._life = None
        if self._proc is not None:
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            if self._proc.stdout:
                self._proc.stdout.close()
            self._proc = None
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None

    def close(self) -> None:
        with self._lock:
            self._stop_locked()

    def run(self, argv: list[str], *, argv0: str, env: dict[str, str], cwd: str, timeout: float,
            stdin: int | None = None, stdout: int | None = None) -> Raw:
        """Run `c3 ARGV` in a fork; stdin is /dev/null (or the fd given), stdout/stderr are captured
        (stdout goes to the fd given instead, if one is). At the deadline the child's group is killed."""
        self.ensure()
        out_r, out_w = os.pipe() if stdout is None else (None, stdout)
        err_r, err_w = os.pipe()
        null = os.open(os.devnull, os.O_RDONLY) if stdin is None else None
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            conn.connect(self.socket_path)
            request = json.dumps({"argv": argv, "argv0": argv0, "env": env, "cwd": cwd}).encode()
            socket.send_fds(conn, [request], [stdin if null is None else null, out_w, err_w])
        except OSError as error:
            conn.close()
            for fd in (out_r, err_r):
                if fd is not None:
                    os.close(fd)
            raise ForkServerError(f"the c3 fork server did not take the request: {error}\n{self._log()}") from error
        finally:
            for fd in (null, err_w, out_w if stdout is None else None):
                if fd is not None:
                    os.close(fd)
        try:
            return _collect(conn, out_r, err_r, timeout, self._log)
        finally:
            conn.close()


def _collect(conn: socket.socket, out_r: int | None, err_r: int, timeout: float, log) -> Raw:
    """Read the child's output to EOF and its status, killing its group at the deadline (as
    `subprocess.communicate` + `killpg` does for a real process)."""
    chunks: dict[int, list[bytes]] = {fd: [] for fd in (out_r, err_r) if fd is not None}
    open_fds = set(chunks)
    pid: int | None = None
    status: int | None = None
    timed_out = False
    deadline = time.monotonic() + timeout
    hard_stop = deadline + 60.0  # after a kill: wait this long for the group's pipes to close
    sel = selectors.DefaultSelector()
    for fd in open_fds:
        sel.register(fd, selectors.EVENT_READ)
    sel.register(conn, selectors.EVENT_READ)
    try:
        while open_fds or status is None:
            now = time.monotonic()
            if not timed_out and now >= deadline and pid is not None:
                timed_out = True
                _kill_group(pid, reaped=status is not None)
            if now >= hard_stop:
                raise ForkServerError(f"a forked c3 (pid {pid}) neither finished nor died after SIGKILL\n{log()}")
            wait = (deadline if not timed_out else hard_stop) - now
            for key, _ in sel.select(timeout=max(0.0, wait) if (pid is not None or timed_out) else 1.0):
                if key.fileobj is conn:
                    message = conn.recv(4096)
                    if not message:
                        sel.unregister(conn)
                        if status is None:
                            raise ForkServerError(f"the c3 fork server hung up before the child's status (it died?)\n{log()}")
                        continue
                    reply = json.loads(message)
                    pid = reply.get("pid", pid)
                    status = reply.get("status", status)
                else:
                    data = os.read(key.fd, 65536)
                    if data:
                        chunks[key.fd].append(data)
                    else:
                        sel.unregister(key.fd)
                        open_fds.discard(key.fd)
    except BaseException:
        if pid is not None and status is None:
            _kill_group(pid, reaped=False)  # we leave early (pytest-timeout, Ctrl-C): the child must not run on
        raise
    finally:
        sel.close()
        for fd in chunks:
            os.close(fd)
    assert status is not None
    return Raw(rc=os.waitstatus_to_exitcode(status), stdout=b"".join(chunks.get(out_r, [])) if out_r is not None else b"",
               stderr=b"".join(chunks[err_r]), timed_out=timed_out)


def _kill_group(pid: int, *, reaped: bool) -> None:
    """Kill the child's process group (it may outlive the reaped child: a grandchild holding the pipes)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        if not reaped:  # killed before its setsid(): it is still in the server's group. Once reaped, its pid may be reused.
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


if __name__ == "__main__":
    preload()
    child_request = serve(sys.argv[1], int(sys.argv[2]))
    if child_request is None:
        sys.exit(0)
    become_c3(child_request)
