"""Test-rig fixtures: the stub engine as a local process, a real dockerd, the stub-engine image, the fake
libnvidia-ml.so.1 loaded by the real pynvml. How to run the same things by hand: scripts/rig/README.md.

Everything a fixture starts is stopped by the pid or container id it created, even when the test fails.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STUB_ENGINE = ROOT / "backend" / "stub_engine.py"
TEST_LABEL = "io.c3.test"


def free_port() -> int:
    """A loopback port nobody listens on right now (the caller retries if it loses the race)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(host: str, port: int, timeout: float, alive=lambda: True) -> bool:
    """Poll until something accepts on host:port (False on timeout or when `alive()` turns False)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and alive():
        try:
            socket.create_connection((host, port), timeout=0.5).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


@dataclass
class StubProcess:
    """A stub engine started by the `stub_process` fixture."""

    popen: subprocess.Popen
    port: int
    log_path: Path
    host: str = "127.0.0.1"
    argv: list[str] = field(default_factory=list)

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def alive(self) -> bool:
        return self.popen.poll() is None

    def wait_ready(self, timeout: float = 30.0) -> None:
        if not wait_for_port(self.host, self.port, timeout, self.alive):
            raise AssertionError(f"stub engine pid {self.pid} never served on {self.port}:\n{self.log()[-2000:]}")

    def wait_exit(self, timeout: float = 15.0) -> int:
        return self.popen.wait(timeout=timeout)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 10.0) -> int | None:
        """Signal the stub (by its pid) and reap it; SIGKILL if it does not go in time."""
        if self.popen.poll() is None:
            self.popen.send_signal(sig)
            try:
                return self.popen.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
        return self.popen.wait(timeout=timeout)


def start_stub(args: tuple[str, ...], env: dict | None, log_dir: Path, *, wait: bool = True,
               timeout: float = 30.0, host: str = "127.0.0.1") -> StubProcess:
    """Start backend/stub_engine.py on a free loopback port (retrying if another process took the port)."""
    for attempt in range(3):
        port = free_port()
        log_path = log_dir / f"stub-{port}.log"
        argv = [sys.executable, str(STUB_ENGINE), "--host", host, "--port", str(port), *args]
        full_env = {**os.environ, **(env or {})}
        with open(log_path, "wb") as log:
            popen = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=full_env,
                                     stdin=subprocess.DEVNULL)
        stub = StubProcess(popen=popen, port=port, log_path=log_path, host=host, argv=argv)
        if not wait:
            return stub
        if wait_for_port(host, port, timeout, stub.alive):
            return stub
        if stub.alive() or "could not bind" not in stub.log() or attempt == 2:
            return stub  # the caller's own assertions say what went wrong
    raise AssertionError("unreachable")


@pytest.fixture
def stub_process(tmp_path_factory):
    """Factory: `stub_process("--tokens", "4", env={...}, wait=True)` → StubProcess on 127.0.0.1.

    With wait=True (default) it returns once the port accepts connections (or the process died).
    Every stub it started is stopped by pid at teardown.
    """
    started: list[StubProcess] = []
    log_dir = tmp_path_factory.mktemp("stub-logs")

    def start(*args: str, env: dict | None = None, wait: bool = True, timeout: float = 30.0) -> StubProcess:
        stub = start_stub(args, env, log_dir, wait=wait, timeout=timeout)
        started.append(stub)
        return stub

    yield start
    for stub in started:
        stub.stop(signal.SIGKILL if stub.alive() else signal.SIGTERM, timeout=10)


# ---------------------------------------------------------------- fake NVML

@pytest.fixture(scope="session")
def fake_nvml_library(require_service) -> Path:
    """The fake libnvidia-ml.so.1, compiled once (cached by source hash under .rig/)."""
    from scripts.rig.fake_nvml import build_library, build_problem

    problem = build_problem()
    require_service("fake-nvml", problem is None, problem or "")
    return build_library()


@pytest.fixture
def fake_nvml(fake_nvml_library, tmp_path_factory, monkeypatch):
    """A fresh fake NVML for one test: `fake_nvml.set_gpus([FakeGpu(...)])`, `.add_process(...)`.

    This process's environment points at its state file and registry (C3_FAKE_NVML_STATE,
    C3_GPU_REGISTRY, LD_LIBRARY_PATH) and the library is preloaded, so in-process pynvml sees it;
    `fake_nvml.env()` is the environment for subprocesses. Starts with no GPUs.
    """
    from scripts.rig.fake_nvml import FakeNvml, preload

    fake = FakeNvml(fake_nvml_library, tmp_path_factory.mktemp("nvml"))
    for key, value in fake.env().items():
        if key in ("C3_FAKE_NVML_STATE", "C3_GPU_REGISTRY", "LD_LIBRARY_PATH"):
            monkeypatch.setenv(key, value)
    preload(fake_nvml_library)
    yield fake
