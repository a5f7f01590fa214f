"""Finding running routers and reading their status (for `c3 pool status` and the cockpit).

A router writes `$C3_STATE/pool/router-<port>.json` (pid, bind, admin URL, nodes, sticky mode) when it
starts listening and removes it when it exits. Live numbers come from the router's own admin endpoint
`GET /c3/status` on its port, so the CLI and the cockpit never read stale counters; a file whose pid is
gone is stale and ignored (and removed). A status file c3 cannot read (not a regular file, oversized,
not JSON, nested absurdly deep) is skipped with a warning, so one broken file never hides the other
routers; it is left in place, since c3 did not write it as it is.

Cockpit API: `read_pools(timeout_s)` → list of `PoolStatus` (blocking, stdlib only: call it from a worker).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from backend import paths
from backend.atomic import write_atomic
from backend.errors import C3Error
from backend.http_probe import probe
from backend.limits import whole
from backend.models.names import host_url
from backend.userfiles import read_bytes, read_json


class EngineLoadStatus(BaseModel):
    """`--route cache --cache-load engine`: the backend's engine queue as last scraped from its /metrics."""

    model_config = ConfigDict(extra="ignore")

    read: bool
    """A recent reading exists; False: the balance bound falls back to the router's in-flight count."""
    engine: str | None = None
    """`vllm` or `llamacpp`."""
    waiting: int | None = None
    """Requests the engine queues (vLLM waiting, llama-server deferred): above 0 the prefix holder is passed over."""
    running: int | None = None
    """Requests in the engine's running batch."""
    age_s: float | None = None
    """Seconds since the reading."""
    error: str | None = None
    """Why there is no reading (no /metrics, timeout, neither engine's names)."""


class KvEventsStatus(BaseModel):
    """`--route cache --kv-events`: one backend's vLLM KV-cache event stream (backend/pool/kvevents.py)."""

    model_config = ConfigDict(extra="ignore")

    endpoint: str
    """The ZMQ publisher subscribed to (`tcp://HOST:PORT`)."""
    messages: int = 0
    """Event batches received."""
    engine_blocks: int = 0
    """Blocks the engine stored since the router subscribed and has not removed (what it holds, as far as seen)."""
    untracked: int = 0
    """Blocks stored past the remembered maximum (their removals are not counted)."""
    stored: int = 0
    """BlockStored blocks received."""
    removed: int = 0
    """BlockRemoved blocks received (evictions)."""
    cleared: int = 0
    """AllBlocksCleared events (the engine's prefix cache was reset): each empties this backend's index."""
    gaps: int = 0
    """Skips in the publisher's sequence numbers (messages lost)."""
    restarts: int = 0
    """Times the publisher's sequence started again (a new engine process): each empties this backend's index."""
    bad: int = 0
    """Messages that were not vLLM event batches (dropped)."""
    trimmed: int = 0
    """Prefix-index entries dropped because the engine evicted or cleared."""
    last_event_age_s: float | None = None
    """Seconds since the last message (None: none yet — wrong endpoint, or an idle engine)."""
    error: str | None = None
    """What was wrong with the last message, if anything."""


class BackendStatus(BaseModel):
    """One backend as a running router reports it."""

    model_config = ConfigDict(extra="ignore")

    node: str
    """Node name from the registry."""
    url: str
    """The node's OpenAI base URL."""
    healthy: bool
    """Routable now (up, or not yet probed)."""
    state: str = "unknown"
    """`unknown`, `up`, `loading` (alive, not ready) or `down`."""
    draining: bool = False
    """Takes no new keys (`c3 pool drain`)."""
    suspect: bool = False
    """Routable, but recent requests failed (timeouts, 5xx, cut streams); `consecutive_failures` counts them."""
    in_flight: int = 0
    """Requests in progress."""
    requests: int = 0
    """Requests answered since the router started."""
    errors: int = 0
    """Connect failures, 5xx answers and broken streams."""
    retries: int = 0
    """Requests moved elsewhere after this backend failed before the first byte."""
    repins: int = 0
    """Sessions moved onto this backend."""
    stalled_streams: int = 0
    """Responses cut because the backend sent no bytes for `--stream-timeout` mid-body."""
    pins: int = 0
    """Sessions pinned here now."""
    prefix_blocks: int = 0
    """`--route cache`: prompt prefix blocks remembered as sent here (0 under `--route ring`)."""
    engine_load: EngineLoadStatus | None = None
    """`--route cache --cache-load engine`: the engine's queue (None otherwise)."""
    kv_events: KvEventsStatus | None = None
    """`--route cache --kv-events`: what the engine's KV-cache events said (None otherwise)."""
    latency_ms: dict[str, float | None] = Field(default_factory=dict)
    """`p50`/`p99` time to response head over the last 2,048 requests."""
    last_probe_rtt_ms: float | None = None
    """Round trip of the last successful probe."""
    consecutive_failures: int = 0
    """Current failure streak."""
    last_error: str | None = None
    """Why the last probe or request failed (never contains request data)."""


class HotKey(BaseModel):
    """A sticky key carrying most of one backend's recent traffic (shown only as its salted hash)."""

    model_config = ConfigDict(extra="ignore")

    key_hash: str
    """Salted hash of the key (the raw API key or session id is never kept)."""
    backend: str
    """Node the key is pinned to."""
    share: float
    """Its share of that backend's recent requests (0-1)."""
    requests: int = 0
    """Its requests among them."""
    window: int = 0
    """How many recent requests of the backend the share is over."""


