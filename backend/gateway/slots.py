"""Per-pod on-demand state: a request for a stopped pod starts it once, waits in a bounded queue, and a
pod the gateway started is stopped after `idle_ttl_s` without use. A pod launched with vLLM's sleep mode may
be put to sleep instead of stopped by a swap (`sleeping`), and is then woken, not booted, by the next request.

Every blocking call on the estate (`PodControl`) runs in a worker thread, so the event loop keeps
answering other pods while one boots. One start task per pod: every request that arrives while it runs
awaits the same task (shielded: a request that gives up never cancels the boot of the others).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from backend.gateway.config import GatewayConfig, GatewayPod, PodControl, StartResult
from backend.gateway.swap import Holder, SwapPlan, SwapRecord, plan_swap

log = logging.getLogger("c3.gateway")

RUNNING_FRESH_S = 1.0
"""How long a "the engine runs" answer is trusted before the runtime is asked again."""


class Overloaded(Exception):
    """The pod's queue is full: 429 while it starts, 503 while its requests are held for a swap (`held`)."""

    def __init__(self, held: bool = False) -> None:
        super().__init__("queue full")
        self.held = held


class Busy(Exception):
    """The pod's GPUs are held by pods that cannot be stopped yet (429 with Retry-After): `message` says why."""

    def __init__(self, message: str, retry_after_s: int) -> None:
        super().__init__(message)
        self.message = message
        self.retry_after_s = retry_after_s


class SwapTimeout(Busy):
    """A request was held `swap_wait_s` and its pod still may not start (503 with Retry-After)."""


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
    """`stopped`, `starting`, `running`, `failed`, `stopping`, `falling-asleep`, `sleeping` (the engine runs,
    asleep: a swap put it to sleep) or `waking`."""
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
    running_since: float | None = None
    """Monotonic time it was first seen running (or started); the minimum residency counts from here."""
    last_swap: SwapRecord | None = None
    """The last swap that started this pod."""
    held_for: str | None = None
    """While requests are held for a swap that may not happen yet: why (the planner's words)."""
    start_task: asyncio.Task[StartResult] | None = None
    stop_task: asyncio.Task[None] | None = None

    def set_state(self, state: str) -> None:
        """Change the state, keeping `running_since` (set on becoming running, cleared on stopping)."""
        if state == "running" and self.running_since is None:
            self.running_since = time.monotonic()
        elif state in ("stopped", "failed", "sleeping"):
            self.running_since = None
        self.state = state


HOLDING = ("running", "starting", "stopping", "falling-asleep", "sleeping", "waking")
"""Slot states in which the pod's engine holds (or is about to hold) memory on its GPUs."""


