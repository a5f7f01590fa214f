"""The simulated world the cockpit's scenes run on: what `c3 demo` builds, brought into a known state.

A `World` is a private `$HOME` with the demo's folders (`backend.sim.demo.demo_settings`), an estate file,
pods really booted by the backend (`boot_many` → the sim runtime → stub-engine processes holding
their GPUs on the simulated rig), registered nodes, a user recipe and — for `cluster` — a real
`c3 pool serve` router and an active profile. The cockpit then runs the real facade
(`c3.services_real.RealServices`) over it; nothing in the facade is replaced.

Scenarios: `empty` (the demo as first started), `placed` (two pods serving on exactly their GPUs,
this machine registered as a node, a user recipe), `mismatch` (`placed` plus the demo's misplaced
pod, which asks for GPU 1 and lands on GPU 0), `bench` (an eight-GPU rig, sixteen pods, eight
running), `cluster` (`placed` plus an unreachable node, a pool router over both nodes and an active
profile). `stale` is `placed` with a GPU probe that a scene step makes stop answering.

The pictures must be the same on every run, so `StableFacade` pins what changes between runs and
nothing else: timestamps (to the scenes' fixed clock), pids (to one number per pod), ports the
kernel picks for a client, and the health-probe access lines of engine logs (how many there are
depends on timing). It passes every call through to the real facade.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
FIXED_NOW = datetime(2026, 5, 1, 12, 0, 0, tzinfo=UTC)
HISTORY_POINTS = 6
"""Readings per series a history picture shows (a scene waits until every series has them)."""
SCENARIOS = ("empty", "placed", "mismatch", "stale", "bench", "cluster")

# Variables that would point the demo elsewhere; the world sets its own.
_CLEARED = ("C3_HOME", "C3_STATE", "C3_RIG", "C3_RUNTIME", "C3_DEMO", "C3_GPU_REGISTRY", "C3_GPU_MODE", "C3_STUB_STARTUP_DELAY", "HF_TOKEN", "XDG_CONFIG_HOME", "XDG_STATE_HOME")

# (name, slug, gpus, port, running)
PLACED = [("chat", "vllm/qwen3-8b", [0], 8020, True), ("coder", "vllm/qwen3-32b-awq-tp2", [2, 3], 8024, True)]
MISPLACED = ("odd", "custom/demo-misplaced", [1], 8900, True)
BENCH_SLUGS = ["vllm/qwen3-8b", "vllm/llama-3.1-8b", "vllm/qwen3-8b-awq", "vllm/gpt-oss-20b"]
POOL_BIND = "127.0.0.1:8011"
GATEWAY_HELD_FOR = "pod summarizer needs GPU 0, held by pod chat with 1 request(s) in flight"
LOCK_FILE = Path(tempfile.gettempdir()) / "c3-cockpit-world.lock"
"""Machine-wide: the worlds bind fixed ports (the pictures show them), so two test runs on one machine take turns."""
_lock_state: dict[str, Any] = {"fd": None, "holders": 0}
before_build: list[Callable[[], None]] = []
"""Called before a world is built: whatever holds a world this process keeps alive (the shared world of
`tests.cockpit.shared`) lets go of it, since the new one binds the same fixed ports."""
UNREACHABLE = "198.51.100.12"
"""TEST-NET-2 (RFC 5737), the suite's black hole: the network guard (tests/plugins/netguard.py) refuses every
connect to it with EHOSTUNREACH before the kernel, as a powered-off node on the LAN answers. (TEST-NET-1
was used before, believed never routed; on the test machines 192.0.2.0/24 is eth0's own LAN.)"""

USER_RECIPE = """\
# A recipe this user measured on their own box (the demo's 5090 pair).
id: qwen3-32b-awq-2x5090
title: Qwen3-32B AWQ on two RTX 5090, vLLM TP=2
model: Qwen/Qwen3-32B-AWQ
engine: vllm
image: vllm/vllm-openai@sha256:4be1c0de4be1c0de4be1c0de4be1c0de4be1c0de4be1c0de4be1c0de4be1c0de
nodes: 1
hardware: {id: 2x-rtx5090, description: 2x RTX 5090 (32 GB), gpu: NVIDIA GeForce RTX 5090, gpus_per_node: 2}
defaults: {port: 8000, tensor_parallel_size: 2, max_model_len: 16384, gpu_memory_utilization: 0.92}
command: [vllm, serve, "{model}", --port, "{port}", --tensor-parallel-size, "{tensor_parallel_size}",
          --max-model-len, "{max_model_len}", --gpu-memory-utilization, "{gpu_memory_utilization}"]
known_aborts:
  - {key: max_model_len, op: ">", value: 40960, hardware: "*", why: "above the model's 40960 positions: vLLM refuses to start"}
provenance: {measured_by: the demo's user, measured_on: "2026-04-30", hardware: 2x RTX 5090}
measured: {tokens_per_s: 41.7, ttft_ms: 180, startup_s: 95}
verified: true
"""


def _model_cache(home: Path) -> None:
    """This machine's model weights for the Nodes screen's cache pane: two hub repos laid out as
    huggingface_hub writes them and a GGUF in `~/models` (a recipe's mount), as sparse files of their
    sizes in weights.csv, so nothing is written."""
    for repo, size in (("Qwen/Qwen3-8B", 16_381_470_720), ("Qwen/Qwen3-32B-AWQ", 19_325_298_688)):
        folder = home / ".cache/huggingface/hub" / ("models--" + repo.replace("/", "--"))
        (folder / "blobs").mkdir(parents=True)
        (folder / "snapshots/9c925d6").mkdir(parents=True)
        with open(folder / "blobs/a1", "wb") as blob:
            blob.truncate(size)
        os.symlink("../../blobs/a1", folder / "snapshots/9c925d6/model.safetensors")
    (home / "models").mkdir()
    with open(home / "models/Qwen3-30B-A3B-Q4_K_M.gguf", "wb") as gguf:
        gguf.truncate(18_550_716_416)


def _bench_rig() -> str:
    cards = [("NVIDIA GeForce RTX 3090", 24576, "8.6", 422, 350), ("NVIDIA GeForce RTX 5090", 32607, "12.0", 487, 575)]
    gpus = [{"name": n, "total_mib": t, "sm": s, "reserved_mib": r, "used_mib": 14, "power_limit_w": p} for n, t, s, r, p in (cards[i // 4] for i in range(8))]
    return yaml.safe_dump({"gpus": gpus}, sort_keys=False)


@contextmanager
def environment(values: dict[str, str]) -> Iterator[None]:
    """`os.environ` with these values (and the demo's variables cleared), restored afterwards."""
    saved = dict(os.environ)
    for key in _CLEARED:
        os.environ.pop(key, None)
    os.environ.update(values)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _hold_lock() -> None:
    """Take the machine-wide world lock (re-entrant within this process: a run may hold two worlds)."""
    if _lock_state["holders"] == 0:
        fd = os.open(LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o666)
        fcntl.flock(fd, fcntl.LOCK_EX)  # another checkout's test run may hold it for a while: wait
        _lock_state["fd"] = fd
    _lock_state["holders"] += 1


def _release_lock() -> None:
    if _lock_state["holders"] == 0:
        return
    _lock_state["holders"] -= 1
    if _lock_state["holders"] == 0:
        os.close(_lock_state["fd"])  # closing the descriptor drops the flock
        _lock_state["fd"] = None


@dataclass
class World:
    """One scenario's simulated world; `with world.active():` around everything that uses it."""

    scenario: str
    base: Path
    env: dict[str, str] = field(default_factory=dict)
    pids: dict[int, int] = field(default_factory=dict)
    """Real pid → the fixed number the pictures show (4100 + the pod's place in the estate)."""
    router: subprocess.Popen | None = None
    strangers: list[subprocess.Popen] = field(default_factory=list)
    """Processes on a GPU that belong to no pod (`add_stranger`)."""
    shard_ranks: list[subprocess.Popen] = field(default_factory=list)
    """A shard's rank processes (`start_shard`)."""
    facades: list[StableFacade] = field(default_factory=list)
    holds_lock: bool = False
    """Whether this world still holds its share of the machine-wide lock (released once, by `stop`)."""

    @property
    def home(self) -> Path:
        return self.base / "home"

    @contextmanager
    def active(self) -> Iterator[None]:
        with environment(self.env):
            yield

    # -- building ----------------------------------------------------------------------------------
    @classmethod
    def build(cls, scenario: str) -> World:
        if scenario not in SCENARIOS:
            raise ValueError(f"unknown scenario {scenario!r}")
        for release in before_build:
            release()
        _hold_lock()
        world = cls(scenario, Path(tempfile.mkdtemp(prefix="c3-world-")), holds_lock=True)
        try:
            world._build()
        except BaseException:
            world.stop()
            raise
        return world

    def _build(self) -> None:
        from backend.sim.demo import demo_settings

        self.home.mkdir()
        with environment({"HOME": str(self.home)}):
            self.env = {"HOME": str(self.home), **demo_settings(startup_delay_s=0.0).child_env()}
        self.env["C3_STUB_STARTUP_DELAY"] = "0"
        kind = "placed" if self.scenario == "stale" else self.scenario
        if kind == "bench":
            rig = self.home / "rig-8gpu.yaml"
            rig.write_text(_bench_rig(), encoding="utf-8")
            self.env["C3_RIG"] = str(rig)
        with self.active():
            self._populate(kind)

    def _populate(self, kind: str) -> None:
        from backend import paths

        if kind == "empty":
            return
        pods = list(PLACED)
        if kind == "mismatch":
            pods.append(MISPLACED)
        if kind == "bench":
            pods = [(f"pod-{i:02d}", BENCH_SLUGS[i % 4], [i % 8], 9000 + i, i < 8) for i in range(16)]
        estate = {"schema_version": 1, "estate": [{"name": n, "slug": s, "gpus": g, "port": p} for n, s, g, p, _ in pods]}
        paths.estate_file().parent.mkdir(parents=True, exist_ok=True)
        paths.estate_file().write_text(yaml.safe_dump(estate, sort_keys=False), encoding="utf-8")
        if kind != "bench":
            self._cluster_files(kind)
        self._boot([name for name, *_, running in pods if running])
        self.pids = self._pid_aliases([name for name, *_ in pods])
        if kind == "cluster":
            self._start_router()

    def _cluster_files(self, kind: str) -> None:
        from backend import paths
        from backend.nodes.registry import add_node

        add_node("box", "http://127.0.0.1:8020", f"{os.environ.get('USER') or 'me'}@127.0.0.1")
        _model_cache(Path(os.environ["HOME"]))
        recipes = paths.user_recipes_dir()
        recipes.mkdir(parents=True, exist_ok=True)
        (recipes / "qwen3-32b-awq-2x5090.yaml").write_text(USER_RECIPE, encoding="utf-8")
        if kind != "cluster":
            return
        add_node("spark-2", f"http://{UNREACHABLE}:8000", f"ubuntu@{UNREACHABLE}")
        from backend.profiles import Profile, save_profile, set_active
        from backend.recipes import get_recipe

        recipe = get_recipe("qwen3-32b-awq-2x5090")
        save_profile(Profile(name=recipe.id, recipe=recipe.id, recipe_digest=recipe.digest(), nodes=["box"], base_url="http://127.0.0.1:8000/v1",
                             model=recipe.model, launched_at="2026-05-01T11:00:00Z"))
        set_active(recipe.id)

    def _boot(self, names: list[str]) -> None:
        from backend import paths
        from backend.estate import load_estate
        from backend.runtime.boot import boot_many
        from backend.wiring import open_context

        if not names:
            return
        path = paths.estate_file()
        pods = [p for p in load_estate(path).pods if p.name in names]
        ctx = open_context(demo=True)
        outcomes = boot_many(ctx, pods, estate=str(path.resolve()), timeout_s=60)
        failed = [f"{o.pod}: {o.phase} {o.detail}" for o in outcomes if not o.ok]
        if failed:
            raise RuntimeError("the scene world could not boot its pods (is a port taken?): " + "; ".join(failed))

    def _pid_aliases(self, names: list[str]) -> dict[int, int]:
        from backend.sim.runtime import SimRuntime

        workloads = SimRuntime().workloads()
        return {pid: 4100 + names.index(name) for name, w in workloads.items() if name in names for pid in w.pids}

    def _start_router(self) -> None:
        from backend.pool.status import read_pools

        log = (self.base / "router.log").open("wb")
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.router = subprocess.Popen([sys.executable, "-m", "c3", "pool", "serve", "--nodes", "box,spark-2", "--bind", POOL_BIND],
                                       env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=str(ROOT))
        log.close()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            pools = read_pools(timeout_s=1.0)
            if pools and pools[0].reachable and any(b.healthy for b in pools[0].backends):
                self.pids[self.router.pid] = 48213
                return
            if self.router.poll() is not None:
                break
            time.sleep(0.2)
        raise RuntimeError("the scene world's pool router did not come up: " + (self.base / "router.log").read_text(errors="replace")[-400:])

    def add_stranger(self, gpu: int, mib: int) -> int:
        """A process that is no pod's, holding `mib` MiB on GPU `gpu` (someone else's job): a real
        `sleep` registered in the rig's GPU registry as a stub engine registers itself. Returns its pid."""
        from backend.gpu.registry import default_registry_dir
        from backend.stub_registry import own_pidns

        if self.strangers:  # one is enough (scenes of one world share it)
            return self.strangers[0].pid
        proc = subprocess.Popen(["sleep", "3600"], start_new_session=True)
        self.strangers.append(proc)
        self.pids[proc.pid] = 4321
        with self.active():
            directory = default_registry_dir()
        directory.mkdir(parents=True, exist_ok=True)
        (directory / f"stranger-{proc.pid}.gpu").write_text(f"pid {proc.pid}\nname stranger\npidns {own_pidns()}\ngpu {gpu} {mib} 0\n", encoding="utf-8")
        return proc.pid

    def start_shard(self) -> None:
        """An mp shard that `c3 shard start` runs over spark-1 and spark-2 (both driven from here), whose rank 1
        was SIGKILLed while serving and whose runner has not stopped the rest yet: rank 0 is a real process
        carrying the shard's C3_SHARD and `vllm serve … --node-rank 0` in its argv (it stands for the runner
        too), and the runner's record says `serving`. The Nodes mode reads both ranks from /proc, as for real."""
        from backend.remote.node import Node
        from backend.shard import announce

        if self.shard_ranks:
            return
        tag, model = "spark-1-29500", "Qwen/Qwen3-235B-A22B-GPTQ-Int4"
        argv = [sys.executable, "-c", "import time; time.sleep(3600)", "serve", model, "--pipeline-parallel-size", "2",
                "--distributed-executor-backend", "mp", "--nnodes", "2", "--node-rank", "0"]
        proc = subprocess.Popen(argv, env={**os.environ, "C3_SHARD": tag}, start_new_session=True)
        self.shard_ranks.append(proc)
        self.pids[proc.pid] = 4242
        nodes = [Node(name=f"spark-{i}", host=f"http://10.0.0.1{i}:8000", ssh=f"ubuntu@10.0.0.1{i}", local=True) for i in (1, 2)]
        with self.active():
            announce.write(announce.ShardRecord(tag=tag, backend="mp", model=model, api_url="http://10.0.0.11:8000/v1", head_port=29500,
                                                pid=proc.pid, nodes=nodes, state="serving", started_at=FIXED_NOW.timestamp()))

    # -- teardown ----------------------------------------------------------------------------------
    def stop(self) -> None:
        """Stop the facades' live hubs, the router and every stub process of this world, then delete its files."""
        for facade in self.facades:
            facade.close()
        for proc in [*self.strangers, *self.shard_ranks]:
            proc.kill()
            proc.wait(timeout=5)
        if self.router is not None and self.router.poll() is None:
            os.killpg(self.router.pid, signal.SIGTERM)
            try:
                self.router.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.router.pid, signal.SIGKILL)
                self.router.wait(timeout=5)
        if self.env:
            with self.active():
                from backend.sim.runtime import SimRuntime

                runtime = SimRuntime()
                for name in runtime.workloads():
                    runtime.stop(name, timeout=5.0)
        shutil.rmtree(self.base, ignore_errors=True)
        if self.holds_lock:
            self.holds_lock = False
            _release_lock()

    def write_gateway_status(self) -> Path:
        """A running gateway's status file, as `c3 gateway serve` writes it (this process's pid, so it reads
        as alive): chat loaded on GPU 0 with a request in flight, summarizer's two requests held for a swap."""
        from backend.gateway.status import GatewayStatus, ModelStatus, status_file, write_status
        from backend.gateway.swap import SwapRecord

        swap = SwapRecord(pod="chat", stopped=["summarizer"], gpus=[0], why="stop summarizer (idle, resident 41s) to free GPU 0 for pod chat",
                          at=FIXED_NOW.timestamp() - 60, took_s=4.1, ok=True)
        models = [ModelStatus(pod="chat", slug="vllm/qwen3-8b", models=["chat", "Qwen/Qwen3-8B", "qwen3-8b", "vllm/qwen3-8b"], state="running",
                              in_flight=1, started_by_gateway=True, starts=1, gpus=[0], on_demand=True, last_swap=swap),
                  ModelStatus(pod="coder", slug="vllm/qwen3-32b-awq-tp2", models=["coder", "Qwen/Qwen3-32B-AWQ", "qwen3-32b-awq-tp2"], state="running",
                              gpus=[2, 3]),
                  ModelStatus(pod="summarizer", slug="vllm/llama-3.1-8b", models=["summarizer", "meta-llama/Llama-3.1-8B-Instruct"], state="stopped",
                              queue_depth=2, gpus=[0], on_demand=True, held_for=GATEWAY_HELD_FOR)]
        status = GatewayStatus(pid=os.getpid(), bind="127.0.0.1:8012", updated_at=time.time(), auth=True, swap_wait_s=120, last_swap=swap, models=models)
        folder = Path(self.env["C3_STATE"]) / "gateway"
        write_status(folder, 8012, status)
        return status_file(folder, 8012)

    # -- the facade over it ------------------------------------------------------------------------
    def services(self, *, readonly: bool = False) -> StableFacade:
        """The real facade over this world (call inside `active()`)."""
        from c3.services_real import RealServices

        real = RealServices(readonly=readonly, demo=True)
        if self.scenario == "stale":
            real.ctx.probe = FailingProbe(real.ctx.probe)
        facade = StableFacade(real, self)
        self.facades.append(facade)
        return facade


class FailingProbe:
    """The rig's probe, until `failing` is set: then its readings fail as NVML's do when the driver goes away."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.source, self.failing = inner, inner.source, False

    def gpus(self) -> Any:
        return self.inner.gpus()

    def processes(self) -> Any:
        return self.inner.processes()

    def snapshots(self, *, processes_max_age_s: float = 0.0) -> Any:
        from backend.errors import EnvironmentProblem

        if self.failing:
            raise EnvironmentProblem("NVML did not answer within 2 s")
        return self.inner.snapshots(processes_max_age_s=processes_max_age_s)


_STAMP = re.compile(r"\b\d\d-\d\d \d\d:\d\d:\d\d\b")
_PEER = re.compile(r"(127\.0\.0\.1|\('127\.0\.0\.1'),? ?\d{4,5}\)?")
_PROBE_LINE = re.compile(r'"GET /(health|v1/models) HTTP')
_USAGE = re.compile(r"^CPU [\d.]+% · RAM [\d.]+ (KiB|MiB|GiB)$")  # a real reading, different every run: pinned only when well formed


class StableFacade:
    """The real facade with run-to-run noise pinned (see the module docstring); all else passes through."""

    def __init__(self, real: Any, world: World) -> None:
        self.real, self.world = real, world

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    def _pid(self, text: str) -> str:
        def alias(match: re.Match[str]) -> str:
            return match.group(1) + str(self.world.pids.get(int(match.group(2)), 4999))

        return re.sub(r"(\bpid[ =]|sim-|process \[)(\d+)", alias, text)

    def _home(self, text: str) -> str:
        return text.replace(str(self.world.home), "~")

    def clock(self) -> datetime:
        return FIXED_NOW + timedelta(seconds=1)

    def shards(self) -> list[Any]:
        pinned = []
        for shard in self.real.shards():
            # Only the world's own ranks are pinned: a test's real shard keeps its real pids.
            ranks = [r.model_copy(update={"pid": str(self.world.pids[int(r.pid)])}) if r.pid and int(r.pid) in self.world.pids else r
                     for r in shard.ranks]
            pinned.append(shard.model_copy(update={"ranks": ranks}))
        return pinned

    @property
    def label(self) -> str:
        return self._home(self.real.label)

    def _gpu(self, snap: Any) -> Any:
        procs = tuple(p.model_copy(update={"pid": self.world.pids.get(p.pid, 4999)}) for p in snap.processes)
        return snap.model_copy(update={"taken_at": FIXED_NOW, "processes": procs})

    def gpu_snapshots(self) -> list[Any]:
        return [self._gpu(snap) for snap in self.real.gpu_snapshots()]

    def _pod_state(self, pod: Any) -> Any:
        return replace(pod, placement_detail=self._pid(pod.placement_detail))

    def pod_states(self) -> list[Any]:
        return [self._pod_state(p) for p in self.real.pod_states()]

    def subscribe(self, on_update: Any) -> Any:
        """The hub's pushes, pinned like the reads: a pushed GPU reading carries the hub's own clock."""

        def pinned(update: Any) -> None:
            gpus = update.gpus and replace(update.gpus, taken_at=FIXED_NOW, snapshots=tuple(self._gpu(s) for s in update.gpus.snapshots))
            pods = update.pods and replace(update.pods, taken_at=FIXED_NOW, pods=tuple(self._pod_state(p) for p in update.pods.pods))
            on_update(replace(update, gpus=gpus, pods=pods))

        return self.real.subscribe(pinned)

    def freshness(self) -> Any:
        fresh = self.real.freshness()
        return replace(fresh, gpus_at=fresh.gpus_at and FIXED_NOW, pods_at=fresh.pods_at and FIXED_NOW)

    def pod_details(self, name: str) -> Any:
        details = self.real.pod_details(name)
        facts = tuple((k, _USAGE.sub("CPU 0.4% · RAM 31.2 MiB", v) if k == "CPU / RAM" else self._home(self._pid(v))) for k, v in details.facts)
        return replace(details, pod=replace(details.pod, placement_detail=self._pid(details.pod.placement_detail)), facts=facts)

    def pod_logs(self, name: str, tail: int, timestamps: bool = False) -> list[str]:
        lines = [line for line in self.real.pod_logs(name, tail, timestamps) if not _PROBE_LINE.search(line)]
        return [self._home(self._pid(_PEER.sub("127.0.0.1:40000", _STAMP.sub("05-01 12:00:00", line)))) for line in lines]

    def make_plan(self, key: Any, pod: Any = None, request: Any = None) -> Any:
        from c3.services import ProcessSignal

        if isinstance(request, ProcessSignal):  # the process view shows pids by alias: signal the real one
            real = {alias: pid for pid, alias in self.world.pids.items()}
            request = replace(request, pid=real.get(request.pid, request.pid))
        plan = self.real.make_plan(key, pod, request)
        lines = tuple(re.sub(r"^user: \S+$", "user: me", self._pid(self._home(line))) for line in plan.lines)  # as the process rows say
        return replace(plan, title=self._pid(plan.title), lines=lines,
                       problems=tuple(self._pid(self._home(p)) for p in plan.problems))

    def gpu_processes(self) -> list[Any]:
        """Pids aliased; the user and the interpreter's path are this machine's, not the picture's."""
        rows = []
        for row in self.real.gpu_processes():
            command = row.command
            if command is not None:
                program, _, rest = command.partition(" ")
                if program.rsplit("/", 1)[-1].startswith("python"):  # the checkout's own venv path
                    command = f"/usr/bin/python3 {rest}"
            rows.append(row.model_copy(update={"pid": self.world.pids.get(row.pid, 4999), "user": "me" if row.user else None, "command": command}))
        rows.sort(key=lambda r: (r.gpu_index, r.pid))
        return rows

    def history(self) -> Any:
        """The real series, each cut to its last HISTORY_POINTS readings and re-timed to its source's
        cadence ending at the fixed clock: how many readings a run gathers, and when, is timing."""
        view = self.real.history()
        now = FIXED_NOW.timestamp()
        series = []
        for s in view.series:
            step = 1.0 if s.key.startswith("gpu/") else 2.0
            kept = s.points[-HISTORY_POINTS:]
            series.append(s.model_copy(update={"points": tuple((now - step * (len(kept) - 1 - n), v) for n, (_, v) in enumerate(kept))}))
        return view.model_copy(update={"taken_at": now, "series": tuple(series)})

    def pools(self) -> list[Any]:
        return [replace(p, pid=self.world.pids.get(p.pid, 4999), uptime_s=7260.0) for p in self.real.pools()]

    def gateways(self) -> list[Any]:
        return [g.model_copy(update={"pid": 4999, "updated_at": FIXED_NOW.timestamp()}) for g in self.real.gateways()]

    def close(self) -> None:
        """Stop the facade's live hub; the world's pods keep running for the next scene."""
        hub = getattr(self.real, "_hub", None)
        if hub is not None:
            hub.stop()
