"""The reads a long-lived front end (the cockpit) keeps open over one estate file: one runtime
context for its lifetime and the live hub (GPU poller, workload events, health, placement and
/metrics in their own threads), started on first use.

Every read falls back to the source itself while the hub cannot start or has not read that source
yet, and says so (EnvironmentProblem) when a source the hub reads has gone stale. Writes are
`backend.actions`; they act on `context`, the same runtime context.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from backend.errors import EnvironmentProblem
from backend.models import GpuSnapshot, Pod
from backend.models.gpu import GpuProcessRow
from backend.views.pods import PodStatus

if TYPE_CHECKING:
    from backend.live.history import HistoryView
    from backend.runtime.context import RuntimeContext
    from backend.runtime.models import Workload

LIVE_PAUSABLE = ("placement",)
"""The hub sources paused while no screen shows them (the others feed the history)."""


class LiveEstate:
    """One estate file watched live on this machine (or on the demo's simulated rig)."""

    def __init__(self, path: Path, *, demo: bool = False) -> None:
        from backend.wiring import open_context

        self.path = path
        self.context: RuntimeContext = open_context(demo=demo)
        """The runtime context every read and write of this front end uses."""
        self._hub: Any = None
        self._hub_failed = False
        self._hub_lock = threading.Lock()
        self._plan: tuple[tuple[int, int, int], list[Pod]] | None = None

    # -- what this front end runs on -------------------------------------------------------------
    @property
    def gpu_source(self) -> str:
        """Where GPU readings come from (`nvml`, `simulated (…)`), or why there are none."""
        return getattr(self.context.probe, "source", None) or f"no GPUs ({self.context.probe_problem})"

    @property
    def runtime_kind(self) -> str:
        """The pod runtime: `docker` or `sim`."""
        return str(self.context.runtime.kind)

    def _pods(self) -> list[Pod]:
        """The estate's pods for the live hub, which asks several times a second: the file is parsed
        again only when it changed (its inode, size or modification time)."""
        from backend.views.estate_file import planned_pods

        try:
            st = self.path.stat()
        except OSError:
            return []  # no estate file yet: no pods (the writes say what to do)
        stamp = (st.st_ino, st.st_size, st.st_mtime_ns)
        plan = self._plan
        if plan is None or plan[0] != stamp:
            plan = (stamp, planned_pods(self.path))
            self._plan = plan
        return list(plan[1])

    def _probe(self) -> Any:
        if self.context.probe is None:
            raise EnvironmentProblem(self.context.probe_problem or "no GPU probe", hint="c3 needs NVML, or C3_RIG=rig.yaml for a simulated rig")
        return self.context.probe

    def _live(self) -> Any:
        """The live hub, started on first use; None if it cannot start (then every read goes to the
        source directly)."""
        with self._hub_lock:  # the first reads come from several workers at once: one hub, not one each
            if self._hub is None and not self._hub_failed:
                try:
                    from backend.live import LiveState
                    from backend.views.estate_file import health_path_of

                    hub = LiveState(self.context, pods=self._pods, health_path_of=health_path_of(self.context))
                    hub.start()
                    self._hub = hub
                except Exception:  # noqa: BLE001 - the direct reads still work
                    self._hub_failed = True
        return self._hub

    # -- reads -----------------------------------------------------------------------------------
    def gpu_snapshots(self) -> list[GpuSnapshot]:
        """The latest reading of every GPU (the hub's, or the probe's own before its first)."""
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

    def pod_statuses(self, pods: list[Pod]) -> list[PodStatus]:
        """`pod status` rows for `pods`, from the hub's latest snapshot; read directly while the hub
        has not read the workloads yet (a pod from another estate must not lose its explanation)."""
        from backend.views.estate_file import health_path_of
        from backend.views.pods import pod_rows

        if not pods:
            return []
        hub = self._live()
        status = hub.latest().source("workloads") if hub is not None else None
        if hub is None or status is None or status.last_ok is None:
            return pod_rows(self.context, pods, health_path_of=health_path_of(self.context), estate=str(self.path.resolve()))
        return self._live_rows(hub, pods)

    def pod_reading(self, pod: Pod) -> tuple[PodStatus, Workload]:
        """One pod's row and its workload, from one hub snapshot (two reads could say `serving` and
        `exited` about the same pod); read directly without a hub."""
        from backend.runtime.models import Workload

        hub = self._live()
        if hub is None:
            rows = self.pod_statuses([pod])
            return rows[0], self.context.runtime.workload(pod.name)
        snap = hub.latest()
        row = self._live_rows(hub, [pod], snap)[0]
        return row, next((w for w in snap.workloads if w.pod == pod.name), None) or Workload(pod=pod.name, status="absent")

    def _live_rows(self, hub: Any, pods: list[Pod], snap: Any = None) -> list[PodStatus]:
        """`pod status` rows from a hub snapshot; a pod the hub has not seen yet (just created) is
        listed at once, as down."""
        from backend.runtime.status import describe_estate, same_estate

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
            elif place is not None and not running and place.verdict != "unknown":
                place = None  # from before it stopped: a pod that does not run is placed nowhere
            row = PodStatus.absent(pod, "verifying placement…" if running else "the pod is not running")
            metrics = entry.metrics if serving and entry and entry.metrics else None
            rows.append(row.model_copy(update={
                "running": running, "serving": serving, "state": workload.status if workload else "absent", "placement": place or row.placement,
                "metrics": metrics.metrics if metrics else None, "metrics_error": metrics.error if metrics else None,
                "restart_count": workload.restart_count if workload else 0,
            }))
        return rows

    def gpu_processes(self, pods: list[Pod]) -> list[GpuProcessRow]:
        """Every compute process on the GPUs with its pod (or none: foreign), user and command, GPU then pid order."""
        from backend.runtime.gpu_processes import process_rows

        return process_rows(self.gpu_snapshots(), pods, self.context.runtime.owners)

    def history(self) -> HistoryView:
        """The live hub's recorded history; empty without a hub."""
        from backend.live.history import HistoryView

        hub = self._live()
        if hub is None:
            return HistoryView(taken_at=time.time(), window_s=0.0)
        snapshot: HistoryView = hub.history.snapshot()
        return snapshot

    # -- the hub's own life ------------------------------------------------------------------------
    def subscribe(self, on_snapshot: Callable[[Any], None]) -> Callable[[], None] | None:
        """Hand every hub snapshot (`backend.live.models.RigSnapshot`) to `on_snapshot`, from the hub's
        threads, starting at once with the latest (the next change may be a while); returns the
        unsubscribe, or None when there is no hub to push (the caller then polls)."""
        hub = self._live()
        if hub is None:
            return None
        unsubscribe: Callable[[], None] = hub.subscribe(on_snapshot)
        on_snapshot(hub.latest())
        return unsubscribe

    def rows_of(self, snap: Any) -> list[PodStatus]:
        """`pod status` rows of one hub snapshot, for the pods it was assembled for."""
        return self._live_rows(self._hub, list(snap.pods), snap)

    def set_live(self, active: bool) -> None:
        """Pause (or resume) the costly reads no screen shows: only placement (`runtime.owners()`);
        GPUs, workloads, health and metrics keep running under a modal, because the history records them."""
        hub = self._hub
        if hub is None:
            return
        for name in LIVE_PAUSABLE:
            if active:
                hub.resume(name)
            else:
                hub.pause(name)
        if active:
            hub.refresh()

    def refresh(self) -> None:
        """Read every source again now (after a write, so the live view catches up at once)."""
        if self._hub is not None:
            self._hub.refresh()

    def close(self) -> None:
        """Stop the hub's threads."""
        if self._hub is not None:
            self._hub.stop()
