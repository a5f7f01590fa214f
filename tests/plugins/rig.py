"""Test-rig fixtures: the stub engine as a local process, a real dockerd, the stub-engine image, the fake
libnvidia-ml.so.1 loaded by the real pynvml. How to run the same things by hand: scripts/rig/README.md.

Everything a fixture starts is stopped by the pid or container id it created, even when the test fails.
"""

from __future__ import annotations

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
STUB_ENGINE = ROOT / "backend" / "sim" / "stub_engine.py"
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
    """Start backend/sim/stub_engine.py on a free loopback port (retrying if another process took the port)."""
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


# ---------------------------------------------------------------- docker

DOCKERD_HINT = "start one with: nohup dockerd > /tmp/dockerd.log 2>&1 &  (then wait for `docker info`)"


@pytest.fixture(scope="session")
def docker_client(require_service):
    """docker-py client for the running dockerd (never started here: .ci/run or a human starts it)."""
    try:
        import docker

        client = docker.from_env(timeout=300)
        client.ping()
    except Exception as exc:  # noqa: BLE001 - any failure means "no usable daemon"
        require_service("dockerd", False, f"{type(exc).__name__}: {exc}; {DOCKERD_HINT}")
        return
    yield client
    client.close()


@pytest.fixture(scope="session")
def stub_image(docker_client, require_service) -> str:
    """`c3-stub:test`, built once per session from a local Debian rootfs (no registry pulls)."""
    from scripts.rig.image import BASE_IMAGE, ensure_stub_image, has_image

    if not has_image(docker_client, BASE_IMAGE):
        require_service("mmdebstrap", shutil.which("mmdebstrap") is not None,
                        "needed once to build the Debian rootfs of the test image")
    return ensure_stub_image(docker_client, log=lambda line: print(line, file=sys.stderr))


@dataclass
class StubContainer:
    """A stub-engine container started by the `stub_container` fixture."""

    container: object
    port: int

    @property
    def id(self) -> str:
        return self.container.id

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def logs(self) -> str:
        return self.container.logs().decode(errors="replace")

    def host_pid(self) -> int:
        self.container.reload()
        return int(self.container.attrs["State"]["Pid"])

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Poll GET /health (a TCP connect is not enough: docker's proxy accepts before the engine does)."""
        import httpx

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.container.reload()
            if self.container.status == "exited":
                break
            try:
                if httpx.get(self.url + "/health", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"container {self.id[:12]} never served:\n{self.logs()[-2000:]}")


@pytest.fixture
def stub_container(docker_client, stub_image):
    """Factory: `stub_container("vllm", "serve", "m", env={...}, registry=path)` → StubContainer.

    Runs `c3-stub:test` detached with label io.c3.test=1, port 8000 published on a free 127.0.0.1 port,
    and (when `registry` is given) that directory mounted as the GPU registry. Waits for /health unless
    wait=False. Removes (by id) every container it created.
    """
    created: list = []

    def run(*command: str, env: dict | None = None, registry: Path | None = None, wait: bool = True,
            **kwargs) -> StubContainer:
        port = free_port()
        env = dict(env or {})
        volumes = dict(kwargs.pop("volumes", {}) or {})
        if registry is not None:
            volumes[str(registry)] = {"bind": "/c3-registry", "mode": "rw"}
            env["C3_GPU_REGISTRY"] = "/c3-registry"
        labels = {TEST_LABEL: "1", **kwargs.pop("labels", {})}
        container = docker_client.containers.run(stub_image, list(command) or None, detach=True, environment=env,
                                                 ports={"8000/tcp": ("127.0.0.1", port)}, labels=labels,
                                                 volumes=volumes, **kwargs)
        created.append(container)
        stub = StubContainer(container=container, port=port)
        if wait:
            stub.wait_ready()
        return stub

    yield run
    for container in created:
        try:
            container.remove(force=True)
        except Exception:  # noqa: BLE001 - already gone (or removed by the test itself)
            pass
