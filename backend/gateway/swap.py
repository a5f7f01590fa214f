"""Swap by fit: which running pods to stop so that a requested pod can start on its GPUs.

What may run together is derived, never written by hand: two pods may run at once exactly when their
GPU sets are disjoint (`pod up`'s GPU gate refuses a GPU claimed by a running pod, whatever the memory
figures say), and a pod whose own fit-check verdict is `wont-fit` or `incompatible-hw` on its GPUs can
never run there, so nothing is stopped for it. Among the running pods holding the requested pod's GPUs,
the plan stops all of them or none: never a pod not marked on demand (503: only waiting will not help),
never a pod with requests in flight or held for it, and never one that has run for less than the
minimum residency (429 with Retry-After: it is a matter of waiting).

Sleep instead of stop: a holder launched with vLLM's sleep mode (`sleep_mode: true`) is put to sleep (level 1)
instead of stopped when, on every GPU it shares with the requested pod, the requested pod's fit budget plus the
sleeping footprints of the pods left asleep there (`backend.fit.vllm.sleeping_gib`) stay within the GPU's total;
a pod that sleeps is woken, not booted, by the same plan. Holders are taken in estate order; one whose footprint
does not fit, or whose memory is not priced, is stopped as before.

`plan_swap` is pure: the caller (`slots.Slots`) hands it the pods as they are now and carries it out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from backend.gateway.config import GatewayPod

NEVER_FITS = ("wont-fit", "incompatible-hw")
TRANSIENT = ("starting", "stopping", "falling-asleep", "waking")
"""Slot states in the middle of a change: a holder in one is busy (only waiting helps)."""
BUSY_RETRY_S = 2
"""Retry-After when a holder has requests in flight (they usually end within seconds)."""


@dataclass(frozen=True)
class Holder:
    """A pod that runs (or starts, or stops) now, as the planner sees it."""

    pod: GatewayPod
    state: str
    in_flight: int = 0
    waiting: int = 0
    resident_s: float = 0.0
    """How long it has been running (as far as this gateway knows)."""


@dataclass(frozen=True)
class SwapPlan:
    """What to do before starting the requested pod."""

    ok: bool
    stop: tuple[str, ...] = ()
    """Pods to stop first (empty with ok: nothing holds its GPUs)."""
    sleep: tuple[str, ...] = ()
    """Pods to put to sleep first (level 1): their sleeping footprint leaves it room."""
    asleep: tuple[str, ...] = ()
    """Pods asleep on its GPUs already that may stay so (their footprint leaves it room)."""
    freed: tuple[int, ...] = ()
    """GPU indices the stops free for it."""
    why: str = ""
    """The plan in one line (ok), or why there is none (not ok)."""
    retry_after_s: int | None = None
    """Not ok, and only a matter of waiting: 429 with this Retry-After. None: 503."""


class SwapRecord(BaseModel):
    """One swap the gateway carried out (`c3 gateway status`: last swap and how long it took)."""

    model_config = ConfigDict(extra="ignore")

    pod: str
    """The pod started."""
    stopped: list[str] = Field(default_factory=list)
    """The pods stopped to make room for it."""
    slept: list[str] = Field(default_factory=list)
    """The pods put to sleep (level 1) to make room for it."""
    woke: bool = False
    """It was woken from sleep, not booted."""
    gpus: list[int] = Field(default_factory=list)
    """The GPU indices those stops freed."""
    why: str = ""
    """The plan as it was logged."""
    at: float = 0.0
    """When the swap began (Unix time)."""
    took_s: float | None = None
    """Stops, sleeps plus the start or wake, to serving or to failure; None while it runs."""
    ok: bool | None = None
    """Whether the started pod serves; None while it runs."""


def _gpus(indices: list[int] | tuple[int, ...]) -> str:
    return ",".join(str(i) for i in indices)


def _sleepers(target: GatewayPod, conflicts: list[Holder]) -> dict[str, str]:
    """Which conflicting holders may sleep (or stay asleep) beside `target`: name → a note for the plan's line."""
    if not target.need_gib or len(target.need_gib) != len(target.gpus) or len(target.total_gib) != len(target.gpus):
        return {}
    used = dict(zip(target.gpus, target.need_gib, strict=True))
    total = dict(zip(target.gpus, target.total_gib, strict=True))
    out: dict[str, str] = {}
    for h in conflicts:
        pod = h.pod
        if not pod.sleep_mode or len(pod.sleeping_gib) != len(pod.gpus):
            continue
        footprint = {g: f for g, f in zip(pod.gpus, pod.sleeping_gib, strict=True) if g in used}
        if all(used[g] + f <= total[g] for g, f in footprint.items()):
            for g, f in footprint.items():
                used[g] += f
            out[pod.name] = ", ".join(f"{f:.1f} GiB asleep on GPU {g}" for g, f in footprint.items())
    if out:
        room = ", ".join(f"GPU {g} {used[g]:.1f}/{total[g]:.1f} GiB" for g in target.gpus)
        out = {name: f"{note}; with pod {target.name} awake: {room}" for name, note in out.items()}
    return out


