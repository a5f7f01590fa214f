"""`LiveState`: the hub the cockpit drives — GPU poller, workload events, placement, and the engines
(each running pod's health and, once it serves, its /metrics, every 2 s); `history` records the GPU
readings and the engine metrics over the last ten minutes (`backend.live.history`).

One round of the `engines` source costs one request per serving pod: an engine that served and answers
its `/metrics` is alive, so that scrape stands in for its health probe. The health path is still probed
when the scrape fails, when the pod's engine changed (started, exited, restarted), for a pod that does
not serve yet, and at least every `health_proof_s` (10 s) — an engine's HTTP server can outlive the
engine itself (vLLM's `/health` answers 503 once its engine core died; its `/metrics` still answers).

Each source runs in its own daemon thread (NVML, the Docker socket and HTTP all block); every change
assembles a new immutable `RigSnapshot` and hands it to subscribers (a callback, called from the
source's thread — a Textual app wraps it in `call_from_thread` — or a queue). `latest()` is always
safe to call. A source that fails is marked stale with the time it started failing and retried with
backoff; the others keep going.

    hub = LiveState(ctx, pods=lambda: load_estate(path).pods)
    hub.subscribe(lambda snap: app.call_from_thread(app.show, snap))
    hub.start() … hub.pause("placement") … hub.stop()
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from backend.errors import EnvironmentProblem
from backend.live.engine_metrics import EngineSample, PodMetrics, read_pod
from backend.live.events import EventSource
from backend.live.health import probe
from backend.live.history import LiveHistory
from backend.live.models import EndpointHealth, PodLive, RigSnapshot
from backend.live.source import Source, now
from backend.models import Pod
from backend.runtime import placement as placement_rules
from backend.runtime.context import RuntimeContext
from backend.runtime.models import Placement, Workload
from backend.runtime.status import requested_uuids

Subscriber = Callable[[RigSnapshot], None]

HEALTH_TIMEOUT_S = 1.5
"""How long one health probe may take (a slow answer is an unhealthy one)."""
HEALTH_LATE_ALLOWED = 2
"""How many health probes in a row may time out on an engine that was healthy before it is called
unhealthy: a CPU-bound or heavily batched engine can answer a probe late while it serves well, so one
late answer is "busy", not "sick" (Docker's and Kubernetes' probes likewise need 3 failures in a row).
Only timeouts get this grace: a refused connection, a reset or a bad status is unhealthy at once, and so
is an engine whose container changed (restarted, new pid). At the default 2 s period and 1.5 s probe
timeout a hung engine is called unhealthy within ~10 s."""
HEALTH_PROOF_S = 10.0
"""How long answered /metrics scrapes stand in for an engine's health probe before the health path is probed again."""


