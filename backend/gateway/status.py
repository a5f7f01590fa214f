"""The gateway's status file, `$C3_STATE/gateway/gateway-<port>.json`, and reading it back.

The serve process rewrites it (atomically) whenever a pod's state, queue or start changes and at
least every couple of seconds; it removes it when it exits. `c3 gateway status` reads every such file
whose process still lives (a file left by a killed gateway is stale: ignored and removed).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from backend import paths
from backend.atomic import write_atomic
from backend.gateway.slots import Slot
from backend.gateway.swap import SwapRecord

MAX_STATUS_BYTES = 1024 * 1024


class ModelStatus(BaseModel):
    """One pod as a running gateway reports it."""

    model_config = ConfigDict(extra="ignore")

    pod: str
    """The pod's name (what `model` may say)."""
    slug: str = ""
    """Its catalog entry."""
    models: list[str] = Field(default_factory=list)
    """The model names that also route to it."""
    state: str = "stopped"
    """`stopped`, `starting`, `running`, `failed`, `stopping`, `falling-asleep`, `sleeping` (the engine runs, asleep at
    level 1: a swap put it to sleep; a request wakes it) or `waking`."""
    queue_depth: int = 0
    """Requests held until it is ready."""
    in_flight: int = 0
    """Requests forwarded and not answered to their end."""
    started_by_gateway: bool = False
    """The gateway started it (only such a pod is stopped after the idle TTL)."""
    starts: int = 0
    """Starts this gateway launched."""
    last_start_at: float | None = None
    """When the last start began (Unix time)."""
    last_start_s: float | None = None
    """How long the last start took."""
    last_error: str | None = None
    """Why the last start (or idle stop) failed; never holds a secret."""
    gpus: list[int] = Field(default_factory=list)
    """The GPU indices it is pinned to."""
    on_demand: bool = False
    """Marked on demand: the gateway may stop it to start another pod on its GPUs."""
    sleep_mode: bool = False
    """A vLLM pod launched with sleep mode: a swap puts it to sleep instead of stopping it, where the fit leaves room."""
    last_swap: SwapRecord | None = None
    """The last swap that started it: the pods stopped, the GPUs freed, why, how long it took."""
    held_for: str | None = None
    """While its queued requests are held for a swap that may not happen yet: why (in the planner's words)."""


class GatewayStatus(BaseModel):
    """One running gateway (`c3 gateway status --json` lists these under `gateways`)."""

    model_config = ConfigDict(extra="ignore")

    pid: int
    """The serve process."""
    bind: str
    """HOST:PORT it listens on."""
    updated_at: float
    """When the file was last written (Unix time)."""
    idle_ttl_s: float = 0.0
    """Its `--idle-ttl` (0: never stops a pod)."""
    auth: bool = False
    """Whether it needs an API key (never the key)."""
    min_residency_s: float = 30.0
    """Its `--min-residency`: a pod runs this long before a swap may stop it."""
    swap_wait_s: float = 120.0
    """Its `--swap-wait`: how long a request is held for a swap before it is 503 (0: 429 at once)."""
    last_swap: SwapRecord | None = None
    """The last swap of any pod."""
    models: list[ModelStatus] = Field(default_factory=list)
    """Every pod of the estate, in file order."""


def gateway_dir() -> Path:
    """`$C3_STATE/gateway`."""
    return paths.state_home() / "gateway"


def status_file(folder: Path, port: int) -> Path:
    return folder / f"gateway-{port}.json"


def snapshot(slots: list[Slot], bind: str, idle_ttl_s: float, auth: bool, min_residency_s: float = 30.0,
             last_swap: SwapRecord | None = None, swap_wait_s: float = 120.0) -> GatewayStatus:
    return GatewayStatus(
        pid=os.getpid(), bind=bind, updated_at=time.time(), idle_ttl_s=idle_ttl_s, auth=auth, min_residency_s=min_residency_s,
        swap_wait_s=swap_wait_s, last_swap=last_swap,
        models=[ModelStatus(pod=s.pod.name, slug=s.pod.slug, models=list(s.pod.models), state=s.state, queue_depth=s.waiting,
                            in_flight=s.in_flight, started_by_gateway=s.started_by_gateway, starts=s.starts,
                            last_start_at=s.last_start_at, last_start_s=s.last_start_s, last_error=s.last_error, gpus=list(s.pod.gpus),
                            on_demand=s.pod.on_demand, sleep_mode=s.pod.sleep_mode, last_swap=s.last_swap,
                            held_for=s.held_for) for s in slots],
    )


def write_status(folder: Path, port: int, status: GatewayStatus) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    write_atomic(status_file(folder, port), status.model_dump_json(), mode=0o600)


def remove_status(folder: Path, port: int) -> None:
    try:
        status_file(folder, port).unlink()
    except FileNotFoundError:
        pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def read_gateways(folder: Path | None = None) -> list[GatewayStatus]:
    """Every running gateway's last status, by port; stale and unreadable files are skipped."""
    from backend.errors import C3Error
    from backend.userfiles import read_text

    folder = folder or gateway_dir()
    found: list[GatewayStatus] = []
    try:
        files = sorted(folder.glob("gateway-*.json"))
    except OSError:
        return []
    for path in files:
        try:
            text = read_text(path, what="gateway status file", limit=MAX_STATUS_BYTES)
            status = GatewayStatus.model_validate(json.loads(text))
        except (OSError, ValueError, C3Error):
            continue
        if not _alive(status.pid):
            try:
                path.unlink()
            except OSError:
                pass
            continue
        found.append(status)
    return found
