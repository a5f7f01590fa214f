"""`LiveState`: the hub the cockpit drives — GPU poller, workload events, endpoint health, placement,
and engine metrics (each serving pod's /metrics, every 2 s); `history` records the GPU readings and
the engine metrics over the last ten minutes (`backend.live.history`).

Each source runs in its own daemon thread (NVML, the Docker socket and HTTP all block); every change
assembles a new immutable `RigSnapshot` and hands it to subscribers (a callback, called from the
source's thread — a Textual app wraps it in `call_from_thread` — or a queue). `latest()` is always
safe to call. A source that fails is marked stale with the time it started failing and retried with
backoff; the others keep going.

    hub = LiveState(ctx, pods=lambda: load_estate(path).pods)
    hub.subscribe(lambda snap: app.call_from_thread(app.show, snap))
    hub.start() … hub.pause("health") … hub.stop()
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading
from collections.abc import Callable, Sequence
from typing import Any

from backend.errors import EnvironmentProblem
from backend.live.engine_metrics import EngineSample, PodMetrics, read_pod
from backend.live.events import EventSource
from backend.live.health import check_all
from backend.live.history import LiveHistory
from backend.live.models import PodLive, RigSnapshot
from backend.live.source import Source, now
from backend.models import Pod
from backend.runtime import placement as placement_rules
from backend.runtime.context import RuntimeContext
from backend.runtime.models import Placement, Workload
from backend.runtime.status import requested_uuids

Subscriber = Callable[[RigSnapshot], None]

HEALTH_TIMEOUT_S = 1.5
"""How long one health probe may take (a slow answer is an unhealthy one)."""

log = logging.getLogger("c3.live")


def _with_last_numbers(failed: PodMetrics, shown: PodMetrics | None, sample: EngineSample | None, keep_s: float) -> PodMetrics:
    """A failed scrape (a busy engine past the timeout) keeps the last numbers it read, up to `keep_s`
    old: they come with their `taken_at` (their age) and the scrape's error, so the view says "as of"
    instead of dropping the engine line while the engine works hardest."""
    last = shown.metrics if shown is not None else None
    if last is None or sample is None or (now() - last.taken_at).total_seconds() > keep_s:
        return failed
    return failed.model_copy(update={"metrics": last})


def _describe(callback: Subscriber) -> str:
    return getattr(callback, "__qualname__", None) or type(callback).__qualname__


class LiveState:
    """Live GPUs, workloads, endpoint health and placement, as immutable stamped snapshots."""

    def __init__(
        self,
        ctx: RuntimeContext,
        *,
        pods: Callable[[], Sequence[Pod]] = lambda: (),
        health_path_of: Callable[[Pod], str] = lambda pod: "/v1/models",
        gpu_interval_s: float = 1.0,
        health_interval_s: float = 2.0,
        placement_interval_s: float = 2.0,
        workload_interval_s: float = 1.0,
        metrics_interval_s: float = 2.0,
        metrics_timeout_s: float = 1.0,
        metrics_keep_s: float = 30.0,
        history: LiveHistory | None = None,
    ) -> None:
        self.ctx = ctx
        self._pods = pods
        self._health_path_of = health_path_of
        self._lock = threading.Lock()
        self._version = itertools.count(1)
        self._subscribers: list[Subscriber] = []
        self._failing: set[int] = set()  # id() of subscribers whose last call raised: warned once per streak
        self._queues: list[queue.Queue[RigSnapshot]] = []
        self._snapshot = RigSnapshot(taken_at=now(), version=0)
        self._pod_cache: tuple[Pod, ...] = ()
        self.history = history or LiveHistory()
        """GPU and engine-metrics history, recorded by the sources' threads whatever the cockpit shows."""
        self._samples: dict[str, EngineSample] = {}  # each serving pod's previous scrape: rates need two
        self._engine_key: dict[str, tuple[Any, ...]] = {}  # each pod's (status, container, pids) at the last workloads reading
        self._metrics_timeout_s = metrics_timeout_s
        self._metrics_keep_s = metrics_keep_s
        self._metrics_client: Any = None  # one keep-alive client, used only by the metrics thread
        self._health_client: Any = None  # one keep-alive client, used only by the health thread
        events = getattr(ctx.runtime, "events", None)
        workloads: Source
        if callable(events):
            workloads = EventSource("workloads", ctx.runtime.workloads, events)
        else:
            workloads = Source("workloads", ctx.runtime.workloads, interval_s=workload_interval_s)
        self.sources: dict[str, Source] = {
            "gpus": Source("gpus", self._read_gpus, interval_s=gpu_interval_s),
            "workloads": workloads,
            "health": Source("health", self._read_health, interval_s=health_interval_s),
            "placement": Source("placement", self._read_placement, interval_s=placement_interval_s),
            "metrics": Source("metrics", self._read_metrics, interval_s=metrics_interval_s),
        }
        for source in self.sources.values():
            source.publish = self._changed

    # -- control ---------------------------------------------------------------------------------

    def start(self) -> None:
        for source in self.sources.values():
            source.start()

    def stop(self) -> None:
        for source in self.sources.values():
            source.stop()
        for client in (self._metrics_client, self._health_client):
            if client is not None:
                client.close()
        self._metrics_client = self._health_client = None

    def pause(self, name: str) -> None:
        self.sources[name].pause()
        self._changed(None)

    def resume(self, name: str) -> None:
        self.sources[name].resume()

    def refresh(self) -> None:
        """Ask every source for a reading now (after a write: up, down, create)."""
        for source in self.sources.values():
            source.poke()

    def latest(self) -> RigSnapshot:
        with self._lock:
            return self._snapshot

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """Call `callback(snapshot)` on every change; returns the unsubscribe function."""
        with self._lock:
            self._subscribers.append(callback)

        def unsubscribe() -> None:
            with self._lock:
                if callback in self._subscribers:
                    self._subscribers.remove(callback)
                    self._failing.discard(id(callback))

        return unsubscribe

    def changes(self, maxsize: int = 8) -> queue.Queue[RigSnapshot]:
        """A queue receiving every new snapshot (the oldest is dropped when the reader lags)."""
        q: queue.Queue[RigSnapshot] = queue.Queue(maxsize=maxsize)
        with self._lock:
            self._queues.append(q)
        return q

    # -- fetchers (run in the sources' threads) ------------------------------------------------------

    def _read_gpus(self) -> Any:
        if self.ctx.probe is None:
            from backend.gpu import get_probe

            try:
                self.ctx.probe = get_probe()
                self.ctx.probe_problem = None
            except EnvironmentProblem as error:
                self.ctx.probe_problem = error.message
                raise
        return tuple(self.ctx.probe.snapshots())

    def _planned(self) -> tuple[Pod, ...]:
        try:
            self._pod_cache = tuple(self._pods())
        except Exception:  # a half-edited estate file keeps the last good plan on screen
            pass
        return self._pod_cache

    def _workloads(self) -> dict[str, Workload]:
        return self.sources["workloads"].value or {}

    def _read_health(self) -> Any:
        running = self._workloads()
        targets = []
        for pod in self._planned():
            w = running.get(pod.name)
            if w is not None and w.running:
                targets.append((pod.name, f"http://127.0.0.1:{pod.port}{self._health_path_of(pod)}"))
        if not targets:
            return {}
        if self._health_client is None:
            from backend import http_probe  # httpx is imported lazily there

            self._health_client = http_probe.client(HEALTH_TIMEOUT_S)
        return check_all(targets, client=self._health_client)

    def _read_metrics(self) -> dict[str, PodMetrics]:
        """Scrape /metrics of every serving pod, one after another on one keep-alive client; each
        wait is bounded by the timeout, and a pod that fails is reported, never raised."""
        from backend import http_probe  # httpx is imported lazily there

        health = self.sources["health"].value or {}
        running = self._workloads()
        serving = [p for p in self._planned() if (w := running.get(p.name)) is not None and w.running and getattr(health.get(p.name), "healthy", False)]
        previous = self._samples
        samples: dict[str, EngineSample] = {}  # becomes self._samples whole: the health thread reads it
        if not serving:
            self._samples = samples
            if self._metrics_client is not None:
                self._metrics_client.close()
                self._metrics_client = None
            return {}
        if self._metrics_client is None:
            self._metrics_client = http_probe.client(self._metrics_timeout_s)
        shown: dict[str, PodMetrics] = self.sources["metrics"].value or {}
        out: dict[str, PodMetrics] = {}
        for pod in serving:
            read, sample = read_pod(self._metrics_client, pod.name, pod.port, previous.get(pod.name))
            if sample is not None:
                samples[pod.name] = sample
            else:
                read = _with_last_numbers(read, shown.get(pod.name), previous.get(pod.name), self._metrics_keep_s)
                if pod.name in previous and read.metrics is not None:
                    samples[pod.name] = previous[pod.name]  # the next rates span the failed scrape
            out[pod.name] = read
        self._samples = samples
        return out

    def _read_placement(self) -> dict[str, Placement]:
        gpus_snap = self.sources["gpus"].value
        gpus = [s.gpu for s in gpus_snap] if gpus_snap else []
        procs = [p for s in gpus_snap for p in s.processes] if gpus_snap is not None else None
        workloads = self._workloads()
        owners: dict[int, str | None] = {}
        if procs and any(w.running for w in workloads.values()):
            owners = self.ctx.runtime.owners(p.pid for p in procs)
        result: dict[str, Placement] = {}
        for pod in self._planned():
            w = workloads.get(pod.name)
            result[pod.name] = placement_rules.verdict(
                pod=pod.name,
                requested=requested_uuids(pod, gpus),
                gpus=gpus,
                processes=procs,
                owners=owners,
                running=bool(w and w.running),
                nvml_problem=self.ctx.probe_problem,
            )
        return result

    # -- assembly ------------------------------------------------------------------------------

    def _engines_changed(self) -> bool:
        """Whether a pod's engine process changed since the last workloads reading: it started, exited,
        or was restarted (a container that served restarts under Docker's `unless-stopped`; the
        restarted one has a new pid). Its last health answer is then out of date."""
        key = {name: (w.status, w.id, w.pids) for name, w in self._workloads().items()}
        changed = key != self._engine_key
        self._engine_key = key
        return changed

    def _record(self, source: Source | None) -> None:
        """Append a fresh reading to the history (a failed attempt republishes the old value: skipped)."""
        if source is None or not source.status.ok or source.value is None:
            return
        if source is self.sources["gpus"]:
            self.history.record_gpus(source.value)
        elif source is self.sources["metrics"]:
            self.history.record_metrics(source.value, pods=[p.name for p in self._pod_cache])

    def _changed(self, source: Source | None) -> None:
        self._record(source)
        if source is self.sources["workloads"] and self._engines_changed():
            # An engine killed with SIGKILL is back to "running" within ~0.1 s when Docker restarts it:
            # without a fresh probe the pod would look serving until the next health tick (up to 2 s +
            # the probe's timeout), past the 2 s in which trouble must be announced.
            self.sources["health"].poke()
        if source is self.sources["health"]:
            healthy = {name for name, h in (source.value or {}).items() if h.healthy}
            if healthy - set(self._samples):
                self.sources["metrics"].poke()  # a pod just started serving: its metrics now, not at the next tick
        workloads = self._workloads()
        health = self.sources["health"].value or {}
        places = self.sources["placement"].value or {}
        metrics = self.sources["metrics"].value or {}
        pods = tuple(
            PodLive(name=p.name, slug=p.slug, gpus=p.gpus, port=p.port, workload=workloads.get(p.name), health=health.get(p.name), placement=places.get(p.name),
                    metrics=metrics.get(p.name))
            for p in self._pod_cache
        )
        with self._lock:
            snap = RigSnapshot(
                taken_at=now(),
                version=next(self._version),
                gpus=tuple(self.sources["gpus"].value or ()),
                pods=pods,
                workloads=tuple(workloads.values()),
                sources=tuple(s.status for s in self.sources.values()),
            )
            self._snapshot = snap
            subscribers = list(self._subscribers)
            queues = list(self._queues)
        for q in queues:
            while True:
                try:
                    q.put_nowait(snap)
                    break
                except queue.Full:
                    try:
                        q.get_nowait()
                    except queue.Empty:
                        pass
        for callback in subscribers:
            self._deliver(callback, snap)

    def _deliver(self, callback: Subscriber, snap: RigSnapshot) -> None:
        """Call one subscriber; its exception is logged, never raised into the source's thread."""
        try:
            callback(snap)
        except Exception as error:  # a subscriber's bug must not stop the live view or the other subscribers
            key = id(callback)
            first = key not in self._failing
            self._failing.add(key)
            if first:  # one warning per failure streak, not one per snapshot (a snapshot a second or more)
                detail = str(error).splitlines()[0] if str(error) else ""
                log.warning("live subscriber %s raised %s%s (snapshot %d); the hub keeps going",
                            _describe(callback), type(error).__name__, f": {detail}" if detail else "", snap.version)
            log.debug("live subscriber %s failed on snapshot %d", _describe(callback), snap.version, exc_info=True)
        else:
            self._failing.discard(id(callback))
