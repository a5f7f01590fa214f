"""A gateway on the demo rig with the simulated runtime (stub engines as local processes), run in a
thread of the test process, in front of pods planned and booted through the actions."""

from __future__ import annotations

import asyncio
import http.client
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from backend.actions import NewPod
from backend.actions.base import ignore_progress
from backend.actions.create_pod import CreatePod
from backend.actions.serve_gateway import EstateControl
from backend.actions.workspace import Workspace
from backend.gateway.config import GatewayConfig
from backend.gateway.front import Gateway
from backend.gateway.serve import serve
from tests.actions.conftest import ws  # noqa: F401 - the demo-rig workspace (a fixture)
from tests.support import free_port

SLUG = "vllm/qwen3-8b"


def create(ws: Workspace, name: str, gpu: int, slug: str = SLUG, on_demand: bool = False, sleep_mode: bool = False) -> int:
    port = free_port()
    action = CreatePod(ws, NewPod(name, slug, (gpu,), port, on_demand, sleep_mode), force=True)
    assert [p for p in action.problems() if p.blocking] == []
    assert action.run(ignore_progress).ok
    return port


def crashing_slug(home: Path) -> str:
    """A catalog entry whose stub engine dies while it loads (after printing a CUDA OOM line)."""
    folder = home / "catalog.d"
    folder.mkdir(parents=True, exist_ok=True)
    entry = {"slug": "custom/crashy", "engine": "custom", "image": "c3-stub:test", "command": ["python3", "/opt/c3/stub_engine.py", "--port", "8000"],
             "container_port": 8000, "health_path": "/v1/models", "tp": 1, "env": {"C3_STUB_CRASH_DURING_BOOT": "1"}}
    (folder / "test.yaml").write_text(yaml.safe_dump({"entries": [entry]}))
    return "custom/crashy"


class Counting(EstateControl):
    """The real control, counting starts and stops."""

    def __init__(self, ws: Workspace, secrets: tuple[str, ...] = ()) -> None:
        super().__init__(ws, secrets)
        self.starts: list[str] = []
        self.stops: list[str] = []
        self.sleeps: list[str] = []
        self.wakes: list[str] = []
        self.asleep: list[tuple[str, ...]] = []
        """What each start was told sleeps on its GPUs."""
        self.hold = threading.Event()
        """Cleared: a start waits here before it boots (a test fills the queue meanwhile)."""
        self.hold.set()

    def start(self, name: str, timeout_s: float, asleep: tuple[str, ...] = ()) -> Any:
        self.starts.append(name)
        self.asleep.append(asleep)
        assert self.hold.wait(60)
        return super().start(name, timeout_s, asleep)

    def stop(self, name: str) -> None:
        self.stops.append(name)
        super().stop(name)

    def sleep(self, name: str) -> None:
        self.sleeps.append(name)
        super().sleep(name)

    def wake(self, name: str) -> Any:
        self.wakes.append(name)
        return super().wake(name)


class Running:
    """A gateway serving in its own thread and event loop."""

    def __init__(self, config: GatewayConfig, control: Counting) -> None:
        self.control = control
        self.gw: Gateway | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.stop_event: asyncio.Event | None = None
        self.ready = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(config,), daemon=True)
        self.thread.start()
        assert self.ready.wait(30), self.error
        assert self.gw is not None

    def _run(self, config: GatewayConfig) -> None:
        async def main() -> None:
            self.loop = asyncio.get_running_loop()
            self.stop_event = asyncio.Event()

            def on_ready(gw: Gateway) -> None:
                self.gw = gw
                self.ready.set()

            await serve(config, self.control, on_ready=on_ready, stop=self.stop_event)

        try:
            asyncio.run(main())
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc
            self.ready.set()

    @property
    def port(self) -> int:
        assert self.gw is not None
        return self.gw.port

    def close(self) -> None:
        if self.loop is not None and self.stop_event is not None:
            self.loop.call_soon_threadsafe(self.stop_event.set)
        self.thread.join(30)

    def request(self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None, timeout: float = 60) -> tuple[int, dict[str, str], bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
            conn.request(method, path, body=data, headers={"Content-Type": "application/json", **(headers or {})})
            resp = conn.getresponse()
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
        finally:
            conn.close()

    def chat(self, model: str, **extra: Any) -> tuple[int, dict[str, str], bytes]:
        headers = extra.pop("headers", None)
        timeout = extra.pop("timeout", 60)
        return self.request("POST", "/v1/chat/completions", {"model": model, "messages": [{"role": "user", "content": "hi"}], **extra}, headers,
                            timeout=timeout)


@pytest.fixture
def gateway(ws, tmp_path) -> Iterator[Any]:
    """`gateway(**config)` starts one (port 0, status files under tmp_path); all are stopped afterwards."""
    started: list[Running] = []

    def start(secrets: tuple[str, ...] = (), **fields: Any) -> Running:
        fields.setdefault("state_dir", tmp_path / "gateway")
        config = GatewayConfig(host="127.0.0.1", port=0, **fields)
        running = Running(config, Counting(ws, secrets))
        started.append(running)
        return running

    yield start
    for running in started:
        running.close()
