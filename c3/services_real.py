"""`Services` over the real backend: ESTATE's probe and estate file, FIT's catalog and fit-check,
RUNTIME's runtime (Docker, or the simulated local-process runtime for `c3 demo`), the node registry
and (when it exists) the recipes backend. Every method blocks; the app calls them from workers.
"""

from __future__ import annotations

import itertools
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from backend import paths
from backend.actions import Action, Problem
from backend.actions.workspace import Workspace
from backend.errors import C3Error, EnvironmentProblem, Refused
from backend.models import CatalogEntry, FitReport, Gpu, GpuSnapshot, Pod
from backend.runtime.models import Workload
from backend.views import PodStatus
from c3.services import (
    Freshness,
    LiveUpdate,
    NodeRow,
    PodRunState,
    PodDetails,
    PodState,
    PoolRow,
    ProfileRow,
    ProgressCallback,
    RecipeRow,
    WritePlan,
    WriteResult,
)
from c3.services_cluster import active_profile_row, node_rows, override_problems, pool_rows
from c3.metrics_text import metrics_facts
from c3.services_plans import recipes_rows

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
        self.workspace = Workspace(self.path, self.ctx)
        """What the writes act on: this estate file and this runtime context."""
        self._lock = threading.Lock()
        self._history: dict[int, deque[tuple[float, float]]] = {}
        self._hub: Any = None
        self._hub_failed = False
        self._hub_lock = threading.Lock()
        self._feed: Any = None
        self._plan: tuple[tuple[int, int, int], list[Pod]] | None = None
        self._history_at: dict[int, Any] = {}  # each GPU's last reading in the sparkline history (its taken_at)
        self._demo_lease: Path | None = None
        if demo:
            from c3.demo import join_demo

            self._demo_lease = join_demo()  # the demo's pods stop when the last demo leaves
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
        with self._hub_lock:  # the first reads come from several workers at once: one hub, not one each
            if self._hub is None and not self._hub_failed:
                try:
                    from backend.live import LiveState

                    hub = LiveState(self.ctx, pods=self._planned_pods, health_path_of=self._health_path)
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

    def _planned_pods(self) -> list[Pod]:
        """The estate's pods for the live hub, which asks several times a second: the file is parsed
        again only when it changed (its inode, size or modification time)."""
        try:
            st = self.path.stat()
        except OSError:
            return self._estate_pods()  # missing or unreadable: the workspace says what to do
        stamp = (st.st_ino, st.st_size, st.st_mtime_ns)
        plan = self._plan
        if plan is None or plan[0] != stamp:
            plan = (stamp, self._estate_pods())
            self._plan = plan
        return list(plan[1])

    def _pod(self, name: str) -> Pod:
        return self.workspace.pod(name)

    def _health_path(self, pod: Pod) -> str:
        return self.workspace.health_path(pod)

    def pod_states(self) -> list[PodState]:
        from backend.runtime.status import pod_rows

        pods = self._estate_pods()
        if not pods:
            return []
        hub = self._live()
        status = hub.latest().source("workloads") if hub is not None else None
        if hub is None or status is None or status.last_ok is None:
            # No hub, or it has not read the workloads yet (just started): read them directly rather than
            # call every pod "not running" — a pod from another estate would lose its explanation.
            rows = pod_rows(self.ctx, pods, health_path_of=self._health_path, estate=str(self.path.resolve()))
            return [self._state_of(row) for row in rows]
        return [self._state_of(row) for row in self._live_rows(hub, pods)]

    def _live_rows(self, hub: Any, pods: list[Pod], snap: Any = None) -> list[PodStatus]:
        """`pod status` rows from the hub's latest snapshot; a pod the hub has not seen yet (just
        created) is listed at once, as down."""
        from backend.runtime.status import describe_estate, same_estate
        from backend.views import PodStatus

        mine = str(self.path.resolve())
        snap = snap if snap is not None else hub.latest()
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
                other = PodStatus.absent(pod, f"container c3-{pod.name} belongs to {describe_estate(workload.estate)}")
                rows.append(other.model_copy(update={"state": "other-estate", "other_estate": workload.estate or ""}))
                continue
            running = bool(workload and workload.running)
            serving = running and bool(entry and entry.health and entry.health.healthy)
            place = entry.placement if entry else None
            if place is not None and running and place.verdict == "unknown" and "not running" in place.reason:
                place = None  # from before it started; the next placement read will judge it
            row = PodStatus.absent(pod, "verifying placement…" if running else "the pod is not running")
            metrics = entry.metrics if serving and entry and entry.metrics else None
            rows.append(row.model_copy(update={
                "running": running, "serving": serving, "state": workload.status if workload else "absent", "placement": place or row.placement,
                "metrics": metrics.metrics if metrics else None, "metrics_error": metrics.error if metrics else None,
            }))
        return rows

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
            metrics=metrics, metrics_error=row.metrics_error if state == "serving" else None,
        )

    def fit(self, slug: str, gpus: tuple[int, ...]) -> FitReport:
        return self.workspace.fit(slug, gpus)

    def propose_port(self, slug: str) -> int:
        from backend.estate import default_port, load_estate
        from backend.models import Estate

        entry = self.catalog_obj().get(slug)
        estate = load_estate(self.path) if self.path.exists() else Estate()
        return default_port(estate, entry.default_port)

    def pod_logs(self, name: str, tail: int, timestamps: bool = False) -> list[str]:
        from backend.actions.workspace import pod_log
        from backend.errors import C3Error

        try:
            log = pod_log(self.ctx, name, tail, timestamps=timestamps)
        except C3Error as error:
            return [f"(no container; the boot log cannot be read: {error.message})"]
        if log is None:
            return [f"pod {name} has no container and no boot log yet — press u to boot it"]
        if log.boot_log is not None:
            return [f"(no container; last boot log {log.boot_log})", *log.lines]
        return log.lines

    def pod_details(self, name: str) -> PodDetails:
        pod = self._pod(name)
        hub = self._live()
        if hub is not None:
            # The state and the workload line from one hub snapshot: two reads could say `serving` and
            # `exited` about the same pod.
            snap = hub.latest()
            state = self._state_of(self._live_rows(hub, [pod], snap)[0])
            workload = next((w for w in snap.workloads if w.pod == pod.name), None) or Workload(pod=pod.name, status="absent")
        else:
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

    def subscribe(self, on_update: Callable[[LiveUpdate], None]) -> Callable[[], None] | None:
        from c3.live_feed import LiveFeed

        hub = self._live()
        if hub is None:
            return None
        feed = LiveFeed(self, hub, on_update)
        self._feed = feed
        unsubscribe: Callable[[], None] = hub.subscribe(feed)
        feed(hub.latest())  # what the hub already has, at once: the next change may be a while
        return unsubscribe

    def freshness(self) -> Freshness:
        feed = self._feed
        return feed.fresh if feed is not None else Freshness()

    def pods_from(self, hub: Any, snap: Any) -> list[PodState]:
        """The pod view of one hub snapshot (its own plan: the pods it was assembled for)."""
        return [self._state_of(row) for row in self._live_rows(hub, list(snap.pods), snap)]

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

    # -- writes: every one is a `backend.actions` class, built from the registry ---------------------
    def make_plan(self, key: str | Action, pod: str | None = None, request: Any = None) -> WritePlan:
        from backend.actions.registry import build

        action = key if isinstance(key, Action) else build(key, self.workspace, pod, request)
        plan = action.plan()
        found = self._problems(action)
        return WritePlan(action, plan.title, plan.lines, tuple(p.text() for p in found if p.severity != "warning"),
                         tuple(p.text() for p in found if p.severity == "warning"), plan.destructive, plan.wide)

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
            if self._hub is not None:
                self._hub.refresh()  # the live view catches up with the write at once

    def close(self) -> None:
        """A normal cockpit leaves pods running; the demo stops its stub processes."""
        if self._hub is not None:
            self._hub.stop()
        if self.demo:
            from c3.demo import leave_demo, stop_demo_pods

            lease, self._demo_lease = self._demo_lease, None
            if leave_demo(lease):
                stop_demo_pods()


def build_services(readonly: bool = False, demo: bool = False, estate_path: Path | None = None) -> RealServices:
    """The facade `c3` and `c3 demo` run on (`c3 --file P` shows and edits that estate file)."""
    if demo:
        from c3.demo import enter_demo

        enter_demo()
    return RealServices(readonly=readonly, demo=demo, estate_path=estate_path)

