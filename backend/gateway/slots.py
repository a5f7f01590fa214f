"""Per-pod on-demand state: a request for a stopped pod starts it once, waits in a bounded queue, and a
pod the gateway started is stopped after `idle_ttl_s` without use.

Every blocking call on the estate (`PodControl`) runs in a worker thread, so the event loop keeps
answering other pods while one boots. One start task per pod: every request that arrives while it runs
awaits the same task (shielded: a request that gives up never cancels the boot of the others).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field

from backend.gateway.config import GatewayConfig, GatewayPod, PodControl, StartResult

log = logging.getLogger("c3.gateway")

RUNNING_FRESH_S = 1.0
"""How long a "the engine runs" answer is trusted before the runtime is asked again."""


class Overloaded(Exception):
    """The pod's queue is full (429)."""


class NotReady(Exception):
    """The pod did not become ready (503); `message` says why, with its last log lines."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass
class Slot:
    """One pod's state in this gateway."""

    pod: GatewayPod
    state: str = "stopped"
    """`stopped`, `starting`, `running`, `failed` or `stopping`."""
    waiting: int = 0
    """Requests held until the pod is ready."""
    in_flight: int = 0
    """Requests forwarded and not yet answered to their end."""
    started_by_gateway: bool = False
    starts: int = 0
    """Starts this gateway launched."""
    last_start_at: float | None = None
    """Wall-clock time the last start began."""
    last_start_s: float | None = None
    """How long the last start took, to serving or to failure."""
    last_error: str | None = None
    last_used: float = field(default_factory=time.monotonic)
    checked_at: float = 0.0
    failed_until: float = 0.0
    start_task: asyncio.Task[StartResult] | None = None
    stop_task: asyncio.Task[None] | None = None


def not_ready_message(name: str, result: StartResult) -> str:
    """The 503's message: why the start failed and the engine's last lines (already redacted)."""
    lines = "; ".join(line.strip() for line in result.log_tail if line.strip())
    text = f"pod {name} did not become ready: {result.detail or 'the start failed'}"
    return text + (f" — last log lines: {lines}" if lines else "")


class Slots:
    """Every pod's slot, the starts, and the idle stop."""

    def __init__(self, config: GatewayConfig, control: PodControl) -> None:
        self.config = config
        self.control = control
        self.slots: dict[str, Slot] = {}
        self.changed = asyncio.Event()
        """Set on every state change (the status file is rewritten)."""

    def load(self, pods: list[GatewayPod], running: set[str]) -> None:
        """Adopt the estate's pods (a reload keeps the state of the pods that stay)."""
        old = self.slots
        self.slots = {}
        now = time.monotonic()
        for pod in pods:
            slot = old.get(pod.name) or Slot(pod)
            slot.pod = pod
            if slot.start_task is None and slot.stop_task is None:
                slot.state = "running" if pod.name in running else ("failed" if slot.state == "failed" else "stopped")
                slot.checked_at = now
            self.slots[pod.name] = slot
        self.changed.set()

    async def refresh_running(self) -> set[str]:
        running = await asyncio.to_thread(self.control.running)
        now = time.monotonic()
        for slot in self.slots.values():
            if slot.start_task is None and slot.stop_task is None:
                new = "running" if slot.pod.name in running else ("failed" if slot.state == "failed" else "stopped")
                if new != slot.state:
                    slot.state = new
                    if new == "stopped":
                        slot.started_by_gateway = False  # stopped by someone else: no longer ours to stop
                    self.changed.set()
                slot.checked_at = now
        return running

    async def ready(self, slot: Slot) -> None:
        """Return once the pod serves; start it (once) when it does not. Raises Overloaded or NotReady."""
        if slot.stop_task is not None:
            await asyncio.shield(slot.stop_task)
        now = time.monotonic()
        if slot.state == "running" and now - slot.checked_at < RUNNING_FRESH_S:
            return
        if slot.start_task is None:
            running = await asyncio.to_thread(self.control.running)
            slot.checked_at = time.monotonic()
            if slot.pod.name in running and slot.start_task is None:
                if slot.state != "running":
                    slot.state = "running"
                    self.changed.set()
                return
        if slot.start_task is None and slot.state == "failed" and time.monotonic() < slot.failed_until:
            raise NotReady(slot.last_error or f"pod {slot.pod.name} failed to start")
        if slot.waiting >= self.config.queue_limit:
            raise Overloaded
        slot.waiting += 1
        self.changed.set()
        try:
            if slot.start_task is None:
                slot.start_task = asyncio.get_running_loop().create_task(self._start(slot))
            try:
                # The boot itself is bounded by boot_timeout_s; the margin covers gates and the stop of a timed-out boot.
                result = await asyncio.wait_for(asyncio.shield(slot.start_task), self.config.boot_timeout_s + 60)
            except TimeoutError:
                raise NotReady(f"pod {slot.pod.name} did not become ready within {self.config.boot_timeout_s:g}s") from None
        finally:
            slot.waiting -= 1
            self.changed.set()
        if not result.ok:
            raise NotReady(not_ready_message(slot.pod.name, result))

    async def _start(self, slot: Slot) -> StartResult:
        name = slot.pod.name
        slot.state = "starting"
        slot.last_start_at = time.time()
        began = time.monotonic()
        self.changed.set()
        log.info("starting pod %s for a request", name)
        try:
            result = await asyncio.to_thread(self.control.start, name, self.config.boot_timeout_s)
        except Exception as exc:  # a refusal (a gate) or a runtime failure: the held requests get 503
            result = StartResult(ok=False, started=False, detail=str(getattr(exc, "message", exc)) or type(exc).__name__)
        finally:
            slot.start_task = None
        slot.last_start_s = time.monotonic() - began
        slot.checked_at = time.monotonic()
        slot.last_used = time.monotonic()
        if result.ok:
            slot.state = "running"
            slot.last_error = None
            if result.started:
                slot.started_by_gateway = True
                slot.starts += 1
            log.info("pod %s serving after %.1fs%s", name, slot.last_start_s, "" if result.started else " (already running)")
        else:
            slot.state = "failed"
            slot.last_error = not_ready_message(name, result)
            slot.failed_until = time.monotonic() + self.config.failure_hold_s
            log.warning("%s", slot.last_error)
        self.changed.set()
        return result

    def used(self, slot: Slot) -> None:
        slot.last_used = time.monotonic()

    async def reap_idle(self) -> None:
        """Stop the pods this gateway started that nobody used for `idle_ttl_s` (never any other pod)."""
        ttl = self.config.idle_ttl_s
        if ttl <= 0:
            return
        now = time.monotonic()
        for slot in list(self.slots.values()):
            if (slot.started_by_gateway and slot.state == "running" and slot.in_flight == 0 and slot.waiting == 0
                    and slot.start_task is None and slot.stop_task is None and now - slot.last_used >= ttl):
                slot.stop_task = asyncio.get_running_loop().create_task(self._stop(slot))

    async def _stop(self, slot: Slot) -> None:
        name = slot.pod.name
        slot.state = "stopping"
        self.changed.set()
        log.info("stopping pod %s: unused for %gs", name, self.config.idle_ttl_s)
        try:
            await asyncio.to_thread(self.control.stop, name)
            slot.state = "stopped"
            slot.started_by_gateway = False
        except Exception as exc:  # the runtime refused: keep it as running, say why
            slot.state = "running"
            slot.last_error = f"idle stop of pod {name} failed: {getattr(exc, 'message', exc)}"
            log.warning("%s", slot.last_error)
        finally:
            slot.stop_task = None
            slot.checked_at = time.monotonic()
            self.changed.set()
