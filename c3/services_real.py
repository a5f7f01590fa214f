"""`Services` over the real backend: ESTATE's probe and estate file, FIT's catalog and fit-check,
RUNTIME's runtime (Docker, or the simulated local-process runtime for `c3 demo`), the node registry
and (when it exists) the recipes backend. Every method blocks; the app calls them from workers.
"""

from __future__ import annotations

import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from backend import paths
from backend.errors import C3Error, EnvironmentProblem, Refused
from backend.models import CatalogEntry, FitReport, Gpu, GpuSnapshot, Pod
from c3.services import (
    BootProgress,
    NewPod,
    NodeRow,
    PodDetails,
    PodState,
    PoolRow,
    ProfileRow,
    ProgressCallback,
    RecipeRow,
    WriteKind,
    WritePlan,
    WriteResult,
)
from c3.services_cluster import (
    CLUSTER_KINDS,
    active_profile_row,
    cluster_execute,
    cluster_plan,
    cluster_problems,
    node_rows,
    override_problems,
    pool_rows,
)
from c3.metrics_text import metrics_facts
from c3.services_plans import plan_lines, recipes_rows

HISTORY_SAMPLES = 180
LIVE_PAUSABLE = ("placement",)
"""The hub sources paused while no screen shows them (the others feed the history)."""


