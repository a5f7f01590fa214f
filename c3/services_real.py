"""`Services` over the real backend: ESTATE's probe and estate file, FIT's catalog and fit-check,
RUNTIME's runtime (Docker, or the simulated local-process runtime for `c3 demo`), the node registry
and (when it exists) the recipes backend. Every method blocks; the app calls them from workers.
"""

from __future__ import annotations

import itertools
import socket
import threading
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from backend.actions import Action, Problem
from backend.actions.session import DemoLease
from backend.actions.workspace import Workspace
from backend.errors import C3Error, Refused
from backend.models import CatalogEntry, FitReport, Gpu, GpuSnapshot, Pod
from backend.views import PodStatus
from backend.views.estate_file import estate_path as default_estate_path
from backend.views.live_estate import LiveEstate
from c3.metrics_text import metrics_facts, usage_text
from c3.services import (
    Freshness,
    LiveUpdate,
    NodeRow,
    PodDetails,
    PodRunState,
    PodState,
    PoolRow,
    ProfileRow,
    ProgressCallback,
    RecipeRow,
    WritePlan,
    WriteResult,
)
from c3.services_cluster import active_profile_row, node_rows, override_problems, pool_rows, profile_rows
from c3.services_plans import recipes_rows

if TYPE_CHECKING:
    from backend.views.cache import NodeCache
    from backend.views.node_pods import NodePods

HISTORY_SAMPLES = 180
TRY_TIMEOUT_S = 60.0
"""The cockpit's `t` waits for a test prompt's answer as long as `c3 pod try`'s default --timeout."""