def _seen(slot: Slot, running: set[str]) -> str:
    """The state of a slot without a task in flight, from whether its engine runs: a pod this gateway put to
    sleep still runs (asleep); one no longer running is stopped (or stays failed)."""
    if slot.pod.name in running:
        return "sleeping" if slot.state == "sleeping" else "running"
    return "failed" if slot.state == "failed" else "stopped"


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
        self._pulse = asyncio.Event()
        """Replaced on every change: held requests wake on it to plan their swap again."""
        self.swap_lock = asyncio.Lock()
        """One start decision at a time: two requests never plan stops on the same picture."""
        self.last_swap: SwapRecord | None = None
        """The last swap of any pod (`c3 gateway status`)."""

    def load(self, pods: list[GatewayPod], running: set[str], asleep: set[str] | None = None) -> None:
        """Adopt the estate's pods (a reload keeps the state of the pods that stay); `asleep`: running pods whose
        engine says it sleeps."""
        old = self.slots
        self.slots = {}
        now = time.monotonic()
        for pod in pods:
            slot = old.get(pod.name) or Slot(pod)
            slot.pod = pod
            if slot.start_task is None and slot.stop_task is None:
                slot.set_state("sleeping" if pod.name in (asleep or set()) else _seen(slot, running))
                slot.checked_at = now
            self.slots[pod.name] = slot
        self.mark()

    async def refresh_running(self) -> set[str]:
        running = await asyncio.to_thread(self.control.running)
        now = time.monotonic()
        for slot in self.slots.values():
            if slot.start_task is None and slot.stop_task is None:
                new = _seen(slot, running)
                if new != slot.state:
                    slot.set_state(new)
                    if new == "stopped":
                        slot.started_by_gateway = False  # stopped by someone else: no longer ours to stop
                    self.mark()
                slot.checked_at = now
        return running

    def forget_running(self, slot: Slot) -> None:
        """The pod refused a connection: the next `ready` asks the runtime instead of trusting the last answer."""
        slot.checked_at = 0.0

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
            if slot.stop_task is not None:  # a swap chose it meanwhile: wait for the stop, then start it again
                await asyncio.shield(slot.stop_task)
            elif slot.pod.name in running and slot.start_task is None and slot.state != "sleeping":
                if slot.state != "running":
                    slot.set_state("running")
                    self.mark()
                return
        if slot.start_task is None and slot.state in ("failed", "sleeping") and time.monotonic() < slot.failed_until:
            raise NotReady(slot.last_error or f"pod {slot.pod.name} failed to start")
        if slot.waiting >= self.config.queue_limit:
            raise Overloaded(held=slot.held_for is not None)
        slot.waiting += 1
        self.mark()
        try:
            if slot.start_task is None and not await self._hold_and_begin(slot):
                return  # it turned out to be running
            assert slot.start_task is not None
            try:
                # The boot itself is bounded by boot_timeout_s; the margin covers gates and the stop of a timed-out boot.
                result = await asyncio.wait_for(asyncio.shield(slot.start_task), self.config.boot_timeout_s + 60)
            except TimeoutError:
                raise NotReady(f"pod {slot.pod.name} did not become ready within {self.config.boot_timeout_s:g}s") from None
        finally:
            slot.waiting -= 1
            if slot.waiting == 0:
                slot.held_for = None
            self.mark()
        if not result.ok:
            raise NotReady(not_ready_message(slot.pod.name, result))

    async def _hold_and_begin(self, slot: Slot) -> bool:
        """`_begin`, retried on every change while only waiting helps (Busy), until `swap_wait_s` has passed:
        the request is held through the swap instead of being told to come back. False: it runs already."""
        wait = self.config.swap_wait_s
        deadline = time.monotonic() + wait
        while slot.start_task is None:
            try:
                return await self._begin(slot)
            except Busy as exc:
                left = deadline - time.monotonic()
                if wait <= 0:
                    raise
                if left <= 0:
                    raise SwapTimeout(f"held {wait:g}s (--swap-wait) for pod {slot.pod.name}, and it still cannot start: {exc.message}",
                                      exc.retry_after_s) from None
                if slot.held_for != exc.message:
                    slot.held_for = exc.message
                    self.mark()
                # Wake on any change (a request ended, a pod stopped) and, at the latest, when residency runs out.
                await self._next_change(min(float(exc.retry_after_s), left))
        slot.held_for = None
        return True

    async def _begin(self, slot: Slot) -> bool:
        """Plan the start of `slot` (the swap it needs) and launch it; False when it runs already.
        Raises Busy (only waiting helps: 429) or NotReady (no plan exists: 503)."""
        async with self.swap_lock:
            if slot.start_task is not None:
                return True
            running = await self.refresh_running()
            waking = slot.state == "sleeping"
            if slot.pod.name in running and slot.stop_task is None and not waking:
                return False
            now = time.monotonic()
            holders = [Holder(s.pod, s.state, s.in_flight, s.waiting, now - (s.running_since if s.running_since is not None else now))
                       for s in self.slots.values() if s is not slot and s.state in HOLDING]
            plan = plan_swap(slot.pod, holders, self.config.min_residency_s, waking=waking)
            if not plan.ok:
                log.info("no swap for pod %s: %s", slot.pod.name, plan.why)
                if plan.retry_after_s is not None:
                    raise Busy(plan.why, plan.retry_after_s)
                raise NotReady(plan.why)
            # No await from the plan to here: the pods it stops get their stop task before any request can reach them.
            loop = asyncio.get_running_loop()
            for name in plan.stop:
                victim = self.slots[name]
                victim.state = "stopping"
                victim.stop_task = loop.create_task(self._stop(victim, f"swapped out for pod {slot.pod.name}"))
            for name in plan.sleep:
                victim = self.slots[name]
                victim.state = "falling-asleep"
                victim.stop_task = loop.create_task(self._sleep(victim, f"swapped out for pod {slot.pod.name}"))
            slot.state = "waking" if waking else "starting"
            slot.start_task = loop.create_task(self._start(slot, plan, waking))
            self.mark()
            return True

    async def _swap_out(self, slot: Slot, plan: SwapPlan) -> StartResult | None:
        """Wait for the plan's stops and sleeps; a failed one is the start's failure (the GPUs are still held)."""
        record = SwapRecord(pod=slot.pod.name, stopped=list(plan.stop), slept=list(plan.sleep), woke=slot.state == "waking",
                            gpus=list(plan.freed), why=plan.why, at=time.time())
        slot.last_swap = self.last_swap = record
        log.info("swap: %s", plan.why)
        for names, want, verb in ((plan.stop, "stopped", "stop"), (plan.sleep, "sleeping", "put to sleep")):
            for name in names:
                victim = self.slots.get(name)
                if victim is not None and victim.stop_task is not None:
                    await asyncio.shield(victim.stop_task)
                if victim is not None and victim.state != want:
                    return StartResult(ok=False, started=False, detail=f"could not {verb} pod {name} to free GPU "
                                                                      f"{','.join(map(str, plan.freed))}: {victim.last_error or 'it still runs'}")
        return None

    async def _start(self, slot: Slot, plan: SwapPlan | None = None, waking: bool = False) -> StartResult:
        name = slot.pod.name
        slot.state = "waking" if waking else "starting"
        slot.last_start_at = time.time()
        began = time.monotonic()
        self.mark()
        swapped = plan is not None and bool(plan.stop or plan.sleep or waking)
        try:
            refused = await self._swap_out(slot, plan) if plan is not None and swapped else None
            if refused is None:
                log.info("%s pod %s for a request", "waking" if waking else "starting", name)
            if refused is not None:
                result = refused
            elif waking:
                result = await asyncio.to_thread(self.control.wake, name)
            else:
                asleep = (plan.sleep + plan.asleep) if plan is not None else ()
                result = await asyncio.to_thread(self.control.start, name, self.config.boot_timeout_s, asleep)
        except Exception as exc:  # a refusal (a gate) or a runtime failure: the held requests get 503
            result = StartResult(ok=False, started=False, detail=str(getattr(exc, "message", exc)) or type(exc).__name__)
        finally:
            slot.start_task = None
        slot.last_start_s = time.monotonic() - began
        slot.checked_at = time.monotonic()
        slot.last_used = time.monotonic()
        if swapped and slot.last_swap is not None:
            slot.last_swap.took_s = time.monotonic() - began
            slot.last_swap.ok = result.ok
            log.info("swap for pod %s %s after %.1fs", name, "done" if result.ok else "failed", slot.last_swap.took_s)
        if result.ok:
            slot.running_since = time.monotonic()  # the minimum residency counts from serving
            slot.set_state("running")
            slot.last_error = None
            if result.started:
                slot.started_by_gateway = True
                slot.starts += 1
            log.info("pod %s serving after %.1fs%s", name, slot.last_start_s, " (woken)" if waking else "" if result.started else " (already running)")
        else:
            # A wake that failed (or whose swap-out did) leaves the engine asleep: never `failed`, which the next
            # look at the runtime would turn into `running` and a request forwarded into an engine that holds it.
            slot.set_state("sleeping" if waking else "failed")
            slot.last_error = not_ready_message(name, result)
            slot.failed_until = time.monotonic() + self.config.failure_hold_s
            log.warning("%s", slot.last_error)
        self.mark()
        return result

    def mark(self) -> None:
        """Something changed: the status file is rewritten and every held request plans again."""
        self.changed.set()
        self._wake()

    def _wake(self) -> None:
        self._pulse.set()
        self._pulse = asyncio.Event()

    async def _next_change(self, timeout_s: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._pulse.wait(), timeout_s)

    def used(self, slot: Slot) -> None:
        """A request for it began or ended: an end may let a held swap go ahead (no status rewrite per request)."""
        slot.last_used = time.monotonic()
        self._wake()

    async def reap_idle(self) -> None:
        """Stop the pods this gateway started that nobody used for `idle_ttl_s` (never any other pod)."""
        ttl = self.config.idle_ttl_s
        if ttl <= 0:
            return
        now = time.monotonic()
        for slot in list(self.slots.values()):
            if (slot.started_by_gateway and slot.state in ("running", "sleeping") and slot.in_flight == 0 and slot.waiting == 0
                    and slot.start_task is None and slot.stop_task is None and now - slot.last_used >= ttl):
                slot.stop_task = asyncio.get_running_loop().create_task(self._stop(slot, f"unused for {ttl:g}s"))

    async def _sleep(self, slot: Slot, why: str) -> None:
        """Put the pod to sleep (level 1) for a swap; a refusal keeps it running and says why (the swap then fails)."""
        await self._change(slot, why, ("falling-asleep", "putting pod {} to sleep", "sleep"), self.control.sleep, "sleeping")

    async def _stop(self, slot: Slot, why: str) -> None:
        await self._change(slot, why, ("stopping", "stopping pod {}", "stop"), self.control.stop, "stopped")

    async def _change(self, slot: Slot, why: str, words: tuple[str, str, str], call: Callable[[str], None], done: str) -> None:
        """Run a stop or a sleep in a thread: `words` are the state meanwhile, the log line and the verb of a failure."""
        name = slot.pod.name
        slot.state = words[0]
        self.mark()
        log.info("%s: %s", words[1].format(name), why)
        try:
            await asyncio.to_thread(call, name)
            slot.set_state(done)
            if done == "stopped":
                slot.started_by_gateway = False
        except Exception as exc:  # the runtime or the engine refused: it still runs (and holds its memory); say why
            slot.state = "running"
            slot.last_error = f"{words[2]} of pod {name} ({why}) failed: {getattr(exc, 'message', exc)}"
            log.warning("%s", slot.last_error)
        finally:
            slot.stop_task = None
            slot.checked_at = time.monotonic()
            self.mark()