class RealServices:
    """The facade over `backend/`. One runtime context for the app's lifetime (cheap to keep)."""

    def __init__(self, *, readonly: bool = False, demo: bool = False, estate_path: Path | None = None) -> None:
        from backend.runtime.context import open_context

        self.readonly = readonly
        self.demo = demo
        self.path = Path(estate_path) if estate_path else paths.estate_file()
        self.ctx = open_context(demo=demo)
        self._catalog: Any = None
        self._lock = threading.Lock()
        self._history: dict[int, deque[tuple[float, float]]] = {}
        self._hub: Any = None
        self._hub_failed = False
        source = getattr(self.ctx.probe, "source", None) or f"no GPUs ({self.ctx.probe_problem})"
        where = "demo rig" if demo else socket.gethostname()
        self.label = f"{where} · {source} · runtime {self.ctx.runtime.kind}"

    # -- reads -----------------------------------------------------------------------------------
    def _probe(self) -> Any:
        if self.ctx.probe is None:
            raise EnvironmentProblem(self.ctx.probe_problem or "no GPU probe", hint="c3 needs NVML, or C3_RIG=rig.yaml for a simulated rig")
        return self.ctx.probe

    def _live(self) -> Any:
        """RUNTIME's live hub (GPU poller, workload events, health, placement in its own threads),
        started on first use; None if it cannot start (then every read goes to the source directly)."""
        if self._hub is None and not self._hub_failed:
            try:
                from backend.live import LiveState

                hub = LiveState(self.ctx, pods=self._estate_pods, health_path_of=self._health_path)
                hub.start()
                self._hub = hub
            except Exception:  # noqa: BLE001 - the direct reads still work
                self._hub_failed = True
        return self._hub

    def _read_gpus(self) -> list[GpuSnapshot]:
        hub = self._live()
        if hub is None:
            return list(self._probe().snapshots())
        snap = hub.latest()
        status = snap.source("gpus")
        if status is not None and status.stale:
            raise EnvironmentProblem(f"GPU readings stopped: {status.error or 'no answer'}")
        if not snap.gpus:  # the hub's first reading is not in yet
            return list(self._probe().snapshots())
        return list(snap.gpus)

    def gpu_snapshots(self) -> list[GpuSnapshot]:
        snapshots = self._read_gpus()
        with self._lock:
            for snap in snapshots:
                total = snap.gpu.total_mib or 0
                mem = 100.0 * (snap.used_mib or 0) / total if total else 0.0
                self._history.setdefault(snap.gpu.index, deque(maxlen=HISTORY_SAMPLES)).append((float(snap.util_pct or 0), mem))
        return snapshots

    def gpu_history(self) -> dict[int, list[tuple[float, float]]]:
        with self._lock:
            return {index: list(samples) for index, samples in self._history.items()}

    def catalog_obj(self) -> Any:
        if self._catalog is None:
            from backend.catalog import load_catalog

            self._catalog = load_catalog()
            self.ctx.catalog = self._catalog
        return self._catalog

    def catalog(self) -> list[CatalogEntry]:
        return list(self.catalog_obj().entries)

    def _gpus(self) -> list[Gpu]:
        return list(self._probe().gpus())

    def _estate_pods(self) -> list[Pod]:
        from backend.estate import load_estate

        if not self.path.exists():
            return []
        return list(load_estate(self.path).pods)

    def _pod(self, name: str) -> Pod:
        pod = next((p for p in self._estate_pods() if p.name.casefold() == name.casefold()), None)
        if pod is None:
            raise Refused(f"pod `{name}` is not in {self.path}", hint="`c3 pod list` lists the pods")
        return pod

    def _health_path(self, pod: Pod) -> str:
        try:
            return self.catalog_obj().get(pod.slug).health_path
        except (C3Error, ImportError):
            return "/v1/models"

    def pod_states(self) -> list[PodState]:
        from backend.runtime.status import pod_rows

        pods = self._estate_pods()
        if not pods:
            return []
        hub = self._live()
        if hub is None:
            rows = pod_rows(self.ctx, pods, health_path_of=self._health_path, estate=str(self.path.resolve()))
            return [self._state_of(row) for row in rows]
        return [self._state_of(row) for row in self._live_rows(hub, pods)]

    def _live_rows(self, hub: Any, pods: list[Pod]) -> list[dict[str, Any]]:
        """`pod status` rows from the hub's latest snapshot; a pod the hub has not seen yet (just
        created) is listed at once, as down."""
        from backend.runtime.status import describe_estate, placement_json, same_estate

        mine = str(self.path.resolve())
        snap = hub.latest()
        status = snap.source("workloads")
        if status is not None and status.stale:
            raise EnvironmentProblem(f"the runtime stopped answering: {status.error or 'no answer'}")
        live = {p.name: p for p in snap.pods}
        workloads = {w.pod: w for w in snap.workloads}
        rows = []
        for pod in pods:
            entry = live.get(pod.name)
            workload = (entry.workload if entry else None) or workloads.get(pod.name)
            if workload is not None and not same_estate(workload.estate, mine):
                # c3-<name> from another estate file is not this pod (workloads are estate + name).
                rows.append({
                    "name": pod.name, "slug": pod.slug, "gpus": list(pod.gpus), "port": pod.port, "running": False, "serving": False,
                    "state": "other-estate", "placement": {
                        "verdict": "unknown", "requested": [], "actual": [], "requested_indices": list(pod.gpus), "actual_indices": [],
                        "missing": [], "extra": [], "foreign": [], "reason": f"container c3-{pod.name} belongs to {describe_estate(workload.estate)}"},
                })
                continue
            running = bool(workload and workload.running)
            serving = running and bool(entry and entry.health and entry.health.healthy)
            place = entry.placement if entry else None
            if place is not None and running and place.verdict == "unknown" and "not running" in place.reason:
                place = None  # from before it started; the next placement read will judge it
            placement = placement_json(place) if place is not None else {
                "verdict": "unknown", "requested": [], "actual": [], "requested_indices": list(pod.gpus), "actual_indices": [],
                "missing": [], "extra": [], "foreign": [], "reason": "verifying placement…" if running else "the pod is not running",
            }
            rows.append({
                "name": pod.name, "slug": pod.slug, "gpus": list(pod.gpus), "port": pod.port, "running": running, "serving": serving,
                "state": workload.status if workload else "absent", "placement": placement,
                **(entry.metrics.row() if serving and entry and entry.metrics else {"metrics": None, "metrics_error": None}),
            })
        return rows

    @staticmethod
    def _state_of(row: dict[str, Any]) -> PodState:
        place = row["placement"]
        if row["serving"]:
            state = "serving"
        elif row["running"]:
            state = "booting"
        elif row.get("state") == "exited":
            state = "failed"
        else:
            state = "down"
        detail = place.get("reason") or ""
        foreign = place.get("foreign") or []
        if foreign:
            who = "; ".join(f"pid {f['pid']} ({'pod ' + f['owner'] if f.get('owner') else 'not a c3 pod'}) on GPU {f.get('gpu_index')}" for f in foreign)
            detail = (detail + "; " if detail else "") + "foreign process: " + who
        if state == "failed" and place["verdict"] == "unknown":
            detail = "engine exited — press l for its log"
        actual = tuple(place.get("actual_indices") or ()) or None
        metrics = None
        if state == "serving" and row.get("metrics"):
            from backend.live.engine_metrics import EngineMetrics

            metrics = EngineMetrics.model_validate(row["metrics"])
        return PodState(
            name=row["name"], slug=row["slug"], port=row["port"], gpus=tuple(row["gpus"]), state=state,  # type: ignore[arg-type]
            placement=place["verdict"], placement_detail=detail if place["verdict"] != "ok" or foreign else "", actual_gpus=actual,
            metrics=metrics, metrics_error=row.get("metrics_error") if state == "serving" else None,
        )

    def fit(self, slug: str, gpus: tuple[int, ...]) -> FitReport:
        from backend.fit import fit_on_gpus

        catalog = self.catalog_obj()
        entry = catalog.get(slug)
        by_index = {g.index: g for g in self._gpus()}
        missing = [i for i in gpus if i not in by_index]
        if missing:
            return FitReport(verdict="unknown", reasons=[f"no GPU {','.join(map(str, missing))} on this rig"])
        if len(gpus) != entry.gpu_count:
            return FitReport(verdict="unknown", reasons=[f"{slug} needs {entry.gpu_count} GPU(s) (TP {entry.tp} × PP {entry.pp}); {len(gpus)} chosen"])
        return fit_on_gpus(entry, [by_index[i] for i in gpus], catalog=catalog)

    def propose_port(self, slug: str) -> int:
        from backend.estate import default_port, load_estate
        from backend.models import Estate

        entry = self.catalog_obj().get(slug)
        estate = load_estate(self.path) if self.path.exists() else Estate()
        return default_port(estate, entry.default_port)

    def pod_logs(self, name: str, tail: int) -> list[str]:
        from backend.errors import C3Error
        from backend.runtime.bootlog import read_tail

        workload = self.ctx.runtime.workload(name)
        if workload.status == "absent":
            try:
                found = read_tail(name, tail)
            except C3Error as error:
                return [f"(no container; the boot log cannot be read: {error.message})"]
            if found is not None:
                boot, lines = found
                return [f"(no container; last boot log {boot})", *lines]
            return [f"pod {name} has no container and no boot log yet — press u to boot it"]
        return self.ctx.runtime.logs(name, tail=tail).splitlines()[-tail:]

    def pod_details(self, name: str) -> PodDetails:
        pod = self._pod(name)
        state = next((s for s in self.pod_states() if s.name == pod.name), PodState(pod.name, pod.slug, pod.port, tuple(pod.gpus)))
        workload = self.ctx.runtime.workload(pod.name)
        by_index = {g.index: g for g in self._gpus()}
        facts: list[tuple[str, str]] = [
            ("estate file", str(self.path)),
            ("workload", f"{workload.status}" + (f" ({workload.id})" if workload.id else "") + (f", exit {workload.exit_code}" if workload.exit_code is not None else "")),
            ("runtime", self.ctx.runtime.kind),
            ("endpoint", f"http://127.0.0.1:{pod.port}/v1"),
        ]
        for index in pod.gpus:
            gpu = by_index.get(index)
            facts.append((f"GPU {index}", f"{gpu.name} {gpu.uuid}" if gpu else "not on this rig"))
        facts += metrics_facts(state)
        report = None
        try:
            entry = self.catalog_obj().get(pod.slug)
            facts[1:1] = [("image", entry.image + (f"@{entry.image_digest}" if entry.image_digest else "")), ("model", entry.model or "(custom)"), ("engine", entry.engine)]
            report = self.fit(pod.slug, tuple(pod.gpus))
        except C3Error as error:
            facts.append(("catalog", error.message))
        return PodDetails(pod=state, facts=tuple(facts), fit=report)

    def set_live(self, active: bool) -> None:
        hub = self._hub
        if hub is None:
            return
        # Only placement pauses (its runtime.owners() is the costly read): GPUs, workloads, health and
        # metrics keep running under a modal or another mode, because the history records them.
        for name in LIVE_PAUSABLE:
            if active:
                hub.resume(name)
            else:
                hub.pause(name)
        if active:
            hub.refresh()

    def gpu_processes(self) -> list[Any]:
        """Every compute process on the GPUs with its pod (or none: foreign), user and command
        (`backend.runtime.gpu_processes.GpuProcessRow`), GPU then pid order."""
        from backend.runtime.gpu_processes import process_rows

        return process_rows(self._read_gpus(), self._estate_pods(), self.ctx.runtime.owners)

    def history(self) -> Any:
        """The live hub's recorded history (`backend.live.history.HistoryView`); empty without a hub."""
        from backend.live.history import HistoryView

        hub = self._live()
        if hub is None:
            return HistoryView(taken_at=time.time(), window_s=0.0)
        return hub.history.snapshot()

    def subscribe(self, on_change: Callable[[], None]) -> Callable[[], None]:
        hub = self._live()
        if hub is None:
            return lambda: None
        last: list[tuple[Any, ...] | None] = [None]

        def changed(snap: Any) -> None:
            # The hub publishes on every GPU reading too; only a pod's own transitions are news here.
            key = tuple((p.name, p.workload.status if p.workload else None, bool(p.health and p.health.healthy),
                         p.placement.verdict if p.placement else None) for p in snap.pods)
            if key != last[0]:
                last[0] = key
                on_change()

        return hub.subscribe(changed)

    def nodes(self) -> list[NodeRow]:
        return node_rows(self)

    def registered_nodes(self) -> list[NodeRow]:
        from backend.nodes.registry import load_registry

        return [NodeRow(n.name, n.host, n.ssh, n.local, ssh_key=n.ssh_key) for n in load_registry().nodes]

    def pools(self) -> list[PoolRow]:
        return pool_rows()

    def active_profile(self) -> ProfileRow | None:
        return active_profile_row()

    def recipes(self) -> list[RecipeRow] | None:
        return recipes_rows()

    def override_problems(self, recipe: str, overrides: tuple[str, ...]) -> list[str]:
        return override_problems(recipe, overrides)

    # -- writes ----------------------------------------------------------------------------------
    def _problems(self, kind: WriteKind, pod: str | None, request: NewPod | None) -> list[str]:
        if self.readonly:
            return ["read-only cockpit: writes are refused"]
        if kind == "create" and request is not None:
            return self._create_problems(request)
        if kind == "stop_all":
            return [] if self._running_pods() else ["nothing in the estate is running"]
        names = {p.name for p in self._estate_pods()}
        if pod not in names:
            return [f"pod `{pod}` is not in {self.path} any more"]
        workload = self.ctx.runtime.workload(pod)
        if kind == "up" and workload.running:
            return [f"pod `{pod}` is already running"]
        if kind == "up":
            return self._up_problems(pod)
        if kind == "down" and workload.status == "absent":
            return [f"pod `{pod}` has no workload to stop"]
        if kind == "rm" and workload.running:
            return [f"pod `{pod}` is running — stop it first (d)"]
        return []

    def _create_problems(self, request: NewPod) -> list[str]:
        from backend.estate import check_estate, load_estate
        from backend.models import Estate

        estate = load_estate(self.path) if self.path.exists() else Estate()
        if any(p.name.casefold() == request.name.casefold() for p in estate.pods):
            return [f"a pod named `{request.name}` already exists"]
        try:
            pod = Pod(name=request.name, slug=request.slug, gpus=request.gpus, port=request.port)
        except ValueError as error:
            return [str(error).splitlines()[0]]
        candidate = Estate(schema_version=estate.schema_version, pods=[*estate.pods, pod], extra=dict(getattr(estate, "extra", {}) or {}))
        check = check_estate(candidate, self._gpus(), self.catalog_obj())
        return [p.message + (f" — hint: {p.hint}" if p.hint else "") for p in check.about(request.name) if p.blocking]

    def _up_problems(self, name: str) -> list[str]:
        from backend.estate import load_estate, validate_estate

        estate = load_estate(self.path)
        out = []
        for problem in validate_estate(estate, self._gpus(), self.catalog_obj()):
            involved = {problem.pod, *problem.pods}
            if problem.blocking and name in involved and problem.code != "port":
                out.append(problem.message)
        return out

    def _running_pods(self) -> list[str]:
        workloads = self.ctx.runtime.workloads()
        return [p.name for p in self._estate_pods() if workloads.get(p.name) and workloads[p.name].status != "absent"]

    def make_plan(self, kind: WriteKind, pod: str | None = None, request: Any = None) -> WritePlan:
        if kind in CLUSTER_KINDS:
            plan = cluster_plan(kind, pod, request)
            return replace(plan, problems=("read-only cockpit: writes are refused", *plan.problems)) if self.readonly else plan
        problems = tuple(self._problems(kind, pod, request))
        running = tuple(self._running_pods()) if kind == "stop_all" else ()
        lines = plan_lines(self, kind, pod, request, running)
        titles = {"create": f"Create pod {request.name if request else ''}", "up": f"Boot pod {pod}", "down": f"Stop pod {pod}", "rm": f"Remove pod {pod}", "stop_all": "Stop the whole estate"}
        return WritePlan(kind, titles[kind], tuple(lines), pod or (request.name if request else None), request, running, problems)

    def check(self, plan: WritePlan) -> list[str]:
        if plan.kind in CLUSTER_KINDS:
            return ["read-only cockpit: writes are refused"] if self.readonly else cluster_problems(plan.kind, plan.pod, plan.request)
        return self._problems(plan.kind, plan.pod if plan.kind != "create" else None, plan.request)

    def execute(self, plan: WritePlan, progress: ProgressCallback) -> WriteResult:
        try:
            return self._execute(plan, progress)
        finally:
            if self._hub is not None:
                self._hub.refresh()  # the live view catches up with the write at once

    def _execute(self, plan: WritePlan, progress: ProgressCallback) -> WriteResult:
        if self.readonly:
            raise Refused("read-only cockpit: writes are refused", hint="restart c3 without --readonly")
        if plan.kind in CLUSTER_KINDS:
            return cluster_execute(plan, progress)
        if plan.kind == "create" and isinstance(plan.request, NewPod):
            return self._create(plan.request)
        if plan.kind == "up" and plan.pod:
            return self._up(plan.pod, progress)
        if plan.kind == "down" and plan.pod:
            stopped = self.ctx.runtime.stop(plan.pod, timeout=30.0)
            return WriteResult(True, f"stopped pod {plan.pod}" if stopped else f"pod {plan.pod} was not running")
        if plan.kind == "rm" and plan.pod:
            from backend.estate import remove_pod

            result = remove_pod(self.path, plan.pod, is_running=lambda p: self.ctx.runtime.workload(p.name).running)
            return WriteResult(True, f"removed pod {result.pod.name} from {result.path}", result.warning)
        stopped = [name for name in plan.pods if self.ctx.runtime.stop(name, timeout=30.0)]
        return WriteResult(True, f"stopped {len(stopped)} pod(s): {', '.join(stopped) or 'none'}")

    def _create(self, request: NewPod) -> WriteResult:
        from backend.estate import create_pod

        result = create_pod(self.path, request.name, list(request.gpus), request.slug, gpus=self._gpus(), catalog=self.catalog_obj(), port=request.port)
        verdict = f", fit {result.fit.verdict}" if result.fit else ""
        notes = "; ".join(w.message for w in result.warnings)
        message = f"created pod {result.pod.name}: {result.pod.slug} on GPU {','.join(map(str, result.pod.gpus))}, port {result.pod.port}{verdict}"
        return WriteResult(True, message, notes or "press u on it to boot it")

    def _up(self, name: str, progress: ProgressCallback) -> WriteResult:
        from backend.runtime.boot import boot_pod

        pod = self._pod(name)
        started = time.monotonic()
        tail: deque[str] = deque(maxlen=4)
        last_logs = [0.0]
        phase = ["starting"]
        emitting = threading.Lock()

        def emit() -> None:
            with emitting:  # the boot's own callback and the ticker below
                now = time.monotonic()
                if now - last_logs[0] > 0.8:  # the engine's own last lines, at most about once a second
                    last_logs[0] = now
                    try:
                        lines = self.ctx.runtime.logs(name, tail=3).splitlines()[-3:]
                        tail.clear()
                        tail.extend(lines)
                    except C3Error:
                        pass
                progress(BootProgress(name, phase[0], now - started, tuple(tail)))

        def report(_pod: str, line: str) -> None:
            phase[0] = line.split(" … ")[0]
            emit()

        # The boot reports a phase only when it changes (or every 10 s); a real engine loads for
        # minutes, so the engine's own lines are read once a second meanwhile.
        finished = threading.Event()

        def tick() -> None:
            while not finished.wait(1.0):
                emit()

        ticker = threading.Thread(target=tick, name=f"c3-boot-log-{name}", daemon=True)
        ticker.start()
        try:
            outcome = boot_pod(self.ctx, pod, estate=str(self.path.resolve()), progress=report)
        finally:
            finished.set()
            ticker.join(timeout=5)
        elapsed = time.monotonic() - started
        log_tail = tuple(outcome.log_tail.rstrip().splitlines()[-4:]) if outcome.log_tail else tuple(tail)
        progress(BootProgress(name, "serving" if outcome.ok else outcome.phase, elapsed, log_tail, done=True, ok=outcome.ok))
        if not outcome.ok:
            where = f" (boot log: {outcome.boot_log})" if outcome.boot_log else ""
            return WriteResult(False, f"pod {name} failed to boot: {outcome.detail}{where}", "press l for the engine's log")
        place = outcome.placement
        if place is not None and place.verdict == "mismatch":
            return WriteResult(False, f"pod {name} serves, but not on exactly its GPUs: {place.reason}", "it is left running; d stops it")
        summary = place.summary() if place is not None else "placement not verified"
        return WriteResult(True, f"pod {name} is serving on http://127.0.0.1:{pod.port}/v1 after {outcome.elapsed_s:.0f} s — {summary}")

    def close(self) -> None:
        """A normal cockpit leaves pods running; the demo stops its stub processes."""
        if self._hub is not None:
            self._hub.stop()
        if self.demo:
            from c3.demo import stop_demo_pods

            stop_demo_pods()


def build_services(readonly: bool = False, demo: bool = False, estate_path: Path | None = None) -> RealServices:
    """The facade `c3` and `c3 demo` run on (`c3 --file P` shows and edits that estate file)."""
    if demo:
        from c3.demo import prepare_demo

        prepare_demo()
    return RealServices(readonly=readonly, demo=demo, estate_path=estate_path)