class RealServices:
    """The facade over `backend/`. One runtime context for the app's lifetime (cheap to keep)."""

    def __init__(self, *, readonly: bool = False, demo: bool = False, estate_path: Path | None = None) -> None:
        self.readonly = readonly
        self.demo = demo
        self.path = Path(estate_path) if estate_path else default_estate_path()
        self.live = LiveEstate(self.path, demo=demo)
        """The reads: one runtime context for the app's lifetime and the live hub."""
        self.ctx = self.live.context
        self.workspace = Workspace(self.path, self.ctx)
        """What the writes act on: this estate file and this runtime context."""
        self._lock = threading.Lock()
        self._history: dict[int, deque[tuple[float, float]]] = {}
        self._feed: Any = None
        self._history_at: dict[int, Any] = {}  # each GPU's last reading in the sparkline history (its taken_at)
        self._demo_lease: DemoLease | None = None
        self._shard_watch: Any = None
        """The Shards view's kept SSH connections (backend.views.shard.ShardWatch), made on its first poll."""
        if demo:
            from backend.actions.session import join_demo

            self._demo_lease = join_demo()  # the demo's pods stop when the last demo leaves
        self.startup_notice: str | None = None
        where = "demo rig" if demo else socket.gethostname()
        self.label = f"{where} · {self.live.gpu_source} · runtime {self.live.runtime_kind}"

    # -- reads -----------------------------------------------------------------------------------
    def _read_gpus(self) -> list[GpuSnapshot]:
        return self.live.gpu_snapshots()

    def gpu_snapshots(self) -> list[GpuSnapshot]:
        snapshots = self._read_gpus()
        self.remember_gpus(snapshots)
        return snapshots

    def remember_gpus(self, snapshots: Iterable[GpuSnapshot]) -> None:
        """Add GPU readings to the sparkline history; one the history already holds (the same reading
        pushed by the hub and read by a poll) is added once."""
        with self._lock:
            for snap in snapshots:
                if self._history_at.get(snap.gpu.index) == snap.taken_at:
                    continue
                self._history_at[snap.gpu.index] = snap.taken_at
                total = snap.gpu.total_mib or 0
                mem = 100.0 * (snap.used_mib or 0) / total if total else 0.0
                self._history.setdefault(snap.gpu.index, deque(maxlen=HISTORY_SAMPLES)).append((float(snap.util_pct or 0), mem))

    def gpu_history(self) -> dict[int, list[tuple[float, float]]]:
        with self._lock:
            return {index: list(samples) for index, samples in self._history.items()}

    def gpu_series(self, samples: int) -> dict[int, tuple[tuple[float, float], ...]]:
        """The last `samples` (util %, memory %) readings per GPU, oldest first."""
        with self._lock:
            return {index: tuple(itertools.islice(values, max(0, len(values) - samples), None)) for index, values in self._history.items()}

    def catalog_obj(self) -> Any:
        return self.workspace.catalog()

    def catalog(self) -> list[CatalogEntry]:
        return list(self.catalog_obj().entries)

    def _gpus(self) -> list[Gpu]:
        return self.workspace.gpus()

    def _estate_pods(self) -> list[Pod]:
        return self.workspace.pods()

    def _pod(self, name: str) -> Pod:
        return self.workspace.pod(name)

    def _health_path(self, pod: Pod) -> str:
        return self.workspace.health_path(pod)

    def pod_states(self) -> list[PodState]:
        return [self._state_of(row) for row in self.live.pod_statuses(self._estate_pods())]

    @staticmethod
    def _state_of(row: PodStatus) -> PodState:
        place = row.placement
        state: PodRunState
        if row.serving:
            state = "serving"
        elif row.running:
            state = "booting"
        elif row.state == "exited":
            state = "failed"
        else:
            state = "down"
        detail = place.reason or ""
        if place.foreign:
            who = "; ".join(f"pid {f.pid} ({'pod ' + f.owner if f.owner else 'not a c3 pod'}) on GPU {f.gpu_index}" for f in place.foreign)
            detail = (detail + "; " if detail else "") + "foreign process: " + who
        if state == "failed" and place.verdict == "unknown":
            detail = "engine exited — press l for its log"
        actual = tuple(place.actual_indices) or None
        metrics = row.metrics if state == "serving" else None
        return PodState(
            name=row.name, slug=row.slug, port=row.port, gpus=tuple(row.gpus), state=state,
            placement=place.verdict, placement_detail=detail if place.verdict != "ok" or place.foreign else "", actual_gpus=actual,
            metrics=metrics, metrics_error=row.metrics_error if state == "serving" else None, restarts=row.restart_count,
        )

    def fit(self, slug: str, gpus: tuple[int, ...]) -> FitReport:
        return self.workspace.fit(slug, gpus)

    def propose_port(self, slug: str) -> int:
        from backend.views.estate_file import proposed_port

        return proposed_port(self.path, self.catalog_obj().get(slug).default_port)

    def port_problem(self, text: str, taken: Mapping[int, str]) -> str | None:
        from backend.views.estate_file import port_problem

        return port_problem(text, taken, on_host=True)

    def pod_logs(self, name: str, tail: int, timestamps: bool = False) -> list[str]:
        from backend.views.workloads import pod_log

        try:
            log = pod_log(self.ctx, name, tail, timestamps=timestamps)
        except C3Error as error:
            return [f"(no container; the boot log cannot be read: {error.message})"]
        if log is None:
            return [f"pod {name} has no container and no boot log yet — press u to boot it"]
        if log.boot_log is not None:
            return [f"(no container; last boot log {log.boot_log})", *log.lines]
        return log.lines

    def shell_command(self, name: str) -> list[str]:
        from backend.views.workloads import pod_shell

        self._pod(name)  # a pod of this estate, or Refused
        return pod_shell(name)

    def pod_details(self, name: str) -> PodDetails:
        pod = self._pod(name)
        row, workload = self.live.pod_reading(pod)
        state = self._state_of(row)
        by_index = {g.index: g for g in self._gpus()}
        facts: list[tuple[str, str]] = [
            ("estate file", str(self.path)),
            ("workload", f"{workload.status}" + (f" ({workload.id})" if workload.id else "") + (f", exit {workload.exit_code}" if workload.exit_code is not None else "")),
            ("runtime", self.ctx.runtime.kind),
            *([("restarts", f"{workload.restart_count}× — the engine exited and Docker restarted the container")] if workload.restart_count else []),
            ("endpoint", f"http://127.0.0.1:{pod.port}/v1"),
        ]
        for index in pod.gpus:
            gpu = by_index.get(index)
            facts.append((f"GPU {index}", f"{gpu.name} {gpu.uuid}" if gpu else "not on this rig"))
        if workload.running:
            # Read here, in the modal's worker, not per poll: `docker stats` takes about a second.
            try:
                use = self.ctx.runtime.usage([pod.name]).get(pod.name)
            except C3Error as error:
                use, why = None, error.message
            else:
                why = "the runtime gave no reading"
            facts.append(("CPU / RAM", usage_text(use) if use else why))
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
        self.live.set_live(active)

    def try_pod(self, name: str, prompt: str, max_tokens: int) -> Any:
        """One streaming test prompt to a running pod of this estate file (`backend.views.try_pod.TryResult`)."""
        from backend.views.try_pod import try_planned_pod

        return try_planned_pod(self.ctx, self._pod(name), self.path, prompt, max_tokens=max_tokens, timeout_s=TRY_TIMEOUT_S)

    def gpu_processes(self) -> list[Any]:
        """Every compute process on the GPUs with its pod (or none: foreign), user and command
        (`backend.models.gpu.GpuProcessRow`), GPU then pid order."""
        return self.live.gpu_processes(self._estate_pods())

    def history(self) -> Any:
        """The live hub's recorded history (`backend.live.history.HistoryView`); empty without a hub."""
        return self.live.history()

    def subscribe(self, on_update: Callable[[LiveUpdate], None]) -> Callable[[], None] | None:
        from c3.live_feed import LiveFeed

        feed = LiveFeed(self, on_update)
        unsubscribe = self.live.subscribe(feed)  # hands it what the hub already has, at once
        if unsubscribe is None:
            return None
        self._feed = feed
        return unsubscribe

    def freshness(self) -> Freshness:
        feed = self._feed
        return feed.fresh if feed is not None else Freshness()

    def pods_from(self, snap: Any) -> list[PodState]:
        """The pod view of one hub snapshot (its own plan: the pods it was assembled for)."""
        return [self._state_of(row) for row in self.live.rows_of(snap)]

    def nodes(self) -> list[NodeRow]:
        return node_rows(self)

    def node_caches(self) -> list[NodeCache]:
        from backend.views.cache import registered_caches

        return registered_caches()

    def node_pods(self) -> list[NodePods]:
        from backend.views.node_pods import other_node_pods

        return other_node_pods()

    def registered_nodes(self) -> list[NodeRow]:
        from backend.views.registry import registered_nodes

        return [NodeRow(n.name, n.host, n.ssh, n.local, ssh_key=n.ssh_key) for n in registered_nodes()]

    def pools(self) -> list[PoolRow]:
        return pool_rows()

    def shards(self) -> list[Any]:
        from backend.views.shard import ShardWatch

        # One SSH connection per node, kept between the Shards view's 1 s polls (closed 5 s after the last).
        with self._lock:
            if self._shard_watch is None:
                self._shard_watch = ShardWatch()
            watch = self._shard_watch
        shards: list[Any] = watch.poll()
        return shards

    def gateways(self) -> list[Any]:
        from backend.views.gateway import running_gateways

        return running_gateways()

    def active_profile(self) -> ProfileRow | None:
        return active_profile_row()

    def profiles(self) -> list[ProfileRow]:
        return profile_rows()

    def recipes(self) -> list[RecipeRow] | None:
        return recipes_rows()

    def override_problems(self, recipe: str, overrides: tuple[str, ...]) -> list[str]:
        return override_problems(recipe, overrides)

    # -- writes: every one is a `backend.actions` class, built from the registry ---------------------
    def make_plan(self, key: str | Action, pod: str | None = None, request: Any = None) -> WritePlan:
        from backend.actions.registry import build

        action = key if isinstance(key, Action) else build(key, self.workspace, pod, request)
        plan = action.plan()
        found = self._problems(action)
        return WritePlan(action, plan.title, plan.lines, tuple(p.text() for p in found if p.severity != "warning"),
                         tuple(p.text() for p in found if p.severity == "warning"), plan.destructive, plan.wide,
                         plan.confirm)

    def _problems(self, action: Action) -> list[Problem]:
        if self.readonly:
            return [Problem("read-only cockpit: writes are refused")]
        return action.problems()

    def check(self, plan: WritePlan) -> list[str]:
        # A write that would change nothing (already running, nothing to stop) is refused here too.
        return [p.text() for p in self._problems(plan.action) if p.severity != "warning"]

    def execute(self, plan: WritePlan, progress: ProgressCallback) -> WriteResult:
        if self.readonly:
            raise Refused("read-only cockpit: writes are refused", hint="restart c3 without --readonly")
        try:
            return plan.action.run(progress)
        finally:
            self.live.refresh()  # the live view catches up with the write at once

    def close(self) -> None:
        """A normal cockpit leaves pods running; the demo stops its stub processes."""
        self.live.close()
        if self._shard_watch is not None:
            self._shard_watch.close()
        if self._demo_lease is not None:
            self._demo_lease.release()


def build_services(readonly: bool = False, demo: bool = False, estate_path: Path | None = None, demo_gateway_port: int | None = None) -> RealServices:
    """The facade `c3` and `c3 demo` run on (`c3 --file P` shows and edits that estate file); `c3 demo`
    also starts the demo's gateway on `demo_gateway_port` (None: no gateway)."""
    if demo:
        from backend.actions.session import enter_demo

        enter_demo()
    services = RealServices(readonly=readonly, demo=demo, estate_path=estate_path)
    if demo and demo_gateway_port is not None:
        from backend.actions.session import start_demo_gateway

        services.startup_notice = start_demo_gateway(demo_gateway_port)
    return services

