"""Fixtures for the pool tests: a real `c3 pool serve` process in front of real stub engines on loopback.

Every process is started by these fixtures (or the rig's `stub_process`) and stopped by its pid.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from backend.nodes.registry import add_node, load_registry
from tests.plugins.rig import StubProcess, free_port, start_stub

ROOT = Path(__file__).resolve().parents[2]


def wait_until(predicate, timeout: float = 15.0, interval: float = 0.05, what: str = "condition"):
    """Poll `predicate` until it returns something truthy; fail after `timeout`."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


@dataclass
class PoolProcess:
    """A running `c3 pool serve`."""

    popen: subprocess.Popen
    port: int
    log_path: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def status(self) -> dict:
        return httpx.get(self.url + "/c3/status", timeout=5).json()

    def backend(self, node: str) -> dict:
        return next(b for b in self.status()["backends"] if b["node"] == node)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20.0) -> int:
        if self.popen.poll() is None:
            self.popen.send_signal(sig)
            try:
                return self.popen.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
        return self.popen.wait(timeout=timeout)


def c3_argv() -> list[str]:
    return [sys.executable, "-m", "c3"]


def register(name: str, url: str) -> None:
    """Register a loopback node (idempotent per test)."""
    if not any(n.name == name for n in load_registry().nodes):
        add_node(name, url, "tester@localhost")


def launch_pool(log_dir: Path, nodes: dict[str, str], *args: str, probe_interval: float = 0.25, port: int | None = None,
                env: dict | None = None) -> PoolProcess:
    """Register `nodes`, start `c3 pool serve` in front of them and return once it answers."""
    for name, url in nodes.items():
        register(name, url)
    port = port or free_port()
    log_path = log_dir / f"pool-{port}.log"
    argv = [*c3_argv(), "pool", "serve", "--nodes", ",".join(nodes), "--bind", f"127.0.0.1:{port}",
            "--probe-interval", str(probe_interval), "--probe-timeout", "1", *args]
    with open(log_path, "wb") as log:
        popen = subprocess.Popen(argv, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                 env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})
    proc = PoolProcess(popen, port, log_path)

    def ready():
        if popen.poll() is not None:
            raise AssertionError(f"c3 pool serve exited {popen.returncode}:\n{proc.log()}")
        try:
            return httpx.get(proc.url + "/c3/health", timeout=1).status_code in (200, 503)
        except httpx.HTTPError:
            return False

    try:
        wait_until(ready, timeout=30, what="the router to listen")
    except BaseException:
        proc.stop(signal.SIGKILL)
        raise
    return proc


@pytest.fixture
def pool_process(tmp_path):
    """Factory: `pool_process({"a": url, ...}, "--sticky", "auto")` → PoolProcess once it answers."""
    started: list[PoolProcess] = []

    def start(nodes: dict[str, str], *args: str, probe_interval: float = 0.25, port: int | None = None, env: dict | None = None) -> PoolProcess:
        proc = launch_pool(tmp_path, nodes, *args, probe_interval=probe_interval, port=port, env=env)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.stop(signal.SIGKILL if proc.popen.poll() is None else signal.SIGTERM)


@pytest.fixture
def stubs(stub_process):
    """Factory: `stubs("a", "b", tokens=4, token_delay=0)` → {name: StubProcess} (rig stub engines)."""

    def start(*names: str, extra: tuple[str, ...] = ()) -> dict:
        return {name: stub_process("--name", name, *extra) for name in names}

    return start


