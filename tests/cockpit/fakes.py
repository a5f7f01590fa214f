"""An in-memory `Services` with fixed numbers and a fixed clock: tests, screenshots, benchmarks.

Scenarios (`FakeServices(scenario=…)`):
- `empty`: a four-GPU rig, no pods;
- `placed`: two pods, both serving and verified on exactly their GPUs;
- `mismatch`: as `placed`, but `coder` really runs on GPU 3 instead of GPU 2;
- `stale`: as `placed`, but the GPU source stops answering after its first reading;
- `bench`: eight GPUs and sixteen pods;
- `cluster`: as `placed`, plus three nodes, a running pool and an active recipe profile.

Writes change the in-memory estate, so a Pilot test can create, boot, stop and remove pods and see
every result. `boot_step_s` paces a simulated boot (0 in tests).
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

from backend.errors import EnvironmentProblem, Refused
from backend.models import (
    CatalogEntry,
    ComputeProcess,
    FitReport,
    Gpu,
    GpuFit,
    GpuSnapshot,
)
from c3.services import (
    BootProgress,
    NewPod,
    PodDetails,
    PodState,
    ProgressCallback,
    WriteKind,
    WritePlan,
    WriteResult,
)
from tests.cockpit.fakes_cluster import CLUSTER_KINDS, FakeCluster

FIXED_NOW = datetime(2026, 5, 1, 12, 0, 0, tzinfo=UTC)

_CARDS = [
    ("NVIDIA GeForce RTX 3090", 24576, "8.6", 350.0),
    ("NVIDIA GeForce RTX 3090", 24576, "8.6", 350.0),
    ("NVIDIA GeForce RTX 4090", 24564, "8.9", 450.0),
    ("NVIDIA GeForce RTX 5090", 32607, "12.0", 575.0),
]

# slug -> (engine, model, tp, port, weights GiB)
_CATALOG = [
    ("vllm/qwen3-8b", "vllm", "Qwen/Qwen3-8B", 1, 8000, 15.3),
    ("vllm/qwen3-32b-awq-tp2", "vllm", "Qwen/Qwen3-32B-AWQ", 2, 8010, 18.1),
    ("llamacpp/gemma-3-27b-q4", "llamacpp", "google/gemma-3-27b-it", 1, 8020, 16.5),
    ("sglang/qwen3-30b-a3b-fp8", "sglang", "Qwen/Qwen3-30B-A3B-FP8", 1, 8030, 29.0),
    ("vllm/llama-3.3-70b-awq-tp4", "vllm", "meta-llama/Llama-3.3-70B-Instruct-AWQ", 4, 8040, 37.1),
    ("vllm/gpt-oss-20b", "vllm", "openai/gpt-oss-20b", 1, 8050, 12.8),
]

_BOOT_PHASES = [
    ("pulling image", "image vllm/vllm-openai:v0.11.0 present"),
    ("starting engine", "INFO Starting vLLM API server on http://0.0.0.0:8000"),
    ("loading weights", "INFO Loading weights took 14.21 seconds"),
    ("profiling memory", "INFO Available KV cache memory: 4.31 GiB"),
    ("capturing CUDA graphs", "INFO Graph capturing finished in 9 secs"),
    ("waiting for /v1/models", "INFO Application startup complete."),
]


def _gpu(index: int) -> Gpu:
    name, total, sm, _ = _CARDS[index % len(_CARDS)]
    return Gpu(index=index, uuid=f"GPU-{index:08x}-c3de-0000-0000-demo{index:08d}", name=name, total_mib=total, sm=sm)


class FakeServices(FakeCluster):
    """Fixed-number `Services`; thread-safe because workers call it from threads."""

    def __init__(self, scenario: str = "placed", *, readonly: bool = False, gpu_count: int | None = None, boot_step_s: float = 0.0, fail_boot: bool = False) -> None:
        self.readonly = readonly
        self.label = "demo rig (simulated)"
        self.scenario = scenario
        self.boot_step_s = boot_step_s
        self.fail_boot = fail_boot
        self.calls: list[str] = []
        self._lock = threading.Lock()
        count = gpu_count or (8 if scenario == "bench" else 4)
        self._gpus = [_gpu(i) for i in range(count)]
        self._entries = [
            CatalogEntry(slug=slug, engine=engine, image=f"{engine}/server:demo", model=model, tp=tp, default_port=port, max_model_len=32768)
            for slug, engine, model, tp, port, _ in _CATALOG
        ]
        self._weights = {slug: gib for slug, *_, gib in _CATALOG}
        self._pods: dict[str, PodState] = {}
        self._seed(scenario)
        self._init_cluster(scenario)

    # -- scenario set-up -------------------------------------------------------------------------
    def _seed(self, scenario: str) -> None:
        if scenario in {"placed", "mismatch", "stale", "cluster"}:
            self._pods["chat"] = PodState("chat", "vllm/qwen3-8b", 8000, (0,), "serving", "ok", "", (0,))
            if scenario == "mismatch":
                detail = "asked for GPU 1,2 but runs on GPU 1,3: GPU 3 was not requested, GPU 2 is unused"
                self._pods["coder"] = PodState("coder", "vllm/qwen3-32b-awq-tp2", 8010, (1, 2), "serving", "mismatch", detail, (1, 3))
            else:
                self._pods["coder"] = PodState("coder", "vllm/qwen3-32b-awq-tp2", 8010, (1, 2), "serving", "ok", "", (1, 2))
        elif scenario == "bench":
            slugs = [e.slug for e in self._entries if e.tp == 1]
            for i in range(16):
                name = f"pod-{i:02d}"
                running = i < 8
                self._pods[name] = PodState(
                    name, slugs[i % len(slugs)], 9000 + i, (i % len(self._gpus),),
                    "serving" if running else "down", "ok" if running else "unknown", "" if running else "not running", (i % len(self._gpus),) if running else None,
                )

    def _record(self, name: str) -> None:
        with self._lock:
            self.calls.append(name)

    # -- reads -----------------------------------------------------------------------------------
    def gpu_snapshots(self) -> list[GpuSnapshot]:
        self._record("gpu_snapshots")
        if self.scenario == "stale" and self.calls.count("gpu_snapshots") > 1:
            raise EnvironmentProblem("NVML did not answer within 2 s")
        holders = self._holders()
        snaps = []
        for gpu in self._gpus:
            pod = holders.get(gpu.index)
            busy = pod is not None and pod.state == "serving"
            booting = pod is not None and pod.state == "booting"
            used = int((gpu.total_mib or 0) * 0.91) if busy else (int((gpu.total_mib or 0) * 0.4) if booting else 412)
            util = 37 + 11 * gpu.index % 50 if busy else 0
            procs = (ComputeProcess(pid=4100 + gpu.index, gpu_uuid=gpu.uuid, used_mib=used - 400),) if busy else ()
            snaps.append(
                GpuSnapshot(
                    gpu=gpu, taken_at=FIXED_NOW, used_mib=used, free_mib=(gpu.total_mib or 0) - used, util_pct=util,
                    temp_c=61 if busy else 34, power_w=(_CARDS[gpu.index % 4][3] * (0.72 if busy else 0.06)), power_limit_w=_CARDS[gpu.index % 4][3], processes=procs,
                )
            )
        return snaps

    def gpu_history(self) -> dict[int, list[tuple[float, float]]]:
        self._record("gpu_history")
        holders = self._holders()
        history: dict[int, list[tuple[float, float]]] = {}
        for gpu in self._gpus:
            busy = gpu.index in holders and holders[gpu.index].state == "serving"
            wave = [0, 5, 20, 45, 70, 88, 92, 75, 60, 40, 52, 66, 81, 90, 72, 48]
            history[gpu.index] = [(float(w if busy else 0), 91.0 if busy else 1.7) for w in wave * 4]
        return history

    def _holders(self) -> dict[int, PodState]:
        holders: dict[int, PodState] = {}
        for pod in self._pods.values():
            if pod.state in {"serving", "booting"}:
                for index in pod.actual_gpus or pod.gpus:
                    holders[index] = pod
        return holders

    def pod_states(self) -> list[PodState]:
        self._record("pod_states")
        with self._lock:
            return list(self._pods.values())

    def catalog(self) -> list[CatalogEntry]:
        self._record("catalog")
        return list(self._entries)

    def _entry(self, slug: str) -> CatalogEntry:
        for entry in self._entries:
            if entry.slug == slug:
                return entry
        raise Refused(f"unknown slug `{slug}`", hint="`c3 catalog` lists the slugs")

    def fit(self, slug: str, gpus: tuple[int, ...]) -> FitReport:
        self._record("fit")
        entry = self._entry(slug)
        if len(gpus) != entry.gpu_count:
            return FitReport(verdict="unknown", reasons=[f"{slug} needs {entry.gpu_count} GPU(s), {len(gpus)} chosen"])
        if any(i >= len(self._gpus) for i in gpus):
            return FitReport(verdict="unknown", reasons=["no such GPU on this rig"])
        ranks = []
        for index in gpus:
            total = (self._gpus[index].total_mib or 0) / 1024 * 0.96
            budget = total * entry.gpu_memory_utilization
            weights = self._weights[slug] / entry.tp
            kv = budget - weights - 0.6 - 0.9 - 0.4
            ranks.append(GpuFit(index=index, card=self._gpus[index].name, total_gib=round(total, 2), budget_gib=round(budget, 2), weights_gib=round(weights, 2), activation_gib=0.6, non_torch_gib=0.9, cudagraph_gib=0.4, available_kv_gib=round(kv, 2)))
        kv = min(r.available_kv_gib for r in ranks)
        verdict = "fits" if kv >= 2.0 else ("tight" if kv > 0.3 else "wont-fit")
        per_token = 147456 // entry.tp
        tokens = max(0, int(kv * 2**30 / per_token))
        reasons = [] if verdict == "fits" else [f"only {kv:.2f} GiB left for the KV cache on the smallest rank"]
        return FitReport(
            verdict=verdict, kv_bytes_per_token=per_token, kv_cache_tokens=tokens, max_concurrency=round(tokens / 32768, 2),
            max_model_len=32768, max_model_len_fits=min(tokens, 131072), available_kv_gib=round(kv, 2), gpus=ranks, reasons=reasons,
        )

    def propose_port(self, slug: str) -> int:
        self._record("propose_port")
        port = self._entry(slug).default_port
        taken = {p.port for p in self._pods.values()}
        while port in taken:
            port += 1
        return port

    def pod_logs(self, name: str, tail: int) -> list[str]:
        self._record("pod_logs")
        pod = self._get(name)
        lines = [f"2026-05-01T11:59:{i:02d}Z INFO engine[{pod.name}] {text}" for i, (_, text) in enumerate(_BOOT_PHASES)]
        lines += [f"2026-05-01T12:00:{i:02d}Z INFO 127.0.0.1 \"POST /v1/chat/completions HTTP/1.1\" 200" for i in range(30)]
        return lines[-tail:]

    def pod_details(self, name: str) -> PodDetails:
        self._record("pod_details")
        pod = self._get(name)
        entry = self._entry(pod.slug)
        facts = (
            ("container", f"c3-{pod.name}"),
            ("image", entry.image),
            ("model", entry.model),
            ("GPUs", ", ".join(f"{i} ({self._gpus[i].uuid})" for i in pod.gpus if i < len(self._gpus))),
            ("endpoint", f"http://127.0.0.1:{pod.port}/v1"),
            ("state", pod.state),
        )
        return PodDetails(pod=pod, facts=facts, fit=self.fit(pod.slug, pod.gpus))

    def set_live(self, active: bool) -> None:
        self._record(f"set_live:{active}")

    # -- writes ----------------------------------------------------------------------------------
    def _get(self, name: str) -> PodState:
        with self._lock:
            pod = self._pods.get(name)
        if pod is None:
            raise Refused(f"pod `{name}` is not in the estate", hint="`c3 pod list` lists the pods")
        return pod

    def _problems(self, kind: WriteKind, pod: str | None, request: NewPod | None) -> list[str]:
        if kind == "create" and request is not None:
            problems = []
            if request.name in self._pods:
                problems.append(f"a pod named `{request.name}` already exists")
            entry = self._entry(request.slug)
            if len(request.gpus) != entry.gpu_count:
                problems.append(f"{request.slug} needs {entry.gpu_count} GPU(s); {len(request.gpus)} chosen")
            claimed = {i: p.name for p in self._pods.values() for i in p.gpus}
            problems += [f"GPU {i} is claimed by pod `{claimed[i]}`" for i in request.gpus if i in claimed]
            problems += [f"GPU {i} does not exist on this rig" for i in request.gpus if i >= len(self._gpus)]
            if any(p.port == request.port for p in self._pods.values()):
                problems.append(f"port {request.port} is already used by another pod")
            return problems
        if kind in {"up", "down", "rm"} and pod is not None:
            if pod not in self._pods:
                return [f"pod `{pod}` is not in the estate any more"]
            state = self._pods[pod].state
            if kind == "up" and state in {"serving", "booting"}:
                return [f"pod `{pod}` is already {state}"]
            if kind == "down" and state == "down":
                return [f"pod `{pod}` is not running"]
        return []

    def make_plan(self, kind: WriteKind, pod: str | None = None, request: object = None) -> WritePlan:
        self._record("make_plan")
        if kind in CLUSTER_KINDS:
            return self.cluster_plan(kind, pod, request)
        problems = tuple(self._problems(kind, pod, request))
        if kind == "create" and request is not None:
            lines = (
                f"add pod `{request.name}` to the estate file",
                f"  slug  {request.slug}",
                f"  GPUs  {', '.join(map(str, request.gpus))}",
                f"  port  {request.port}",
                "nothing is started until you press u on it",
            )
            return WritePlan("create", f"Create pod {request.name}", lines, request.name, request, problems=problems)
        if kind == "stop_all":
            running = tuple(p.name for p in self._pods.values() if p.state in {"serving", "booting", "failed"})
            lines = tuple(f"stop c3-{name} (GPU {', '.join(map(str, self._pods[name].gpus))}, port {self._pods[name].port})" for name in running)
            return WritePlan("stop_all", "Stop the whole estate", lines or ("nothing is running",), pods=running, problems=() if running else ("nothing is running",))
        state = self._pods.get(pod or "")
        where = f"GPU {', '.join(map(str, state.gpus))}, port {state.port}" if state else "?"
        lines = {
            "up": (f"start container c3-{pod} from {state.slug if state else '?'}", f"pin {where}", "wait for /v1/models, then verify placement"),
            "down": (f"stop and remove container c3-{pod} ({where})", "the pod stays in the estate"),
            "rm": (f"remove pod `{pod}` from the estate file", "its container is stopped first if it runs"),
        }[kind]
        titles = {"up": f"Boot pod {pod}", "down": f"Stop pod {pod}", "rm": f"Remove pod {pod}"}
        return WritePlan(kind, titles[kind], lines, pod, problems=problems)

    def check(self, plan: WritePlan) -> list[str]:
        self._record("check")
        if self.readonly:
            return ["read-only cockpit: writes are refused"]
        if plan.kind in CLUSTER_KINDS:
            return self.cluster_problems(plan.kind, plan.pod, plan.request)
        return self._problems(plan.kind, plan.pod, plan.request)

    def execute(self, plan: WritePlan, progress: ProgressCallback) -> WriteResult:
        self._record(f"execute:{plan.kind}")
        if self.readonly:
            raise Refused("read-only cockpit: writes are refused", hint="restart c3 without --readonly")
        if plan.kind in CLUSTER_KINDS:
            return self.cluster_execute(plan, progress)
        problems = self._problems(plan.kind, plan.pod, plan.request)
        if problems:
            raise Refused(problems[0])
        if plan.kind == "create" and plan.request is not None:
            req = plan.request
            with self._lock:
                self._pods[req.name] = PodState(req.name, req.slug, req.port, req.gpus)
            return WriteResult(True, f"created pod {req.name}: {req.slug} on GPU {', '.join(map(str, req.gpus))}, port {req.port}", "press u on it to boot it")
        if plan.kind == "up" and plan.pod:
            return self._boot(plan.pod, progress)
        if plan.kind == "down" and plan.pod:
            self._set(plan.pod, state="down", placement="unknown", placement_detail="not running", actual_gpus=None)
            return WriteResult(True, f"stopped pod {plan.pod}")
        if plan.kind == "rm" and plan.pod:
            with self._lock:
                del self._pods[plan.pod]
            return WriteResult(True, f"removed pod {plan.pod} from the estate")
        for name in plan.pods:
            if name in self._pods:
                self._set(name, state="down", placement="unknown", placement_detail="not running", actual_gpus=None)
        return WriteResult(True, f"stopped {len(plan.pods)} pod(s): {', '.join(plan.pods)}")

    def _set(self, name: str, **changes: object) -> None:
        with self._lock:
            old = self._pods[name]
            self._pods[name] = PodState(**{**old.__dict__, **changes})  # type: ignore[arg-type]

    def _boot(self, name: str, progress: ProgressCallback) -> WriteResult:
        self._set(name, state="booting", placement="unknown", placement_detail="booting")
        tail: list[str] = []
        for step, (phase, line) in enumerate(_BOOT_PHASES):
            tail.append(line)
            progress(BootProgress(name, phase, float(step * 7), tuple(tail[-4:])))
            if self.boot_step_s:
                time.sleep(self.boot_step_s)
            if self.fail_boot and step == 3:
                tail.append("ERROR torch.OutOfMemoryError: CUDA out of memory")
                self._set(name, state="failed", placement="unknown", placement_detail="engine exited")
                progress(BootProgress(name, "failed", float(step * 7), tuple(tail[-4:]), done=True, ok=False))
                return WriteResult(False, f"pod {name} failed to boot: CUDA out of memory", "lower max_model_len or pick larger GPUs")
        pod = self._get(name)
        self._set(name, state="serving", placement="ok", placement_detail="", actual_gpus=pod.gpus)
        progress(BootProgress(name, "serving", 42.0, tuple(tail[-4:]), done=True, ok=True))
        return WriteResult(True, f"pod {name} is serving on http://127.0.0.1:{pod.port}/v1, placed on GPU {', '.join(map(str, pod.gpus))}")

    def clock(self) -> datetime:
        """The fixed clock (not part of the facade: the app takes it separately)."""
        return FIXED_NOW + timedelta(seconds=1)