@dataclass(frozen=True)
class EngineReadings:
    """One round of the `engines` source: each running pod's health, each serving pod's metrics."""

    health: dict[str, EndpointHealth] = field(default_factory=dict)
    """By pod: its last health verdict (a real probe of its health path, or an answered /metrics scrape)."""
    metrics: dict[str, PodMetrics] = field(default_factory=dict)
    """By pod: its last /metrics scrape (serving pods only)."""
    scraped: frozenset[str] = frozenset()
    """The pods whose /metrics were read in this round (the others' entries are carried over)."""

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
        health_proof_s: float = HEALTH_PROOF_S,
        history: LiveHistory | None = None,
    ) -> None:
        """`health_interval_s`: how often each running pod's engine is checked (a /metrics scrape or a
        health probe); `metrics_interval_s`: how often a serving pod's /metrics is read (a round in which
        it is not due probes the health path instead); `health_proof_s`: see HEALTH_PROOF_S."""
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
        self._metrics_interval_s = metrics_interval_s
        self._metrics_timeout_s = metrics_timeout_s
        self._metrics_keep_s = metrics_keep_s
        self._health_proof_s = health_proof_s
        self._probed_at: dict[str, float] = {}  # monotonic time of each pod's last real health probe
        self._scraped_at: dict[str, float] = {}  # … and of its last /metrics scrape
        self._reprobe: set[str] = set()  # pods whose engine changed: probe their health path next round
        self._engines_client: Any = None  # one keep-alive loopback client, used only by the engines thread
        self._processes_max_age_s = max(0.0, placement_interval_s - gpu_interval_s / 2)
        """How old a GPU reading's process lists may be (see GpuProbe.snapshots): 1.5 s at the default
        periods, so they are read on every other 1 s GPU tick and are never older than a placement round."""
        self._placement_memo: tuple[Any, dict[str, Placement]] | None = None
        self._pods_built: tuple[tuple[Any, ...], tuple[PodLive, ...]] | None = None  # the last pods assembled, and from what
        self._published: dict[str, tuple[Any, ...]] = {}  # per source: the value and state last made into a snapshot
        events = getattr(ctx.runtime, "events", None)
        workloads: Source
        if callable(events):
            workloads = EventSource("workloads", ctx.runtime.workloads, events)
        else:
            workloads = Source("workloads", ctx.runtime.workloads, interval_s=workload_interval_s)
        self.sources: dict[str, Source] = {
            "gpus": Source("gpus", self._read_gpus, interval_s=gpu_interval_s),
            "workloads": workloads,
            "engines": Source("engines", self._read_engines, interval_s=min(health_interval_s, metrics_interval_s)),
            "placement": Source("placement", self._read_placement, interval_s=placement_interval_s),
        }
        for source in self.sources.values():
            source.publish = self._changed

    # -- control ---------------------------------------------------------------------------------

    def start(self) -> None:
        self._planned()  # the plan before the first snapshot: none goes out listing no pods for want of it
        for source in self.sources.values():
            source.start()

    def stop(self) -> None:
        for source in self.sources.values():
            source.stop()
        if self._engines_client is not None:
            self._engines_client.close()
        self._engines_client = None

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
            if self.ctx.reopen_probe is None:
                raise EnvironmentProblem(self.ctx.probe_problem or "no GPU probe")
            try:
                self.ctx.probe = self.ctx.reopen_probe()
                self.ctx.probe_problem = None
            except EnvironmentProblem as error:
                self.ctx.probe_problem = error.message
                raise
        # Processes are judged (placement) every placement period: read them every other GPU tick, not each.
        return tuple(self.ctx.probe.snapshots(processes_max_age_s=self._processes_max_age_s))

    def _planned(self) -> tuple[Pod, ...]:
        try:
            self._pod_cache = tuple(self._pods())
        except Exception:  # a half-edited estate file keeps the last good plan on screen
            pass
        return self._pod_cache

    def _workloads(self) -> dict[str, Workload]:
        return self.sources["workloads"].value or {}

    def _read_engines(self) -> EngineReadings:
        """Check every running pod's engine, one after another on one keep-alive client (each wait bounded
        by its timeout): a pod that served and whose /metrics answers is alive — that scrape is its health
        check; any other pod (not serving yet, its scrape failed, its engine changed, or its last real
        probe is older than `health_proof_s`) has its health path probed, and once healthy is scraped."""
        from backend import http_probe

        running = self._workloads()
        targets = [p for p in self._planned() if (w := running.get(p.name)) is not None and w.running]
        previous: EngineReadings = self.sources["engines"].value or EngineReadings()
        with self._lock:
            changed, self._reprobe = self._reprobe, set()
        if not targets:
            self._samples = {}
            if self._engines_client is not None:
                self._engines_client.close()
                self._engines_client = None
            return EngineReadings()
        if self._engines_client is None:  # every engine check is a GET to a loopback port
            self._engines_client = http_probe.LoopbackClient(max(self._metrics_timeout_s, HEALTH_TIMEOUT_S))
        client = self._engines_client
        health: dict[str, EndpointHealth] = {}
        metrics: dict[str, PodMetrics] = {}
        samples: dict[str, EngineSample] = {}
        scraped: set[str] = set()
        for pod in targets:
            name = pod.name
            now = time.monotonic()
            due = now - self._scraped_at.get(name, float("-inf")) >= 0.9 * self._metrics_interval_s
            last = previous.health.get(name)
            trusted = (last is not None and last.healthy and name not in changed
                       and now - self._probed_at.get(name, float("-inf")) < self._health_proof_s)
            reading: PodMetrics | None = None
            if trusted and due:
                reading, sample = self._scrape(client, pod, samples, scraped)
                if sample is not None:  # it answered as an engine: alive
                    url = f"http://127.0.0.1:{pod.port}/metrics"
                    health[name] = EndpointHealth(pod=name, url=url, healthy=True, checked_at=datetime.now(UTC), status_code=200)
                    metrics[name] = reading
                    continue
            verdict = probe(client, name, f"http://127.0.0.1:{pod.port}{self._health_path_of(pod)}")
            if (verdict.timed_out and last is not None and last.healthy and name not in changed
                    and last.late < HEALTH_LATE_ALLOWED):
                verdict = verdict.model_copy(update={"healthy": True, "late": last.late + 1})  # busy, not gone (yet)
            health[name] = verdict
            self._probed_at[name] = time.monotonic()
            if not verdict.healthy:
                continue  # not serving: no metrics
            if reading is None and not verdict.late and (due or name not in previous.metrics):  # just started serving: its metrics now
                reading, _ = self._scrape(client, pod, samples, scraped)
            if reading is not None:
                metrics[name] = reading
            elif name in previous.metrics:
                metrics[name] = previous.metrics[name]
                if name in self._samples:
                    samples[name] = self._samples[name]
        self._samples = samples  # replaced whole: only this thread writes it
        return EngineReadings(health=health, metrics=metrics, scraped=frozenset(scraped))

    def _scrape(self, client: Any, pod: Pod, samples: dict[str, EngineSample], scraped: set[str]) -> tuple[PodMetrics, EngineSample | None]:
        """One /metrics read. `sample` is None when the engine did not answer as an engine: then the reading
        keeps the last numbers shown (with their age and the error, up to `metrics_keep_s`), and the next
        rates span the failed scrape. Liveness is judged on `sample`, never on kept numbers."""
        previous = self._samples.get(pod.name)
        reading, sample = read_pod(client, pod.name, pod.port, previous)
        self._scraped_at[pod.name] = time.monotonic()
        scraped.add(pod.name)
        if sample is not None:
            samples[pod.name] = sample
        else:
            shown: EngineReadings = self.sources["engines"].value or EngineReadings()
            reading = _with_last_numbers(reading, shown.metrics.get(pod.name), previous, self._metrics_keep_s)
            if previous is not None and reading.metrics is not None:
                samples[pod.name] = previous
        return reading, sample

    def _read_placement(self) -> dict[str, Placement]:
        gpus_snap = self.sources["gpus"].value
        gpus = [s.gpu for s in gpus_snap] if gpus_snap else []
        procs = [p for s in gpus_snap for p in s.processes] if gpus_snap is not None else None
        workloads = self._workloads()
        planned = self._planned()
        # The verdicts depend only on these: when none changed, neither did they (and the runtime is not
        # asked again who owns the same pids — its costliest read).
        inputs = (planned, tuple(gpus), None if procs is None else tuple(procs), self.ctx.probe_problem,
                  tuple(sorted((n, w.status, w.id, w.pids) for n, w in workloads.items())))
        memo = self._placement_memo
        if memo is not None and memo[0] == inputs:
            return memo[1]
        owners: dict[int, str | None] = {}
        if procs and any(w.running for w in workloads.values()):
            owners = self.ctx.runtime.owners(p.pid for p in procs)
        result: dict[str, Placement] = {}
        for pod in planned:
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
        self._placement_memo = (inputs, result)
        return result

    # -- assembly ------------------------------------------------------------------------------

    def _engines_changed(self) -> set[str]:
        """The pods whose engine process changed since the last workloads reading: it started, exited,
        or was restarted (a container that served restarts under Docker's `unless-stopped`; the
        restarted one has a new pid). Their last health answer is then out of date."""
        key = {name: (w.status, w.id, w.pids) for name, w in self._workloads().items()}
        changed = {name for name in key.keys() | self._engine_key.keys() if key.get(name) != self._engine_key.get(name)}
        self._engine_key = key
        return changed

    def _record(self, source: Source | None) -> None:
        """Append a fresh reading to the history (a failed attempt republishes the old value: skipped)."""
        if source is None or not source.status.ok or source.value is None:
            return
        if source is self.sources["gpus"]:
            self.history.record_gpus(source.value)
        elif source is self.sources["engines"]:
            value: EngineReadings = source.value
            self.history.record_metrics({n: m for n, m in value.metrics.items() if n in value.scraped}, pods=[p.name for p in self._pod_cache])

    def _changed(self, source: Source | None) -> None:
        self._record(source)
        if source is self.sources["workloads"]:
            changed = self._engines_changed()
            if changed:
                # An engine killed with SIGKILL is back to "running" within ~0.1 s when Docker restarts it:
                # without a fresh probe of its health path the pod would look serving until the next round
                # (up to 2 s + the probe's timeout), past the 2 s in which trouble must be announced.
                with self._lock:
                    self._reprobe |= changed
                self.sources["engines"].poke()
        if source is not None and source is not self.sources["gpus"]:
            # A reading equal to the last one published (the same workloads listed again, the same
            # placement verdicts) changes nothing: no new snapshot. GPU readings always go out — their
            # time is what the cockpit's freshness badge shows.
            status = source.status
            said = (source.value, status.ok, status.error, status.stale_since)
            if said == self._published.get(source.name):
                return
            self._published[source.name] = said
        workloads = self._workloads()
        engines: EngineReadings = self.sources["engines"].value or EngineReadings()
        health, metrics = engines.health, engines.metrics
        places = self.sources["placement"].value or {}
        inputs = (self._pod_cache, workloads, engines, places)
        built = self._pods_built
        if built is not None and all(a is b for a, b in zip(built[0], inputs, strict=True)):
            pods = built[1]  # a GPU reading: the pods' own readings are the very same objects
        else:
            pods = tuple(
                PodLive(name=p.name, slug=p.slug, gpus=p.gpus, port=p.port, workload=workloads.get(p.name), health=health.get(p.name),
                        placement=places.get(p.name), metrics=metrics.get(p.name))
                for p in self._pod_cache
            )
            self._pods_built = (inputs, pods)
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