class ModuleStubs:
    """Stub engines kept for a whole test module, one per (name, flags), so that tests which only send
    requests through their own router do not each start new engine processes. Before a test gets them
    their request records are cleared (`DELETE /debug/requests`), and one found dead is started again:
    what a test reads back from a stub is then its own traffic, as with a fresh one."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.kept: dict[tuple[str, tuple[str, ...]], StubProcess] = {}
        self.starts = 0
        """Stub processes this keeper started (a test can tell a kept stub from a new one)."""

    def lend(self, *names: str, extra: tuple[str, ...] = ()) -> dict[str, StubProcess]:
        out = {}
        for name in names:
            key = (name, tuple(extra))
            stub = self.kept.get(key)
            if stub is None or not stub.alive():
                stub = self.kept[key] = start_stub(("--name", name, *extra), None, self.log_dir)
                self.starts += 1
                stub.wait_ready()
            httpx.delete(stub.url + "/debug/requests", timeout=5).raise_for_status()
            out[name] = stub
        return out

    def close(self) -> None:
        for stub in self.kept.values():
            stub.stop(signal.SIGKILL if stub.alive() else signal.SIGTERM, timeout=10)
        self.kept.clear()


@pytest.fixture(scope="module")
def _module_stubs(tmp_path_factory):
    keeper = ModuleStubs(tmp_path_factory.mktemp("module-stubs"))
    yield keeper
    keeper.close()


@pytest.fixture
def shared_stubs(_module_stubs):
    """Like `stubs` (`shared_stubs("a", "b", extra=("--tokens", "1"))` → {name: StubProcess}), but the
    engines are the module's (`ModuleStubs`): for tests that do not stop, kill or reconfigure a stub.
    Each test still starts its own router, whose state (pins, counters, health) is what it checks."""
    return _module_stubs.lend


def stub_records(url: str) -> dict:
    """The stub engine's record of what it received."""
    return httpx.get(url + "/debug/requests", timeout=5).json()


def chat(client: httpx.Client, headers: dict | None = None, stream: bool = False, **body) -> httpx.Response:
    payload = {"model": "stub/model", "messages": [{"role": "user", "content": "hello"}], "stream": stream, **body}
    return client.post("/v1/chat/completions", json=payload, headers=headers or {})


class ScriptedBackend:
    """A tiny threaded HTTP backend whose answers the test scripts: for 503s and byte-exact streams."""

    def __init__(self, name: str, status: int = 200, health: int = 200, stream_chunks: list[bytes] | None = None, chunk_delay: float = 0.0):
        self.name = name
        self.status = status
        self.health = health
        self.stream_chunks = stream_chunks
        self.chunk_delay = chunk_delay
        self.requests: list[tuple[str, str]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def _answer(self):
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                if self.path == "/health":
                    self._send(outer.health, b"")
                    return
                outer.requests.append((self.command, self.path))
                if outer.stream_chunks is not None:
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Transfer-Encoding", "chunked")
                    self.send_header("X-Stub-Backend", outer.name)
                    self.end_headers()
                    for chunk in outer.stream_chunks:
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                        self.wfile.flush()
                        time.sleep(outer.chunk_delay)
                    self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()
                    return
                body = json.dumps({"backend": outer.name, "status": outer.status}).encode()
                self._send(outer.status, body)

            def _send(self, status, body):
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("X-Stub-Backend", outer.name)
                self.end_headers()
                self.wfile.write(body)

            do_GET = _answer
            do_POST = _answer

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def scripted():
    """Factory for ScriptedBackend; all are shut down at teardown."""
    made: list[ScriptedBackend] = []

    def make(*args, **kwargs) -> ScriptedBackend:
        backend = ScriptedBackend(*args, **kwargs)
        made.append(backend)
        return backend

    yield make
    for backend in made:
        backend.close()


def raw_request(port: int, request: bytes, timeout: float = 10.0) -> bytes:
    """Send raw bytes, read until the server closes (the request should say Connection: close)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(request)
        data = b""
        while True:
            piece = sock.recv(65536)
            if not piece:
                return data
            data += piece


def admin_headers() -> dict[str, str]:
    """`X-C3-Admin: TOKEN`: what a request must present for the router to say its sticky outcome."""
    from backend.pool.status import admin_token

    token = admin_token()
    assert token, "the router writes its admin token on start"
    return {"X-C3-Admin": token}