class PoolStatus(BaseModel):
    """One running router."""

    model_config = ConfigDict(extra="ignore")

    pid: int
    """Router process id."""
    bind: str
    """Listening address `HOST:PORT`."""
    admin_url: str
    """Base URL of the router's admin endpoints."""
    sticky: str = "auto"
    """Sticky mode."""
    route: str = "ring"
    """`ring` or `cache` (`--route`): how a request without a live pin picks its backend."""
    cache_load: str | None = None
    """`--route cache`: `engine` (the engines' queues, in-flight where unread) or `in-flight` (`--cache-load`)."""
    pins: int = 0
    """Pinned sessions in all."""
    sticky_hit_ratio: float | None = None
    """Sticky hits over keyed requests."""
    uptime_s: float = 0.0
    """Seconds since the router started."""
    reachable: bool = True
    """False when the status file exists and the process lives but the admin endpoint did not answer."""
    error: str | None = None
    """Why it was not reachable."""
    backends: list[BackendStatus] = Field(default_factory=list)
    """Per-backend health and counters."""
    hot_keys: list[HotKey] = Field(default_factory=list)
    """Keys that carry more than the hot-key share of a backend's recent requests."""


def pool_dir() -> Path:
    """`$C3_STATE/pool`: salt, pins and status files."""
    return paths.state_home() / "pool"


def admin_token_file() -> Path:
    """The routers' admin token (32 random bytes, mode 0600, created by `pool serve`)."""
    return pool_dir() / "admin-token"


def admin_token() -> str | None:
    """The admin token drain/undrain present (hex), or None when there is none (no router ran here)."""
    data = read_bytes(admin_token_file(), what="router admin token", missing_ok=True)  # a FIFO there must not hang drain
    return data.hex() if data is not None and len(data) >= 16 else None


def status_file(port: int) -> Path:
    """The status file of the router on `port`."""
    return pool_dir() / f"router-{port}.json"


def admin_host(host: str) -> str:
    """Where to reach a router bound to `host` from this machine (an address, without brackets)."""
    if host in ("", "0.0.0.0"):
        return "127.0.0.1"
    if host == "::":
        return "::1"
    return host.removeprefix("[").removesuffix("]")


def write_status_file(port: int, host: str, nodes: list[str], sticky: str) -> Path:
    """Announce a listening router."""
    path = status_file(port)
    doc = {
        "pid": os.getpid(),
        "bind": f"{host}:{port}",
        "admin_url": host_url(admin_host(host), port),
        "nodes": nodes,
        "sticky": sticky,
        "started_at": time.time(),
    }
    write_atomic(path, json.dumps(doc, indent=2) + "\n", mode=0o600)
    return path


def remove_status_file(port: int) -> None:
    """Withdraw the announcement (only our own)."""
    path = status_file(port)
    try:
        doc = read_json(path, what="router status file")
        if isinstance(doc, dict) and doc.get("pid") == os.getpid():
            path.unlink()
    except (C3Error, OSError):
        pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def running_routers(skipped: list[str] | None = None) -> list[dict[str, Any]]:
    """Status files of routers whose process is alive (stale files are removed); why each unreadable
    file was skipped is appended to `skipped`."""
    found: list[dict[str, Any]] = []
    directory = pool_dir()
    if not directory.is_dir():
        return found
    for path in sorted(directory.glob("router-*.json")):
        try:
            doc = read_json(path, what="router status file")
            pid = whole(doc["pid"], "pid", 1, 2**31 - 1)  # os.kill(-1, 0) would ask about every process
        except C3Error as error:
            if skipped is not None:
                skipped.append(f"{error.message}; skipped")
            continue
        except (ValueError, KeyError, TypeError, OverflowError):
            continue
        if _alive(pid):
            found.append(doc)
        else:
            try:
                path.unlink()
            except OSError:
                pass
    return found


def fetch_status(admin_url: str, timeout_s: float = 2.0) -> dict[str, Any]:
    """GET `<admin_url>/c3/status` (raises OSError / ValueError)."""
    answer = probe(admin_url.rstrip("/") + "/c3/status", timeout=timeout_s)  # loopback/admin URL from our own file
    if not answer.answered:
        raise OSError(answer.error)
    if not answer.ok:
        raise OSError(f"HTTP {answer.status}")
    doc = json.loads(answer.body.decode("utf-8"))
    if not isinstance(doc, dict):
        raise ValueError("the router's /c3/status is not a JSON object")
    return doc


def read_pools(timeout_s: float = 2.0, skipped: list[str] | None = None) -> list[PoolStatus]:
    """Every running router with its live status; unreachable ones are listed with `reachable=False`,
    unreadable status files are skipped (why: appended to `skipped`)."""
    pools = []
    for doc in running_routers(skipped):
        base = {"pid": doc["pid"], "bind": doc.get("bind", "?"), "admin_url": doc.get("admin_url", ""), "sticky": doc.get("sticky", "auto")}
        try:
            live = fetch_status(base["admin_url"], timeout_s)
        except (OSError, ValueError) as exc:
            nodes = [BackendStatus(node=n, url="", healthy=False) for n in doc.get("nodes", [])]
            pools.append(PoolStatus(**base, reachable=False, error=str(exc)[:200], backends=nodes))
            continue
        live.update({k: v for k, v in base.items() if k != "sticky"})
        pools.append(PoolStatus.model_validate(live))
    return pools
