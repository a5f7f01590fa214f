"""A workspace on the built-in demo rig with the simulated runtime (stub engines as local
processes): the same world `c3 demo` runs, driven through the actions alone."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from backend.actions import Progress
from backend.actions.workspace import Workspace


@pytest.fixture
def ws(monkeypatch, tmp_path) -> Iterator[Workspace]:
    monkeypatch.setenv("C3_RIG", "demo")
    monkeypatch.setenv("C3_RUNTIME", "sim")
    monkeypatch.setenv("C3_STUB_STARTUP_DELAY", "0.2")
    from backend.wiring import open_context

    workspace = Workspace(Path(tmp_path) / "estate.yml", open_context())
    yield workspace
    runtime = workspace.ctx.runtime
    for name, workload in runtime.workloads().items():  # only this test's C3_STATE: its own stubs
        if workload.status != "absent":
            runtime.stop(name, timeout=5.0)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Steps(list[Progress]):
    """A progress sink that keeps every step."""

    def __call__(self, step: Progress, /) -> None:
        self.append(step)
