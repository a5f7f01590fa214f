"""The `real_engine` tier: tests against a real vLLM (CPU build) and llama.cpp's own llama-server.

The engines, the tiny models and their GGUF are built by scripts/rig/real_engines.py, once per machine
(cached under /var/cache/c3-rig/real-engines, keyed by the pinned versions; a file lock keeps two
pytest sessions from building twice). The build runs when collection is over and at least one
selected test is marked `real_engine` — outside any test's timeout, since a cold build takes minutes.
A build that cannot happen (no cmake, no package registry…) skips the tier, or fails it under
`--require-services`. scripts/test.py builds in the background while the other tests run and then runs
this tier alone; when that build failed it says so in `C3_REAL_ENGINE_PROBLEM`, and the tier takes that
as its verdict instead of building again. Under pytest-xdist every worker collects, but only the first (`gw0`) builds:
the others would only wait on its lock, and a failed build would be tried again by each of them.
No worker runs a test before every worker has collected, so the engines are there (or known missing)
by then; the build's line in the terminal summary comes from `gw0` (tests/plugins/workers.py).

Fixtures: `real_engines` (paths), `vllm_engine` / `llama_engine` (factories; every server they start is
stopped by pid at teardown), `vllm_dense` (one vLLM per module serving the dense tiny model).
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.plugins.workers import summary_line, worker_id

_BUILD: dict[str, object] = {}
BUILDING_WORKER = "gw0"


@dataclass(frozen=True)
class RealEngines:
    vllm_venv: Path
    vllm_python: Path
    llama_server: Path
    rpc_server: Path
    """`ggml-rpc-server`: llama.cpp's RPC worker, what a shard runs on each node beyond the first."""
    fit_params: Path
    """`llama-fit-params`: llama.cpp's own answer to "what fits in this memory"."""
    models: Path

    def model(self, family: str) -> Path:
        return self.models / family

    @property
    def gguf(self) -> Path:
        return self.models / "tiny.gguf"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "real_engine: needs the real vLLM (CPU) and llama-server the rig builds")


def _builds_here(config: pytest.Config) -> bool:
    """This process builds the engines: a run without xdist, or xdist's first worker."""
    return worker_id(config) in (None, BUILDING_WORKER)


@pytest.hookimpl(trylast=True)  # after `-m`/`-k` deselected: `-m "not real_engine"` must not build (nor wait on a build)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.option.collectonly or _BUILD or not any(item.get_closest_marker("real_engine") for item in items):
        return
    if not _builds_here(config):
        _BUILD["elsewhere"] = BUILDING_WORKER
        return
    from scripts.rig import real_engines

    if os.environ.get("C3_REAL_ENGINE_PROBLEM"):  # scripts/test.py's background build failed: not again here
        _BUILD["problem"] = os.environ["C3_REAL_ENGINE_PROBLEM"]
        _BUILD["seconds"] = 0.0
        return
    started = time.monotonic()
    # An xdist worker's terminal reporter writes nowhere that is shown; its stderr reaches the terminal.
    reporter = config.pluginmanager.get_plugin("terminalreporter") if worker_id(config) is None else None

    def log(line: str) -> None:
        if reporter is not None:
            reporter.write_line(line)
        else:
            print(line, file=sys.stderr)

    try:
        real_engines.build_all(log)
    except Exception as exc:  # noqa: BLE001 - any build failure means "tier unavailable", said once below
        _BUILD["problem"] = f"{type(exc).__name__}: {str(exc)[-1500:]}"
    _BUILD["seconds"] = time.monotonic() - started
    state = "unavailable: " + str(_BUILD["problem"])[:300] if "problem" in _BUILD else "ready"
    summary_line(config, f"real engines: {state} ({_BUILD['seconds']:.0f}s to build or find)")


@pytest.fixture(scope="session")
def real_engines(require_service) -> RealEngines:
    from scripts.rig import real_engines as rig

    problem = _BUILD.get("problem")
    if problem is None and not rig.ready():
        problem = "not built (run: python3 scripts/rig/real_engines.py build)"
        if "elsewhere" in _BUILD:
            problem = f"not built: the build at collection on worker {_BUILD['elsewhere']} failed (its reason is in the terminal summary)"
    require_service("real-engines", problem is None, str(problem or ""))
    return RealEngines(rig.vllm_dir(), rig.vllm_python(), rig.llama_server(), rig.rpc_server(), rig.fit_params(),
                       rig.models_dir())


@pytest.fixture
def vllm_engine(real_engines, tmp_path_factory):
    """Factory: `vllm_engine("dense", *extra, kv_space_gib=1)` → EngineProcess (not yet healthy)."""
    from scripts.rig.engine_procs import start_vllm

    started = []

    def start(family: str = "dense", *extra: str, **kwargs):
        scratch = tmp_path_factory.mktemp(f"vllm-{family}")
        proc = start_vllm(real_engines.model(family), scratch, *extra, **kwargs)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.stop()


@pytest.fixture
def llama_engine(real_engines, tmp_path_factory):
    """Factory: `llama_engine(*extra)` → EngineProcess serving tiny.gguf (not yet healthy)."""
    from scripts.rig.engine_procs import start_llama

    started = []

    def start(*extra: str, **kwargs):
        proc = start_llama(real_engines.gguf, tmp_path_factory.mktemp("llama"), *extra, **kwargs)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.stop()


@pytest.fixture(scope="module")
def vllm_dense(real_engines, tmp_path_factory):
    """One healthy vLLM serving the dense tiny model as `tiny`, shared by a module's tests that only read it
    (module scope: it is gone before the next module starts its own servers — at most two run at once)."""
    from scripts.rig.engine_procs import start_vllm

    proc = start_vllm(real_engines.model("dense"), tmp_path_factory.mktemp("vllm-dense-shared"))
    try:
        proc.wait_healthy(300)
        yield proc
    finally:
        proc.stop()