def plan_swap(target: GatewayPod, holders: list[Holder], min_residency_s: float, waking: bool = False) -> SwapPlan:
    """The stops and sleeps that let `target` start (or, `waking`, wake) on its GPUs, or why none may happen
    now (see the module doc)."""
    if target.fit_verdict in NEVER_FITS:
        reasons = "; ".join(target.fit_reasons) or "the fit-check says so"
        return SwapPlan(False, why=f"pod {target.name} can never run on GPU {_gpus(target.gpus)}: fit {target.fit_verdict} — {reasons}")
    mine = set(target.gpus)
    conflicts = [h for h in holders if h.pod.name != target.name and mine & set(h.pod.gpus)]
    if not conflicts:
        return SwapPlan(True)
    shared = {h.pod.name: sorted(mine & set(h.pod.gpus)) for h in conflicts}
    fixed = [h for h in conflicts if not h.pod.on_demand]
    if fixed or not target.on_demand:
        who = fixed[0] if fixed else conflicts[0]
        what = f"pod {who.pod.name}, which is not on demand" if fixed else f"pod {who.pod.name} (pod {target.name} is not on demand)"
        return SwapPlan(False, why=f"GPU {_gpus(shared[who.pod.name])} of pod {target.name} is held by {what}: the gateway never stops it")
    busy = [h for h in conflicts if h.in_flight or h.waiting or h.state in TRANSIENT]
    if busy:
        h = busy[0]
        doing = (f"{h.in_flight} request(s) in flight" if h.in_flight else f"{h.waiting} request(s) waiting" if h.waiting else h.state)
        return SwapPlan(False, why=f"pod {target.name} needs GPU {_gpus(shared[h.pod.name])}, held by pod {h.pod.name} with {doing}",
                        retry_after_s=BUSY_RETRY_S)
    young = [h for h in conflicts if h.state != "sleeping" and h.resident_s < min_residency_s]
    if young:
        h = min(young, key=lambda x: x.resident_s)
        left = max(1, math.ceil(min_residency_s - h.resident_s))
        return SwapPlan(False, why=f"pod {target.name} needs GPU {_gpus(shared[h.pod.name])}, held by pod {h.pod.name}, which started "
                                   f"{h.resident_s:.0f}s ago (minimum residency {min_residency_s:g}s)", retry_after_s=left)
    sleepers = _sleepers(target, conflicts)
    stop = tuple(h.pod.name for h in conflicts if h.pod.name not in sleepers)
    sleep = tuple(h.pod.name for h in conflicts if h.pod.name in sleepers and h.state != "sleeping")
    asleep = tuple(h.pod.name for h in conflicts if h.pod.name in sleepers and h.state == "sleeping")
    freed = tuple(sorted({g for h in conflicts for g in h.pod.gpus}))
    steps = [f"sleep {h.pod.name} (idle, resident {h.resident_s:.0f}s; {sleepers[h.pod.name]})" for h in conflicts if h.pod.name in sleep]
    steps += [f"stop {h.pod.name} ({'asleep' if h.state == 'sleeping' else f'idle, resident {h.resident_s:.0f}s'})" for h in conflicts
              if h.pod.name in stop]
    steps += [f"keep {h.pod.name} asleep ({sleepers[h.pod.name]})" for h in conflicts if h.pod.name in asleep]
    goal = f"wake pod {target.name}" if waking else f"pod {target.name}"
    return SwapPlan(True, stop=stop, sleep=sleep, asleep=asleep, freed=freed, why=f"{', '.join(steps)} to free GPU {_gpus(freed)} for {goal}")
