"""Gates before `up`: free VRAM on every card, the host port free, the GPUs not held by anyone else.

Each gate returns a `GateResult`; `enforce` turns failures into one `Refused` line (or, with
`--force`, into warnings). Messages name the GPU or port and by how much.
"""

from __future__ import annotations

import errno
import socket
import time
from collections.abc import Callable, Iterable, Mapping, Sequence

from backend.errors import C3Error, Refused
from backend.models import CatalogEntry, ComputeProcess, Gpu
from backend.runtime.models import GateResult, Workload

VRAM_ATTEMPTS = 5
VRAM_INTERVAL_S = 2.0
# A gain smaller than this between two readings is noise (other tenants, driver bookkeeping), not an
# engine's memory coming back, which returns in hundreds of MiB at least.
VRAM_RISE_MIN_MIB = 32


def gib(mib: float) -> str:
    """MiB as a GiB figure with one decimal."""
    return f"{mib / 1024:.1f} GiB"


def vram_gate(
    *,
    slug: str,
    gpus: Sequence[Gpu],
    entry: CatalogEntry,
    read_free: Callable[[], Mapping[str, int | None]],
    reservation: Callable[[CatalogEntry, Gpu], int | None],
    attempts: int = VRAM_ATTEMPTS,
    interval_s: float = VRAM_INTERVAL_S,
    sleep: Callable[[float], None] = time.sleep,
) -> GateResult:
    """Every card must have at least what the engine reserves at boot free.

    Retried while it may still pass: the driver releases a just-stopped container's memory with a
    lag, so a shortfall is read again as long as free memory on the pod's cards keeps rising (at most
    `attempts` readings; a tensor-parallel engine's cards may come back one reading apart). When no
    card gained memory since the previous reading the shortfall is steady (something holds the card)
    and is refused at once: after two readings (one interval), not all of them.
    """
    needs = {g.uuid: reservation(entry, g) for g in gpus}
    shortfalls: list[str] = []
    previous: dict[str, int] | None = None
    for attempt in range(max(1, attempts)):
        try:
            free = read_free()
        except C3Error as error:
            return not_checked("vram", f"free VRAM: {error.message}")
        unread = [g for g in gpus if g.uuid not in free]
        if unread:
            # A reading that lacks the pod's card (NVML answered for fewer GPUs, or not at all) is no
            # data, never a pass. A card that is listed with no figure (a GB10's unified memory) is
            # a known limit of that card and stays unjudged.
            missing = ", ".join(f"GPU {g.index}" for g in unread)
            return not_checked("vram", f"free VRAM: NVML's reading has no entry for {missing}")
        shortfalls = []
        judged: dict[str, int] = {}
        for g in gpus:
            need, have = needs[g.uuid], free.get(g.uuid)
            if need is None or have is None:
                continue  # unknown reservation or unreadable memory: nothing to judge
            judged[g.uuid] = have
            if have < need:
                shortfalls.append(f"GPU {g.index} ({g.name}) has {gib(have)} free but {slug} reserves {gib(need)} there (short by {gib(need - have)}, {need - have} MiB)")
        if not shortfalls:
            return GateResult(gate="vram", ok=True)
        if previous is not None and not _rising(previous, judged):
            break
        previous = judged
        if attempt + 1 < attempts:
            sleep(interval_s)
    return GateResult(
        gate="vram",
        ok=False,
        message="; ".join(shortfalls),
        hint="free the card (stop what holds it), lower gpu_memory_utilization in a catalog.d entry, or --force",
    )


def not_checked(gate: str, reason: str) -> GateResult:
    """A gate whose data source failed: it refuses like a failure (a safety check is never passed on
    no data), and --force boots anyway with the reason as a warning."""
    return GateResult(gate=gate, ok=False, checked=False, message=f"{gate} gate not checked: {reason}",
                      hint="fix the GPU driver / NVML (`nvidia-smi` must answer), or --force to boot without this check")


def _rising(before: Mapping[str, int], now: Mapping[str, int]) -> bool:
    """Some card has more free memory than at the previous reading: memory is still being released."""
    return any(uuid in before and have - before[uuid] >= VRAM_RISE_MIN_MIB for uuid, have in now.items())


def port_in_use(port: int, host: str = "0.0.0.0") -> bool:
    """True when something already listens on the host port (bind test, as the engine's proxy will)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # SO_REUSEADDR: a TIME_WAIT leftover of a stopped pod is not "in use"; a listener still is.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as error:
            return error.errno in {errno.EADDRINUSE, errno.EACCES}
    return False


def port_gate(*, port: int, workloads: Iterable[Workload], in_use: Callable[[int], bool] = port_in_use) -> GateResult:
    """The pod's host port must be free."""
    holder = next((w.pod for w in workloads if w.running and w.host_port == port), None)
    if holder is not None:
        return GateResult(gate="port", ok=False, message=f"port {port} is held by running pod {holder}", hint=f"`c3 pod down {holder}`, or give this pod another port")
    if in_use(port):
        return GateResult(gate="port", ok=False, message=f"port {port} is already in use on this host", hint=f"stop what listens there (`ss -ltnp sport = :{port}`), or give the pod another port")
    return GateResult(gate="port", ok=True)


def gpus_gate(
    *,
    pod: str,
    gpus: Sequence[Gpu],
    workloads: Iterable[Workload],
    processes: Iterable[ComputeProcess] | None,
    owners: Mapping[int, str | None],
) -> GateResult:
    """No other running pod claims the GPUs, and no stranger process holds memory on them."""
    mine = {g.uuid: g for g in gpus}
    problems: list[str] = []
    for w in workloads:
        if w.pod == pod or not w.running:
            continue
        shared = [mine[u].index for u in w.gpu_uuids if u in mine]
        if shared:
            problems.append(f"GPU {_list(shared)} claimed by running pod {w.pod}")
    for p in processes or ():
        if p.gpu_uuid not in mine:
            continue
        owner = owners.get(p.pid)
        if owner == pod:
            continue
        held = f", {p.used_mib} MiB" if p.used_mib is not None else ""
        who = f"pod {owner}" if owner else "a process c3 did not start"
        problems.append(f"GPU {mine[p.gpu_uuid].index} held by pid {p.pid} ({who}{held})")
    if problems:
        return GateResult(gate="gpus", ok=False, message="; ".join(dict.fromkeys(problems)), hint="stop the other user of the GPU, pick other GPUs, or --force")
    return GateResult(gate="gpus", ok=True)


def _list(indices: Sequence[int]) -> str:
    return ",".join(str(i) for i in indices)


def enforce(pod: str, results: Sequence[GateResult], *, force: bool) -> list[GateResult]:
    """Refuse on any failed gate; with `force`, return the failures as forced warnings instead."""
    failed = [r for r in results if not r.ok]
    if not failed:
        return []
    if force:
        return [r.model_copy(update={"forced": True}) for r in failed]
    hint = failed[0].hint if len(failed) == 1 else "fix the above, or pass --force to start anyway"
    raise Refused(f"pod {pod} cannot start: " + "; ".join(r.message for r in failed), hint=hint)
