"""`c3 gateway status` and the cockpit's gateway view: every running gateway's last status file
(backend/gateway/status.py), and the one-line account of a swap both show."""

from __future__ import annotations

import time

from backend.gateway.status import GatewayStatus, ModelStatus, read_gateways
from backend.gateway.swap import SwapRecord

__all__ = ["GatewayStatus", "ModelStatus", "SwapRecord", "clock_time", "running_gateways", "swap_line"]


def running_gateways() -> list[GatewayStatus]:
    """Every gateway whose serve process still runs, as it last wrote its status (per pod: state,
    queue depth, started by the gateway, last start and how long it took)."""
    return read_gateways()


def clock_time(at: float | None) -> str:
    """`HH:MM:SS` local time of a Unix time, `-` for none."""
    return "-" if at is None else time.strftime("%H:%M:%S", time.localtime(at))


def swap_line(swap: SwapRecord) -> str:
    """`12:00:03 started coder, stopped chat (freed GPU 0), took 3.2s` (or `running`, `, start failed`); a sleep-mode
    swap says `put chat to sleep` and `woke chat` instead."""
    took = "running" if swap.took_s is None else f"took {swap.took_s:.1f}s" + ("" if swap.ok else ", start failed")
    gpus = ",".join(str(i) for i in swap.gpus)
    done = [f"stopped {', '.join(swap.stopped)}"] if swap.stopped else []
    done += [f"put {', '.join(swap.slept)} to sleep"] if swap.slept else []
    freed = f" (freed GPU {gpus})" if done else ""
    return f"{clock_time(swap.at)} {'woke' if swap.woke else 'started'} {swap.pod}{''.join(', ' + d for d in done)}{freed}, {took}"
